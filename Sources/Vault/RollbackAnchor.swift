import Foundation
import Cipher

/// The rollback anchor of one vault: `vaults/VAULTID.anchor` in the trusted directory beside the
/// device key (CONFIG, the directory of the device-key provider record), holding monotonic
/// generation counters by name and the failed-attempt count. Layout: docs/FORMATS.md,
/// "Rollback anchor".
///
/// Whoever can write the data directory (HOME) cannot write CONFIG, so a counter here is a lower
/// bound for the generation of a file in HOME: the writer of a file writes it first, then
/// advances the counter (``advance(_:to:)``, which never lowers it); a reader accepts a file whose
/// generation is at least the counter (and advances the counter to it: a writer killed between
/// its write and the advance) and refuses an older one as rolled back (``check(_:found:file:advancing:)``).
///
/// The counters are changed under an exclusive `flock` on `vaults/VAULTID.anchor.lock`, so two
/// processes (or two copies of one home) never lower one another's counter.
public struct RollbackAnchor: Sendable {
    /// The counter of `vault.state`'s generation.
    public static let vaultState = "vault.state"
    /// The counter of `protected-files.keys`'s generation.
    package static let protectedFilesKeys = "protected-files.keys"
    /// The counter of a share group's revocation list (reserved for device sharing).
    public static let shareRevocations = "share.revocations"

    static let formatName = "securefoundation-rollback-anchor"
    static let currentVersion = 1
    static let suffix = ".anchor"
    /// At most this many counters (names are short, known ones; a file with more is refused).
    static let maximumCounters = 64
    /// Counters stay below 2^53 (exact in every JSON reader).
    static let maximumValue: UInt64 = 1 << 53

    /// The anchor file.
    public let path: String
    /// The vault the anchor belongs to.
    public let vaultID: Data

    /// The anchor of the vault `vaultID` in `directory` (the trusted `vaults/` directory,
    /// ``DeviceKeyRecord/trustedDirectory(filePath:)``).
    /// - Parameters:
    ///   - directory: The trusted `vaults/` directory.
    ///   - vaultID: The vault's identifier.
    public init(directory: String, vaultID: Data) {
        self.path = directory + "/" + Encoding.hex(vaultID) + Self.suffix
        self.vaultID = vaultID
    }

    var directory: String { SecureFile.directoryOf(path) }
    var lockPath: String { path + ".lock" }

    /// The file's content.
    struct Content: Codable, Equatable, Sendable {
        var format: String = RollbackAnchor.formatName
        var version: Int = RollbackAnchor.currentVersion
        var vaultID: Data
        var counters: [String: UInt64] = [:]
        /// The failed-attempt record as last stored (the data directory's `attempts` may be
        /// deleted or zeroed by its writer; the count used is the larger of the two).
        var attempts: Attempts?
    }

    struct Attempts: Codable, Equatable, Sendable {
        var failures: Int
        var lastFailure: Double
        var uncounted: Int?
    }

    // MARK: Reading

    /// The current value of the counter `name` (0 when the anchor or the counter does not exist).
    /// - Parameter name: The counter's name.
    /// - Returns: The counter's value.
    /// - Throws: ``VaultError/corrupted(_:)`` for an anchor that does not parse or names another
    ///   vault; ``VaultError/insecurePermissions(path:reason:fix:)``.
    public func current(_ name: String) throws(VaultError) -> UInt64 {
        try VaultError.call {
            try Self.checkName(name)
            return try load()?.counters[name] ?? 0
        }
    }

    /// The anchor's content (nil: no anchor yet). `fresh`: read the file whatever is kept (the
    /// read of a read-modify-write under the anchor's lock).
    func load(fresh: Bool = false) throws -> Content? {
        guard access(path, F_OK) == 0 || errno != ENOENT else {
            CheckedFileCache.forget(path: path, kind: Content.self)
            return nil
        }
        return try VaultError.call {
            try SecureFile.checkPrivate(directory, isDirectory: true)
            // Parsed and checked once while the file is unchanged (CheckedFileCache, which also
            // checks that it is a private regular file before reading it).
            return try CheckedFileCache.value(at: path, kind: Content.self, maxLength: 64 * 1024, fresh: fresh) { bytes in
                let content: Content
                do { content = try CanonicalEncoding.decode(Content.self, from: bytes) } catch {
                    throw VaultError.corrupted("\(path) is not a rollback anchor: \(error); it lives beside the device key, where only you write: restore it from a backup of that directory")
                }
                try check(content)
                return content
            }
        }
    }

    func check(_ content: Content) throws {
        guard content.format == Self.formatName else { throw VaultError.corrupted("\(path): unknown format \(content.format)") }
        guard content.version == Self.currentVersion else {
            throw VaultError.corrupted("\(path): rollback anchor version \(content.version) is not supported by this version of SecureFoundation")
        }
        guard content.vaultID == vaultID else { throw VaultError.corrupted("\(path) is the rollback anchor of another vault") }
        guard content.counters.count <= Self.maximumCounters else { throw VaultError.corrupted("\(path) holds \(content.counters.count) counters (at most \(Self.maximumCounters))") }
        for (name, value) in content.counters {
            guard Self.validName(name), value <= Self.maximumValue else {
                throw VaultError.corrupted("\(path): a counter \(name.prefix(60).debugDescription) is malformed")
            }
        }
        if let attempts = content.attempts {
            guard (0...1_000_000).contains(attempts.failures), attempts.lastFailure.isFinite,
                  (attempts.uncounted ?? 0) >= 0, (attempts.uncounted ?? 0) <= attempts.failures else {
                throw VaultError.corrupted("\(path): the failed-attempt record is out of range")
            }
        }
    }

    static func validName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D }
    }

    static func checkName(_ name: String) throws {
        guard validName(name) else { throw VaultError.invalidArgument("\(name.prefix(60).debugDescription) is not a rollback counter name (a-z, 0-9, '.', '-', at most 64 bytes)") }
    }

    // MARK: Changing

    /// Raises the counter `name` to `value` (a counter is never lowered: advancing to a smaller
    /// value changes nothing). Creates the anchor (0600) and its directory (0700) if needed;
    /// written atomically.
    /// - Parameters:
    ///   - name: The counter's name.
    ///   - value: The generation reached.
    /// - Returns: The counter's value afterwards.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for a value out of range, as ``current(_:)``
    ///   for the anchor, and ``VaultError`` for a file that cannot be written.
    @discardableResult
    public func advance(_ name: String, to value: UInt64) throws(VaultError) -> UInt64 {
        try VaultError.call { try Self.checkName(name) }
        guard value <= Self.maximumValue else { throw VaultError.invalidArgument("a generation of \(value) is out of range") }
        return try VaultError.call {
            try update { content in
                let now = max(content.counters[name] ?? 0, value)
                content.counters[name] = now
                return now
            }
        }
    }

    /// Checks the generation `found` of `file` against the counter `name` and, with
    /// `advancing`, advances the counter to it: a file at least as new as the anchor is accepted
    /// (a writer killed between its write and the advance left the anchor behind), an older one
    /// is refused. Advance only once the file (and so `found`) is authenticated: pass
    /// `advancing: false` before, and call ``advance(_:to:)`` after.
    /// - Parameters:
    ///   - name: The counter's name.
    ///   - found: The generation read from the file.
    ///   - file: The file's path, for the error.
    ///   - advancing: Advance the counter to `found` when it is higher.
    /// - Throws: ``VaultError/rolledBack(file:found:expected:)`` when `found` is below the counter.
    public func check(_ name: String, found: UInt64, file: String, advancing: Bool = true) throws(VaultError) {
        let expected = try current(name)
        guard found >= expected else { throw VaultError.rolledBack(file: file, found: found, expected: expected) }
        if advancing, found > expected { try advance(name, to: found) }
    }

    /// Reads, changes and writes the content under the anchor's lock.
    func update<Result>(_ body: (inout Content) throws -> Result) throws -> Result {
        try VaultError.call {
            try SecureFile.ensurePrivateDirectory(directory)
            return try FileLock.withExclusiveLock(path: lockPath) {
                // Never from the cache: counters are only raised from what the file holds now.
                var content = try load(fresh: true) ?? Content(vaultID: vaultID)
                let before = content
                let result = try body(&content)
                if content != before {
                    try SecureFile.writeAtomically(try CanonicalEncoding.encode(content), to: path)
                    // The anchor's directory is the user's own and its writers hold this lock:
                    // what was written is kept for the reads of the next two seconds.
                    CheckedFileCache.keep(content, at: path)
                }
                return result
            }
        }
    }

    // MARK: Attempts

    /// The failed-attempt record kept here, or nil.
    func attempts() throws -> AttemptRecord? {
        guard let stored = try load()?.attempts else { return nil }
        return AttemptRecord(failures: stored.failures, lastFailure: stored.lastFailure, uncounted: stored.uncounted)
    }

    /// Stores the failed-attempt record (a damaged flag is not stored).
    func storeAttempts(_ record: AttemptRecord) throws {
        let failures = min(max(record.failures, 0), 1_000_000)
        let stored = Attempts(failures: failures,
                              lastFailure: record.lastFailure.isFinite ? record.lastFailure : Double(Int32.max),
                              uncounted: record.uncounted.map { min(max($0, 0), failures) }.flatMap { $0 == 0 ? nil : $0 })
        try update { content in content.attempts = stored.failures == 0 ? nil : stored }
    }

    /// Removes the anchor (and its lock file). For an erased vault: nothing is left to protect.
    func remove() {
        CheckedFileCache.forget(path: path, kind: Content.self)
        unlink(path)
        unlink(lockPath)
    }
}

extension CryptoManager {
    /// The trusted directory where this vault's rollback anchor lives: the directory of device-key
    /// provider records (`vaults/` beside the device-key file, ``DeviceKeyRecord/trustedDirectory(filePath:)``)
    /// that this manager's provider was made from; nil when the provider has no such place (a
    /// key given in memory, or a provider of the application's own). Then nothing is anchored.
    public var anchorDirectory: String? {
        var provider: any DeviceKeyProvider = deviceKeyProvider
        if let checked = provider as? CheckedDeviceKeyProvider {
            if let directory = checked.recordDirectory { return directory }
            provider = checked.inner
        }
        if let unavailable = provider as? UnavailableDeviceKeyProvider { return unavailable.recordDirectory }
        if let cache = provider as? KeyringDeviceKeyProvider { provider = cache.backing }
        if let file = provider as? FileDeviceKeyProvider { return DeviceKeyRecord.trustedDirectory(filePath: file.path) }
        return nil
    }

    /// The rollback anchor of this vault (``RollbackAnchor``), or nil when there is no vault or
    /// no place for one (``anchorDirectory``).
    public var rollbackAnchor: RollbackAnchor? {
        get throws {
            guard let directory = anchorDirectory, let vaultID = try vaultID else { return nil }
            return RollbackAnchor(directory: directory, vaultID: vaultID)
        }
    }

    func anchor(for state: VaultState) -> RollbackAnchor? {
        anchorDirectory.map { RollbackAnchor(directory: $0, vaultID: state.vaultID) }
    }
}
