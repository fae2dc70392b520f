import Foundation
import Cipher
import Age
import Vault

/// The age recipient of a protection class: the standard `X25519` stanza to the class
/// recipient, followed by the class stanza `-> sf-protection 1 NAME` (empty body), which the
/// header MAC authenticates and which stock `age` skips.
struct ProtectionClassRecipient: AgeRecipient {
    static let stanzaType = "sf-protection"
    static let stanzaVersion = "1"
    let cls: FileProtectionClass
    let recipient: X25519Recipient

    func wrap(fileKey: SecretBytes) throws -> [AgeStanza] {
        try recipient.wrap(fileKey: fileKey) + [AgeStanza(type: Self.stanzaType, arguments: [Self.stanzaVersion, cls.name], body: [])]
    }

    /// The class a header's class stanza names, or nil when it has none: the one check of that
    /// stanza (at most one, version 1, a known class, an empty body).
    /// - Throws: ``ProtectedFileError/tampered(path:reason:)`` (named `path`) for two class
    ///   stanzas, or one that is malformed or of an unknown version.
    static func declaredClass(in stanzas: [AgeStanza], path: String) throws(ProtectedFileError) -> FileProtectionClass? {
        let classStanzas = stanzas.filter { $0.type == stanzaType }
        guard classStanzas.count <= 1 else { throw ProtectedFileError.tampered(path: path, reason: "the header has more than one class stanza") }
        guard let stanza = classStanzas.first else { return nil }
        guard stanza.arguments.count == 2, stanza.arguments[0] == stanzaVersion, stanza.body.isEmpty,
              let cls = FileProtectionClass(name: stanza.arguments[1]) else {
            throw ProtectedFileError.tampered(path: path, reason: "the class stanza is malformed or of an unknown version")
        }
        return cls
    }
}

/// Files protected by the four data-protection classes, on top of a vault's class keys and
/// the age format.
///
/// Each class (×thisDeviceOnly) has an X25519 key pair; its identity is sealed under the
/// vault's class key (`protected-files.keys` in the vault directory) and its recipient is kept
/// in clear, so ``FileProtection/completeUnlessOpen`` files can be written while the vault is
/// locked. A protected file is an age v1 file for the class recipient, plus a class stanza.
///
/// ```swift
/// let files = ProtectedFiles(manager: manager)
/// try files.write(Data("hello".utf8), to: path, protection: .completeUnlessOpen)  // even locked
/// try manager.unlock(passcode: passcode)
/// let bytes = try files.read(at: path)
/// try files.setProtection(.complete, ofItemAt: path)
/// ```
public final class ProtectedFiles: Sendable {
    /// The vault whose class keys protect the files.
    public let manager: CryptoManager
    let table: ClassKeyTable
    /// Fault injection for tests.
    let testHooks = TestHooks()

    /// Binds to a vault (nothing is read until used; the thread that wipes the keys of open
    /// complete readers at a lock is started here, before any file key exists).
    /// - Parameter manager: The vault whose class keys seal the class key pairs.
    public init(manager: CryptoManager) {
        self.manager = manager
        table = ClassKeyTable(manager: manager)
        LockWatchExecutor.shared.warmUp()
    }

    /// Points where tests inject faults.
    final class TestHooks: @unchecked Sendable {
        private let lock = NSLock()
        private var _beforeReplace: (@Sendable (String) -> Void)?
        /// Called with the path after a rewritten header and copied payload are synced, just
        /// before the file is checked for a replacement and renamed into place.
        var beforeReplace: (@Sendable (String) -> Void)? {
            get { lock.withLock { _beforeReplace } }
            set { lock.withLock { _beforeReplace = newValue } }
        }
    }

    // MARK: Keys

    /// Creates the key pair of every class whose class key is available now (for
    /// ``FileProtection/completeUnlessOpen``, do this once while unlocked so that writing
    /// works while locked). Pairs that exist are kept.
    /// - Returns: The classes that have a key pair afterwards.
    /// - Throws: ``ProtectedFileError`` when the key table cannot be read or written.
    @discardableResult
    public func prepareClasses() throws(ProtectedFileError) -> [FileProtectionClass] {
        var ready: [FileProtectionClass] = []
        for cls in FileProtectionClass.allValues {
            do {
                _ = try Self.typed { try table.entryCreatingIfNeeded(cls) }
                ready.append(cls)
            } catch {
                switch error {
                case .locked, .noKeyPairYet, .wrongDevice: continue
                default: throw error
                }
            }
        }
        return ready
    }

    /// Crypto-erases the key table (`protected-files.keys`: the class key pairs) and removes its
    /// lock file. For use with the vault's erase (`CryptoManager.erase()`), which destroys the
    /// class keys the table's identities are sealed under: this removes the table itself, so no
    /// copy of it stays in the data directory. Every protected file of this vault is unreadable
    /// afterwards (as it is once the vault is erased), except with an identity exported earlier.
    /// - Throws: ``ProtectedFileError/io(_:)`` when the table could not be destroyed (it was
    ///   unlinked).
    public func eraseKeyTable() throws(ProtectedFileError) {
        try Self.typed { try table.erase() }
    }

    /// The class recipient (`age1…`): files encrypted to it by any age tool read as this class.
    /// Creates the key pair when missing (which needs the class key).
    /// - Parameter cls: The class.
    /// - Returns: The class's X25519 recipient.
    /// - Throws: ``ProtectedFileError``.
    public func recipient(for cls: FileProtectionClass) throws(ProtectedFileError) -> X25519Recipient {
        try Self.typed { try table.trustedRecipient(cls) }
    }

    /// The class identity (`AGE-SECRET-KEY-1…`, in locked memory), for interoperability and
    /// recovery: whoever holds it reads every file of the class without the vault. Needs the
    /// class key.
    /// - Parameter cls: The class.
    /// - Returns: The identity's text, `AGE-SECRET-KEY-1…`.
    /// - Throws: ``ProtectedFileError``.
    public func exportIdentity(for cls: FileProtectionClass) throws(ProtectedFileError) -> SecretBytes {
        try Self.typed { try table.openIdentity(try table.entryCreatingIfNeeded(cls), cls).encoded }
    }

    /// Re-seals the class identities under the vault's current class keys (after
    /// `CryptoManager.rotateClassKeys()`); needs the vault unlocked.
    /// - Returns: The number of identities re-sealed.
    /// - Throws: ``ProtectedFileError``: ``ProtectedFileError/locked(_:_:)`` when a class key
    ///   is unavailable (the vault must be unlocked), ``ProtectedFileError/vault(_:)`` for the
    ///   vault's other errors, the other cases for the key table.
    @discardableResult
    public func resealUnderCurrentClassKeys() throws(ProtectedFileError) -> Int {
        try Self.typed { try table.resealUnderCurrentClassKeys() }
    }

    /// Rotates the vault's class keys, then re-seals the class identities under the new keys.
    /// The key pairs themselves do not change; ``rotateKeyPairs(rewrapping:resume:)`` replaces
    /// them and re-wraps the files (docs/PROTECTED-FILES.md, "Rotation").
    /// - Returns: The number of identities re-sealed.
    /// - Throws: ``ProtectedFileError``: ``ProtectedFileError/locked(_:_:)`` when the vault is
    ///   locked, ``ProtectedFileError/vault(_:)`` for the vault's other errors, the other cases
    ///   for the key table.
    @discardableResult
    public func rotateClassKeys() throws(ProtectedFileError) -> Int {
        try Self.vaultCall(.complete, path: table.path) { try manager.rotateClassKeys() }
        return try resealUnderCurrentClassKeys()
    }

    // MARK: Writing

    /// Writes `bytes` to `path` as a protected file of class `protection`, atomically
    /// (temporary file, fsync, rename, fsync of the directory; mode 0600).
    /// - Throws: ``ProtectedFileError``: ``ProtectedFileError/locked(_:_:)`` when the class is
    ///   not writable now (every class but completeUnlessOpen needs its class key).
    /// - Parameters:
    ///   - bytes: The plaintext.
    ///   - path: Where the file goes (replaced when it exists).
    ///   - protection: The file's class.
    public func write<Bytes: DataProtocol>(_ bytes: Bytes, to path: String, protection: FileProtectionClass) throws(ProtectedFileError) {
        let recipient = try Self.typed { try writableRecipient(protection) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, protection) {
            _ = try SecureFile.writeOutput(to: path) { fd in
                let encryptor = try AgeEncryptor(recipients: [recipient]) { try SecureFile.writeAll(fd, $0, path: path) }
                try encryptor.update(bytes)
                try encryptor.finish()
            }
        }
    }

    /// Writes a Codable value (JSON) as a protected file.
    /// - Parameters:
    ///   - value: The value, encoded as JSON.
    ///   - path: Where the file goes (replaced when it exists).
    ///   - protection: The file's class.
    /// - Throws: ``ProtectedFileError``.
    public func write<Value: Encodable>(value: Value, to path: String, protection: FileProtectionClass) throws(ProtectedFileError) {
        var data: Data
        do { data = try JSONEncoder().encode(value) } catch {
            throw ProtectedFileError.invalidArgument("the value does not encode as JSON: \(error)")
        }
        defer { data.resetBytes(in: 0..<data.count) }
        try write(data, to: path, protection: protection)
    }

    /// Writes everything readable from `input` (a file, pipe or socket) as a protected file,
    /// streaming in constant memory, atomically.
    /// - Parameters:
    ///   - input: The descriptor to read the plaintext from, up to its end.
    ///   - path: Where the file goes (replaced when it exists).
    ///   - protection: The file's class.
    ///   - progress: When given, called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func write(from input: Int32, to path: String, protection: FileProtectionClass,
                      progress: ((Int64) -> Void)? = nil) throws(ProtectedFileError) {
        let recipient = try Self.typed { try writableRecipient(protection) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, protection) {
            try Age.encrypt(from: input, toFile: path, recipients: [recipient], progress: progress)
        }
    }

    // MARK: Reading

    /// Reads a whole protected file.
    /// - Parameter path: The protected file.
    /// - Returns: Its plaintext.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String) throws(ProtectedFileError) -> [UInt8] {
        let opened = try Self.typed { try self.open(path) }
        defer { close(opened.fd) }
        let identities = try Self.typed { try self.identities(opened.cls, path: path) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        return try mapAge(path: path, opened.cls) {
            let reader = try AgeRandomAccessReader(fileDescriptor: opened.fd, identities: identities)
            return try reader.read(offset: 0, count: Int(reader.plaintextSize))
        }
    }

    /// Reads a whole small protected file straight into wipeable memory (one open, one read of
    /// the header, no plaintext copy left behind), for files that hold keys.
    /// - Parameters:
    ///   - path: The protected file.
    ///   - maxLength: A larger plaintext is refused as not this kind of file.
    ///   - checkClass: Called with the file's class (from its header) before any key is used:
    ///     throw to refuse the file (for a class other than the one expected).
    /// - Returns: The plaintext and the file's class.
    /// - Throws: What `checkClass` throws, or ``ProtectedFileError``.
    package func readSecret(at path: String, maxLength: Int,
                            checkClass: (FileProtectionClass) throws -> Void = { _ in }) throws -> (SecretBytes, FileProtectionClass) {
        let opened = try Self.typed { try self.open(path) }
        defer { close(opened.fd) }
        try checkClass(opened.cls)
        let identities = try Self.typed { try self.identities(opened.cls, path: path) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        let secret = try mapAge(path: path, opened.cls) { () throws -> SecretBytes in
            let reader = try AgeRandomAccessReader(fileDescriptor: opened.fd, identities: identities)
            guard reader.plaintextSize <= Int64(maxLength) else {
                // An authenticated file of the class, but not of this kind (its writer wrote
                // more): what a swapped file looks like.
                throw ProtectedFileError.tampered(path: path, reason: "it holds \(reader.plaintextSize) bytes, more than the \(maxLength) a file of this kind holds")
            }
            return try SecretBytes(count: Int(reader.plaintextSize)) { (buffer) throws(AgeError) in
                _ = try reader.read(offset: 0, into: buffer)
            }
        }
        return (secret, opened.cls)
    }

    /// Reads a whole protected file as `Data`.
    /// - Parameter path: The protected file.
    /// - Returns: Its plaintext.
    /// - Throws: ``ProtectedFileError``.
    public func readData(at path: String) throws(ProtectedFileError) -> Data { Data(try read(at: path)) }

    /// Reads a Codable value written by ``write(value:to:protection:)``.
    /// - Parameters:
    ///   - type: The value's type.
    ///   - path: The protected file.
    /// - Returns: The decoded value.
    /// - Throws: ``ProtectedFileError``.
    public func read<Value: Decodable>(_ type: Value.Type, at path: String) throws(ProtectedFileError) -> Value {
        var bytes = try read(at: path)
        defer { for i in bytes.indices { bytes[i] = 0 } }
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch {
            throw ProtectedFileError.invalidArgument("\(path) does not decode as \(type): \(error)")
        }
    }

    /// Decrypts a protected file to the descriptor `output`, streaming (constant memory); only
    /// authenticated plaintext is written.
    /// - Parameters:
    ///   - path: The protected file.
    ///   - output: The descriptor the plaintext is written to.
    ///   - progress: When given, called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String, to output: Int32, progress: ((Int64) -> Void)? = nil) throws(ProtectedFileError) {
        let opened = try Self.typed { try self.open(path) }
        defer { close(opened.fd) }
        let identities = try Self.typed { try self.identities(opened.cls, path: path) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            try Age.decrypt(from: opened.fd, to: output, identities: identities, armor: .none, progress: progress)
        }
    }

    /// Decrypts a protected file into the file `destination`, streaming, atomically (it
    /// appears only once the whole payload authenticated).
    /// - Parameters:
    ///   - path: The protected file.
    ///   - destination: The plaintext file to make (replaced when it exists).
    ///   - progress: When given, called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String, toFile destination: String, progress: ((Int64) -> Void)? = nil) throws(ProtectedFileError) {
        let opened = try Self.typed { try self.open(path) }
        defer { close(opened.fd) }
        let identities = try Self.typed { try self.identities(opened.cls, path: path) }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            try Age.decrypt(from: opened.fd, toFile: destination, identities: identities, armor: .none, progress: progress)
        }
    }

    /// Opens a protected file for streaming, random-access reads (constant memory). The file key
    /// lives in the reader until ``ProtectedFileReader/close()``; for ``FileProtection/complete``
    /// every read after the vault locks fails, for the other classes an open reader stays usable.
    /// - Parameter path: The protected file.
    /// - Returns: The reader, positioned at offset 0.
    /// - Throws: ``ProtectedFileError``.
    public func openForReading(at path: String) throws(ProtectedFileError) -> ProtectedFileReader {
        let opened = try Self.typed { try self.open(path) }
        do throws(ProtectedFileError) {
            let identities = try Self.typed { try self.identities(opened.cls, path: path) }
            let reader = try mapAge(path: path, opened.cls) { try AgeRandomAccessReader(fileDescriptor: opened.fd, identities: identities) }
            return ProtectedFileReader(reader: reader, fd: opened.fd, cls: opened.cls, path: path, manager: manager)
        } catch {
            close(opened.fd)
            throw error
        }
    }
}
