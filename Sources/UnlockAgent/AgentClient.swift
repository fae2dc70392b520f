import Foundation
import Cipher
import Vault
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Talks to a running unlock agent (``AgentServer``).
///
/// It is also a vault key source: give it to a `CryptoManager` (`unlockedKeySource:`) and the
/// manager, the keychain and protected files built on it take their whenUnlocked and
/// afterFirstUnlock keys from the agent whenever the manager itself is locked:
///
/// ```swift
/// let manager = try CryptoManager(directory: home, unlockedKeySource: AgentClient(home: home))
/// let keychain = try Keychain(manager: manager)   // works while `securefoundation agent unlock` holds the vault
/// ```
///
/// The client checks the agent's uid (`SO_PEERCRED`) before sending anything: a socket served
/// by another user is refused. Thread safety: a value type; every call opens its own connection.
public struct AgentClient: UnlockedClassKeySource, Sendable {
    /// The agent's socket.
    public let socketPath: String
    /// Seconds to wait for an answer (an unlock waits for the KDF: allow for it).
    public let timeout: Double

    /// - Parameters:
    ///   - socketPath: The socket.
    ///   - timeout: Seconds to wait for each answer.
    public init(socketPath: String, timeout: Double = 60) {
        self.socketPath = VaultPaths.absolute(socketPath)
        self.timeout = timeout
    }

    /// The client of the agent serving the vault in `home` (nil: the default data directory);
    /// see ``AgentPaths/socket(home:environment:)``.
    public init(home: String?, timeout: Double = 60) {
        self.init(socketPath: AgentPaths.socket(home: home), timeout: timeout)
    }

    // MARK: Requests

    /// The agent's status.
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers.
    public func status() throws -> AgentStatus {
        let payload = try request([AgentProtocol.Operation.status.rawValue])
        defer { payload.wipe() }
        return try decodeStatus(payload)
    }

    /// Whether an agent answers at the socket.
    public var isRunning: Bool { (try? status()) != nil }

    /// Unlocks the agent's vault with the passcode (the agent runs the KDF; an attempt is
    /// counted as with `CryptoManager.unlock(passcode:)`).
    /// - Returns: The status afterwards.
    /// - Throws: The vault's errors (`VaultError.wrongPasscode` and the rest), ``AgentError``.
    @discardableResult
    public func unlock(passcode: SecretBytes) throws -> AgentStatus {
        guard passcode.count > 0, passcode.count <= AgentProtocol.maximumFrame - 3 else {
            throw VaultError.invalidArgument("a passcode of \(passcode.count) bytes")
        }
        let body = SecretBytes(count: 3 + passcode.count) { target in
            target[0] = AgentProtocol.version
            target[1] = AgentProtocol.Operation.unlock.rawValue
            target[2] = 0
            passcode.withUnsafeBytes { (target.baseAddress! + 3).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        defer { body.wipe() }
        let payload = try request(body)
        defer { payload.wipe() }
        return try decodeStatus(payload)
    }

    /// Unlocks the agent's vault with the answers (one per question, empty for unanswered).
    @discardableResult
    public func unlock(answers: [SecretBytes]) throws -> AgentStatus {
        guard (1...CryptoManager.maximumQuestions).contains(answers.count), answers.allSatisfy({ $0.count <= 4096 }) else {
            throw VaultError.invalidArgument("\(answers.count) answers (1 to \(CryptoManager.maximumQuestions), each at most 4096 bytes)")
        }
        let total = 4 + answers.reduce(0) { $0 + 2 + $1.count }
        let body = SecretBytes(count: total) { target in
            target[0] = AgentProtocol.version
            target[1] = AgentProtocol.Operation.unlock.rawValue
            target[2] = 1
            target[3] = UInt8(answers.count)
            var offset = 4
            for answer in answers {
                target[offset] = UInt8(answer.count >> 8)
                target[offset + 1] = UInt8(answer.count & 0xFF)
                offset += 2
                answer.withUnsafeBytes { bytes in
                    if bytes.count > 0 { (target.baseAddress! + offset).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                }
                offset += answer.count
            }
        }
        defer { body.wipe() }
        let payload = try request(body)
        defer { payload.wipe() }
        return try decodeStatus(payload)
    }

    /// Locks the agent's vault at once (whenUnlocked keys are wiped; afterFirstUnlock keys stay
    /// until the agent stops).
    public func lock() throws {
        try request([AgentProtocol.Operation.lock.rawValue]).wipe()
    }

    /// Stops the agent and waits (at most 5 s) until its socket is gone.
    public func stop() throws {
        try request([AgentProtocol.Operation.stop.rawValue]).wipe()
        for _ in 0..<100 {
            if (try? FileCalls.linkStatus(socketPath)) == nil { return }
            usleep(50_000)
        }
    }

    /// The keys of `accessibility` of the vault `vaultID`: the current key, then retired ones.
    /// - Throws: `VaultError.classKeyUnavailable` (locked, no first unlock yet), ``AgentError``.
    public func classKeys(for accessibility: Accessibility, vaultID: Data) throws -> [SecretBytes] {
        guard vaultID.count == 16 else { throw VaultError.invalidArgument("a vault id of \(vaultID.count) bytes") }
        let body = [AgentProtocol.Operation.classKeys.rawValue, AgentProtocol.classCode(accessibility.protectionClass),
                    accessibility.thisDeviceOnly ? 1 : 0] + Array(vaultID)
        let payload = try request(body)
        defer { payload.wipe() }
        return try payload.withUnsafeBytes { bytes in
            guard bytes.count >= 1, bytes[0] >= 1, bytes.count == 1 + 32 * Int(bytes[0]) else {
                throw AgentError.protocolViolation("a class-key answer of \(bytes.count) bytes")
            }
            return (0..<Int(bytes[0])).map { index in
                SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[1 + 32 * index..<33 + 32 * index])) }
            }
        }
    }

    /// `UnlockedClassKeySource`: the agent's keys, or nil when no agent runs, it is locked, or
    /// it serves another vault.
    public func unlockedClassKeys(_ protectionClass: ProtectionClass, vaultID: Data) -> [SecretBytes]? {
        guard protectionClass != .always else { return nil }
        return try? classKeys(for: Accessibility(protectionClass), vaultID: vaultID)
    }

    /// The agent's lock state: the current state first, then every change (unlock, lock, a TTL
    /// running out, the agent stopping: the stream then ends).
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers.
    public func lockStateChanges() throws -> AsyncStream<LockState> {
        let fd = try connect()
        do {
            try AgentProtocol.writeFrame(fd, [AgentProtocol.version, AgentProtocol.Operation.subscribe.rawValue])
        } catch {
            close(fd)
            throw error
        }
        UnixSocket.setTimeouts(fd, seconds: 0)
        let (stream, continuation) = AsyncStream<LockState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let reader = Thread {
            defer {
                continuation.finish()
                close(fd)
            }
            while true {
                guard let frame = try? AgentProtocol.readFrame(fd) else { return }
                let state: LockState? = frame.withUnsafeBytes { bytes in
                    guard bytes.count == 2, bytes[0] == 0 else { return nil }
                    return bytes[1] == 1 ? .unlocked : .locked
                }
                frame.wipe()
                guard let state else { return }
                if case .terminated = continuation.yield(state) { return }
            }
        }
        continuation.onTermination = { _ in UnixSocket.shutdownBoth(fd) }
        reader.start()
        return stream
    }

    // MARK: Plumbing

    private func connect() throws -> Int32 {
        let fd = try UnixSocket.connect(to: socketPath, timeout: timeout)
        var uid: UInt32 = 0
        var pid: Int32 = 0
        let code = sf_peer_credentials(fd, &uid, &pid)
        guard code == 0, uid == UInt32(geteuid()) else {
            close(fd)
            throw AgentError.refused(code == 0 ? "the socket \(socketPath) is served by uid \(uid), not by this user" : "the agent's uid cannot be checked")
        }
        return fd
    }

    @discardableResult
    private func request(_ operation: [UInt8]) throws -> SecretBytes {
        let body = SecretBytes(copying: [AgentProtocol.version] + operation)
        defer { body.wipe() }
        return try request(body)
    }

    /// Sends one request and returns the answer's payload (a status-0 frame without its status byte).
    private func request(_ body: SecretBytes) throws -> SecretBytes {
        let fd = try connect()
        defer { close(fd) }
        try AgentProtocol.writeFrame(fd, body)
        let frame = try AgentProtocol.readFrame(fd)
        defer { frame.wipe() }
        let status: UInt8 = frame.withUnsafeBytes { $0.first ?? 255 }
        switch status {
        case 0:
            return frame.slice(1..<frame.count)
        case 1:
            let text = frame.withUnsafeBytes { bytes in Data([UInt8](bytes[1...])) }
            guard let wire = try? JSONDecoder().decode(WireError.self, from: text) else {
                throw AgentError.protocolViolation("an unreadable error answer: \(String(decoding: text.prefix(200), as: UTF8.self))")
            }
            throw wire.error
        default:
            throw AgentError.protocolViolation("an answer with status \(status)")
        }
    }

    private func decodeStatus(_ payload: SecretBytes) throws -> AgentStatus {
        do {
            return try payload.withUnsafeBytes { try JSONDecoder().decode(AgentStatus.self, from: Data($0)) }
        } catch {
            throw AgentError.protocolViolation("an unreadable status: \(error)")
        }
    }
}
