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

/// An agent that is stopped, dead or crowded: the client says which (not "locked"), and silent
/// connections of another client do not keep a real request out.
@Suite("Unlock agent availability", .serialized)
struct AgentAvailabilityTests {
    /// A socket that listens and never accepts: what a client sees of an agent stopped with SIGSTOP.
    static func listeningSocket(at path: String) throws -> Int32 {
        var address = try UnixSocket.address(path)
        let fd = try UnixSocket.makeSocket()
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        #expect(listen(fd, 16) == 0)
        return fd
    }

    /// A stopped agent: the read times out (the client's one deadline), `lastFailure` says so,
    /// and the next request fails at once instead of waiting again.
    @Test func aStoppedAgentIsATimeoutNotALock() throws {
        let directory = try TemporaryDirectory.short(prefix: "sf-avail")
        let path = directory.path + "/agent.sock"
        let fd = try Self.listeningSocket(at: path)
        defer { close(fd) }
        let client = AgentClient(socketPath: path, timeout: 1)
        #expect(client.unlockedClassKeys(.whenUnlocked, vaultID: Data(count: 16)) == nil)
        guard case .timedOut(let why)? = client.lastFailure else {
            Issue.record("no timeout recorded: \(String(describing: client.lastFailure))"); return
        }
        #expect(why.contains("within 1 s: it is stopped or hung"))
        // The copy shares the record: the next request fails with the same timeout at once.
        let copy = client
        #expect(throws: AgentError.timedOut(why)) { _ = try copy.status() }
    }

    /// The socket of an agent that died (nothing listens): not running, recorded; no socket at
    /// all: no agent is in use, nothing recorded (the class is simply locked).
    @Test func aDeadAgentIsNotRunningAndNoSocketIsNoFailure() throws {
        let directory = try TemporaryDirectory.short(prefix: "sf-avail")
        let path = directory.path + "/agent.sock"
        close(try Self.listeningSocket(at: path))
        let client = AgentClient(socketPath: path, timeout: 5)
        #expect(client.unlockedClassKeys(.whenUnlocked, vaultID: Data(count: 16)) == nil)
        #expect(client.lastFailure == .notRunning(socket: path))

        let none = AgentClient(socketPath: directory.path + "/absent.sock", timeout: 5)
        #expect(none.unlockedClassKeys(.whenUnlocked, vaultID: Data(count: 16)) == nil)
        #expect(none.lastFailure == nil)
    }

    /// A real client whose request is under way, then far more silent connections than slots
    /// (which are not cut by the request deadline during the test): the silent ones give their
    /// slots (and one client keeps at most `maximumSilentPerClient` of them), the real request
    /// is answered, and a new client is served at once.
    @Test func silentConnectionsDoNotStarveRealRequests() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let slots = 128
        try fixture.start(.init(requestTimeout: 60, maximumConnections: slots))
        let frame: [UInt8] = [0, 0, 0, 2, AgentProtocol.version, AgentProtocol.Operation.status.rawValue]
        let real = try UnixSocket.connect(to: fixture.socket, timeout: 10)
        defer { close(real) }
        try frame.prefix(3).withUnsafeBytes { try UnixSocket.writeAll(real, $0) }
        usleep(200_000)

        var silent: [Int32] = []
        defer { silent.forEach { close($0) } }
        for _ in 0..<(slots + 72) {
            silent.append(try UnixSocket.connect(to: fixture.socket, timeout: 10))
        }
        // A new client, queued behind every silent connection: once it is answered, the agent
        // has accepted them all (and given their slots away).
        let client = AgentClient(socketPath: fixture.socket, timeout: 10)
        #expect(try client.status().state == .locked)
        #expect(client.lastFailure == nil)

        try frame.dropFirst(3).withUnsafeBytes { try UnixSocket.writeAll(real, $0) }
        UnixSocket.setTimeouts(real, seconds: 10)
        let answer = try AgentProtocol.readFrame(real)
        defer { answer.wipe() }
        #expect(answer.withUnsafeBytes { $0.first } == 0, "the real request under way lost its slot")
    }
}
