import Cipher
import Foundation
import Keychain
import NIOCore
import PinnedTLS
import Testing
import TestSupport
import Vault
import X509
@testable import DeviceSharing

/// The group's record of revocations (absence is not emptiness), the enrolled-device allowlist
/// on the machine that holds the group root, and a revoked sender told so every time.
@Suite("Sharing: revocations and enrolment", .serialized, .onOwnThreads)
struct ShareRevocationTests {
    /// Deletes a generic keychain row of the group, as a writer of the data directory can
    /// (it sees which rows share the service's index and deletes them; it cannot write one).
    static func delete(_ device: TestDevice, account: String) throws {
        try device.keychain.deletePassword(forService: ShareGroup.service, account: account)
        try device.keychain.flush()
    }

    /// Deleting the `revoked` row used to read as an empty list, so the revoked sender was
    /// served again (the send succeeded). The record holds the list: deleting that row changes
    /// nothing, and deleting the record too is refused, never read as empty.
    @Test func deletingTheRevocationRowsDoesNotServeARevokedDeviceAgain() async throws {
        let (a, b) = try makeGroup()
        let path = try b.write("x.txt", Array("secret".utf8))
        let bravo = try ShareGroup.pin(b.group.membership().identity.leaf)
        _ = try a.group.revoke(device: "bravo")
        #expect(try a.group.revocations().devices.map(\.pin) == [bravo])

        try Self.delete(a, account: "revoked")
        #expect(try a.group.revokedPins() == [bravo])
        try await withServer(a) { port, log in
            let sender = try ShareClient(membership: b.group.membership(), isRevoked: b.isRevoked())
            let error = await shareError { _ = try await sender.send(path, to: "127.0.0.1", port: port) }
            let events = await log.wait(for: 1)
            // On a mismatch, the receiver's own account of the connection says why.
            #expect(error == .revoked(device: "bravo"), "receiver: \(events)")
        }

        try Self.delete(a, account: ShareGroup.recordAccount)
        #expect(throws: ShareError.self) { _ = try a.group.revokedPins() }
        do {
            _ = try a.group.revocations()
            Issue.record("a missing record was read")
        } catch {
            guard case .revocationsTampered(let detail) = error else { throw error }
            #expect(detail.contains("is missing"))
        }
        // Opening the group again does not turn the missing record into an empty one.
        try? a.group.upgradeIfNeeded()
        #expect(throws: ShareError.self) { _ = try a.group.revocations() }
        #expect(throws: ShareError.self) { _ = try a.group.revoke(device: "bravo") }
        #expect(ShareError.revocationsTampered("x").description.contains("restore it from a backup"))
        try await withServer(a) { port, log in
            let sender = try ShareClient(membership: b.group.membership(), isRevoked: b.isRevoked())
            let error = await shareError { _ = try await sender.send(path, to: "127.0.0.1", port: port) }
            let events = await log.wait(for: 1)
            // On a mismatch, the receiver's own account of the connection says why.
            #expect(error == .revoked(device: "bravo"), "receiver: \(events)")
        }
        #expect(a.inboxNames().isEmpty)
        // The way back: a new group on this machine.
        try a.group.create(deviceName: "alpha", replace: true)
        #expect(try a.group.revocations().generation >= 1)
    }

    /// Each revocation advances the generation; the record checks its own count and digest.
    /// Putting the whole keychain back to a copy made before a revocation brings back a record
    /// that is consistent in itself (list, count, digest) but older: the vault's rollback anchor,
    /// beside the device key, holds the newest generation and refuses it.
    @Test func aKeychainPutBackFromBeforeARevocationIsRefused() throws {
        let directory = try TemporaryDirectory(prefix: "share-anchor")
        let home = directory.path("home"), keyFile = directory.path("config") + "/device.key"
        let passcode = SecretBytes(utf8: "correct horse battery staple")
        let manager = try CryptoManager(directory: home, deviceKeyProvider: FileDeviceKeyProvider(path: keyFile),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: passcode) }
        let pin = "sha256/" + Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let files = ["keychain.sqlite", "keychain.sqlite-wal", "keychain.sqlite-shm"]
        do {
            let keychain = try Keychain(manager: manager)
            try ShareGroup(store: IdentityStore(keychain: keychain)).create(deviceName: "alpha")
            try keychain.close()
        }
        for file in files where FileManager.default.fileExists(atPath: home + "/" + file) {
            try FileManager.default.copyItem(atPath: home + "/" + file, toPath: directory.path("backup-" + file))
        }
        do {
            let keychain = try Keychain(manager: manager)
            let group = ShareGroup(store: IdentityStore(keychain: keychain))
            let before = try group.revocations().generation
            try group.revoke(device: pin)
            #expect(try group.revocations().generation == before + 1)
            #expect(try group.revokedPins() == [pin])
            try keychain.close()
        }
        for file in files {
            try? FileManager.default.removeItem(atPath: home + "/" + file)
            if FileManager.default.fileExists(atPath: directory.path("backup-" + file)) {
                try FileManager.default.copyItem(atPath: directory.path("backup-" + file), toPath: home + "/" + file)
            }
        }
        let keychain = try Keychain(manager: manager)
        defer { try? keychain.close() }
        let group = ShareGroup(store: IdentityStore(keychain: keychain))
        do {
            _ = try group.revokedPins()
            Issue.record("the list of before the revocation was read")
        } catch {
            guard case .revocationsTampered(let detail) = error else { throw error }
            #expect(detail.contains("rolled back"), "\(detail)")
        }
    }

    @Test func theGenerationAdvancesAndTheRecordChecksItsList() throws {
        let (a, b) = try makeGroup()
        let start = try a.group.revocations()
        #expect(start.devices.isEmpty)
        _ = try a.group.revoke(device: "bravo")
        let after = try a.group.revocations()
        #expect(after.generation == start.generation + 1)
        #expect(after.devices.map(\.device) == ["bravo"])
        // The joined machine has a record from its join.
        #expect(try b.group.revocations().devices.isEmpty)
        #expect(try !b.group.enrolsDevices())
        #expect(try a.group.enrolsDevices())

        // A record whose list does not match its count and digest (written with the device key,
        // which a writer of the data directory lacks: the check is the record's own).
        var record = try a.group.groupRecord()
        record.revoked = []
        try a.keychain.set(record, forService: ShareGroup.service, account: ShareGroup.recordAccount,
                           accessibility: .alwaysThisDeviceOnly)
        do {
            _ = try a.group.revocations()
            Issue.record("a record that does not match its list was read")
        } catch {
            guard case .revocationsTampered = error else { throw error }
        }
        // One stored under a weaker class is refused too.
        try a.keychain.set(ShareGroupRecord(generation: 9, revoked: [], issuer: true), forService: ShareGroup.service,
                           account: ShareGroup.recordAccount, accessibility: .always)
        #expect(throws: ShareError.self) { _ = try a.group.revocations() }
    }

    /// A group of the previous version (root certificate stored `always`, the list in the
    /// `revoked` row, no record) is upgraded once: its list becomes the record, and from then
    /// on deleting the record is refused.
    @Test func anOlderGroupIsUpgradedOnce() throws {
        let (a, b) = try makeGroup()
        let bravo = try ShareGroup.pin(b.group.membership().identity.leaf)
        // Back to the previous version's items.
        let legacy = [ShareDeviceRecord(device: "bravo", pin: bravo, time: 1)]
        try a.keychain.set(legacy, forService: ShareGroup.service, account: "revoked", accessibility: .always)
        try Self.delete(a, account: ShareGroup.recordAccount)
        try a.store.storeCertificates([try a.group.rootCertificate()], label: ShareGroup.rootLabel, accessibility: .always,
                                      replace: true)
        try a.store.flush()

        try a.group.upgradeIfNeeded()
        let upgraded = try a.group.revocations()
        #expect(upgraded.devices == legacy)
        #expect(upgraded.generation == 1)
        #expect(try a.group.enrolsDevices())
        _ = try a.store.certificates(label: ShareGroup.rootLabel, requiring: .alwaysThisDeviceOnly)

        try Self.delete(a, account: ShareGroup.recordAccount)
        #expect(throws: ShareError.self) { _ = try a.group.revokedPins() }
    }

    /// The group root signs a certificate outside any enrolment: the machine that holds the root
    /// refused nothing of it before (and `share revoke NAME` could not find it). Now it is
    /// refused there (not enrolled); a machine that joined accepts it, and revoking its pin
    /// there refuses it.
    @Test func aCertificateOfTheRootNotEnrolledHereIsRefused() async throws {
        let (a, b) = try makeGroup()
        let authority = try a.group.authority()
        let stray = try authority.issue(names: ["charlie", ShareGroup.memberName])
        let membership = ShareMembership(identity: stray, root: authority.certificate)
        let pin = try ShareGroup.pin(stray.leaf)
        let path = try b.write("c.bin", content(200_000))
        #expect(try !a.group.isEnrolled(pin: pin))
        #expect(try a.group.isEnrolled(pin: ShareGroup.pin(b.group.membership().identity.leaf)))

        try await withServer(a) { port, log in
            let sender = try ShareClient(membership: membership, isRevoked: { _ in false })
            let error = await shareError { _ = try await sender.send(path, to: "127.0.0.1", port: port) }
            guard case .rejected(let text) = error else {
                Issue.record("expected a refusal, got \(String(describing: error))")
                return
            }
            #expect(text.contains("charlie") && text.contains("is not enrolled"))
            _ = await log.wait(for: 1)
            guard case .peerRefused(let reason) = log.refusals.first else {
                Issue.record("no refusal logged: \(log.all)")
                return
            }
            #expect(reason.contains("not enrolled"))
        }
        #expect(a.inboxNames().isEmpty)
        #expect(throws: ShareError.notFound("no device named charlie was enrolled on this machine: give its sha256/ pin instead")) {
            _ = try a.group.revoke(device: "charlie")
        }

        // The joined machine cannot know which certificates were enrolled: it accepts the
        // certificate until its pin is revoked there.
        #expect(try b.group.isEnrolled(pin: pin))
        try await withServer(b) { port, log in
            let sender = try ShareClient(membership: membership, isRevoked: { _ in false })
            let sent = try await sender.send(path, to: "127.0.0.1", port: port)
            #expect(sent.device == "bravo")
            let revoked = try b.group.revoke(device: pin)
            #expect(revoked.map(\.pin) == [pin])
            let error = await shareError { _ = try await sender.send(path, to: "127.0.0.1", port: port) }
            #expect(error == .revoked(device: "charlie"))
            _ = await log.wait(for: 2)
        }
        #expect(b.inboxNames() == ["c.bin"])
    }

    /// A revoked sender of a large file: the receiver refuses at once while the sender is still
    /// writing the body (megabytes ahead of the refusal), closes its side and reads on until the
    /// sender hangs up; the sender reads the refusal before it takes a failed write as the end.
    /// Twenty rounds, each bounded by the send timeout; every one must end in `.revoked`.
    @Test func aRevokedSenderOfALargeFileIsToldEveryRound() async throws {
        let (a, b) = try makeGroup()
        _ = try a.group.revoke(device: "bravo")
        let path = try b.write("large.bin", [UInt8](repeating: 0x5a, count: 24 << 20))
        try await withServer(a) { port, log in
            let sender = try ShareClient(membership: b.group.membership(), isRevoked: b.isRevoked())
            var outcomes: [String] = []
            for round in 0..<20 {
                let error = await shareError {
                    _ = try await sender.send(path, to: "127.0.0.1", port: port, timeout: .seconds(60))
                }
                if error != .revoked(device: "bravo") { outcomes.append("round \(round): \(String(describing: error))") }
            }
            #expect(outcomes.isEmpty, "\(outcomes)")
            let events = await log.wait(for: 20)
            #expect(events.count == 20)
            #expect(log.refusals.allSatisfy { $0 == .revoked(device: "bravo") })
        }
        #expect(a.everyInboxFile().isEmpty)
    }

    /// A receiver that reads everything and never replies (an overloaded one, say): the sender
    /// gives up after its timeout and says so, instead of reporting that the receiver closed
    /// the connection without a reply, which read like a refusal lost on the way.
    @Test func aSenderThatGetsNoReplyInTimeSaysItGaveUp() async throws {
        let (a, b) = try makeGroup()
        let path = try b.write("x.txt", Array("secret".utf8))
        let membership = try a.group.membership()
        let server = try await PinnedTLSServer.bind(identity: membership.identity,
                                                    clientAuthentication: ClientAuthentication(anchors: .only([membership.root])),
                                                    handshakeTimeout: .seconds(30))
        let task = Task(executorPreference: TestExecutor.shared) {
            try await server.run { connection in
                // Reads until the sender hangs up (bounded by the sender's timeout), never replies.
                try? await connection.channel.executeThenClose { inbound, _ in
                    for try await _ in inbound {}
                }
            }
        }
        let sender = try ShareClient(membership: b.group.membership(), isRevoked: b.isRevoked())
        let error = await shareError { _ = try await sender.send(path, to: "127.0.0.1", port: server.port, timeout: .seconds(2)) }
        guard case .connectionFailed(let detail) = error else {
            Issue.record("expected a connection failure, got \(String(describing: error))")
            task.cancel()
            await server.close()
            return
        }
        #expect(detail.hasPrefix("no reply from the receiver within 2 s after the file was sent"), "\(detail)")
        task.cancel()
        await server.close()
        _ = await task.result
    }
}
