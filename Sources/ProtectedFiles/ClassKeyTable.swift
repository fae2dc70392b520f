import Foundation
import Crypto
import Cipher
import Age
import Vault
import Shredder

/// One class's key pair as stored in `protected-files.keys`: the recipient in clear, the
/// identity sealed under the class key, and a MAC under a device sub-key that lets the
/// recipient be trusted while the class key is unavailable (writing `completeUnlessOpen`
/// while locked).
struct ClassKeyEntry: Codable, Equatable {
    var name: String
    var recipient: String
    var sealedIdentity: String
    var mac: String

    /// The bytes the sealed identity is bound to (associated data). A retired identity (kept
    /// after a key-pair rotation only to re-wrap files) is bound to another context, so it cannot
    /// be moved back into the current entries.
    static func identityContext(name: String, recipient: String, retired: Bool = false) -> [UInt8] {
        Array("SecureFoundation protected-file \(retired ? "retired identity" : "identity") v1\n\(name)\n\(recipient)".utf8)
    }

    /// The bytes the device MAC covers in tables of format 1 and 2.
    var macInput: [UInt8] {
        Array("SecureFoundation protected-file key table entry v1\n\(name)\n\(recipient)\n\(sealedIdentity)".utf8)
    }

    /// The bytes the device MAC covers in a table of `format` (3: also the vault's id and the
    /// table's generation, so an entry MAC vouches for neither another vault's table nor an
    /// older table of this one).
    func macInput(format: Int, vaultID: Data, generation: UInt64) -> [UInt8] {
        guard format >= 3 else { return macInput }
        return Array("SecureFoundation protected-file key table entry v3\n\(Encoding.hex(vaultID))\n\(generation)\n\(name)\n\(recipient)\n\(sealedIdentity)".utf8)
    }
}

/// The JSON file holding every class's key pair, beside the vault state.
///
/// Format 2 adds `retired`: the key pairs a rotation replaced, kept (sealed under the current
/// class keys, with the retired context) only until every file is re-wrapped to the new pairs.
/// Format 1 (no `retired`) is read as format 2 without retired pairs.
///
/// Format 3 adds `generation`, incremented by every write; each entry's MAC covers the vault's
/// id and the generation, and the rollback anchor beside the device key holds the highest
/// generation written, so an older table (or one copied from another vault's home) is refused.
/// Formats 1 and 2 are read and written as format 3 by the next write.
struct ClassKeyTableFile: Codable, Sendable {
    static let currentFormat = 3
    static let readableFormats = 1...3
    /// The most retired pairs kept (a rotation beyond that asks for a re-wrap first).
    static let maximumRetired = 64
    var format: Int
    var entries: [ClassKeyEntry]
    var retired: [ClassKeyEntry]
    /// Format 3: the table's generation (at least 1).
    var generation: UInt64?
    /// Recipients whose entries were proven genuine since the table was read (their identity
    /// opened with the class key, or they were made now): the next write MACs them. Not stored.
    var vouched: Set<String> = []

    enum CodingKeys: String, CodingKey { case format, entries, retired, generation }

    init(entries: [ClassKeyEntry] = [], retired: [ClassKeyEntry] = []) {
        format = Self.currentFormat
        self.entries = entries
        self.retired = retired
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decode(Int.self, forKey: .format)
        entries = try container.decode([ClassKeyEntry].self, forKey: .entries)
        retired = try container.decodeIfPresent([ClassKeyEntry].self, forKey: .retired) ?? []
        generation = try container.decodeIfPresent(UInt64.self, forKey: .generation)
    }

    /// Marks `entry` as proven genuine (its MAC is written by the next save).
    mutating func vouch(_ entry: ClassKeyEntry) { vouched.insert(entry.recipient) }
}

/// Reads and changes the key table under a lock file, so that two processes creating the same
/// class never each keep a different key pair.
struct ClassKeyTable: Sendable {
    static let fileName = "protected-files.keys"
    static let lockName = "protected-files.lock"
    static let macPurpose = "protected files key table v1"
    static let maximumSize = 1 << 20

    let manager: CryptoManager
    var path: String { manager.directory + "/" + Self.fileName }
    var lockPath: String { manager.directory + "/" + Self.lockName }

    /// The current entries.
    func load() throws -> [ClassKeyEntry] { try loadFile().entries }

    /// The whole table (an empty one when the file does not exist and no table was written
    /// before, as the rollback anchor tells). `checkingAnchor` false: an older table is read too
    /// (a restore from an authenticated backup, whose next write goes past the anchor).
    /// `expectingDigest`: the SHA-256 the file's bytes must have (a restore's authenticated copy).
    func loadFile(checkingAnchor: Bool = true, expectingDigest: [UInt8]? = nil) throws -> ClassKeyTableFile {
        do { _ = try FileCalls.linkStatus(path) } catch {
            if error.code == ENOENT {
                CheckedFileCache.forget(path: path, kind: ClassKeyTableFile.self)
                if checkingAnchor, try anchoredGeneration() > 0 {
                    throw ProtectedFileError.keyTable("\(path) is missing, but this vault wrote one already (the rollback anchor beside the device key says so): it was deleted or rolled back; restore it from the newest backup of the data directory")
                }
                var empty = ClassKeyTableFile()
                empty.generation = nil
                return empty
            }
            throw ProtectedFileError.io("cannot read \(path): \(String(cString: strerror(error.code)))")
        }
        let file: ClassKeyTableFile
        if let expectingDigest {
            let bytes: [UInt8]
            do {
                try SecureFile.checkPrivate(path, isDirectory: false)
                bytes = try SecureFile.read(path, maxLength: Self.maximumSize)
            } catch let failure {
                throw Self.map(failure, path: path)
            }
            if Array(SHA256.hash(data: bytes)) != expectingDigest {
                throw ProtectedFileError.keyTable("\(path) is not the table the restore authenticated: it was changed after the restored home was put in place; restore again")
            }
            file = try Self.parse(bytes, path: path)
        } else {
            // Parsed and checked once while the file is unchanged (CheckedFileCache); the anchor
            // is checked below at every load.
            do {
                file = try CheckedFileCache.value(at: path, kind: ClassKeyTableFile.self, maxLength: Self.maximumSize) { bytes in
                    try Self.parse(bytes, path: path)
                }
            } catch let failure as SecureFile.Failure {
                throw Self.map(failure, path: path)
            }
        }
        if checkingAnchor { try checkAnchor(found: file.generation ?? 0) }
        return file
    }

    /// The table's structure, checked (everything but the rollback anchor and the MACs).
    static func parse(_ bytes: [UInt8], path: String) throws -> ClassKeyTableFile {
        guard let file = try? JSONDecoder().decode(ClassKeyTableFile.self, from: Data(bytes)) else {
            throw ProtectedFileError.keyTable("\(path) does not parse; restore it from a backup of the data directory")
        }
        guard ClassKeyTableFile.readableFormats.contains(file.format) else {
            throw ProtectedFileError.keyTable("\(path) has format \(file.format); this library reads formats \(ClassKeyTableFile.readableFormats.lowerBound) to \(ClassKeyTableFile.readableFormats.upperBound): use a newer version of the library")
        }
        guard file.format >= 2 || file.retired.isEmpty else {
            throw ProtectedFileError.keyTable("\(path) has format 1 with retired key pairs, which format 1 does not have: the file was altered")
        }
        if file.format >= 3 {
            guard let generation = file.generation, generation >= 1, generation <= 1 << 53 else {
                throw ProtectedFileError.keyTable("\(path) has format 3 without a generation: the file was altered")
            }
        } else if file.generation != nil {
            throw ProtectedFileError.keyTable("\(path) has format \(file.format) with a generation, which format \(file.format) does not have: the file was altered")
        }
        var seen = Set<String>()
        for entry in file.entries {
            guard FileProtectionClass(name: entry.name) != nil, seen.insert(entry.name).inserted else {
                throw ProtectedFileError.keyTable("\(path) has an unknown or repeated class \(entry.name.prefix(60).debugDescription)")
            }
        }
        var recipients = Set(file.entries.map(\.recipient))
        for entry in file.retired {
            guard FileProtectionClass(name: entry.name) != nil, recipients.insert(entry.recipient).inserted else {
                throw ProtectedFileError.keyTable("\(path) has a retired key pair of an unknown class or a repeated recipient (\(entry.name.prefix(60).debugDescription))")
            }
        }
        return file
    }

    /// Writes the table (format 3, the next generation) atomically, then advances the rollback
    /// anchor. The MAC of each current entry is written for the new generation when the entry is
    /// vouched for (``ClassKeyTableFile/vouch(_:)``) or its MAC verified as read; other entries
    /// keep theirs (which then no longer verifies). `macKey`: the device sub-key to MAC with
    /// (nil: this manager's). The file it replaces is kept by a hard link
    /// (`.superseded-…`, which the vault destroys as a leftover should this be interrupted)
    /// during the rename and then crypto-erased, so identities that were removed (retired key
    /// pairs) do not linger in a freed inode.
    func save(_ file: ClassKeyTableFile, macKey: SecretBytes? = nil) throws {
        var file = file
        let generation = max(file.generation ?? 0, try anchoredGeneration()) + 1
        let vaultID = try vaultID()
        let ownKey = try? manager.deviceSubkey(purpose: Self.macPurpose)
        defer { ownKey?.wipe() }
        for index in file.entries.indices {
            let entry = file.entries[index]
            let trusted = file.vouched.contains(entry.recipient)
                || (ownKey.map { macMatches(entry, format: file.format, vaultID: vaultID, generation: file.generation ?? 0, key: $0) } ?? false)
            guard let key = macKey ?? ownKey else {
                // No device key now: no MAC can be checked or written; the entry is trusted
                // again once its identity opens with the class key (a stale MAC would be
                // refused as altered once the key is back).
                file.entries[index].mac = ""
                continue
            }
            guard trusted else { continue }
            file.entries[index].mac = Self.mac(entry, format: ClassKeyTableFile.currentFormat, vaultID: vaultID, generation: generation, key: key)
        }
        file.format = ClassKeyTableFile.currentFormat
        file.generation = generation
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data: Data
        do { data = try encoder.encode(file) } catch {
            throw ProtectedFileError.io("cannot encode the key table: \(error)")
        }
        // The vault's own lock is held while the temporary file exists: the vault treats every
        // `.sf-*.tmp` and `.superseded-*` in its directory found under that lock as abandoned.
        // Nothing inside calls the vault (which takes the same lock through another descriptor).
        try withLock(file: manager.directory + "/vault.lock") {
            var superseded: String?
            if access(path, F_OK) == 0 {
                let name = manager.directory + "/.superseded-" + (try SecureRandom.string(length: 12, alphabet: SecureRandom.alphanumeric))
                if (try? FileCalls.hardLink(path, name)) != nil { superseded = name }
            }
            do { try SecureFile.writeAtomically(data, to: path) } catch let failure as SecureFile.Failure {
                if let superseded { unlink(superseded) }
                throw Self.map(failure, path: path)
            }
            // As the vault does: a failure here leaves the `.superseded-` link (or, when the
            // shredder refused the file, unlinks it), which the next vault open destroys; the
            // new table is in place either way.
            if let superseded { try? destroySuperseded(superseded) }
        }
        // Written first, anchored second: a failure here leaves the anchor behind, which the
        // next read advances (a newer table is accepted).
        if let anchor = try? manager.rollbackAnchor { _ = try? anchor.advance(RollbackAnchor.protectedFilesKeys, to: generation) }
    }

    // MARK: Rollback anchor

    /// The table generation the rollback anchor holds (0 without an anchor).
    func anchoredGeneration() throws -> UInt64 {
        do {
            guard let anchor = try manager.rollbackAnchor else { return 0 }
            return try anchor.current(RollbackAnchor.protectedFilesKeys)
        } catch let error as VaultError {
            throw ProtectedFileError.vault(error)
        }
    }

    /// Refuses a table older than the anchor. The anchor is not advanced here: the generation
    /// is authenticated only by the entry MACs (``trustedRecipient(_:)`` advances it).
    func checkAnchor(found: UInt64) throws {
        do {
            guard let anchor = try manager.rollbackAnchor else { return }
            try anchor.check(RollbackAnchor.protectedFilesKeys, found: found, file: path, advancing: false)
        } catch VaultError.rolledBack(let file, let found, let expected) {
            throw ProtectedFileError.keyTable("\(file) was rolled back: it is generation \(found), but this vault wrote generation \(expected) already (the rollback anchor beside the device key says so), so an older copy was put back, undoing a key-pair or class-key rotation; restore the newest backup of the data directory")
        } catch let error as VaultError {
            throw ProtectedFileError.vault(error)
        }
    }

    /// The vault's id (bound into every format-3 MAC).
    func vaultID() throws -> Data {
        do {
            guard let id = try manager.vaultID else { throw ProtectedFileError.locked(.complete, .notSetUp) }
            return id
        } catch let error as VaultError {
            throw ProtectedFileError.vault(error)
        }
    }

    /// Crypto-erases a superseded key table: renamed into the vault's `.erasing/` first (so
    /// the shredder's random renames happen only there, where the vault destroys whatever an
    /// interruption leaves), then overwritten, synced, shredded and unlinked.
    func destroySuperseded(_ superseded: String) throws {
        let erasing = manager.directory + "/.erasing"
        if let info = try? FileCalls.linkStatus(erasing) {
            guard info.kind == .directory else {
                throw ProtectedFileError.io("\(erasing) is not a directory; remove it: \(superseded) is destroyed by the next vault open")
            }
        } else {
            guard mkdir(erasing, 0o700) == 0 || errno == EEXIST else {
                throw ProtectedFileError.io("mkdir \(erasing): \(String(cString: strerror(errno))); \(superseded) is destroyed by the next vault open")
            }
        }
        do { try SecureFile.checkPrivate(erasing, isDirectory: true) } catch let failure {
            throw Self.map(failure, path: erasing)
        }
        let target = erasing + "/" + (try SecureRandom.string(length: 16, alphabet: SecureRandom.alphanumeric))
        guard rename(superseded, target) == 0 else {
            throw ProtectedFileError.io("rename \(superseded) into \(erasing): \(String(cString: strerror(errno))); it is destroyed by the next vault open")
        }
        try? SecureFile.syncDirectory(erasing)
        try? SecureFile.syncDirectory(manager.directory)
        do { _ = try CryptoErase.destroy(keyFiles: [target]) } catch {
            unlink(target)
            throw ProtectedFileError.io("crypto-erase of the superseded key table was incomplete (it was unlinked): \(error)")
        }
        rmdir(erasing)
    }

    /// Crypto-erases the table and removes its lock file (after the vault's erase).
    func erase() throws {
        try withLock {
            if (try? FileCalls.linkStatus(path)) != nil { try destroySuperseded(path) }
            unlink(lockPath)
        }
    }

    /// Runs `body` holding the table's lock file (flock, exclusive).
    func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        try withLock(file: lockPath, body)
    }

    /// Runs `body` holding an exclusive flock on `lockPath` (created 0600 if missing), through
    /// Vault's `FileLock`, the one owner of the lock-file sequence.
    func withLock<Result>(file lockPath: String, _ body: () throws -> Result) throws -> Result {
        try FileLock.withExclusiveLock(path: lockPath, failure: { failure in
            switch failure {
            case let .system(operation: "open lock file", path: path, errno: code):
                ProtectedFileError.permission(path: path, reason: String(cString: strerror(code)))
            case let .system(operation: "flock", path: path, errno: code):
                ProtectedFileError.io("flock \(path) failed: \(String(cString: strerror(code)))")
            default:
                Self.map(failure, path: lockPath)
            }
        }, body)
    }

    static func map(_ failure: SecureFile.Failure, path: String) -> ProtectedFileError {
        switch failure {
        case let .insecurePermissions(path, reason, fix): return .permission(path: path, reason: "\(reason); fix it with: \(fix)")
        case let .system(operation, path, code):
            if code == EACCES || code == EPERM { return .permission(path: path, reason: "\(operation): \(String(cString: strerror(code)))") }
            return .io(failure.description)
        }
    }

    // MARK: Device MAC

    /// The MAC (base64) of `entry` in a table of `format` and `generation` under `key`.
    static func mac(_ entry: ClassKeyEntry, format: Int, vaultID: Data, generation: UInt64, key: SecretBytes) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: entry.macInput(format: format, vaultID: vaultID, generation: generation),
                                             using: key.symmetricKey)).base64EncodedString()
    }

    func macMatches(_ entry: ClassKeyEntry, format: Int, vaultID: Data, generation: UInt64, key: SecretBytes) -> Bool {
        guard let stored = Data(base64Encoded: entry.mac), !stored.isEmpty,
              let expected = Data(base64Encoded: Self.mac(entry, format: format, vaultID: vaultID, generation: generation, key: key)) else { return false }
        return ConstantTime.equals(Array(expected), Array(stored))
    }

    /// Whether the MAC of `entry` in `file` verifies under this manager's device sub-key; nil
    /// when the device key cannot be read (or there is no vault).
    func macMatches(_ entry: ClassKeyEntry, in file: ClassKeyTableFile) -> Bool? {
        guard let vaultID = try? vaultID(), let key = try? manager.deviceSubkey(purpose: Self.macPurpose) else { return nil }
        defer { key.wipe() }
        return macMatches(entry, format: file.format, vaultID: vaultID, generation: file.generation ?? 0, key: key)
    }

    // MARK: Class keys

    /// The class key and the retired ones, as a keyring (current first).
    func keyring(_ cls: FileProtectionClass) throws -> Keyring {
        let current = try ProtectedFiles.vaultCall(cls, path: path) { try manager.classKey(for: cls.accessibility) }
        let retired = (try? manager.retiredClassKeys(for: cls.accessibility)) ?? []
        var keys: [SealingKey] = []
        do {
            keys.append(try SealingKey(key: current))
            for raw in retired {
                guard let key = try? SealingKey(key: raw), !keys.contains(where: { $0.id == key.id }) else { raw.wipe(); continue }
                keys.append(key)
            }
            return try Keyring(keys)
        } catch {
            keys.forEach { $0.key.wipe() }
            throw ProtectedFileError.keyTable("the \(cls.name) class keys do not form a keyring: \(error)")
        }
    }

    /// Opens the identity of `entry` (needs the class key), checking it matches the recipient.
    /// `retired`: the entry is a retired key pair (sealed with the retired context).
    func openIdentity(_ entry: ClassKeyEntry, _ cls: FileProtectionClass, retired: Bool = false) throws -> X25519Identity {
        let ring = try keyring(cls)
        defer { ring.keys.forEach { $0.key.wipe() } }
        guard let sealed = Data(base64Encoded: entry.sealedIdentity) else {
            throw ProtectedFileError.keyTable("the \(cls.name) identity is not base64")
        }
        var raw: [UInt8]
        do {
            raw = try Sealed.open(Array(sealed), with: ring, context: ClassKeyEntry.identityContext(name: entry.name, recipient: entry.recipient, retired: retired))
        } catch {
            if cls.thisDeviceOnly { throw ProtectedFileError.wrongDevice(cls, path: path) }
            throw ProtectedFileError.keyTable("the \(cls.name) identity does not open with this vault's class key (\(error)): the table belongs to another vault or was altered")
        }
        defer { for i in raw.indices { raw[i] = 0 } }
        guard raw.count == 32, let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw) else {
            throw ProtectedFileError.keyTable("the \(cls.name) identity is not a 32-byte X25519 key")
        }
        let identity = X25519Identity(privateKey: key)
        guard identity.recipient.description == entry.recipient else {
            throw ProtectedFileError.keyTable("the \(cls.name) recipient does not match its identity: the table was altered")
        }
        return identity
    }

    /// A new entry for `cls`, sealed under its current class key (a retired entry: with the
    /// retired context and no MAC, since it is never used to write).
    func makeEntry(_ cls: FileProtectionClass, identity: X25519Identity, retired: Bool = false) throws -> ClassKeyEntry {
        let ring = try keyring(cls)
        defer { ring.keys.forEach { $0.key.wipe() } }
        let recipient = identity.recipient.description
        var raw = Array(identity.privateKey.rawRepresentation)
        defer { for i in raw.indices { raw[i] = 0 } }
        let sealed: [UInt8]
        do {
            sealed = try Sealed.seal(raw, with: ring, context: ClassKeyEntry.identityContext(name: cls.name, recipient: recipient, retired: retired))
        } catch {
            throw ProtectedFileError.io("sealing the \(cls.name) identity failed: \(error)")
        }
        // The MAC is written by `save`, for the table's new generation (the caller vouches).
        return ClassKeyEntry(name: cls.name, recipient: recipient, sealedIdentity: Data(sealed).base64EncodedString(), mac: "")
    }

    func entry(_ cls: FileProtectionClass) throws -> ClassKeyEntry? {
        try load().first { $0.name == cls.name }
    }

    /// The entry of `cls`, created (under the lock) when missing; creating needs the class key.
    /// The missing entries of the other classes whose keys are available now are created in the
    /// same write, so that completeUnlessOpen has its key pair (for writing while locked) once
    /// any class was used unlocked.
    func entryCreatingIfNeeded(_ cls: FileProtectionClass) throws -> ClassKeyEntry {
        if let existing = try entry(cls) { return existing }
        return try withLock {
            var file = try loadFile()
            if let existing = file.entries.first(where: { $0.name == cls.name }) { return existing }
            let created: ClassKeyEntry
            do { created = try makeEntry(cls, identity: X25519Identity.generate()) } catch ProtectedFileError.locked(let locked, .locked) where locked.protection == .completeUnlessOpen {
                // Writing completeUnlessOpen while locked needs only the public half, but the
                // pair is made (and its private half sealed) under the class key.
                throw ProtectedFileError.noKeyPairYet(locked)
            }
            file.entries.append(created)
            file.vouch(created)
            for other in FileProtectionClass.allValues where !file.entries.contains(where: { $0.name == other.name }) {
                if let entry = try? makeEntry(other, identity: X25519Identity.generate()) {
                    file.entries.append(entry)
                    file.vouch(entry)
                }
            }
            try save(file)
            return try load().first { $0.name == cls.name } ?? created
        }
    }

    /// The recipient of `cls`, trusted: its device MAC matches, or (on another device, or when
    /// the MAC is missing) its identity opens with the class key and matches, after which the MAC
    /// is written again.
    ///
    /// In a format-3 table read with the device key at hand, a MAC that is present and does not
    /// verify (for this vault's id and the table's generation) is refused: the entry was altered,
    /// or the table is another vault's or an older one with its generation raised.
    func trustedRecipient(_ cls: FileProtectionClass) throws -> X25519Recipient {
        _ = try entryCreatingIfNeeded(cls)
        let file = try loadFile()
        guard let entry = file.entries.first(where: { $0.name == cls.name }) else {
            throw ProtectedFileError.keyTable("the \(cls.name) entry disappeared from \(path) while it was being used; try again")
        }
        guard let recipient = try? X25519Recipient(entry.recipient) else {
            throw ProtectedFileError.keyTable("the \(cls.name) recipient is not an age1… recipient")
        }
        let matches = macMatches(entry, in: file)
        if matches == true {
            // The generation is authenticated: a table newer than the anchor (its writer killed
            // before advancing it) advances it now.
            if let generation = file.generation, let anchor = try? manager.rollbackAnchor {
                _ = try? anchor.advance(RollbackAnchor.protectedFilesKeys, to: generation)
            }
            return recipient
        }
        if matches == false, file.format >= 3, !entry.mac.isEmpty {
            throw ProtectedFileError.keyTable("the \(cls.name) entry of \(path) does not verify for this vault and this generation of the table: it was altered, copied from another home, or is an older table put back; restore the newest backup of the data directory")
        }
        _ = try openIdentity(entry, cls)
        try withLock {
            var file = try loadFile()
            guard let current = file.entries.first(where: { $0 == entry }) else { return }
            file.vouch(current)
            try save(file)
        }
        return recipient
    }

    /// Re-seals every identity (current and retired) not sealed under its class's current key
    /// (after a class-key rotation). Needs the class key of every entry. A retired pair that no
    /// longer opens is left as it is.
    /// - Returns: The number of identities re-sealed.
    func resealUnderCurrentClassKeys() throws -> Int {
        try withLock {
            var file = try loadFile()
            var count = 0
            for index in file.entries.indices {
                guard let cls = FileProtectionClass(name: file.entries[index].name) else { continue }
                if try isSealedUnderCurrentKey(file.entries[index], cls) && macMatches(file.entries[index], in: file) == true { continue }
                let identity = try openIdentity(file.entries[index], cls)
                file.entries[index] = try makeEntry(cls, identity: identity)
                file.vouch(file.entries[index])
                count += 1
            }
            for index in file.retired.indices {
                guard let cls = FileProtectionClass(name: file.retired[index].name),
                      !(try isSealedUnderCurrentKey(file.retired[index], cls)),
                      let identity = try? openIdentity(file.retired[index], cls, retired: true) else { continue }
                file.retired[index] = try makeEntry(cls, identity: identity, retired: true)
                count += 1
            }
            if count > 0 { try save(file) }
            return count
        }
    }

    /// Whether `entry` is sealed under the current class key of `cls` (needs that key).
    func isSealedUnderCurrentKey(_ entry: ClassKeyEntry, _ cls: FileProtectionClass) throws -> Bool {
        let ring = try keyring(cls)
        let currentID = ring.keys[0].id
        ring.keys.forEach { $0.key.wipe() }
        guard let sealed = Data(base64Encoded: entry.sealedIdentity),
              case .key(let id)? = try? Sealed.parseHeader(Array(sealed)).keySource else {
            throw ProtectedFileError.keyTable("the \(cls.name) identity is not sealed data")
        }
        return id == currentID
    }

    /// Gives every class that has a key pair a new one; the replaced pairs become retired
    /// (sealed under the current class keys with the retired context) and still open files
    /// until ``destroyRetired()``. Needs the class key of every class that has a pair (the
    /// vault unlocked, and the device key for the ThisDeviceOnly classes); nothing changes
    /// when one is missing.
    /// - Returns: The number of classes given a new key pair.
    func rotateKeyPairs() throws -> Int {
        try withLock {
            let file = try loadFile()
            guard file.retired.count + file.entries.count <= ClassKeyTableFile.maximumRetired else {
                throw ProtectedFileError.invalidArgument("\(file.retired.count) retired key pairs are waiting for their files to be re-wrapped; finish that first (rotate-keys --resume with every directory of protected files)")
            }
            var next = ClassKeyTableFile()
            next.generation = file.generation
            for entry in file.entries {
                guard let cls = FileProtectionClass(name: entry.name) else { continue }
                let old = try openIdentity(entry, cls)
                next.retired.append(try makeEntry(cls, identity: old, retired: true))
                let fresh = try makeEntry(cls, identity: X25519Identity.generate())
                next.entries.append(fresh)
                next.vouch(fresh)
            }
            for entry in file.retired {
                guard let cls = FileProtectionClass(name: entry.name) else { continue }
                if let identity = try? openIdentity(entry, cls, retired: true) {
                    next.retired.append(try makeEntry(cls, identity: identity, retired: true))
                } else {
                    next.retired.append(entry)
                }
            }
            try save(next)
            return next.entries.count
        }
    }

    /// The retired identities of `cls` that open now (those that do not are skipped).
    func retiredIdentities(_ cls: FileProtectionClass) throws -> [X25519Identity] {
        try loadFile().retired.filter { $0.name == cls.name }.compactMap { try? openIdentity($0, cls, retired: true) }
    }

    /// Removes every retired key pair from the table; the table that held them is crypto-erased.
    /// - Returns: The number removed.
    func destroyRetired() throws -> Int {
        try withLock {
            var file = try loadFile()
            let count = file.retired.count
            guard count > 0 else { return 0 }
            file.retired = []
            try save(file)
            return count
        }
    }
}
