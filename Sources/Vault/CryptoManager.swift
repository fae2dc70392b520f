import Foundation
import Crypto
import Cipher

/// The crypto manager: one application key behind a passcode and security questions.
///
/// The application key (256 random bits) is wrapped with AES-256-GCM under a key derived from
/// the passcode (scrypt or PBKDF2 with its own salt), and separately under a key derived from
/// each k-subset of the normalized answers to the security questions. Unlocking with either
/// brings the key into locked memory (`SecretBytes`); ``lock()`` wipes it. Failed attempts are
/// counted in a file guarded by `flock`, with escalating delays and optional erasure.
///
/// Everything lives in one private directory (0700, files 0600); changes are written atomically
/// to one state file, so each change is all-or-nothing. See docs/VAULT.md for the key hierarchy.
///
/// Thread safety: every method may be called from any thread. The in-memory keys are guarded by
/// an internal lock (held only for short copies, never during a KDF); file changes are serialized
/// between threads and processes by an exclusive `flock` on `vault.lock`. The synchronous
/// unlock methods block for the KDF time (about 0.2 s with `KDFPolicy.interactive`); from async
/// code use the `async` variants, which run the KDF on a dispatch queue.
public final class CryptoManager: Sendable {
    /// At most this many security questions.
    package static let maximumQuestions = 16
    /// At most this many k-subsets (C(n, k)), each costing one KDF run at setup.
    public static let maximumSubsets = 70

    /// The data directory.
    public let directory: String
    /// The KDF policy for new wrappings (stored wrappings keep their own parameters).
    public let policy: KDFPolicy
    /// The most KDF work a stored wrapping may demand before it is run: `KDFCeiling.standard`
    /// (scrypt 1 GiB and N·r·p ≤ 2^23, PBKDF2 ≤ 32,000,000 rounds) unless the manager was made
    /// with `KDFCeiling.legacy` for a vault created with costlier custom settings by an
    /// earlier version. A hostile state can make an unlock cost no more than this.
    public let kdfCeiling: KDFCeiling
    /// The failed-attempt policy.
    public let attemptPolicy: AttemptPolicy
    let deviceKeyProvider: any DeviceKeyProvider
    /// Where whenUnlocked and afterFirstUnlock keys come from while this manager cannot derive
    /// them itself (an unlock agent), or nil.
    public let unlockedKeySource: (any UnlockedClassKeySource)?
    let clock: @Sendable () -> Date
    let memory = Protected(Memory())
    let hooks = Protected(TestHooks())

    var statePath: String { VaultState.path(in: directory) }
    var lockPath: String { directory + "/vault.lock" }
    var alwaysKeyPath: String { directory + "/always.key" }
    var erasedMarkerPath: String { directory + "/erased" }

    /// Opens (without unlocking) the vault in `directory`, creating the directory (0700) if needed.
    ///
    /// - Parameters:
    ///   - directory: The data directory; nil means `$SECUREFOUNDATION_HOME`, else
    ///     `$XDG_DATA_HOME/securefoundation`, else `~/.local/share/securefoundation`.
    ///   - deviceKeyProvider: Where the device key comes from.
    ///   - policy: KDF work for new wrappings.
    ///   - attemptPolicy: Delays and erasure after failed attempts.
    ///   - kdfCeiling: The most KDF work a stored wrapping may demand (`KDFCeiling.standard`;
    ///     `KDFCeiling.legacy` for a vault created with costlier custom settings).
    ///   - unlockedKeySource: Asked for the whenUnlocked and afterFirstUnlock keys while this
    ///     manager is locked or not yet unlocked in this process (an unlock agent); nil for none.
    ///   - clock: The wall clock used for attempt delays (injected by tests).
    /// - Throws: ``VaultError/insecurePermissions(path:reason:fix:)`` when the directory is reachable
    ///   by others or owned by another user; ``VaultError/io(_:)``.
    public init(directory: String? = nil, deviceKeyProvider: any DeviceKeyProvider = FileDeviceKeyProvider(),
                policy: KDFPolicy = .interactive, attemptPolicy: AttemptPolicy = .iOS, kdfCeiling: KDFCeiling = .standard,
                unlockedKeySource: (any UnlockedClassKeySource)? = nil,
                clock: @escaping @Sendable () -> Date = { Date() }) throws {
        let resolved = VaultPaths.absolute(directory ?? VaultPaths.defaultDirectory())
        self.directory = resolved
        self.deviceKeyProvider = deviceKeyProvider
        self.unlockedKeySource = unlockedKeySource
        self.policy = policy
        self.kdfCeiling = kdfCeiling
        self.attemptPolicy = attemptPolicy
        self.clock = clock
        do {
            try policy.parameters.validate()
        } catch {
            throw VaultError.invalidArgument("\(error)")
        }
        try vaultCall {
            try SecureFile.ensurePrivateDirectory(resolved)
            // Leftovers that may hold key material; one that cannot be destroyed does not stop
            // the open (erase reports it).
            try withFileLock { try? destroyLeftovers() }
        }
    }

    deinit {
        memory.withLock { $0.wipeAll() }
    }

    // MARK: Queries

    /// Whether a passcode is set.
    /// - Throws: ``VaultError/corrupted(_:)`` or permission errors when the state cannot be read.
    public var hasPasscode: Bool {
        get throws { try loadState()?.passcode != nil }
    }

    /// Whether security questions are set.
    public var hasSecurityQuestions: Bool {
        get throws { try loadState()?.questions != nil }
    }

    /// The security questions, readable before unlock (empty when none are set). They are
    /// authenticated at unlock: a swapped question makes the answers fail and a passcode unlock
    /// report ``VaultError/corrupted(_:)``.
    public var questions: [String] {
        get throws { try loadState()?.questions?.questions ?? [] }
    }

    /// How many answers unlock (k of n), or nil without questions.
    public var answerThreshold: Int? {
        get throws { try loadState()?.questions?.threshold }
    }

    /// The erase-after count stored with the vault by `setUp` (nil: the vault never erases
    /// itself unless a manager's ``AttemptPolicy/eraseAfter`` asks for it). When both are set,
    /// the stricter applies.
    public var storedEraseAfter: Int? {
        get throws { try loadState()?.eraseAfter }
    }

    /// Whether a vault is set up in the directory.
    public var isSetUp: Bool {
        get throws { try loadState() != nil }
    }

    /// Whether the vault was erased (after too many failed attempts or on request) and not set up again.
    public var isErased: Bool {
        access(erasedMarkerPath, F_OK) == 0 && access(statePath, F_OK) != 0
    }

    /// Whether the application key is in memory.
    public var isUnlocked: Bool {
        memory.withLock { $0.unlocked != nil }
    }

    /// The current application key's id (recorded in sealed data), or nil without a vault.
    public var keyID: [UInt8]? {
        get throws { try loadState().map { Array($0.keyID) } }
    }

    /// The vault's 16-byte id (bound into every wrapping), or nil without a vault. An unlock
    /// agent names the vault it serves by it.
    public var vaultID: Data? {
        get throws { try loadState()?.vaultID }
    }

    /// Consecutive failed unlock attempts recorded so far.
    public var failedAttempts: Int {
        get throws { try vaultCall { try withFileLock { try loadAttempts(attemptAnchor(nil)).failures } } }
    }

    /// How long until the next unlock attempt is accepted (zero when it is accepted now).
    public var nextAttemptDelay: Duration {
        get throws {
            try vaultCall {
                try withFileLock { try loadAttempts(attemptAnchor(nil)).wait(at: clock(), policy: attemptPolicy) }
            }
        }
    }

    // MARK: Lock state

    /// A new stream of lock-state changes for one observer. It yields the current state first,
    /// then every change, until the manager is released.
    public var lockStateChanges: AsyncStream<LockState> {
        let (stream, continuation) = AsyncStream<LockState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        memory.withLock { memory in
            continuation.yield(memory.unlocked == nil ? .locked : .unlocked)
            memory.observers[id] = continuation
        }
        continuation.onTermination = { [weak self] _ in
            self?.memory.withLock { _ = $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Wipes the application key, the class master and the whenUnlocked class key from memory
    /// (the original's purge). The afterFirstUnlock class key stays until the process ends.
    public func lock() {
        memory.withLock { memory in
            guard let unlocked = memory.unlocked else { return }
            unlocked.wipe()
            memory.unlocked = nil
            memory.notify(.locked)
        }
        HeapScrub.scrubRecentlyFreed()
    }

    /// The original's name for ``lock()``.
    public func purge() { lock() }

    // MARK: Internals shared by the extensions

    func loadState() throws(VaultError) -> VaultState? {
        try vaultCall { try VaultState.load(directory: directory) }
    }

    func requireState() throws(VaultError) -> VaultState {
        guard let state = try loadState() else { throw isErased ? VaultError.erased : VaultError.notSetUp }
        return state
    }

    func withFileLock<Result>(_ body: () throws -> Result) throws -> Result {
        try FileLock.withExclusiveLock(path: lockPath, body)
    }

    /// Runs `body`, mapping lower-layer errors to ``VaultError``.
    func vaultCall<Result>(_ body: () throws -> Result) throws(VaultError) -> Result {
        do { return try body() } catch { throw VaultError.wrap(error) }
    }

    /// Writes `state` atomically. The state file it replaces (which holds superseded wrappings)
    /// is kept by a hard link during the rename and then destroyed. Call with the file lock held.
    /// - Returns: The identity of the file written.
    @discardableResult
    func commit(_ state: VaultState) throws(VaultError) -> FileIdentity? {
        try vaultCall {
            let data = try state.encoded()
            try replaceDestroyingSuperseded(statePath) {
                try SecureFile.writeAtomically(data, to: statePath)
                testHooks.step?("committed")
            }
        }
        // The state it replaced (its wrappings) is not kept in memory either.
        CheckedFileCache.forget(path: statePath, kind: VaultState.self)
        return FileIdentity(path: statePath)
    }

    /// Replaces the key file at `path` with what `write` writes there atomically, keeping the file
    /// it replaces by a hard link (`.superseded-…`) during the rename and then crypto-erasing
    /// it, so the superseded keys do not linger in a freed inode. Call with the file lock held.
    func replaceDestroyingSuperseded(_ path: String, _ write: () throws -> Void) throws {
        // Leftovers of a writer killed since the open are crypto-erased first: the atomic write
        // below would otherwise unlink an abandoned temporary (a whole state) without erasing it.
        try? destroyLeftovers()
        var superseded: String?
        if access(path, F_OK) == 0 {
            let name = directory + "/.superseded-" + (try SecureRandom.string(length: 12, alphabet: SecureRandom.alphanumeric))
            if VaultFiles.hardLink(path, as: name) { superseded = name }
        }
        do {
            try write()
        } catch {
            if let superseded { unlink(superseded) }
            throw error
        }
        // A failure here leaves a .superseded- file that the next open or erase destroys.
        if let superseded { try? destroyFile(superseded, live: liveInodes()) }
    }

    /// Installs freshly unlocked keys and tells observers.
    func install(_ unlocked: UnlockedKeys) throws(VaultError) {
        FirstUnlockCache.store(vaultID: unlocked.vaultID, keys: try vaultCall { try unlocked.classKeys(.afterFirstUnlock) })
        memory.withLock { memory in
            let wasLocked = memory.unlocked == nil
            memory.unlocked?.wipe()
            memory.unlocked = unlocked
            if wasLocked { memory.notify(.unlocked) }
        }
    }

    /// The unlocked keys, or ``VaultError/locked``.
    func requireUnlocked() throws(VaultError) -> UnlockedKeys {
        guard let unlocked = memory.withLock({ $0.unlocked }) else { throw VaultError.locked }
        return unlocked
    }
}

/// A value behind an `NSLock`. The lock protects in-memory keys and observers; it is held only
/// for short, non-blocking work, never during a KDF or file I/O.
final class Protected<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}

/// What the manager holds in memory.
struct Memory {
    var unlocked: UnlockedKeys?
    var temporaryPasscode: SecretBytes?
    var temporaryQuestions: [String]?
    var temporaryAnswers: [SecretBytes]?
    var temporaryThreshold: Int?
    var observers: [UUID: AsyncStream<LockState>.Continuation] = [:]
    var deviceKey: SecretBytes?

    func notify(_ state: LockState) {
        for continuation in observers.values { continuation.yield(state) }
    }

    mutating func wipeTemporaries() {
        temporaryPasscode?.wipe()
        temporaryAnswers?.forEach { $0.wipe() }
        temporaryPasscode = nil
        temporaryQuestions = nil
        temporaryAnswers = nil
        temporaryThreshold = nil
    }

    mutating func wipeAll() {
        unlocked?.wipe()
        unlocked = nil
        wipeTemporaries()
        deviceKey?.wipe()
        deviceKey = nil
        for continuation in observers.values { continuation.finish() }
        observers = [:]
    }
}
