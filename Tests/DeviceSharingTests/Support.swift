import Cipher
import Crypto
import Foundation
import Keychain
import NIOCore
import PinnedTLS
import ProtectedFiles
import SwiftASN1
import Testing
import TestSupport
import Vault
import X509
@testable import DeviceSharing

/// One machine: a vault (with its keychain and protected files) in a temporary directory.
final class TestDevice: @unchecked Sendable {
    private let directory: TemporaryDirectory
    var root: String { directory.path }
    let home: String
    let inbox: String
    let passcode = SecretBytes(utf8: "correct horse battery staple")
    let manager: CryptoManager
    let keychain: Keychain
    let store: IdentityStore
    let group: ShareGroup
    let files: ProtectedFiles

    init() throws {
        directory = try TemporaryDirectory(prefix: "share-test")
        home = directory.path("home")
        inbox = directory.path("inbox")
        manager = try CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: try SecretBytes.random(count: 32)),
                                    policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: passcode) }
        keychain = try Keychain(manager: manager)
        store = IdentityStore(keychain: keychain)
        group = ShareGroup(store: store)
        files = ProtectedFiles(manager: manager)
        _ = try files.prepareClasses()
    }

    /// The names in the inbox (hidden staging directory excluded).
    func inboxNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// Every file under the inbox, the staging directory included.
    func everyInboxFile() -> [String] {
        (FileManager.default.enumerator(atPath: inbox)?.allObjects as? [String] ?? []).filter { !$0.hasSuffix(".incoming") }
    }

    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = root + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    func isRevoked() -> @Sendable (String) -> Bool {
        let group = self.group
        return { pin in (try? group.revokedPins().contains(pin)) ?? true }
    }

    func isEnrolled() -> @Sendable (String) -> Bool {
        let group = self.group
        return { pin in (try? group.isEnrolled(pin: pin)) ?? false }
    }
}

/// Two members of one group: `a` made it, `b` joined with an invitation.
func makeGroup() throws -> (TestDevice, TestDevice) {
    let a = try TestDevice(), b = try TestDevice()
    try a.group.create(deviceName: "alpha")
    let invitation = try ShareEnrolment(group: a.group).invite()
    let request = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo")
    let chain = try ShareEnrolment(group: a.group).approve(request: request)
    try ShareEnrolment(group: b.group).complete(chainPEM: Array(chain.utf8))
    return (a, b)
}

/// What a server reported.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [ShareServer.Event] = []

    func add(_ event: ShareServer.Event) { lock.lock(); events.append(event); lock.unlock() }

    var all: [ShareServer.Event] { lock.lock(); defer { lock.unlock() }; return events }

    /// Waits (at most 10 s) until `count` events arrived.
    func wait(for count: Int) async -> [ShareServer.Event] {
        for _ in 0..<1000 {
            if all.count >= count { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return all
    }

    var refusals: [ShareError] {
        all.compactMap { if case .refused(_, let error) = $0 { return error } else { return nil } }
    }
}

/// Runs `body` with a share server of `device` listening on loopback.
func withServer(
    _ device: TestDevice, membership: ShareMembership? = nil, idleTimeout: TimeAmount = ShareServer.idleTimeout,
    _ body: @Sendable (Int, EventLog) async throws -> Void
) async throws {
    let server = try await ShareServer.bind(membership: membership ?? device.group.membership(), inbox: device.inbox,
                                            files: device.files, isRevoked: device.isRevoked(), isEnrolled: device.isEnrolled(),
                                            idleTimeout: idleTimeout)
    try await serving(server, body)
}

/// Runs `server` (its events into a log) while `body` runs, then closes it, also when `body` throws.
func serving(_ server: ShareServer, _ body: @Sendable (Int, EventLog) async throws -> Void) async throws {
    let log = EventLog()
    let task = Task(executorPreference: TestExecutor.shared) { try await server.run { log.add($0) } }
    do {
        try await body(server.port, log)
    } catch {
        await server.close()
        _ = await task.result
        throw error
    }
    await server.close()
    _ = await task.result
}

/// The receiver's reply to a file whose digest does not match: refused, logged, nothing stored.
func expectDigestMismatch(_ reply: [UInt8], _ log: EventLog) async throws {
    guard case let .complete(parsed, _) = try ShareWire.parseReply(reply) else {
        Issue.record("no reply")
        return
    }
    #expect(parsed.status == .digestMismatch)
    _ = await log.wait(for: 1)
    #expect(log.refusals == [.digestMismatch])
}

/// A group of another CA ("Honest Abe"): its root and a member certificate with the right names.
func honestAbe(device: String = "alpha") throws -> (root: Certificate, identity: TLSIdentity) {
    let authority = try CertificateAuthority.createRoot(commonName: "Honest Abe")
    let identity = try authority.issue(names: [device, ShareGroup.memberName])
    return (authority.certificate, identity)
}

/// A self-signed certificate for the right names.
func selfSigned(device: String = "alpha") throws -> TLSIdentity {
    let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
    let name = try DistinguishedName { CommonName(device) }
    let now = Date()
    let certificate = try Certificate(
        version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: key.publicKey,
        notValidBefore: now - 3600, notValidAfter: now + 86_400, issuer: name, subject: name,
        signatureAlgorithm: .ecdsaWithSHA256,
        extensions: try Certificate.Extensions {
            SubjectAlternativeNames([.dnsName(device), .dnsName(ShareGroup.memberName)])
        },
        issuerPrivateKey: key)
    return try #require(TLSIdentity(chain: [certificate], privateKey: key))
}

/// Random bytes with a recognisable prefix.
func content(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
    return bytes
}

/// The error a share call threw.
func shareError(_ body: () async throws -> Void) async -> ShareError? {
    do { try await body(); return nil } catch let error as ShareError { return error } catch {
        Issue.record("expected a ShareError, got \(error)")
        return nil
    }
}

extension [UInt8] {
    /// Whether `needle` occurs in these bytes.
    func contains(bytes needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        let first = needle[0]
        var index = 0
        while index <= count - needle.count {
            if self[index] == first && Array(self[index..<(index + needle.count)]) == needle { return true }
            index += 1
        }
        return false
    }
}

/// A TCP relay on loopback that forwards one connection to `port` and records every byte in
/// both directions: the passive eavesdropper.
final class RecordingRelay: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var recorded: [UInt8] = []
    private var finished = 0

    init(to target: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { throw TestError("relay cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var target4 = sockaddr_in()
            target4.sin_family = sa_family_t(AF_INET)
            target4.sin_addr.s_addr = inet_addr("127.0.0.1")
            target4.sin_port = UInt16(target).bigEndian
            let connected = withUnsafePointer(to: &target4) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { close(client); return }
            self.pump(from: client, to: upstream)
            self.pump(from: upstream, to: client)
        }.start()
    }

    private func pump(from source: Int32, to destination: Int32) {
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                lock.lock(); recorded += buffer[0..<count]; lock.unlock()
                var offset = 0
                while offset < count {
                    let sent = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                    if sent <= 0 { break }
                    offset += sent
                }
            }
            shutdown(destination, Int32(SHUT_WR))
            lock.lock(); finished += 1; lock.unlock()
        }.start()
    }

    var recording: [UInt8] { lock.lock(); defer { lock.unlock() }; return recorded }

    deinit { close(listener) }
}

struct TestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
