import DeviceSharing
import Foundation
import PinnedTLS
import SecureFoundation

extension Tour {
    /// The sharing step: two members (a vault each, in homes of their own under the tour's
    /// files), one file sent with mutual TLS (to the receiver found by DNS-SD when a daemon
    /// answers, else over loopback; the tour says which), received while the receiver's vault
    /// is locked, readable only after its unlock; a machine of another group is refused.
    mutating func sharingStep() throws {
        say("Share a file between two machines over mutual TLS; it is received while locked, read after unlock")
        let laptop = try TourMember(directory: filesDirectory + "/share-laptop")
        let desktop = try TourMember(directory: filesDirectory + "/share-desktop")
        try laptop.group.create(deviceName: "laptop")
        let invitation = try ShareEnrolment(group: laptop.group).invite()
        let request = try ShareEnrolment(group: desktop.group).join(invitation: invitation, deviceName: "desktop")
        let chain = try ShareEnrolment(group: laptop.group).approve(request: request)
        try ShareEnrolment(group: desktop.group).complete(chainPEM: Array(chain.utf8))
        proves("one group root, two device certificates (enrolled with a one-time invitation); each side trusts that root only")

        let photo = laptop.directory + "/photo.jpg"
        let bytes = Array(String(repeating: "holiday picture ", count: 8192).utf8)
        try SecureFile.writeAtomically(bytes, to: photo)
        let inbox = desktop.directory + "/inbox"
        let receiverMembership = try desktop.group.membership()
        let senderMembership = try laptop.group.membership()
        _ = try desktop.files.prepareClasses()
        desktop.manager.lock()
        try expect(!desktop.manager.isUnlocked, "the receiver's vault did not lock")

        let stranger = try TourMember(directory: filesDirectory + "/share-stranger")
        try stranger.group.create(deviceName: "laptop")
        let strangerMembership = try stranger.group.membership()
        let desktopGroup = desktop.group, files = desktop.files
        // Discovery when a DNS-SD daemon answers (avahi-daemon on Linux): the receiver listens on
        // every interface and advertises itself; the sender finds it by its device name.
        let discovery = try Tour.blocking { () async -> String? in
            do {
                for try await _ in ShareDiscovery.browse(for: .milliseconds(200)) {}
                return nil
            } catch {
                return "\(error)"
            }
        }
        let outcome = try Tour.blocking { () async throws -> (ShareClient.Sent, String, String) in
            let server = try await ShareServer.bind(
                host: discovery == nil ? "0.0.0.0" : "127.0.0.1", port: 0, membership: receiverMembership, inbox: inbox, files: files,
                isRevoked: { pin in (try? desktopGroup.revokedPins().contains(pin)) ?? true },
                isEnrolled: { pin in (try? desktopGroup.isEnrolled(pin: pin)) ?? false })
            let serving = Task.detached { try await server.run() }
            defer { serving.cancel() }
            do {
                let client = try ShareClient(membership: senderMembership, isRevoked: { _ in false })
                var how = "reached by address (127.0.0.1), without discovery: \(discovery ?? ""), then checked by mutual TLS"
                var found: DiscoveredPeer?
                var advertisement: ShareAdvertisement?
                if discovery == nil {
                    do {
                        advertisement = try await ShareDiscovery.advertise(port: server.port, membership: receiverMembership, showDeviceName: false)
                        for try await peer in ShareDiscovery.browse(for: .seconds(10)) where peer.instance == advertisement?.name {
                            found = peer
                            break
                        }
                        how = found.map { "found by DNS-SD as \($0.instance) (\($0.address):\($0.port), TXT v=1 g=…), then checked by mutual TLS" }
                            ?? "reached by address (127.0.0.1): the advertised service was not found by DNS-SD within 10 s"
                    } catch {
                        how = "reached by address (127.0.0.1): advertising by DNS-SD failed (\(error))"
                    }
                }
                defer { advertisement?.stop() }
                let sent: ShareClient.Sent
                if let found {
                    sent = try await client.send(photo, to: found, device: "desktop", timeout: .seconds(60))
                } else {
                    sent = try await client.send(photo, to: "127.0.0.1", port: server.port, device: "desktop", timeout: .seconds(60))
                }
                var refusal = "no refusal"
                do {
                    _ = try await ShareClient(membership: strangerMembership, isRevoked: { _ in false })
                        .send(photo, to: "127.0.0.1", port: server.port, timeout: .seconds(60))
                } catch {
                    refusal = "\(error)"
                }
                await server.close()
                return (sent, refusal, how)
            } catch {
                await server.close()
                throw error
            }
        }
        let (sent, refusal, how) = outcome
        proves("the receiver was \(how)")
        try expect(sent.storedName == "photo.jpg" && sent.size == UInt64(bytes.count) && sent.device == "desktop",
                   "the file was not stored as sent: \(sent)")
        let stored = inbox + "/photo.jpg"
        try expect(try desktop.files.protection(ofItemAt: stored) == .completeUnlessOpen, "the received file is not completeUnlessOpen")
        let onDisk = try SecureFile.read(stored, maxLength: 1 << 24)
        try expect(!contains(onDisk, Array("holiday picture".utf8)), "the inbox holds the file in clear")
        proves("sent (\(bytes.count) bytes, SHA-256 checked); stored while locked as a completeUnlessOpen protected file, no plaintext on disk")
        try expect(refusal.contains("certificate was refused"), "a machine of another group was not refused: \(refusal)")
        let names = try FileManager.default.contentsOfDirectory(atPath: inbox).filter { !$0.hasPrefix(".") }
        try expect(names == ["photo.jpg"], "the inbox holds \(names)")
        proves("a machine of another group (its own root, the same device name) is refused: \(refusal)")
        let lockedRead = try expectFailure("reading it while locked", { _ = try desktop.files.read(at: stored) }, check: { error in
            if case ProtectedFileError.locked = error { return true }
            return false
        })
        proves("locked: reading the received file is refused: \(lockedRead)")
        try desktop.manager.unlock(passcode: desktop.passcode)
        let report = try desktop.files.upgradeItems(inDirectory: inbox, from: .completeUnlessOpen, to: .complete)
        try expect(report.changed == [stored], "the received file was not upgraded: \(report)")
        try expect(try desktop.files.read(at: stored) == bytes, "the received file does not read back")
        proves("unlocked: upgraded to complete and read back, byte for byte")
        for member in [laptop, desktop, stranger] { member.passcode.wipe() }
    }

    /// Runs `body` to completion from this synchronous command (at most 120 s).
    static func blocking<Value: Sendable>(_ body: @escaping @Sendable () async throws -> Value) throws -> Value {
        let box = TourBox<Result<Value, any Error>>()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do { box.value = .success(try await body()) } catch { box.value = .failure(error) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 120) == .success, let result = box.value else {
            throw TourFailure("the sharing step did not finish within 120 s")
        }
        return try result.get()
    }
}

/// One machine of the sharing step: a vault, its keychain and protected files.
struct TourMember {
    let directory: String
    let passcode = SecretBytes(utf8: "tour member passcode")
    let manager: CryptoManager
    let group: ShareGroup
    let files: ProtectedFiles

    init(directory: String) throws {
        self.directory = directory
        try SecureFile.ensurePrivateDirectory(directory)
        manager = try CryptoManager(directory: directory + "/data",
                                    deviceKeyProvider: FileDeviceKeyProvider(path: directory + "/device.key"),
                                    policy: .interactive)
        try manager.setUp(passcode: passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: passcode) }
        group = ShareGroup(store: IdentityStore(keychain: try Keychain(manager: manager)))
        files = ProtectedFiles(manager: manager)
    }
}

/// A value set by one task and read after a semaphore.
final class TourBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?
    var value: Value? {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}
