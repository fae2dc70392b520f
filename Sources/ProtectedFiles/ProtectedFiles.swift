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
    @discardableResult
    public func prepareClasses() throws -> [FileProtectionClass] {
        var ready: [FileProtectionClass] = []
        for cls in FileProtectionClass.allValues {
            do {
                _ = try table.entryCreatingIfNeeded(cls)
                ready.append(cls)
            } catch let error as ProtectedFileError {
                switch error {
                case .locked, .noKeyPairYet, .wrongDevice: continue
                default: throw error
                }
            }
        }
        return ready
    }

    /// Crypto-erases the key table (`protected-files.keys`: the class key pairs) and removes its
    /// lock file. For use with the vault's erase (``CryptoManager/erase()``), which destroys the
    /// class keys the table's identities are sealed under: this removes the table itself, so no
    /// copy of it stays in the data directory. Every protected file of this vault is unreadable
    /// afterwards (as it is once the vault is erased), except with an identity exported earlier.
    /// - Throws: ``ProtectedFileError/io(_:)`` when the table could not be destroyed (it was
    ///   unlinked).
    public func eraseKeyTable() throws {
        try table.erase()
    }

    /// The class recipient (`age1…`): files encrypted to it by any age tool read as this class.
    /// Creates the key pair when missing (which needs the class key).
    /// - Throws: ``ProtectedFileError``.
    public func recipient(for cls: FileProtectionClass) throws -> X25519Recipient {
        try table.trustedRecipient(cls)
    }

    /// The class identity (`AGE-SECRET-KEY-1…`, in locked memory), for interoperability and
    /// recovery: whoever holds it reads every file of the class without the vault. Needs the
    /// class key.
    /// - Throws: ``ProtectedFileError``.
    public func exportIdentity(for cls: FileProtectionClass) throws -> SecretBytes {
        try table.openIdentity(try table.entryCreatingIfNeeded(cls), cls).encoded
    }

    /// Re-seals the class identities under the vault's current class keys (after
    /// `CryptoManager.rotateClassKeys()`); needs the vault unlocked.
    /// - Returns: The number of identities re-sealed.
    @discardableResult
    public func resealUnderCurrentClassKeys() throws -> Int {
        try table.resealUnderCurrentClassKeys()
    }

    /// Rotates the vault's class keys, then re-seals the class identities under the new keys.
    /// The key pairs themselves do not change; ``rotateKeyPairs(rewrapping:resume:)`` replaces
    /// them and re-wraps the files (docs/PROTECTED-FILES.md, "Rotation").
    /// - Returns: The number of identities re-sealed.
    @discardableResult
    public func rotateClassKeys() throws -> Int {
        try Self.vaultCall(.complete, path: table.path) { try manager.rotateClassKeys() }
        return try resealUnderCurrentClassKeys()
    }

    // MARK: Writing

    /// Writes `bytes` to `path` as a protected file of class `protection`, atomically
    /// (temporary file, fsync, rename, fsync of the directory; mode 0600).
    /// - Throws: ``ProtectedFileError``: ``ProtectedFileError/locked(_:_:)`` when the class is
    ///   not writable now (every class but completeUnlessOpen needs its class key).
    public func write<Bytes: DataProtocol>(_ bytes: Bytes, to path: String, protection: FileProtectionClass) throws {
        let recipient = try writableRecipient(protection)
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
    /// - Throws: ``ProtectedFileError``.
    public func write<Value: Encodable>(value: Value, to path: String, protection: FileProtectionClass) throws {
        var data: Data
        do { data = try JSONEncoder().encode(value) } catch {
            throw ProtectedFileError.invalidArgument("the value does not encode as JSON: \(error)")
        }
        defer { data.resetBytes(in: 0..<data.count) }
        try write(data, to: path, protection: protection)
    }

    /// Writes everything readable from `input` (a file, pipe or socket) as a protected file,
    /// streaming in constant memory, atomically.
    /// `progress`, when given, is called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func write(from input: Int32, to path: String, protection: FileProtectionClass,
                      progress: ((Int64) -> Void)? = nil) throws {
        let recipient = try writableRecipient(protection)
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, protection) {
            try Age.encrypt(from: input, toFile: path, recipients: [recipient], progress: progress)
        }
    }

    // MARK: Reading

    /// Reads a whole protected file.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String) throws -> [UInt8] {
        let opened = try open(path)
        defer { close(opened.fd) }
        let identities = try identities(opened.cls, path: path)
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        return try mapAge(path: path, opened.cls) {
            let reader = try AgeRandomAccessReader(fileDescriptor: opened.fd, identities: identities)
            return try reader.read(offset: 0, count: Int(reader.plaintextSize))
        }
    }

    /// Reads a whole protected file as `Data`.
    public func readData(at path: String) throws -> Data { Data(try read(at: path)) }

    /// Reads a Codable value written by ``write(value:to:protection:)``.
    /// - Throws: ``ProtectedFileError``.
    public func read<Value: Decodable>(_ type: Value.Type, at path: String) throws -> Value {
        var bytes = try read(at: path)
        defer { for i in bytes.indices { bytes[i] = 0 } }
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch {
            throw ProtectedFileError.invalidArgument("\(path) does not decode as \(type): \(error)")
        }
    }

    /// Decrypts a protected file to the descriptor `output`, streaming (constant memory); only
    /// authenticated plaintext is written.
    /// `progress`, when given, is called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String, to output: Int32, progress: ((Int64) -> Void)? = nil) throws {
        let opened = try open(path)
        defer { close(opened.fd) }
        let identities = try identities(opened.cls, path: path)
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            try Age.decrypt(from: opened.fd, to: output, identities: identities, armor: .none, progress: progress)
        }
    }

    /// Decrypts a protected file into the file `destination`, streaming, atomically (it
    /// appears only once the whole payload authenticated).
    /// `progress`, when given, is called as it goes with the bytes of input consumed so far.
    /// - Throws: ``ProtectedFileError``.
    public func read(at path: String, toFile destination: String, progress: ((Int64) -> Void)? = nil) throws {
        let opened = try open(path)
        defer { close(opened.fd) }
        let identities = try identities(opened.cls, path: path)
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            try Age.decrypt(from: opened.fd, toFile: destination, identities: identities, armor: .none, progress: progress)
        }
    }

    /// Opens a protected file for streaming, random-access reads (constant memory). The file key
    /// lives in the reader until ``ProtectedFileReader/close()``; for ``FileProtection/complete``
    /// every read after the vault locks fails, for the other classes an open reader stays usable.
    /// - Throws: ``ProtectedFileError``.
    public func openForReading(at path: String) throws -> ProtectedFileReader {
        let opened = try open(path)
        do {
            let identities = try identities(opened.cls, path: path)
            let reader = try mapAge(path: path, opened.cls) { try AgeRandomAccessReader(fileDescriptor: opened.fd, identities: identities) }
            return ProtectedFileReader(reader: reader, fd: opened.fd, cls: opened.cls, path: path, manager: manager)
        } catch {
            close(opened.fd)
            throw error
        }
    }

    // MARK: Classes

    /// The class of a protected file, from its class stanza (no key needed). A file without
    /// one (written by another age tool to a class recipient) is matched against the class
    /// identities available now.
    /// - Throws: ``ProtectedFileError/notProtectedFile(path:reason:)`` and others.
    public func protection(ofItemAt path: String) throws -> FileProtectionClass {
        let opened = try open(path)
        close(opened.fd)
        return opened.cls
    }

    /// Whether a file of class `cls` can be read now (nil) or why not.
    public func readError(for cls: FileProtectionClass) -> ProtectedFileError? {
        do {
            let entry = try table.entry(cls)
            guard let entry else {
                return .notProtectedFile(path: table.path, reason: "this vault has no \(cls.name) key pair")
            }
            _ = try table.openIdentity(entry, cls)
            return nil
        } catch let error as ProtectedFileError {
            return error
        } catch {
            return .io("\(error)")
        }
    }

    /// Changes the class of a protected file: the file key is unwrapped with the current class's
    /// identity and wrapped to the new class's recipient; only the header is rewritten, the
    /// payload is copied, and the file is replaced atomically. Needs the current class readable
    /// and the new class writable now.
    /// - Throws: ``ProtectedFileError``.
    public func setProtection(_ protection: FileProtectionClass, ofItemAt path: String) throws {
        _ = try changeProtection(to: protection, ofItemAt: path, onlyFrom: nil)
    }

    /// What ``changeProtection(to:ofItemAt:onlyFrom:)`` found and did.
    enum ChangeOutcome: Equatable {
        case changed
        /// The file already was of the class (perhaps changed by another run meanwhile).
        case alreadyInClass
        /// The file is of another class than `onlyFrom` (left alone).
        case otherClass(FileProtectionClass)
    }

    /// Changes the class of the file at `path` to `protection` while holding the file's lock
    /// (see ``openLocked(_:)``), so two runs changing the same file take turns: the second
    /// finds the file the first wrote and reports it as already in the class.
    func changeProtection(to protection: FileProtectionClass, ofItemAt path: String, onlyFrom: FileProtectionClass?) throws -> ChangeOutcome {
        let opened = try openLocked(path)
        defer { close(opened.fd) }
        if opened.cls == protection && opened.hasClassStanza { return .alreadyInClass }
        if let onlyFrom, opened.cls != onlyFrom { return .otherClass(opened.cls) }
        let identities = try identities(opened.cls, path: path)
        let recipient = try writableRecipient(protection)
        try replaceHeader(opened, path: path, identities: identities, recipient: recipient)
        return .changed
    }

    /// Opens `path` as ``open(_:)`` does and takes an exclusive `flock` on the file, which every
    /// header rewrite of this library holds until its replacement is renamed into place. Once
    /// the lock is held, `path` must still name the file opened, unchanged (another run may
    /// have replaced it while this one waited); otherwise the file now at `path` is opened and
    /// locked instead, up to 16 times.
    /// - Throws: ``ProtectedFileError/modifiedDuringChange(path:)`` when the file keeps changing.
    func openLocked(_ path: String) throws -> OpenedFile {
        for _ in 0..<16 {
            let opened = try open(path)
            switch Self.lockForChange(opened.fd) {
            case .locked, .unsupported:
                // Unsupported (a file system without flock): the stamp check before the rename
                // still keeps a replaced file from being overwritten.
                if let now = try? FileCalls.linkStatus(path), FileStamp(now) == opened.stamp { return opened }
                close(opened.fd)
            case .busy:
                close(opened.fd)
                throw ProtectedFileError.io("\(path) is locked by another process for longer than \(Int(Self.lockWait)) s (a class change or re-wrap of it, or another holder of a lock on it); nothing was changed: run the command again once it is released")
            }
        }
        throw ProtectedFileError.modifiedDuringChange(path: path)
    }

    /// How long ``openLocked(_:)`` waits for a file's lock.
    static let lockWait: Double = 30

    enum LockOutcome { case locked, busy, unsupported }

    /// Takes the exclusive lock of `fd`, polling for up to ``lockWait`` seconds (every 10 ms),
    /// so a holder that never lets go costs a bounded wait and a message, not a hang.
    static func lockForChange(_ fd: Int32) -> LockOutcome {
        let deadline = Date().addingTimeInterval(lockWait)
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .locked }
            switch errno {
            case EINTR: continue
            case EWOULDBLOCK:
                guard Date() < deadline else { return .busy }
                usleep(10_000)
            default:
                // ENOLCK, EOPNOTSUPP, ENOSYS and the like: no locking here.
                return .unsupported
            }
        }
    }

    /// Replaces the file at `path` (open as `opened`, locked by ``openLocked(_:)``) with a copy
    /// whose file key is unwrapped with `identities` and wrapped to `recipient`: header
    /// rewritten, nonce and payload copied.
    /// The copy is synced, then the file at `path` is checked to still be the one opened (device,
    /// inode, size, modification and change times), and only then renamed into place, so a file
    /// replaced or written meanwhile is never overwritten with the old contents.
    /// - Throws: ``ProtectedFileError/modifiedDuringChange(path:)`` when it was.
    func replaceHeader(_ opened: OpenedFile, path: String, identities: [any AgeIdentity], recipient: any AgeRecipient) throws {
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            do {
                try SecureFile.replaceAtomically(path) { output in
                    try Age.rewrapHeader(from: opened.fd, to: output, identities: identities, recipients: [recipient])
                    // Synced here so that the window between the check and the rename is short.
                    do throws(SystemCallError) { try FileCalls.sync(output) } catch { throw SecureFile.Failure(error, path: path) }
                    testHooks.beforeReplace?(path)
                    guard let now = try? FileCalls.linkStatus(path), FileStamp(now) == opened.stamp else {
                        throw ProtectedFileError.modifiedDuringChange(path: path)
                    }
                }
            } catch let failure as SecureFile.Failure {
                throw ClassKeyTable.map(failure, path: path)
            }
        }
    }

    /// What ``upgradeItems(inDirectory:from:to:)`` did.
    public struct UpgradeReport: Sendable, Equatable {
        /// One file that could not be changed.
        public struct Failure: Sendable, Equatable {
            public var path: String
            public var error: ProtectedFileError
        }
        /// Files changed to the new class.
        public var changed: [String] = []
        /// Protected files already of the new class (including those another run changed
        /// while this one went through the tree).
        public var alreadyInClass: Int = 0
        /// Regular files left as they were (of a third class, or not protected files).
        public var skipped: Int = 0
        /// Files that could not be changed, or whose class could not be read (a damaged header).
        public var failures: [Failure] = []
    }

    /// Changes every protected file of class `from` in the tree under `directory` to class `to`
    /// (as `upgradeImagesInDir` in Apple's data-protection examples: files written as
    /// completeUnlessOpen while locked become complete once unlocked). Symbolic links are not
    /// followed; other files are left alone. A failure on one file does not stop the others.
    /// - Throws: ``ProtectedFileError`` when the directory cannot be read.
    public func upgradeItems(inDirectory directory: String, from: FileProtectionClass, to: FileProtectionClass) throws -> UpgradeReport {
        guard (try? FileCalls.linkStatus(directory))?.kind == .directory else {
            throw ProtectedFileError.invalidArgument("\(directory) is not a directory")
        }
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw ProtectedFileError.permission(path: directory, reason: "the directory cannot be read")
        }
        var report = UpgradeReport()
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let relative = enumerator.nextObject() as? String {
            let path = base + relative
            guard (try? FileCalls.linkStatus(path))?.isRegularFile == true else { continue }
            let name = (relative as NSString).lastPathComponent
            if name.hasPrefix(".sf-lk-") { continue }
            let cls: FileProtectionClass
            do {
                cls = try protection(ofItemAt: path)
            } catch ProtectedFileError.notProtectedFile {
                report.skipped += 1
                continue
            } catch let error as ProtectedFileError {
                report.failures.append(.init(path: path, error: error))
                continue
            }
            guard cls == from else {
                if cls == to { report.alreadyInClass += 1 } else { report.skipped += 1 }
                continue
            }
            do {
                switch try changeProtection(to: to, ofItemAt: path, onlyFrom: from) {
                case .changed: report.changed.append(path)
                case .alreadyInClass: report.alreadyInClass += 1
                case .otherClass: report.skipped += 1
                }
            } catch let error as ProtectedFileError {
                report.failures.append(.init(path: path, error: error))
            } catch {
                report.failures.append(.init(path: path, error: .io("\(error)")))
            }
        }
        return report
    }

    // MARK: Key-pair rotation

    /// What ``rewrapItems(inDirectories:)`` did.
    public struct RewrapReport: Sendable, Equatable {
        /// Files whose file key was wrapped to a retired key pair and now is wrapped to the
        /// current pair of their class.
        public var rewrapped: [String] = []
        /// Protected files already wrapped to the current key pair of their class.
        public var current: Int = 0
        /// Regular files that are not protected files.
        public var skipped: Int = 0
        /// Files no key pair of this vault opens (a damaged or altered header, a file of another
        /// vault): left as they are; destroying the retired pairs changes nothing for them.
        public var damaged: [UpgradeReport.Failure] = []
        /// Files wrapped to a retired key pair that could not be rewritten (permissions, I/O, a
        /// concurrent change): while any remain, the retired pairs are kept.
        public var failed: [UpgradeReport.Failure] = []

        /// - Parameters: see the properties.
        public init(rewrapped: [String] = [], current: Int = 0, skipped: Int = 0,
                    damaged: [UpgradeReport.Failure] = [], failed: [UpgradeReport.Failure] = []) {
            self.rewrapped = rewrapped
            self.current = current
            self.skipped = skipped
            self.damaged = damaged
            self.failed = failed
        }
    }

    /// What ``rotateKeyPairs(rewrapping:resume:)`` did.
    public struct KeyRotationReport: Sendable, Equatable {
        /// Classes given a new key pair (0 when resuming).
        public var rotated: Int
        /// The re-wrap of the directories.
        public var rewrap: RewrapReport
        /// Retired key pairs destroyed (0 when some file could not be re-wrapped).
        public var retiredDestroyed: Int
        /// Retired key pairs still kept (waiting for the files in ``RewrapReport/failed``).
        public var retiredKept: Int
    }

    /// The number of retired key pairs (replaced by ``rotateKeyPairs()`` and not yet destroyed).
    public var retiredKeyPairCount: Int {
        get throws { try table.loadFile().retired.count }
    }

    /// Gives every class that has a key pair a new X25519 key pair. The replaced pairs are
    /// retired: kept, sealed under the current class keys, so files still wrapped to them stay
    /// readable, until ``destroyRetiredKeyPairs()``. Needs the vault unlocked (and the device
    /// key for ThisDeviceOnly classes); nothing changes when a class key is missing.
    /// - Returns: The number of classes given a new pair.
    /// - Throws: ``ProtectedFileError``.
    @discardableResult
    public func rotateKeyPairs() throws -> Int {
        try table.rotateKeyPairs()
    }

    /// Re-wraps every protected file under `directories` (trees; symbolic links are not
    /// followed) whose file key is wrapped to a retired key pair: the file key is wrapped to
    /// the current pair of the file's class and only the header is rewritten (atomically, as a
    /// class change). Files already on the current pair are left alone, so an interrupted run
    /// is finished by running it again. A failure on one file does not stop the others.
    /// - Throws: ``ProtectedFileError`` when a directory cannot be read.
    public func rewrapItems(inDirectories directories: [String]) throws -> RewrapReport {
        var report = RewrapReport()
        let retired = try table.loadFile().retired
        for directory in directories {
            try forEachRegularFile(in: directory) { path in
                let opened: OpenedFile
                do { opened = try openLocked(path) } catch ProtectedFileError.notProtectedFile {
                    report.skipped += 1
                    return
                } catch ProtectedFileError.modifiedDuringChange(let changed) {
                    // Kept changing while this run waited for it: not damaged, try again later.
                    report.failed.append(.init(path: path, error: .modifiedDuringChange(path: changed)))
                    return
                } catch let error as ProtectedFileError {
                    report.damaged.append(.init(path: path, error: error))
                    return
                }
                defer { close(opened.fd) }
                do {
                    let current = try identity(opened.cls, path: path)
                    do {
                        try opened.header.verify(identities: [current])
                        report.current += 1
                        return
                    } catch AgeError.noMatchingIdentity {}
                    let old = retired.filter { $0.name == opened.cls.name }.compactMap { try? table.openIdentity($0, opened.cls, retired: true) }
                    do { try opened.header.verify(identities: old) } catch let error as AgeError {
                        report.damaged.append(.init(path: path, error: Self.map(error, path: path, opened.cls)))
                        return
                    }
                    let recipient = ProtectionClassRecipient(cls: opened.cls, recipient: try table.trustedRecipient(opened.cls))
                    try replaceHeader(opened, path: path, identities: old, recipient: recipient)
                    report.rewrapped.append(path)
                } catch let error as AgeError {
                    report.damaged.append(.init(path: path, error: Self.map(error, path: path, opened.cls)))
                } catch let error as ProtectedFileError {
                    report.failed.append(.init(path: path, error: error))
                } catch {
                    report.failed.append(.init(path: path, error: .io("\(error)")))
                }
            }
        }
        return report
    }

    /// Destroys the retired key pairs: they are removed from the key table and the table that
    /// held them is crypto-erased. Files still wrapped to them no longer open (except with an
    /// identity exported earlier).
    /// - Returns: The number destroyed.
    @discardableResult
    public func destroyRetiredKeyPairs() throws -> Int {
        try table.destroyRetired()
    }

    /// The whole rotation: new key pairs (unless `resume`, which finishes an interrupted
    /// run), every file under `directories` re-wrapped, then the retired pairs destroyed when
    /// no file wrapped to them failed. Give every directory holding protected files of this
    /// vault: files elsewhere still wrapped to a retired pair become unreadable once it is
    /// destroyed. Stop writers for the duration (a write that fetched the old recipient before
    /// the rotation could otherwise land after the re-wrap).
    ///
    /// Afterwards an old copy of the data directory (`protected-files.keys` with the state and
    /// `always.key`) and the passcode of that time open none of the re-wrapped files.
    /// - Throws: ``ProtectedFileError``.
    public func rotateKeyPairs(rewrapping directories: [String], resume: Bool = false) throws -> KeyRotationReport {
        let rotated = resume ? 0 : try rotateKeyPairs()
        let rewrap = try rewrapItems(inDirectories: directories)
        if rewrap.failed.isEmpty {
            let destroyed = try destroyRetiredKeyPairs()
            return KeyRotationReport(rotated: rotated, rewrap: rewrap, retiredDestroyed: destroyed, retiredKept: 0)
        }
        return KeyRotationReport(rotated: rotated, rewrap: rewrap, retiredDestroyed: 0, retiredKept: try retiredKeyPairCount)
    }

    /// Calls `body` with every regular file under `directory` (symbolic links are not
    /// followed; temporaries of atomic replacements are skipped).
    func forEachRegularFile(in directory: String, _ body: (String) throws -> Void) throws {
        guard (try? FileCalls.linkStatus(directory))?.kind == .directory else {
            throw ProtectedFileError.invalidArgument("\(directory) is not a directory")
        }
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw ProtectedFileError.permission(path: directory, reason: "the directory cannot be read")
        }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let relative = enumerator.nextObject() as? String {
            let path = base + relative
            guard (try? FileCalls.linkStatus(path))?.isRegularFile == true else { continue }
            if (relative as NSString).lastPathComponent.hasPrefix(".sf-lk-") { continue }
            try body(path)
        }
    }

    // MARK: Plumbing

    /// The recipient to write `cls` with, after checking that the class is writable now.
    func writableRecipient(_ cls: FileProtectionClass) throws -> ProtectionClassRecipient {
        if cls.protection != .completeUnlessOpen {
            let key = try Self.vaultCall(cls, path: table.path) { try manager.classKey(for: cls.accessibility) }
            key.wipe()
        }
        return ProtectionClassRecipient(cls: cls, recipient: try table.trustedRecipient(cls))
    }

    /// The identity of `cls` (needs its class key).
    func identity(_ cls: FileProtectionClass, path: String) throws -> X25519Identity {
        guard let entry = try table.entry(cls) else {
            throw ProtectedFileError.notProtectedFile(path: path, reason: "this vault has no \(cls.name) key pair (the file was written under another vault)")
        }
        do {
            return try table.openIdentity(entry, cls)
        } catch ProtectedFileError.wrongDevice(let c, _) {
            throw ProtectedFileError.wrongDevice(c, path: path)
        }
    }

    /// The identity of `cls` followed by its retired ones (files not yet re-wrapped after a
    /// key-pair rotation). Needs the class key.
    func identities(_ cls: FileProtectionClass, path: String) throws -> [any AgeIdentity] {
        [try identity(cls, path: path)] + (try table.retiredIdentities(cls))
    }

    /// A file opened by ``open(_:)``: its descriptor, class, header and identity.
    struct OpenedFile {
        var fd: Int32
        var cls: FileProtectionClass
        var hasClassStanza: Bool
        var header: AgeFileHeader
        var stamp: FileStamp
    }

    /// Opens `path` and determines its class.
    func open(_ path: String) throws -> OpenedFile {
        let fd: Int32
        do { fd = try FileCalls.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } catch {
            let code = error.code
            if code == EACCES || code == EPERM || code == ELOOP {
                throw ProtectedFileError.permission(path: path, reason: code == ELOOP ? "it is a symbolic link" : String(cString: strerror(code)))
            }
            throw ProtectedFileError.io("cannot open \(path): \(String(cString: strerror(code)))")
        }
        do {
            guard let info = try? FileCalls.status(fd), info.isRegularFile else {
                throw ProtectedFileError.notProtectedFile(path: path, reason: "it is not a regular file")
            }
            let header: AgeFileHeader
            do { header = try AgeFileHeader.read(fileDescriptor: fd) } catch let error as AgeError {
                switch error {
                case .io(let why): throw ProtectedFileError.io(why)
                default:
                    // A file that starts as an age file but whose header does not parse was damaged.
                    var start = [UInt8](repeating: 0, count: 22)
                    let n = start.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
                    if n == start.count && start == Array("age-encryption.org/v1\n".utf8) {
                        throw ProtectedFileError.tampered(path: path, reason: "\(error)")
                    }
                    throw ProtectedFileError.notProtectedFile(path: path, reason: "\(error)")
                }
            }
            let classStanzas = header.stanzas.filter { $0.type == ProtectionClassRecipient.stanzaType }
            guard classStanzas.count <= 1 else { throw ProtectedFileError.tampered(path: path, reason: "the header has more than one class stanza") }
            if let stanza = classStanzas.first {
                guard stanza.arguments.count == 2, stanza.arguments[0] == ProtectionClassRecipient.stanzaVersion, stanza.body.isEmpty,
                      let cls = FileProtectionClass(name: stanza.arguments[1]) else {
                    throw ProtectedFileError.tampered(path: path, reason: "the class stanza is malformed or of an unknown version")
                }
                return OpenedFile(fd: fd, cls: cls, hasClassStanza: true, header: header, stamp: FileStamp(info))
            }
            // No class stanza: the class whose identity (current or retired) opens the header.
            let keys = try table.loadFile()
            for entry in keys.entries {
                guard let cls = FileProtectionClass(name: entry.name), let identity = try? table.openIdentity(entry, cls) else { continue }
                let retired = keys.retired.filter { $0.name == cls.name }.compactMap { try? table.openIdentity($0, cls, retired: true) }
                do {
                    try header.verify(identities: [identity] + retired)
                    return OpenedFile(fd: fd, cls: cls, hasClassStanza: false, header: header, stamp: FileStamp(info))
                } catch AgeError.noMatchingIdentity {
                    continue
                } catch let error as AgeError {
                    throw Self.map(error, path: path, cls)
                }
            }
            throw ProtectedFileError.notProtectedFile(path: path, reason: "it has no class stanza and no class identity available now opens it")
        } catch {
            close(fd)
            throw error
        }
    }

    /// Runs a vault call, mapping its errors for class `cls`.
    static func vaultCall<Result>(_ cls: FileProtectionClass, path: String, _ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as VaultError {
            switch error {
            case .classKeyUnavailable(_, .deviceKeyMissing): throw ProtectedFileError.wrongDevice(cls, path: path)
            case .classKeyUnavailable(_, let reason): throw ProtectedFileError.locked(cls, reason)
            case .notSetUp: throw ProtectedFileError.locked(cls, .notSetUp)
            case let .insecurePermissions(path, reason, fix): throw ProtectedFileError.permission(path: path, reason: "\(reason); fix it with: \(fix)")
            default: throw ProtectedFileError.vault(error)
            }
        }
    }

    /// Runs an age call on `path`, mapping its errors.
    func mapAge<Result>(path: String, _ cls: FileProtectionClass, _ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as AgeError {
            throw Self.map(error, path: path, cls)
        } catch let failure as SecureFile.Failure {
            throw ClassKeyTable.map(failure, path: path)
        }
    }

    static func map(_ error: AgeError, path: String, _ cls: FileProtectionClass) -> ProtectedFileError {
        switch error {
        case .headerMACFailure:
            return .tampered(path: path, reason: "the header MAC does not match (the class stanza or a wrapped key was altered)")
        case .noMatchingIdentity:
            return .tampered(path: path, reason: "its file key is not wrapped to this vault's \(cls.name) key (the class stanza was changed, or the file was written under another vault)")
        case .payloadFailure(let why): return .tampered(path: path, reason: "the payload does not authenticate: \(why)")
        case .headerFailure(let why): return .tampered(path: path, reason: "the header is malformed: \(why)")
        case .io(let why): return .io(why)
        case .invalidArgument(let why): return .invalidArgument(why)
        default: return .io("\(error)")
        }
    }
}
