import Foundation
import TestSupport
import Testing
import Cipher
import Vault
@testable import UnlockAgent
import AgentWire
#if canImport(Glibc)
import Glibc
#endif

/// Attacks on the agent's connection slots and on the keys it holds across changes of the vault.
@Suite("Unlock agent hardening", .serialized)
struct AgentHardeningTests {
    /// More clients than slots, each sending its request one byte every half second (each read
    /// on time, the whole frame never): a real client is still served, and every trickler is
    /// cut once the request deadline has passed.
    @Test func tricklingClientsDoNotHoldTheSlots() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let deadline = 2.0
        let slots = 128
        try fixture.start(.init(requestTimeout: deadline, maximumConnections: slots))
        // A frame announcing 256 bytes: at two bytes a second it would take over two minutes.
        let frame: [UInt8] = [0, 0, 1, 0] + [AgentProtocol.version, AgentProtocol.Operation.status.rawValue] + [UInt8](repeating: 0, count: 254)
        let tricklers = Tricklers()
        defer { tricklers.closeAll() }
        for _ in 0..<(slots + 32) {
            tricklers.add(try UnixSocket.connect(to: fixture.socket, timeout: 10))
        }
        Thread { tricklers.trickle(frame, every: 0.5, for: 8 * deadline + 10) }.start()
        usleep(300_000)
        #expect(tricklers.openCount > 0, "the tricklers were refused before the real client came")

        // A real client, while every slot holds a trickler: served.
        let client = AgentClient(socketPath: fixture.socket, timeout: deadline + 10)
        let status = try client.status()
        #expect(status.state == .locked)

        // Every trickler is cut: its connection is closed once its deadline has passed.
        #expect(AgentFixture.eventually(within: 8 * deadline + 20) { tricklers.finished })
        #expect(tricklers.openCount == 0, "\(tricklers.openCount) trickling clients still connected")
        // And the agent still serves.
        #expect(try client.status().state == .locked)
    }

    /// The attack of the review: the agent unlocked, the vault erased, the agent locked, then a
    /// copy of the home taken before the erase put back at its path. The agent serves nothing
    /// of the erased vault (not even afterFirstUnlock keys) and reports it locked; the restored
    /// files need the passcode again.
    @Test func erasedVaultIsForgottenAlsoWhenABackupIsPutBack() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let vaultID = try #require(try fixture.manager().vaultID)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        #expect(try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID).count == 1)
        #expect(try client.classKeys(for: .whenUnlocked, vaultID: vaultID).count == 1)

        let backup = fixture.root + "/backup"
        try copyFiles(from: fixture.home, to: backup)
        try fixture.manager().erase()

        #expect(throws: (any Error).self) { try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID) }
        #expect(throws: (any Error).self) { try client.classKeys(for: .whenUnlocked, vaultID: vaultID) }
        var status = try client.status()
        #expect(status.state == .locked && !status.firstUnlockDone)
        try client.lock()

        try copyFiles(from: backup, to: fixture.home)
        #expect(try fixture.manager().vaultID == vaultID)
        #expect(throws: AgentError.vault(.classKeyUnavailable(.afterFirstUnlock, .noFirstUnlockYet))) {
            try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID)
        }
        #expect(throws: AgentError.vault(.classKeyUnavailable(.whenUnlocked, .locked))) { try client.classKeys(for: .whenUnlocked, vaultID: vaultID) }
        status = try client.status()
        #expect(status.state == .locked && !status.firstUnlockDone)

        // The restored vault is served again after an unlock with its passcode.
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        #expect(try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID).count == 1)
    }

    /// A passcode change made by another program (a rewrite of `vault.state`) locks the agent and
    /// drops its afterFirstUnlock keys; the new passcode unlocks it.
    @Test func aChangeOfTheVaultLocksTheAgent() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let vaultID = try #require(try fixture.manager().vaultID)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        let other = try fixture.manager()
        try other.updatePasscode(current: SecretBytes(utf8: fixture.passcode), new: SecretBytes(utf8: "battery staple"))
        other.lock()
        let status = try client.status()
        #expect(status.state == .locked && !status.firstUnlockDone)
        #expect(throws: AgentError.vault(.classKeyUnavailable(.afterFirstUnlock, .noFirstUnlockYet))) {
            try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID)
        }
        #expect(throws: AgentError.vault(.wrongPasscode(failures: 1, nextAttemptAfter: nil))) { try client.unlock(passcode: SecretBytes(utf8: fixture.passcode)) }
        try client.unlock(passcode: SecretBytes(utf8: "battery staple"))
        #expect(try client.classKeys(for: .whenUnlocked, vaultID: vaultID).count == 1)
    }

    /// Copies the regular files of `source` into `target` (0700) as new 0600 files, replacing
    /// those there: what putting back a backup does.
    private func copyFiles(from source: String, to target: String) throws {
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: source + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let data = try Data(contentsOf: URL(fileURLWithPath: source + "/" + name))
            try? FileManager.default.removeItem(atPath: target + "/" + name)
            #expect(FileManager.default.createFile(atPath: target + "/" + name, contents: data, attributes: [.posixPermissions: 0o600]))
        }
    }
}

/// Connections that send a frame one byte at a time, and notice when the agent closes them.
final class Tricklers: @unchecked Sendable {
    private let lock = NSLock()
    private var fds: [Int32] = []
    private var open: [Bool] = []
    private var done = false

    func add(_ fd: Int32) {
        lock.withLock {
            fds.append(fd)
            open.append(true)
        }
    }

    private func markClosed(_ index: Int) {
        lock.withLock { if index < open.count { open[index] = false } }
    }

    var openCount: Int { lock.withLock { open.filter { $0 }.count } }
    var finished: Bool { lock.withLock { done } }

    /// Sends the next byte of `frame` on every open connection every `interval` seconds, until
    /// every connection is closed by the agent or `limit` seconds have passed.
    func trickle(_ frame: [UInt8], every interval: Double, for limit: Double) {
        let end = Date().addingTimeInterval(limit)
        var position = 0
        while Date() < end {
            let current = lock.withLock { Array(zip(fds.indices, fds)).filter { open[$0.0] } }
            if current.isEmpty { break }
            for (index, fd) in current {
                if Self.closedByPeer(fd) {
                    markClosed(index)
                    continue
                }
                if position < frame.count {
                    var byte = frame[position]
                    let sent = send(fd, &byte, 1, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                    if sent < 0 && errno != EAGAIN && errno != EINTR { markClosed(index) }
                }
            }
            position += 1
            usleep(UInt32(interval * 1_000_000))
        }
        lock.withLock { done = true }
    }

    /// Whether the agent closed `fd` (after its answer, if any): end of file or a reset.
    private static func closedByPeer(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<64 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { return true }
            if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
        }
        return false
    }

    func closeAll() {
        lock.withLock {
            fds.forEach { close($0) }
            fds = []
            open = []
        }
    }
}
