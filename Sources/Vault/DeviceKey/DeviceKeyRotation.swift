import Foundation
import Cipher

/// Something in a vault's home whose keys depend on the device key (a keychain's blind indexes,
/// row MACs and thisDeviceOnly items; the protected-file key table), re-keyed by a
/// ``DeviceKeyRotation``.
///
/// ``rekey(from:to:step:)`` must be idempotent and tell by itself which key each of its parts is
/// under (a check value, a MAC), so that an interrupted rotation resumes where it stopped, and
/// each of its commits must leave every part wholly under the old or wholly under the new key.
public protocol DeviceKeyDependent: Sendable {
    /// What it is, for reports (a path).
    var description: String { get }
    /// Moves everything still under `old` to `new`; parts already under `new` are left alone.
    /// - Parameters:
    ///   - old: The device-bound keys everything is under before the rotation.
    ///   - new: The device-bound keys to move everything to.
    ///   - step: Called with a name at each commit (fault-injection tests stop there).
    /// - Returns: What was moved, found moved already, or left unreadable.
    /// - Throws: The store's errors, and what `step` throws (the rotation stops there).
    func rekey(from old: DeviceBoundKeys, to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRekeyResult

    /// Moves everything to `new` when the old device key is lost (``DeviceKeyRebinding``): what
    /// the class keys alone open is kept and re-bound, what needed the old device key (the
    /// thisDeviceOnly parts) is removed and named. Parts already under `new` are left alone;
    /// each commit leaves the store wholly under one key. The default refuses.
    /// - Parameters:
    ///   - new: The device-bound keys to move everything to.
    ///   - step: Called with a name at each commit (fault-injection tests stop there).
    /// - Returns: What was re-bound, left behind, or re-bound without a check.
    /// - Throws: The store's errors, and what `step` throws.
    func rebind(to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRebindResult
}

extension DeviceKeyDependent {
    /// Refuses: a dependent that cannot be re-bound without its old device key.
    /// - Throws: ``VaultError/deviceKey(_:)``.
    public func rebind(to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRebindResult {
        throw VaultError.deviceKey("\(description) cannot be re-bound without its old device key")
    }
}

/// What re-binding one dependent to a new device key did (the old key being lost).
public struct DeviceKeyRebindResult: Sendable, Equatable {
    /// What was re-bound.
    public var description: String
    /// Parts moved to the new key now.
    public var rebound: Int
    /// Parts found already under the new key (an earlier, interrupted run).
    public var alreadyNew: Int
    /// ThisDeviceOnly parts: they opened only with the lost device key, so they were removed.
    /// Each is named as well as the store can without that key (an item id and its class).
    public var leftBehind: [String]
    /// Parts re-bound without the check that needed the lost key: items of the class `always`,
    /// whose key lies in the data directory, so one planted there cannot be told from a real one.
    public var unverified: [String]
    /// Parts that open with no key (damaged), left as they were.
    public var unreadable: [String]

    /// A step's outcome.
    /// - Parameters:
    ///   - description: What was re-bound.
    ///   - rebound: Parts moved to the new key now.
    ///   - alreadyNew: Parts found already under the new key.
    ///   - leftBehind: ThisDeviceOnly parts removed.
    ///   - unverified: Parts re-bound without the lost key's check.
    ///   - unreadable: Parts that could not be opened, left as they were.
    public init(description: String, rebound: Int, alreadyNew: Int = 0, leftBehind: [String] = [], unverified: [String] = [], unreadable: [String] = []) {
        self.description = description
        self.rebound = rebound
        self.alreadyNew = alreadyNew
        self.leftBehind = leftBehind
        self.unverified = unverified
        self.unreadable = unreadable
    }
}

/// What re-keying one dependent did.
public struct DeviceKeyRekeyResult: Sendable, Equatable {
    /// What was re-keyed.
    public var description: String
    /// Parts moved to the new key now (items, table entries).
    public var rekeyed: Int
    /// Parts found already under the new key (an earlier, interrupted run).
    public var alreadyNew: Int
    /// Parts that could not be opened (damaged), left as they were; they open with neither key.
    public var unreadable: [String]

    /// A step's outcome.
    /// - Parameters:
    ///   - description: What the step moved.
    ///   - rekeyed: Parts moved to the new key now.
    ///   - alreadyNew: Parts found already under the new key.
    ///   - unreadable: Parts that could not be opened, left as they were.
    public init(description: String, rekeyed: Int, alreadyNew: Int = 0, unreadable: [String] = []) {
        self.description = description
        self.rekeyed = rekeyed
        self.alreadyNew = alreadyNew
        self.unreadable = unreadable
    }
}

/// A new device key under the same provider, with everything that depends on the old one
/// re-keyed (docs/UNLOCK.md, "Rotating the device key").
///
/// Steps, each recorded in the journal `VAULTID.device-key.rotation` beside the vault's
/// device-key record, outside the data directory (docs/FORMATS.md):
/// 1. the new key is stored beside the old one (`….rotating`: a key file, an encrypted
///    credential, a TPM-sealed object) and read back; the journal is written (phase `rekeying`);
/// 2. each dependent is re-keyed (each commit all-or-nothing, each part self-identifying);
/// 3. the journal moves to phase `switching`; the new key's files are renamed over the old
///    ones (the old ones crypto-erased), the provider record gets the new check value, the
///    kernel-keyring cache is evicted; the journal is removed.
///
/// A kill at any moment leaves every part under the old or the new key, both keys readable
/// (the old one until the switch, when nothing needs it any more), and ``resume(manager:filePath:dependents:options:)``
/// finishes. Needs every class key (the vault unlocked). No other process should use the home
/// meanwhile: a keychain opened before the rotation keeps the old blind-index key in memory.
public enum DeviceKeyRotation {
    /// The journal's name in the data directory, where version 1 kept it. A file of that name is
    /// never read as a journal any more: anyone who can write the data directory could write one.
    package static let journalName = "device-key.rotation"
    /// The suffix of a journal's name in the trusted directory (after the vault id in hex).
    static let journalSuffix = ".device-key.rotation"
    static let lockName = "device-key.rotation.lock"
    /// The suffix of a staged new key file.
    public static let stagedSuffix = ".rotating"
    /// The suffix under which a replaced key file is kept until it is crypto-erased.
    static let retiredSuffix = ".retired"

    /// Settings the provider record does not hold.
    public struct Options: Sendable {
        /// systemd-credential: `systemd-creds encrypt --with-key` for the new credential (default host).
        public var credentialWithKey: String = "host"
        /// tpm2: the TCTI (nil: `$TPM2TOOLS_TCTI`).
        public var tcti: String?
        /// Called with each step's name (fault-injection tests stop the process there, or throw).
        public var step: (@Sendable (String) throws -> Void)?

        /// Settings for a rotation.
        /// - Parameters:
        ///   - credentialWithKey: systemd-credential: `systemd-creds encrypt --with-key` for the new credential.
        ///   - tcti: tpm2: the TCTI (nil: `$TPM2TOOLS_TCTI`).
        ///   - step: Called with each step's name (for fault-injection tests).
        public init(credentialWithKey: String = "host", tcti: String? = nil, step: (@Sendable (String) throws -> Void)? = nil) {
            self.credentialWithKey = credentialWithKey
            self.tcti = tcti
            self.step = step
        }
    }

    /// A file of the new key, staged beside the one it replaces.
    public struct Move: Codable, Equatable, Sendable {
        public var from: String
        public var to: String
    }

    /// The journal of an unfinished rotation: `VAULTID.device-key.rotation` in
    /// ``DeviceKeyRecord/trustedDirectory(filePath:)``, canonical JSON, 0600.
    public struct Journal: Codable, Equatable, Sendable {
        static let formatName = "securefoundation-device-key-rotation"
        /// Version 2: kept beside the device key, not in the data directory; its moves must be
        /// exactly the staged files of its final record.
        static let currentVersion = 2

        public enum Phase: String, Codable, Sendable {
            /// The new key is staged; dependents may be under either key.
            case rekeying
            /// Every dependent is under the new key; the key files are being switched.
            case switching
        }

        public var format: String = Journal.formatName
        public var version: Int = Journal.currentVersion
        public var phase: Phase
        /// The vault's id (a journal of another vault is refused).
        public var vaultID: Data
        /// Check values (``DeviceKeyRecord/checkValue(of:)``) of the old and the new key.
        public var oldCheck: Data
        public var newCheck: Data
        /// Whether the home had a `device-key.provider` record (else the key file, unrecorded).
        public var hadRecord: Bool
        /// The record naming where the key lives (with the new check value): saved at the switch.
        public var final: DeviceKeyRecord
        /// A record that reads the staged new key (its files before the switch).
        public var staged: DeviceKeyRecord
        /// The key file the file provider uses when the record names none.
        public var filePath: String?
        /// The staged files and the files they replace.
        public var moves: [Move]

        func check(path: String) throws {
            guard format == Self.formatName else { throw VaultError.corrupted("\(path): unknown format \(format)") }
            guard version == Self.currentVersion else {
                throw VaultError.corrupted("\(path): version \(version) is not supported by this version of SecureFoundation; finish the rotation with the version that started it")
            }
            guard oldCheck.count == 16, newCheck.count == 16, final.check == newCheck, staged.check == newCheck,
                  !moves.isEmpty, moves.count <= 4, moves.allSatisfy({ $0.from.hasPrefix("/") && $0.to.hasPrefix("/") && $0.from != $0.to }) else {
                throw VaultError.corrupted("\(path) is not a consistent device-key rotation journal")
            }
            // The renames a rotation may make are fixed by the provider's files: never paths of the journal's choosing.
            guard let expected = try? DeviceKeyRotation.stagedFiles(for: final, filePath: filePath),
                  expected.moves == moves, expected.staged == staged else {
                throw VaultError.corrupted("\(path): its renames are not the staged files of its provider; it was not written by a rotation and is not used")
            }
        }
    }

    /// What a rotation did.
    public struct Report: Sendable {
        /// The new key's check value.
        public var newCheck: Data
        /// One result per dependent.
        public var dependents: [DeviceKeyRekeyResult]
        /// What the operator must redo (values derived from the device key outside the home).
        public var notes: [String]
    }

    /// Where the journal of the vault `vaultID` lives: beside its device-key record.
    static func journalPath(vaultID: Data, filePath: String?) -> String {
        DeviceKeyRecord.trustedDirectory(filePath: filePath) + "/" + Encoding.hex(vaultID) + journalSuffix
    }

    /// The journal of an unfinished rotation of the vault in `directory`, or nil.
    /// - Parameters:
    ///   - directory: The vault's home directory.
    ///   - filePath: The device-key file (nil: the default); the journal is beside it.
    /// - Returns: The journal, or nil when no rotation is unfinished.
    /// - Throws: ``VaultError/corrupted(_:)`` for a journal that does not parse or is inconsistent.
    public static func pending(directory: String, filePath: String? = nil) throws(VaultError) -> Journal? {
        guard let vaultID = try VaultError.call({ try DeviceKeyRecord.vaultID(ofHome: directory) }) else { return nil }
        return try VaultError.call { try DeviceKeyRecord.readPrivateJSON(Journal.self, at: journalPath(vaultID: vaultID, filePath: filePath),
                                                   what: "a device-key rotation journal") { journal, path in
            try journal.check(path: path)
            guard journal.vaultID == vaultID else { throw VaultError.corrupted("\(path) belongs to another vault") }
        } }
    }

    /// The provider of the home in `directory`: the recorded one (beside the device-key file),
    /// else the key file `filePath` (nil: the default). While a rotation is unfinished it gives
    /// no key: it throws ``VaultError/deviceKey(_:)`` saying how to finish the rotation (the
    /// vault itself opens; only what needs the device key waits). A record or journal in the
    /// data directory is never used (``DeviceKeyRecord/load(directory:filePath:)``).
    /// - Parameters:
    ///   - directory: The vault's data directory.
    ///   - filePath: The device-key file (nil: the default).
    /// - Returns: The provider to get the device key from.
    /// - Throws: ``VaultError/deviceKey(_:)`` while a rotation is unfinished, and as
    ///   ``DeviceKeyRecord/load(directory:filePath:)``.
    public static func provider(directory: String, filePath: String?) throws(VaultError) -> any DeviceKeyProvider {
        if try pending(directory: directory, filePath: filePath) != nil {
            return UnavailableDeviceKeyProvider(reason: "a device-key rotation of \(directory) was interrupted: the keychain and the protected-file key table may be under the new key already; finish it with `securefoundation vault rotate-device-key --resume` (with the passcode)",
                                                recordDirectory: DeviceKeyRecord.trustedDirectory(filePath: filePath))
        }
        let record: DeviceKeyRecord?
        do {
            record = try DeviceKeyRecord.load(directory: directory, filePath: filePath)
        } catch {
            guard case .deviceKey(let reason) = error else { throw error }
            // Only a record in the data directory: the vault opens, nothing gets a device key.
            return UnavailableDeviceKeyProvider(reason: reason, recordDirectory: DeviceKeyRecord.trustedDirectory(filePath: filePath))
        }
        destroyStrayStagedKey(directory: directory, filePath: filePath, record: record)
        if let record { return record.provider(filePath: filePath) }
        let file = FileDeviceKeyProvider(path: filePath)
        // No record: the key file. A version-3 state names the device key it was made with, so a
        // key file that was replaced (or created afresh because it was missing) is refused here
        // rather than deriving keys that open nothing.
        if let check = try? VaultState.load(directory: directory)?.deviceCheck {
            return CheckedDeviceKeyProvider(inner: file, record: DeviceKeyRecord(kind: .file, path: file.path, check: check),
                                            recordDirectory: DeviceKeyRecord.trustedDirectory(filePath: filePath))
        }
        return file
    }

    /// The staged new key of a rotation that never wrote its journal (killed, or out of disk
    /// space, between storing the new key and the journal): nothing was re-keyed under it, so it
    /// is crypto-erased, as the vault's own leftovers are.
    ///
    /// Staged files can be shared by several homes (every home without a record uses the
    /// default key file), so the decision is taken in the trusted directory, never from the data
    /// directory: a file is destroyed only when the staging lock there is free (a rotation of any
    /// home holds it from staging until its journal is written) and no journal there, of any
    /// vault, names it; and only for a home whose vault id can be read. Errors are ignored: the
    /// next command tries again. When nothing is staged (the usual case) it costs a few `access`
    /// calls.
    /// - Parameters:
    ///   - directory: The vault's data directory.
    ///   - filePath: The device-key file (nil: the default).
    /// - Returns: The files destroyed.
    @discardableResult
    public static func destroyStrayStagedKey(directory: String, filePath: String?) -> [String] {
        let record: DeviceKeyRecord?
        do { record = try DeviceKeyRecord.load(directory: directory, filePath: filePath) } catch { return [] }
        return destroyStrayStagedKey(directory: directory, filePath: filePath, record: record)
    }

    /// As ``destroyStrayStagedKey(directory:filePath:)``, with the home's record already read
    /// (nil: the key file): the usual case, nothing staged, costs only `access` calls.
    @discardableResult
    static func destroyStrayStagedKey(directory: String, filePath: String?, record: DeviceKeyRecord?) -> [String] {
        guard let files = try? stagedFilesPresent(record: record, filePath: filePath), !files.isEmpty,
              (try? DeviceKeyRecord.vaultID(ofHome: directory)) != nil else { return [] }
        let trusted = DeviceKeyRecord.trustedDirectory(filePath: filePath)
        let destroyed = try? FileLock.withExclusiveLockIfFree(path: trusted + "/" + stagingLockName) { () throws -> [String] in
            let named = try stagedFilesNamedByJournals(in: trusted)
            let stray = try stagedFilesPresent(record: record, filePath: filePath).filter { !named.contains($0) }
            try Erasure.destroy(stray)
            return stray
        }
        return destroyed ?? []
    }

    /// The name of the lock file in the trusted directory that a rotation holds from staging
    /// its new key until its journal is written.
    static let stagingLockName = "device-key.staging.lock"

    /// The staged files of the provider `record` names (nil: the key file) that exist now.
    static func stagedFilesPresent(record: DeviceKeyRecord?, filePath: String?) throws -> [String] {
        let record = record ?? DeviceKeyRecord(kind: .file, path: nil, check: Data(count: 16))
        let resolvedFile = VaultPaths.absolute(filePath ?? FileDeviceKeyProvider.defaultPath())
        return try stagedFiles(for: record, filePath: resolvedFile).moves.map(\.from).filter { access($0, F_OK) == 0 }
    }

    /// Every staged file a journal in `trusted` names (any vault's). A journal that cannot be
    /// read or parsed makes it throw: then nothing is destroyed.
    static func stagedFilesNamedByJournals(in trusted: String) throws -> Set<String> {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: trusted) else { return [] }
        var named: Set<String> = []
        for name in names where name.hasSuffix(journalSuffix) {
            let path = trusted + "/" + name
            let journal = try DeviceKeyRecord.readPrivateJSON(Journal.self, at: path, what: "a device-key rotation journal") { journal, path in
                try journal.check(path: path)
            }
            for move in journal?.moves ?? [] { named.insert(move.from) }
        }
        return named
    }

    /// Replaces the device key with a new random one under the same provider and re-keys
    /// `dependents`.
    ///
    /// - Parameters:
    ///   - manager: The vault, unlocked (its class keys are needed; its own device-key provider is not used).
    ///   - filePath: The key file when the home has no record, or its record names none (`--device-key`).
    ///   - dependents: Everything in the home that depends on the device key.
    ///   - options: The new key's provider settings and the step hook.
    /// - Returns: What was re-keyed and what the operator must redo.
    /// - Throws: ``VaultError/deviceKey(_:)`` (a rotation is already unfinished; the provider
    ///   cannot store a key), ``VaultError/classKeyUnavailable(_:_:)`` while locked, the
    ///   dependents' errors (then ``resume(manager:filePath:dependents:options:)`` finishes).
    public static func rotate(manager: CryptoManager, filePath: String?, dependents: [any DeviceKeyDependent],
                              options: Options = Options()) throws -> Report {
        let directory = manager.directory
        try requireUnlockedHere(manager)
        return try FileLock.withExclusiveLock(path: directory + "/" + lockName) {
            if try pending(directory: directory, filePath: filePath) != nil {
                throw VaultError.deviceKey("a device-key rotation of \(directory) is unfinished; finish it with `securefoundation vault rotate-device-key --resume` before starting another")
            }
            guard let vaultID = try manager.vaultID else { throw manager.isErased ? VaultError.erased : VaultError.notSetUp }
            let record = try DeviceKeyRecord.load(directory: directory, filePath: filePath)
            let resolvedFile = VaultPaths.absolute(filePath ?? FileDeviceKeyProvider.defaultPath())
            let oldProvider: any DeviceKeyProvider = record?.provider(filePath: resolvedFile) ?? FileDeviceKeyProvider(path: resolvedFile)
            let old = try VaultError.call { try oldProvider.deviceKey() }
            defer { old.wipe() }
            // Fail before storing anything when the class keys are out of reach.
            let oldKeys = try manager.deviceBoundKeys(deviceKey: old)
            defer { oldKeys.wipe() }
            let new = try SecretBytes.random(count: 32)
            defer { new.wipe() }
            let newCheck = DeviceKeyRecord.checkValue(of: new)
            let current = record ?? DeviceKeyRecord(kind: .file, path: nil, check: DeviceKeyRecord.checkValue(of: old))
            var final = current
            final.check = newCheck
            // From staging to the journal, the staging lock in the trusted directory is held: no
            // other command takes the staged key for a stray one meanwhile.
            let trusted = DeviceKeyRecord.trustedDirectory(filePath: resolvedFile)
            try VaultError.call { try SecureFile.ensurePrivateDirectory(trusted) }
            try VaultError.call { try FileLock.withExclusiveLock(path: trusted + "/" + stagingLockName) {
            // A staged key left by a rotation that never wrote its journal goes first.
            let named = try stagedFilesNamedByJournals(in: trusted)
            try Erasure.destroy(try stagedFilesPresent(record: record, filePath: resolvedFile).filter { !named.contains($0) })
            let (staged, moves): (DeviceKeyRecord, [Move])
            do {
                (staged, moves) = try stage(new, for: final, filePath: resolvedFile, options: options)
                let readBack = try VaultError.call { try stagedProvider(staged).deviceKey() }
                defer { readBack.wipe() }
                guard readBack == new else { throw VaultError.deviceKey("the new device key read back from \(staged.summary) differs from the one stored") }
                try options.step?("stored")
                let journal = Journal(phase: .rekeying, vaultID: vaultID, oldCheck: DeviceKeyRecord.checkValue(of: old), newCheck: newCheck,
                                      hadRecord: record != nil, final: final, staged: staged, filePath: resolvedFile, moves: moves)
                try journal.check(path: "the new journal")
                try save(journal)
            } catch {
                // No journal: nothing was re-keyed under the new key, which is destroyed again
                // (a half-written journal is removed by `save`'s atomic replace).
                if (try? pending(directory: directory, filePath: resolvedFile)) == nil {
                    _ = try? Erasure.destroy(try stagedFiles(for: final, filePath: resolvedFile).moves.map(\.from))
                }
                throw error
            }
            } }
            try options.step?("staged")
            guard let journal = try pending(directory: directory, filePath: resolvedFile) else {
                throw VaultError.corrupted("the device-key rotation journal just written cannot be read back")
            }
            return try finish(journal, manager: manager, dependents: dependents, options: options)
        }
    }

    /// Finishes an interrupted rotation from its journal.
    /// - Parameters:
    ///   - manager: The vault, unlocked.
    ///   - filePath: The key file when the home has no record, or its record names none (`--device-key`).
    ///   - dependents: Everything in the home that depends on the device key.
    ///   - options: The step hook (the journal names the new key's provider).
    /// - Returns: What was re-keyed and what the operator must redo.
    /// - Throws: ``VaultError/deviceKey(_:)`` when there is none, or a key cannot be read; as ``rotate(manager:filePath:dependents:options:)``.
    public static func resume(manager: CryptoManager, filePath: String?, dependents: [any DeviceKeyDependent],
                              options: Options = Options()) throws -> Report {
        let directory = manager.directory
        try requireUnlockedHere(manager)
        return try FileLock.withExclusiveLock(path: directory + "/" + lockName) {
            guard let journal = try pending(directory: directory, filePath: filePath) else {
                let planted = access(directory + "/" + journalName, F_OK) == 0
                    ? "; \(directory)/\(journalName) is in the data directory, where this version never keeps a journal (an earlier version's, or planted): it was not used and nothing was changed. Finish an earlier version's rotation with that version, or delete the file"
                    : ""
                throw VaultError.deviceKey("no device-key rotation of \(directory) is unfinished: nothing to resume" + planted)
            }
            guard let vaultID = try manager.vaultID, vaultID == journal.vaultID else {
                throw VaultError.corrupted("\(directory)/\(journalName) belongs to another vault; remove it only if no rotation of this vault was started")
            }
            return try finish(journal, manager: manager, dependents: dependents, options: options)
        }
    }

    /// A rotation rewrites `vault.state` (it records the new key's check value), which needs the
    /// application key: the vault unlocked in this process, not only by an unlock agent.
    static func requireUnlockedHere(_ manager: CryptoManager) throws {
        guard manager.isUnlocked else {
            throw VaultError.deviceKey("rotating the device key records the new key in vault.state, which needs the vault unlocked with the passcode or the answers in this process (a running unlock agent does not serve the application key): give --passcode-file or --answers-file")
        }
    }

    // MARK: Steps

    static func finish(_ journal: Journal, manager: CryptoManager, dependents: [any DeviceKeyDependent], options: Options) throws -> Report {
        var journal = journal
        let directory = manager.directory
        var results: [DeviceKeyRekeyResult] = []
        if journal.phase == .rekeying {
            var oldRecord = journal.final
            oldRecord.check = journal.oldCheck
            let old = try VaultError.call { try oldRecord.provider(filePath: journal.filePath).deviceKey() }
            defer { old.wipe() }
            let new = try VaultError.call { try stagedProvider(journal.staged).deviceKey() }
            defer { new.wipe() }
            let oldKeys = try manager.deviceBoundKeys(deviceKey: old)
            defer { oldKeys.wipe() }
            let newKeys = try manager.deviceBoundKeys(deviceKey: new)
            defer { newKeys.wipe() }
            for dependent in dependents {
                results.append(try dependent.rekey(from: oldKeys, to: newKeys) { try options.step?($0) })
                try options.step?("rekeyed")
            }
            journal.phase = .switching
            try save(journal)
            try options.step?("switching")
        }
        // Every dependent is under the new key: the old key is needed no more.
        for move in journal.moves where access(move.from, F_OK) == 0 {
            let retired = move.to + retiredSuffix
            if access(move.to, F_OK) == 0 && access(retired, F_OK) != 0 {
                do throws(SystemCallError) {
                    try FileCalls.hardLink(move.to, retired)
                } catch {
                    throw VaultError.io("cannot keep \(move.to) for erasure: \(String(cString: strerror(error.code)))")
                }
            }
            guard rename(move.from, move.to) == 0 else {
                throw VaultError.io("cannot move the new device key \(move.from) to \(move.to): \(String(cString: strerror(errno)))")
            }
            try VaultError.call { try SecureFile.syncDirectory(SecureFile.directoryOf(move.to)) }
            try options.step?("moved")
        }
        if journal.hadRecord { try journal.final.save(directory: directory, filePath: journal.filePath) }
        // The state names the new key from now on (a resumed rotation finds it done).
        try manager.recordDeviceCheck(journal.newCheck)
        try options.step?("state recorded")
        if journal.final.kind == .keyring, let name = journal.final.name {
            KeyringDeviceKeyProvider(description: name, timeout: journal.final.timeout ?? 600, backing: StaticDeviceKeyProvider(key: SecretBytes(count: 0) { _ in })).evict()
        }
        // The new key is where the provider reads it (systemd's $CREDENTIALS_DIRECTORY aside).
        let check = try VaultError.call { try stagedProvider(journal.final, filePath: journal.filePath).deviceKey() }
        check.wipe()
        var erased: [String] = []
        for move in journal.moves {
            let retired = move.to + retiredSuffix
            guard access(retired, F_OK) == 0, FileIdentity(path: retired)?.inode != FileIdentity(path: move.to)?.inode else { continue }
            erased.append(retired)
        }
        try Erasure.destroy(erased)
        let journalFile = journalPath(vaultID: journal.vaultID, filePath: journal.filePath)
        unlink(journalFile)
        try VaultError.call { try SecureFile.syncDirectory(SecureFile.directoryOf(journalFile)) }
        try options.step?("done")
        manager.forgetDeviceKey()
        return Report(newCheck: journal.newCheck, dependents: results, notes: notes(for: journal))
    }

    /// What the operator must redo after a rotation.
    static func notes(for journal: Journal) -> [String] {
        var notes = [
            "values derived from the device key outside the home changed: every `securefoundation secrets device-share` output (CryptoManager.deviceSubkey(purpose:)), so run it again and rebuild the sealed secrets that use it",
            "processes that had the vault open before the rotation hold the old device key: restart them",
        ]
        let kind = journal.final.kind == .keyring ? (journal.final.backing ?? .file) : journal.final.kind
        if kind == .systemdCredential {
            notes.append("units that load the credential (LoadCredentialEncrypted=\(journal.final.name ?? "NAME"):\(journal.final.sealedPath ?? "PATH")) still see the old key in $CREDENTIALS_DIRECTORY: restart them")
        }
        if kind == .tpm2 {
            notes.append("backups of the sealed key files from before the rotation are useless now; back up the new \(journal.final.sealedPath ?? "").pub and .priv")
        }
        return notes
    }

    static func save(_ journal: Journal) throws {
        try VaultError.call {
            try SecureFile.ensurePrivateDirectory(DeviceKeyRecord.trustedDirectory(filePath: journal.filePath))
            try SecureFile.writeAtomically(try CanonicalEncoding.encode(journal), to: journalPath(vaultID: journal.vaultID, filePath: journal.filePath))
        }
    }
}

/// The provider of a home whose device key must not be used now (a rotation is unfinished, or
/// only a record in the data directory names a provider): it gives no key, and says why.
struct UnavailableDeviceKeyProvider: DeviceKeyProvider {
    let reason: String
    /// The trusted directory beside the device key (where the rollback anchor lives), or nil.
    var recordDirectory: String? = nil
    func deviceKey() throws -> SecretBytes {
        throw VaultError.deviceKey(reason)
    }
}
