import Foundation
import TestSupport
import Testing
import Cipher
import Vault
@testable import UnlockAgent
import AgentWire

@Suite("Unlock agent", .serialized)
struct AgentTests {
    @Test func servesClassKeysByTheClassRules() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let vaultID = try #require(try fixture.manager().vaultID)

        #expect(try client.status().state == .locked)
        // (afterFirstUnlock before any unlock is checked from another process, in AgentCLITests:
        // in this process the fixture's set-up already unlocked the vault once.)
        #expect(try client.status().firstUnlockDone == false)
        #expect(throws: AgentError.vault(.classKeyUnavailable(.whenUnlocked, .locked))) { try client.classKeys(for: .whenUnlocked, vaultID: vaultID) }
        #expect(throws: AgentError.vault(.wrongPasscode(failures: 1, nextAttemptAfter: nil))) { try client.unlock(passcode: SecretBytes(utf8: "wrong")) }

        let status = try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        #expect(status.state == .unlocked && status.firstUnlockDone)

        // The keys the agent serves are the vault's own: a manager unlocked here derives the same.
        let direct = try fixture.manager()
        try direct.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        for accessibility in [Accessibility.whenUnlocked, .afterFirstUnlock, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly] {
            let served = try client.classKeys(for: accessibility, vaultID: vaultID)
            #expect(served.count == 1)
            #expect(hex(served[0]) == hex(try direct.classKey(for: accessibility)))
        }
        direct.lock()

        // A locked manager of the same vault takes its keys from the agent.
        let viaAgent = try fixture.manager(source: client)
        #expect(!viaAgent.isUnlocked)
        #expect(try viaAgent.classKey(for: .whenUnlockedThisDeviceOnly).count == 32)

        // Another vault's id gets nothing; the always class is never served.
        #expect(throws: AgentError.remote("this agent serves another vault (\(fixture.home))")) {
            try client.classKeys(for: .whenUnlocked, vaultID: Data(repeating: 7, count: 16))
        }
        #expect(throws: AgentError.self) { try client.classKeys(for: .always, vaultID: vaultID) }

        try client.lock()
        #expect(try client.status().state == .locked)
        #expect(throws: AgentError.vault(.classKeyUnavailable(.whenUnlocked, .locked))) { try client.classKeys(for: .whenUnlocked, vaultID: vaultID) }
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlocked, .locked)) { try viaAgent.classKey(for: .whenUnlocked) }
        // afterFirstUnlock stays from the first unlock until the agent stops.
        #expect(try client.classKeys(for: .afterFirstUnlock, vaultID: vaultID).count == 1)
        fixture.stop()
        #expect(throws: AgentError.notRunning(socket: fixture.socket)) { try client.status() }
        #expect(access(fixture.socket, F_OK) != 0)
    }

    @Test func idleTTLLocksAndIsResetByUse() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start(.init(idleTTL: 3, maxTTL: 600))
        let vaultID = try #require(try fixture.manager().vaultID)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        // Used every 0.3 s for 4.5 s (longer than the idle TTL): it stays unlocked.
        for _ in 0..<15 {
            #expect(try client.classKeys(for: .whenUnlocked, vaultID: vaultID).count == 1)
            usleep(300_000)
        }
        #expect(try client.status().state == .unlocked)
        // Left alone, it locks.
        #expect(try AgentFixture.eventually(within: 15) { try client.status().state == .locked })
        #expect(throws: AgentError.vault(.classKeyUnavailable(.whenUnlocked, .locked))) { try client.classKeys(for: .whenUnlocked, vaultID: vaultID) }
    }

    @Test func maxTTLLocksWhateverTheUse() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start(.init(idleTTL: 600, maxTTL: 2))
        let vaultID = try #require(try fixture.manager().vaultID)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        let locked = AgentFixture.eventually(within: 15) {
            (try? client.classKeys(for: .whenUnlocked, vaultID: vaultID)) == nil
        }
        #expect(locked)
        #expect(try client.status().state == .locked)
    }

    @Test func lockStateStreamsAcrossProcesses() async throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let stream = try client.lockStateChanges()
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == .locked)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        #expect(await iterator.next() == .unlocked)
        try client.lock()
        #expect(await iterator.next() == .locked)
        fixture.stop()
        #expect(await iterator.next() == nil)
    }

    @Test func staleSocketIsReplacedAndOthersRefused() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        try FileManager.default.createDirectory(atPath: fixture.root + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // A socket left by a killed agent: bound, never unlinked, nobody listening.
        var address = try UnixSocket.address(fixture.socket)
        let stale = try UnixSocket.makeSocket()
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        #expect(bound == 0)
        close(stale)
        #expect(throws: AgentError.notRunning(socket: fixture.socket)) { try AgentClient(socketPath: fixture.socket).status() }
        let client = try fixture.start()
        #expect(try client.status().state == .locked)

        // A second agent on the same socket is refused while the first runs.
        let second = try AgentServer(manager: try fixture.manager(), socketPath: fixture.socket)
        #expect(throws: AgentError.alreadyRunning(socket: fixture.socket)) { try second.bind() }
        #expect(try client.status().state == .locked)
        fixture.stop()

        // A symlink where the socket goes is neither followed nor removed.
        let target = fixture.root + "/target"
        try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, fixture.socket) == 0)
        let third = try AgentServer(manager: try fixture.manager(), socketPath: fixture.socket)
        #expect(throws: AgentError.pathInUse(path: fixture.socket, reason: "exists and is not a socket (a symlink, file or directory)")) {
            try third.bind()
        }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep")
    }

    @Test func socketDirectoryOfAnotherOwnerOrOpenModeIsRefused() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let open = fixture.root + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        #expect(chmod(open, 0o755) == 0)
        let server = try AgentServer(manager: try fixture.manager(), socketPath: open + "/agent.sock")
        #expect(throws: AgentError.insecureDirectory(path: open, reason: "its mode 755 lets group or others in",
                                                     fix: "chmod 700 \(open), or set XDG_RUNTIME_DIR to a private directory")) {
            try server.bind()
        }
        if geteuid() == 0 {
            let foreign = fixture.root + "/foreign"
            try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            #expect(chown(foreign, 65534, 65534) == 0)
            let other = try AgentServer(manager: try fixture.manager(), socketPath: foreign + "/agent.sock")
            // Another user's directory is never to be adopted with chown: it may be a trap.
            #expect(throws: AgentError.insecureDirectory(path: foreign, reason: "it is owned by uid 65534, not by you (uid 0)",
                                                         fix: "someone else created it; remove it as root, or set XDG_RUNTIME_DIR to a private directory")) {
                try other.bind()
            }
            #expect(access(foreign + "/agent.sock", F_OK) != 0)
        }
        // The default directory and a per-vault socket name.
        let environment = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(AgentPaths.directory(environment: environment) == "/run/user/1000/securefoundation")
        #expect(AgentPaths.directory(environment: [:]) == "/tmp/securefoundation-\(geteuid())")
        let first = AgentPaths.socket(home: "/a", environment: environment)
        #expect(first.hasPrefix("/run/user/1000/securefoundation/agent-") && first.hasSuffix(".sock"))
        #expect(first != AgentPaths.socket(home: "/b", environment: environment))
    }

    @Test func fiftyConcurrentClients() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        // All 50 connections below come from this one process and stay silent until all are
        // connected: more than the default 16 silent connections one client may hold (beyond
        // that its oldest is turned away, AgentAvailabilityTests), whenever the agent accepts
        // them faster than they are opened. This test is about 50 at once, so it allows them.
        let client = try fixture.start(.init(maximumSilentPerClient: 64))
        let vaultID = try #require(try fixture.manager().vaultID)
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        let expected = hex(try client.classKeys(for: .whenUnlocked, vaultID: vaultID)[0])
        // 50 connections open at once, each sending its request only after all are connected.
        var fds: [Int32] = []
        defer { fds.forEach { close($0) } }
        for _ in 0..<50 { fds.append(try UnixSocket.connect(to: fixture.socket, timeout: 30)) }
        let request = [AgentProtocol.version, AgentProtocol.Operation.classKeys.rawValue, 0, 0] + Array(vaultID)
        for fd in fds { try AgentProtocol.writeFrame(fd, request) }
        var answers = Set<String>()
        for fd in fds {
            let frame = try AgentProtocol.readFrame(fd)
            let key = frame.slice(2..<frame.count)
            #expect(frame.count == 34)
            answers.insert(hex(key))
        }
        #expect(answers == [expected])
        // And 50 clients on their own threads, through the public client.
        let results = Protected50()
        let group = DispatchGroup()
        for _ in 0..<50 {
            group.enter()
            Thread {
                let key = try? client.classKeys(for: .whenUnlocked, vaultID: vaultID).first.map(hex)
                results.add(key)
                group.leave()
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(results.values.count == 50 && results.values.allSatisfy { $0 == expected })
    }

    @Test func oversizedAndSlowRequestsAreCutOff() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start(.init(requestTimeout: 1))
        // A length over 64 KiB is refused before anything is read.
        let big = try UnixSocket.connect(to: fixture.socket, timeout: 10)
        defer { close(big) }
        try [UInt8]([0x40, 0, 0, 0]).withUnsafeBytes { try UnixSocket.writeAll(big, $0) }
        let refusal = try AgentProtocol.readFrame(big)
        #expect(refusal.withUnsafeBytes { $0.first } == 1)
        // A client that sends nothing is dropped after the request timeout; others are served meanwhile.
        let silent = try UnixSocket.connect(to: fixture.socket, timeout: 10)
        defer { close(silent) }
        #expect(try client.status().state == .locked)
        let answer = try AgentProtocol.readFrame(silent)
        #expect(answer.withUnsafeBytes { $0.first } == 1)
        // Garbage gets a protocol error, not a crash.
        let garbage = try UnixSocket.connect(to: fixture.socket, timeout: 10)
        defer { close(garbage) }
        try AgentProtocol.writeFrame(garbage, [9, 9, 9])
        #expect(try AgentProtocol.readFrame(garbage).withUnsafeBytes { $0.first } == 1)
        #expect(try client.status().state == .locked)
    }

    @Test func anotherUIDIsRefused() throws {
        guard geteuid() == 0, let setpriv = [String](["/usr/bin/setpriv", "/bin/setpriv"]).first(where: { (path: String) in access(path, X_OK) == 0 }),
              access("/usr/bin/python3", X_OK) == 0 else {
            print("skipping: needs root, setpriv and /usr/bin/python3 to run a client as uid 65534")
            return
        }
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        let vaultID = try #require(try fixture.manager().vaultID)
        let script = fixture.root + "/client.py"
        let program = """
        import socket, struct, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sys.argv[1])
        except OSError as e:
            print("connect-failed", e.errno); sys.exit(0)
        body = bytes([1, 4, 0, 0]) + bytes.fromhex(sys.argv[2])
        try:
            s.sendall(struct.pack(">I", len(body)) + body)
        except OSError:
            pass
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        print("answer", data[4:5].hex(), data[5:].decode("utf-8", "replace"))
        """
        try Data(program.utf8).write(to: URL(fileURLWithPath: script))
        #expect(chmod(fixture.root, 0o755) == 0 && chmod(script, 0o644) == 0)
        let vaultHex = vaultID.map { String(format: "%02x", $0) }.joined()
        func runAsNobody() throws -> String {
            try ChildProcess.run(setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", script, fixture.socket, vaultHex]).text
        }
        // The 0700 directory keeps the other uid from reaching the socket at all.
        #expect(try runAsNobody().hasPrefix("connect-failed 13"))
        // With the directory and socket opened up, SO_PEERCRED still refuses it.
        #expect(chmod(fixture.root + "/run", 0o777) == 0 && chmod(fixture.socket, 0o666) == 0)
        let answer = try runAsNobody()
        #expect(answer.hasPrefix("answer 01"))
        #expect(answer.contains("\"kind\":\"refused\""))
        #expect(answer.contains("uid 65534 is not served by this agent"))
        #expect(try client.status().state == .unlocked)
    }
}

final class Protected50: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String?] = []
    func add(_ value: String?) { lock.withLock { stored.append(value) } }
    var values: [String?] { lock.withLock { stored } }
}

/// A request the agent turned away before reading it (answered "busy", as the agent answers a
/// silent connection whose slot went to a newcomer) is sent again on a new connection, a
/// bounded number of times; here an agent of the test's own answers "busy" twice, then the status.
@Suite("Unlock agent client: busy answers")
struct AgentClientBusyTests {
    /// Serves `busyRounds` connections with the busy answer, then one with `status`; counts them.
    static func serve(_ listenFD: Int32, busyRounds: Int, status: AgentStatus, served: Protected50) {
        for round in 0...busyRounds {
            guard let fd = AgentSystem.accept(listenFD) else { return }
            UnixSocket.setTimeouts(fd, seconds: 10)
            let request = try? AgentProtocol.readFrame(fd)
            request?.wipe()
            served.add("round \(round)")
            if round < busyRounds {
                try? AgentProtocol.writeFrame(fd, AgentServer.busy)
            } else if let json = try? JSONEncoder().encode(status) {
                try? AgentProtocol.writeFrame(fd, [0] + Array(json))
            }
            close(fd)
        }
    }

    @Test func aBusyAnswerIsRetriedThenGivenUp() throws {
        let directory = try TemporaryDirectory(prefix: "agent-busy")
        let status = AgentStatus(state: .locked, firstUnlockDone: false, home: "/h", idleTTL: 1, maxTTL: 2,
                                 idleRemaining: nil, maxRemaining: nil, pid: 1, uid: UInt32(geteuid()))
        // Two busy answers, then the status: the client's third attempt gets it.
        let path = directory.path + "/twice.sock"
        let listenFD = try AgentSystem.listen(at: path)
        defer { close(listenFD) }
        let served = Protected50()
        let server = Thread { Self.serve(listenFD, busyRounds: 2, status: status, served: served) }
        server.start()
        #expect(try AgentClient(socketPath: path, timeout: 10).status() == status)
        #expect(served.values.count == 3)
        // Busy every time: after four attempts the client says so.
        let always = directory.path + "/always.sock"
        let alwaysFD = try AgentSystem.listen(at: always)
        defer { close(alwaysFD) }
        let counted = Protected50()
        let busy = Thread { Self.serve(alwaysFD, busyRounds: AgentExchange.attemptsWhenBusy, status: status, served: counted) }
        busy.start()
        #expect(throws: AgentError.remote(AgentServer.busyMessage)) { _ = try AgentClient(socketPath: always, timeout: 10).status() }
        #expect(counted.values.count == AgentExchange.attemptsWhenBusy)
        // Let the server thread finish: its last round is the status nobody asks for.
        _ = try? AgentClient(socketPath: always, timeout: 10).status()
    }
}
