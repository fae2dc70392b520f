import Foundation
import Crypto
import Cipher
import Age
import Vault

/// One class's key pair as stored in `protected-files.keys`: the recipient in clear, the
/// identity sealed under the class key, and a MAC under a device sub-key that lets the
/// recipient be trusted while the class key is unavailable (writing `completeUnlessOpen`
/// while locked).
struct ClassKeyEntry: Codable, Equatable {
    var name: String
    var recipient: String
    var sealedIdentity: String
    var mac: String

    /// The bytes the sealed identity is bound to (associated data).
    static func identityContext(name: String, recipient: String) -> [UInt8] {
        Array("SecureFoundation protected-file identity v1\n\(name)\n\(recipient)".utf8)
    }

    /// The bytes the device MAC covers.
    var macInput: [UInt8] {
        Array("SecureFoundation protected-file key table entry v1\n\(name)\n\(recipient)\n\(sealedIdentity)".utf8)
    }
}

/// The JSON file holding every class's key pair, beside the vault state.
struct ClassKeyTableFile: Codable {
    static let currentFormat = 1
    var format: Int
    var entries: [ClassKeyEntry]
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

    func load() throws -> [ClassKeyEntry] {
        var info = stat()
        if lstat(path, &info) != 0 {
            if errno == ENOENT { return [] }
            throw ProtectedFileError.io("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        do { try SecureFile.checkPrivate(path, isDirectory: false) } catch let failure as SecureFile.Failure {
            throw Self.map(failure, path: path)
        }
        let bytes: [UInt8]
        do { bytes = try SecureFile.read(path, maxLength: Self.maximumSize) } catch let failure as SecureFile.Failure {
            throw Self.map(failure, path: path)
        }
        guard let file = try? JSONDecoder().decode(ClassKeyTableFile.self, from: Data(bytes)) else {
            throw ProtectedFileError.keyTable("\(path) does not parse; restore it from a backup of the data directory")
        }
        guard file.format == ClassKeyTableFile.currentFormat else {
            throw ProtectedFileError.keyTable("\(path) has format \(file.format); this library reads format \(ClassKeyTableFile.currentFormat)")
        }
        var seen = Set<String>()
        for entry in file.entries {
            guard FileProtectionClass(name: entry.name) != nil, seen.insert(entry.name).inserted else {
                throw ProtectedFileError.keyTable("\(path) has an unknown or repeated class \(entry.name.prefix(60).debugDescription)")
            }
        }
        return file.entries
    }

    func save(_ entries: [ClassKeyEntry]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data: Data
        do { data = try encoder.encode(ClassKeyTableFile(format: ClassKeyTableFile.currentFormat, entries: entries)) } catch {
            throw ProtectedFileError.io("cannot encode the key table: \(error)")
        }
        // The vault's own lock is held while the temporary file exists: the vault treats every
        // `.sf-*.tmp` in its directory found under that lock as abandoned. Nothing inside calls
        // the vault (which takes the same lock through another descriptor).
        try withLock(file: manager.directory + "/vault.lock") {
            do { try SecureFile.writeAtomically(data, to: path) } catch let failure as SecureFile.Failure {
                throw Self.map(failure, path: path)
            }
        }
    }

    /// Runs `body` holding the table's lock file (flock, exclusive).
    func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        try withLock(file: lockPath, body)
    }

    /// Runs `body` holding an exclusive flock on `lockPath` (created 0600 if missing).
    func withLock<Result>(file lockPath: String, _ body: () throws -> Result) throws -> Result {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw ProtectedFileError.permission(path: lockPath, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        do { try SecureFile.checkPrivate(lockPath, isDirectory: false) } catch let failure as SecureFile.Failure {
            throw Self.map(failure, path: lockPath)
        }
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            throw ProtectedFileError.io("flock \(lockPath) failed: \(String(cString: strerror(errno)))")
        }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
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

    /// The MAC of `entry` under the device sub-key; nil when the device key cannot be read.
    func deviceMAC(_ entry: ClassKeyEntry) -> [UInt8]? {
        guard let key = try? manager.deviceSubkey(purpose: Self.macPurpose) else { return nil }
        defer { key.wipe() }
        return Array(HMAC<SHA256>.authenticationCode(for: entry.macInput, using: key.symmetricKey))
    }

    func macMatches(_ entry: ClassKeyEntry) -> Bool {
        guard let expected = deviceMAC(entry), let stored = Data(base64Encoded: entry.mac) else { return false }
        return ConstantTime.equals(expected, Array(stored))
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
    func openIdentity(_ entry: ClassKeyEntry, _ cls: FileProtectionClass) throws -> X25519Identity {
        let ring = try keyring(cls)
        defer { ring.keys.forEach { $0.key.wipe() } }
        guard let sealed = Data(base64Encoded: entry.sealedIdentity) else {
            throw ProtectedFileError.keyTable("the \(cls.name) identity is not base64")
        }
        var raw: [UInt8]
        do {
            raw = try Sealed.open(Array(sealed), with: ring, context: ClassKeyEntry.identityContext(name: entry.name, recipient: entry.recipient))
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

    /// A new entry for `cls`, sealed under its current class key.
    func makeEntry(_ cls: FileProtectionClass, identity: X25519Identity) throws -> ClassKeyEntry {
        let ring = try keyring(cls)
        defer { ring.keys.forEach { $0.key.wipe() } }
        let recipient = identity.recipient.description
        var raw = Array(identity.privateKey.rawRepresentation)
        defer { for i in raw.indices { raw[i] = 0 } }
        let sealed: [UInt8]
        do {
            sealed = try Sealed.seal(raw, with: ring, context: ClassKeyEntry.identityContext(name: cls.name, recipient: recipient))
        } catch {
            throw ProtectedFileError.io("sealing the \(cls.name) identity failed: \(error)")
        }
        var entry = ClassKeyEntry(name: cls.name, recipient: recipient, sealedIdentity: Data(sealed).base64EncodedString(), mac: "")
        entry.mac = deviceMAC(entry).map { Data($0).base64EncodedString() } ?? ""
        return entry
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
            var entries = try load()
            if let existing = entries.first(where: { $0.name == cls.name }) { return existing }
            let created = try makeEntry(cls, identity: X25519Identity.generate())
            entries.append(created)
            for other in FileProtectionClass.allValues where !entries.contains(where: { $0.name == other.name }) {
                if let entry = try? makeEntry(other, identity: X25519Identity.generate()) { entries.append(entry) }
            }
            try save(entries)
            return created
        }
    }

    /// The recipient of `cls`, trusted: its device MAC matches, or (on another device, or when
    /// the MAC is missing) its identity opens with the class key and matches, after which the MAC
    /// is written again.
    func trustedRecipient(_ cls: FileProtectionClass) throws -> X25519Recipient {
        let entry = try entryCreatingIfNeeded(cls)
        guard let recipient = try? X25519Recipient(entry.recipient) else {
            throw ProtectedFileError.keyTable("the \(cls.name) recipient is not an age1… recipient")
        }
        if macMatches(entry) { return recipient }
        _ = try openIdentity(entry, cls)
        try withLock {
            var entries = try load()
            guard let index = entries.firstIndex(of: entry) else { return }
            entries[index].mac = deviceMAC(entry).map { Data($0).base64EncodedString() } ?? ""
            try save(entries)
        }
        return recipient
    }

    /// Re-seals every identity not sealed under its class's current key (after a class-key
    /// rotation). Needs the class key of every entry.
    /// - Returns: The number of identities re-sealed.
    func resealUnderCurrentClassKeys() throws -> Int {
        try withLock {
            var entries = try load()
            var count = 0
            for index in entries.indices {
                guard let cls = FileProtectionClass(name: entries[index].name) else { continue }
                let ring = try keyring(cls)
                let currentID = ring.keys[0].id
                ring.keys.forEach { $0.key.wipe() }
                guard let sealed = Data(base64Encoded: entries[index].sealedIdentity),
                      case .key(let id)? = try? Sealed.parseHeader(Array(sealed)).keySource else {
                    throw ProtectedFileError.keyTable("the \(cls.name) identity is not sealed data")
                }
                if id == currentID && macMatches(entries[index]) { continue }
                let identity = try openIdentity(entries[index], cls)
                entries[index] = try makeEntry(cls, identity: identity)
                count += 1
            }
            if count > 0 { try save(entries) }
            return count
        }
    }
}
