import Foundation
import Cipher
import Vault
import Age
import ProtectedFiles
import CPlatform
import AgentWire
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
/// by another user is refused. Every request, from the connection to the last byte of the
/// answer, takes at most ``timeout`` seconds (one deadline), so a stopped (`SIGSTOP`) or hung
/// agent costs a caller that long and no more; after such a timeout the client and its copies
/// fail at once for the next ``timeout`` seconds instead of waiting again.
///
/// As a key source, a failure cannot be thrown through `UnlockedClassKeySource` (the manager then
/// reports the class locked); ``lastFailure`` tells why: an agent that does not answer in time,
/// or the socket of an agent that died.
///
/// Thread safety: a value type; every call opens its own connection; copies share
/// ``lastFailure``.
public struct AgentClient: UnlockedClassKeySource, Sendable {
    /// The agent's socket.
    public let socketPath: String
    /// Seconds a request may take in all, connection included (an unlock waits for the KDF:
    /// allow for it).
    public let timeout: Double

    /// What the copies of one client share: the last failure to reach the agent.
    private final class Record: @unchecked Sendable {
        private let lock = NSLock()
        private var failure: AgentError?
        private var timedOutAt: Double?

        var lastFailure: AgentError? { lock.withLock { failure } }

        func set(_ error: AgentError?) {
            lock.withLock {
                failure = error
                if case .timedOut? = error { timedOutAt = UnixSocket.monotonicNow() } else { timedOutAt = nil }
            }
        }

        /// The timeout recorded less than `window` seconds ago, if any.
        func recentTimeout(within window: Double) -> AgentError? {
            lock.withLock {
                guard let timedOutAt, UnixSocket.monotonicNow() - timedOutAt < window else { return nil }
                return failure
            }
        }
    }

    private let record = Record()

    /// Why the last request could not reach the agent: ``AgentError/timedOut(_:)`` (the agent is
    /// stopped or hung), ``AgentError/notRunning(socket:)`` for a socket left by an agent that
    /// died (no socket at all is no failure: no agent is used), another ``AgentError``; nil
    /// when the agent answered (also with a refusal such as "locked").
    public var lastFailure: AgentError? { record.lastFailure }

    /// - Parameters:
    ///   - socketPath: The socket.
    ///   - timeout: Seconds to wait for each answer.
    public init(socketPath: String, timeout: Double = 60) {
        self.socketPath = VaultPaths.absolute(socketPath)
        self.timeout = timeout
    }

    /// The client of the agent serving the vault in `home` (nil: the default data directory);
    /// see ``AgentPaths/socket(home:environment:)``.
    /// - Parameters:
    ///   - home: The vault's data directory (nil: the default one).
    ///   - timeout: Seconds to wait for each answer.
    public init(home: String?, timeout: Double = 60) {
        self.init(socketPath: AgentPaths.socket(home: home), timeout: timeout)
    }

    // MARK: Requests

    /// The agent's status.
    /// - Returns: The lock state, the data directory served, the TTLs and what remains of them.
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers.
    public func status() throws(AgentError) -> AgentStatus {
        let payload = try request([AgentProtocol.Operation.status.rawValue])
        defer { payload.wipe() }
        return try decodeStatus(payload)
    }

    /// Whether an agent answers at the socket.
    public var isRunning: Bool { (try? status()) != nil }

    /// Unlocks the agent's vault with the passcode (the agent runs the KDF; an attempt is
    /// counted as with `CryptoManager.unlock(passcode:)`).
    /// - Parameter passcode: The vault's passcode (1 byte to the frame limit).
    /// - Returns: The status afterwards.
    /// - Throws: ``AgentError``: ``AgentError/vault(_:)`` for the vault's errors
    ///   (`VaultError.wrongPasscode` and the rest), the other cases for the agent.
    @discardableResult
    public func unlock(passcode: SecretBytes) throws(AgentError) -> AgentStatus {
        guard passcode.count > 0, passcode.count <= AgentProtocol.maximumFrame - 3 else {
            throw .vault(.invalidArgument("a passcode of \(passcode.count) bytes"))
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
    /// - Parameter answers: The answers, in the questions' order (each at most 4096 bytes).
    /// - Returns: The status afterwards.
    /// - Throws: ``AgentError``: ``AgentError/vault(_:)`` with `VaultError.invalidArgument` for
    ///   a wrong number of answers or one too long, or the vault's other errors
    ///   (`VaultError.wrongAnswers` and the rest); the other cases for the agent.
    @discardableResult
    public func unlock(answers: [SecretBytes]) throws(AgentError) -> AgentStatus {
        guard (1...CryptoManager.maximumQuestions).contains(answers.count), answers.allSatisfy({ $0.count <= 4096 }) else {
            throw .vault(.invalidArgument("\(answers.count) answers (1 to \(CryptoManager.maximumQuestions), each at most 4096 bytes)"))
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

    /// Gives the agent the user PIN of the token its device key is wrapped by (the `pkcs11`
    /// device-key provider), for a token whose PIN is typed by a person rather than kept in a
    /// file or the environment. The agent holds it in locked memory until it stops (locking
    /// does not forget it); send it before the first ``unlock(passcode:)``.
    /// - Parameter pin: The PIN, 1 to 256 bytes (wiped by the caller).
    /// - Throws: ``AgentError/vault(_:)`` with `VaultError.invalidArgument` for an empty or
    ///   over-long PIN, ``AgentError``.
    package func giveTokenPIN(_ pin: SecretBytes) throws(AgentError) {
        guard (1...AgentProtocol.maximumPIN).contains(pin.count) else {
            throw .vault(.invalidArgument("a token PIN of \(pin.count) bytes (1 to \(AgentProtocol.maximumPIN))"))
        }
        let body = SecretBytes(count: 2 + pin.count) { target in
            target[0] = AgentProtocol.version
            target[1] = AgentProtocol.Operation.tokenPIN.rawValue
            pin.withUnsafeBytes { (target.baseAddress! + 2).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        defer { body.wipe() }
        try request(body).wipe()
    }

    /// Locks the agent's vault at once (whenUnlocked keys are wiped; afterFirstUnlock keys stay
    /// until the agent stops).
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers, ``AgentError``.
    public func lock() throws(AgentError) {
        try request([AgentProtocol.Operation.lock.rawValue]).wipe()
    }

    /// Stops the agent and waits (at most 5 s) until its socket is gone.
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers, ``AgentError``.
    public func stop() throws(AgentError) {
        try request([AgentProtocol.Operation.stop.rawValue]).wipe()
        for _ in 0..<100 {
            if (try? FileCalls.linkStatus(socketPath)) == nil { return }
            usleep(50_000)
        }
    }

    /// The keys of `accessibility` of the vault `vaultID`: the current key, then retired ones.
    /// - Parameters:
    ///   - accessibility: The keychain accessibility whose class keys are asked for.
    ///   - vaultID: The vault's 16-byte identifier (the agent refuses another vault's).
    /// - Returns: The 32-byte class keys, current first.
    /// - Throws: ``AgentError/vault(_:)`` with `VaultError.classKeyUnavailable` (locked, no
    ///   first unlock yet) or `VaultError.invalidArgument`, ``AgentError``.
    public func classKeys(for accessibility: Accessibility, vaultID: Data) throws(AgentError) -> [SecretBytes] {
        guard vaultID.count == 16 else { throw .vault(.invalidArgument("a vault id of \(vaultID.count) bytes")) }
        let body = [AgentProtocol.Operation.classKeys.rawValue, AgentProtocol.classCode(accessibility.protectionClass),
                    accessibility.thisDeviceOnly ? 1 : 0] + Array(vaultID)
        let payload = try request(body)
        defer { payload.wipe() }
        return try payload.withUnsafeBytes { (bytes) throws(AgentError) -> [SecretBytes] in
            guard bytes.count >= 1, bytes[0] >= 1, bytes.count == 1 + 32 * Int(bytes[0]) else {
                throw AgentError.protocolViolation("a class-key answer of \(bytes.count) bytes")
            }
            return (0..<Int(bytes[0])).map { index in
                SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[1 + 32 * index..<33 + 32 * index])) }
            }
        }
    }

    /// Has the agent unwrap a protected file's key from the file's header stanzas with the
    /// class identity, which stays in the agent (what `age-plugin-securefoundation` does).
    /// - Parameters:
    ///   - stanzas: The header's `X25519` stanzas and its class stanza (others are not sent).
    ///   - onlyClass: Serve only files of this class (nil: any class).
    /// - Returns: The 16-byte file key.
    /// - Throws: ``AgentError/protectedFile(_:)`` with `ProtectedFileError.locked` when the
    ///   class is unavailable in the agent (locked, or not unlocked since it started), or
    ///   `notProtectedFile`, `tampered`, `invalidArgument` for a file the agent's vault does not
    ///   open (its message says why); ``AgentError/remote(_:)`` for other refusals,
    ///   ``AgentError`` for the connection.
    package func unwrapFileKey(stanzas: [AgeStanza], onlyClass: FileProtectionClass?) throws(AgentError) -> SecretBytes {
        // Built first: a request that cannot be built never reached the agent, so it records nothing.
        let body: SecretBytes
        do { body = try AgentPlugin.unwrapRequestBody(stanzas: stanzas, onlyClass: onlyClass?.name) } catch { throw AgentError(error) }
        defer { body.wipe() }
        let payload = try request(body)
        do { return try AgentPlugin.fileKey(from: payload) } catch { throw AgentError(error) }
    }

    /// `UnlockedClassKeySource`: the agent's keys, or nil when no agent runs, it is locked, it
    /// serves another vault, or it does not answer within ``timeout`` (``lastFailure`` says
    /// which of the last two).
    /// - Parameters:
    ///   - protectionClass: The class whose keys are asked for (`.always` is never served).
    ///   - vaultID: The vault's 16-byte identifier.
    /// - Returns: The class keys, current first, or nil.
    public func unlockedClassKeys(_ protectionClass: ProtectionClass, vaultID: Data) -> [SecretBytes]? {
        guard protectionClass != .always else { return nil }
        // The reason of a nil is in `lastFailure` (recorded by every request).
        return try? classKeys(for: Accessibility(protectionClass), vaultID: vaultID)
    }

    /// `UnlockedClassKeySource`: the device key as the agent reads it (with the token PIN it
    /// was given), or nil when no agent runs, it serves another vault or cannot read the key
    /// (``lastFailure`` says which). The manager checks the key against the trusted record.
    /// - Parameter vaultID: The vault's 16-byte identifier.
    /// - Returns: The 32-byte device key, or nil.
    public func deviceKey(vaultID: Data) -> SecretBytes? {
        guard vaultID.count == 16 else { return nil }
        let body = SecretBytes(copying: [AgentProtocol.version, AgentProtocol.Operation.deviceKey.rawValue] + Array(vaultID))
        defer { body.wipe() }
        guard let payload = try? request(body) else { return nil }
        guard payload.count == 32 else {
            payload.wipe()
            return nil
        }
        return payload
    }

    /// The agent's lock state: the current state first, then every change (unlock, lock, a TTL
    /// running out, the agent stopping: the stream then ends).
    /// - Returns: The stream of lock states.
    /// - Throws: ``AgentError/notRunning(socket:)`` when no agent answers.
    public func lockStateChanges() throws(AgentError) -> AsyncStream<LockState> {
        let fd: Int32
        do { fd = try connect() } catch { throw AgentError.mapping(error) }
        do {
            try AgentProtocol.writeFrame(fd, [AgentProtocol.version, AgentProtocol.Operation.subscribe.rawValue])
        } catch {
            close(fd)
            throw AgentError.mapping(error)
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

    private func connect() throws(AgentError) -> Int32 {
        do { return try AgentExchange.connect(socketPath: socketPath, timeout: timeout) } catch { throw AgentError(error) }
    }

    @discardableResult
    private func request(_ operation: [UInt8]) throws(AgentError) -> SecretBytes {
        let body = SecretBytes(copying: [AgentProtocol.version] + operation)
        defer { body.wipe() }
        return try request(body)
    }

    /// Sends one request and returns the answer's payload (a status-0 frame without its status
    /// byte), all within ``timeout`` seconds; records in ``lastFailure`` whether the agent was reached.
    private func request(_ body: SecretBytes) throws(AgentError) -> SecretBytes {
        if let recent = record.recentTimeout(within: timeout) { throw recent }
        do {
            let answer = try exchangeRetryingBusy(body)
            record.set(nil)
            return answer
        } catch {
            remember(error)
            throw error
        }
    }

    /// Records in ``lastFailure`` whether a failed request reached the agent.
    private func remember(_ error: AgentError) {
        switch error {
        case .notRunning where (try? FileCalls.linkStatus(socketPath)) == nil:
            record.set(nil)
        case .notRunning, .timedOut, .io, .refused:
            record.set(error)
        default:
            record.set(nil)
        }
    }

    /// One exchange through AgentWire's `AgentExchange` (a request the agent turned away
    /// unread is sent again), its errors as ``AgentError``.
    private func exchangeRetryingBusy(_ body: SecretBytes) throws(AgentError) -> SecretBytes {
        do { return try AgentExchange.request(body, socketPath: socketPath, timeout: timeout) } catch { throw AgentError(error) }
    }

    private func decodeStatus(_ payload: SecretBytes) throws(AgentError) -> AgentStatus {
        do {
            return try payload.withUnsafeBytes { try JSONDecoder().decode(AgentStatus.self, from: Data($0)) }
        } catch {
            throw AgentError.protocolViolation("an unreadable status: \(error)")
        }
    }
}
