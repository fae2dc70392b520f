import Foundation
import TestSupport
import Testing
import Cipher
import Vault
@testable import UnlockAgent
import AgentWire

/// A vault in a temporary directory and an agent serving it from a thread of the test process.
final class AgentFixture: @unchecked Sendable {
    let root: String
    let home: String
    let socket: String
    let deviceKey: SecretBytes
    let passcode = "correct horse"
    private(set) var server: AgentServer?
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    static let fastKDF = KDFPolicy(parameters: .scrypt(logN: 15, r: 8, p: 1))

    private let directory: TemporaryDirectory

    init() throws {
        // Short: the agent's socket is inside.
        directory = try TemporaryDirectory.short(prefix: "sf-agent")
        root = directory.path
        home = root + "/home"
        socket = root + "/run/agent.sock"
        deviceKey = try SecretBytes.random(count: 32)
        let setup = try manager()
        try setup.setUp(passcode: SecretBytes(utf8: passcode))
        setup.lock()
    }

    /// A manager of the fixture's vault, optionally taking keys from `source`.
    func manager(source: (any UnlockedClassKeySource)? = nil) throws -> CryptoManager {
        try CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: deviceKey), policy: Self.fastKDF,
                          attemptPolicy: .unlimited, unlockedKeySource: source)
    }

    /// Starts an agent on the fixture's socket (in a thread) and returns its client.
    @discardableResult
    func start(_ configuration: AgentServer.Configuration = .init()) throws -> AgentClient {
        try FileManager.default.createDirectory(atPath: root + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let server = try AgentServer(manager: try manager(), socketPath: socket, configuration: configuration)
        try server.bind()
        self.server = server
        let finished = self.finished
        let thread = Thread {
            try? server.run()
            finished.signal()
        }
        thread.start()
        self.thread = thread
        return AgentClient(socketPath: socket, timeout: 30)
    }

    /// Stops the agent and waits (at most 10 s) for its loop to end.
    func stop() {
        guard let server else { return }
        server.stop()
        // run() returns once the loop sees the stop (it polls every 250 ms) and has released
        // the socket's lock; on a busy machine that can take seconds.
        _ = finished.wait(timeout: .now() + 60)
        self.server = nil
    }

    func cleanup() {
        stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Sends one raw request frame and returns the answer frame's bytes.
    func rawRequest(_ request: [UInt8]) throws -> [UInt8] {
        let fd = try UnixSocket.connect(to: socket, timeout: 30)
        defer { close(fd) }
        try AgentProtocol.writeFrame(fd, request)
        let answer = try AgentProtocol.readFrame(fd, deadline: UnixSocket.monotonicNow() + 30)
        defer { answer.wipe() }
        return answer.withUnsafeBytes { Array($0) }
    }

    /// Polls `condition` every 50 ms for at most `seconds`.
    static func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if try condition() { return true }
            usleep(50_000)
        } while Date() < deadline
        return try condition()
    }
}

func hex(_ key: SecretBytes) -> String {
    key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
}
