import Foundation
import GRDB
import Cipher
import Vault
import ProtectedFiles
import CSQLiteCodec

extension ProtectedDatabase {
    /// What ``status(at:files:)`` reports (no key needed).
    public struct Status: Sendable, Equatable {
        /// The class of the key record.
        public var protection: FileProtectionClass
        /// The size of the main file in 4096-byte pages.
        public var pageCount: Int
        /// The size of the WAL in bytes (0 when there is none).
        public var walSize: Int64
        /// The salt at the head of the file (hex), SQLCipher's database identifier.
        public var salt: String
    }

    /// What ``upgrade(at:from:to:files:)`` did.
    public enum UpgradeOutcome: Sendable, Equatable {
        case changed
        /// The database already was of the target class (nothing was written).
        case alreadyInClass
    }

    // MARK: Key record

    /// Reads the key record of the database at `path` and the key that opens the file in
    /// place (the one whose salt the file starts with), checking page 1 under it.
    /// `unfinishedRekey`: the record holds a second key (a rekey stopped part-way).
    static func readKey(at path: String, files: ProtectedFiles, expecting: FileProtectionClass?)
        throws(ProtectedDatabaseError) -> (key: KeyRecord.Key, protection: FileProtectionClass, unfinishedRekey: Bool) {
        let keyPath = keyPath(for: path)
        guard let status = linkStatus(path) else { throw ProtectedDatabaseError.notFound(path: path) }
        guard status.kind == .regular else {
            throw ProtectedDatabaseError.notProtectedDatabase(path: path, reason: "not a regular file")
        }
        guard linkStatus(keyPath) != nil else { throw ProtectedDatabaseError.notFound(path: path) }
        // One open and one read of the record, straight into wipeable memory; its class is
        // checked from the header before any key is used.
        let (secret, cls) = try mapFiles(path: path) {
            try files.readSecret(at: keyPath, maxLength: KeyRecord.maximumEncodedSize) { cls in
                if let expecting, expecting != cls {
                    throw ProtectedDatabaseError.classMismatch(path: path, expected: expecting, found: cls)
                }
            }
        }
        defer { secret.wipe() }
        guard let record = KeyRecord.decode(secret) else {
            throw ProtectedDatabaseError.tampered(path: keyPath, reason: "it is a protected file but not a database key record")
        }
        // Page 1 is read once: its first 16 bytes are the salt that picks the key, and the
        // whole page is checked under that key.
        let (page, size) = try firstPage(path)
        defer { page.wipe() }
        let salt = page.withUnsafeBytes { Array($0.prefix(KeyRecord.saltSize)) }
        guard size >= Int64(SF_DB_PAGE_SIZE) else {
            throw ProtectedDatabaseError.notProtectedDatabase(path: path, reason: "the file is shorter than one page (\(size) bytes)")
        }
        guard size % Int64(SF_DB_PAGE_SIZE) == 0 else {
            throw ProtectedDatabaseError.tampered(path: path, reason: "its size (\(size) bytes) is not a whole number of pages")
        }
        guard let key = record.keys.first(where: { $0.salt == salt }) else { throw ProtectedDatabaseError.keyMismatch(path: path) }
        let check = key.key.withUnsafeBytes { raw in
            page.withUnsafeBytes { pageBytes in
                sf_db_codec_check_page_one(pageBytes.bindMemory(to: UInt8.self).baseAddress, pageBytes.count,
                                           raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
            }
        }
        switch check {
        case 1: break
        case 0: throw ProtectedDatabaseError.tampered(path: path, reason: "its first page does not authenticate under the database key")
        default: throw ProtectedDatabaseError.io("\(path): the first page cannot be read")
        }
        // Two keys: a rekey stopped part-way. Either opens the file in place; the next rekey
        // (which needs the database to itself) keeps the right one before it starts, so no
        // reader ever rewrites the record behind a running rekey.
        return (key, cls, record.keys.count > 1)
    }

    /// Writes the key record atomically: a protected file written at a staging name, synced,
    /// renamed over `keyPath`, and the directory synced.
    static func writeRecord(_ record: KeyRecord, to keyPath: String, protection: FileProtectionClass, files: ProtectedFiles) throws(ProtectedDatabaseError) {
        let bytes = record.encoded()
        let random: [UInt8]
        do { random = try SecretBytes.random(count: 8).withUnsafeBytes { Array($0) } } catch { throw ProtectedDatabaseError.io("\(error)") }
        let staging = keyPath + ".new-" + Encoding.hex(random)
        let databasePath = keyPath.hasSuffix("-key") ? String(keyPath.dropLast(4)) : keyPath
        try mapFiles(path: databasePath, cls: protection) {
            let writer = try files.makeWriter(creating: staging, protection: protection)
            do {
                try bytes.withUnsafeBytes { try writer.write($0) }
                try writer.finish()
            } catch {
                writer.abort()
                throw error
            }
        }
        do { try SecureFile.moveIntoPlace(staging, over: keyPath) } catch {
            unlink(staging)
            throw ProtectedDatabaseError.io("cannot move the key record into place at \(keyPath): \(error)")
        }
    }

    /// The salt (first 16 bytes) and size of a database file, read through SQLite's VFS (a
    /// descriptor of our own, closed after, would drop the locks this process's connections
    /// hold on the file).
    static func fileSalt(_ path: String) throws(ProtectedDatabaseError) -> ([UInt8], Int64) {
        var salt = [UInt8](repeating: 0, count: KeyRecord.saltSize)
        var size: Int64 = 0
        let result = sf_db_codec_read_start(path, &salt, salt.count, &size)
        switch result {
        case SF_DB_OK: return (salt, size)
        case SF_DB_BUSY: return ([], size)
        case SF_DB_NOT_ATTACHED: throw ProtectedDatabaseError.io("cannot open \(path): No such file or directory")
        default: throw ProtectedDatabaseError.io("cannot open \(path): not a regular file, or it cannot be read")
        }
    }

    /// Page 1 of a database file (zeros past the end of a shorter file) and the file's size,
    /// read once through SQLite's VFS (as ``fileSalt(_:)``).
    static func firstPage(_ path: String) throws(ProtectedDatabaseError) -> (SecretBytes, Int64) {
        var size: Int64 = 0
        var result: Int32 = SF_DB_ERROR
        let page = SecretBytes(count: Int(SF_DB_PAGE_SIZE)) { buffer in
            result = sf_db_codec_read_start(path, buffer.bindMemory(to: UInt8.self).baseAddress, buffer.count, &size)
        }
        switch result {
        case SF_DB_OK, SF_DB_BUSY: return (page, size)
        case SF_DB_NOT_ATTACHED: throw ProtectedDatabaseError.io("cannot open \(path): No such file or directory")
        default: throw ProtectedDatabaseError.io("cannot open \(path): not a regular file, or it cannot be read")
        }
    }

    static func mapFiles<T>(path: String, cls: FileProtectionClass? = nil, _ body: () throws -> T) throws(ProtectedDatabaseError) -> T {
        do {
            return try body()
        } catch {
            guard let error = error as? ProtectedFileError else { throw ProtectedDatabaseError.mapping(error) }
            switch error {
            case let .locked(found, _): throw ProtectedDatabaseError.locked(path: path, cls ?? found)
            case let .tampered(file, reason): throw ProtectedDatabaseError.tampered(path: file, reason: reason)
            case .io(let why) where why.contains("No space left") || why.contains("ENOSPC"):
                throw ProtectedDatabaseError.diskFull(path: path)
            default: throw ProtectedDatabaseError.protectedFile(error)
            }
        }
    }

    // MARK: Operations without opening

    /// The class, size and salt of the database at `path` (reads no key).
    /// - Parameters:
    ///   - path: The database's path.
    ///   - files: The protected files of the vault, which keep the key record.
    /// - Returns: The database's status.
    /// - Throws: ``ProtectedDatabaseError``.
    public static func status(at path: String, files: ProtectedFiles) throws(ProtectedDatabaseError) -> Status {
        guard linkStatus(path) != nil, linkStatus(keyPath(for: path)) != nil else { throw ProtectedDatabaseError.notFound(path: path) }
        let cls = try mapFiles(path: path) { try files.protection(ofItemAt: keyPath(for: path)) }
        let (salt, size) = try fileSalt(path)
        // A plain SQLite file beside a key record (copied, or left by another database): its
        // first bytes are SQLite's header, not a salt.
        if salt == Array("SQLite format 3\u{0}".utf8) {
            throw ProtectedDatabaseError.notProtectedDatabase(path: path, reason: "it is a plain SQLite database (it starts with SQLite's header, not a salt), so \(keyPath(for: path)) is not its key record")
        }
        let walSize = linkStatus(path + "-wal")?.size ?? 0
        return Status(protection: cls, pageCount: Int(size / Int64(SF_DB_PAGE_SIZE)), walSize: walSize, salt: Encoding.hex(salt))
    }

    /// Changes the class of the database at `path` from `from` to `to` by re-wrapping its key
    /// record (the pages are not touched): atomic, the record is of the old class or the new
    /// one, never neither. Needs `from` readable and `to` writable now.
    /// - Parameters:
    ///   - path: The database's path.
    ///   - from: The class it must be of now.
    ///   - to: Its new class.
    ///   - files: The protected files of the vault, which keep the key record.
    /// - Returns: Whether the class changed or already was `to`.
    /// - Throws: ``ProtectedDatabaseError/classMismatch(path:expected:found:)`` when the
    ///   database is of neither class.
    @discardableResult
    public static func upgrade(at path: String, from: FileProtectionClass, to: FileProtectionClass, files: ProtectedFiles) throws(ProtectedDatabaseError) -> UpgradeOutcome {
        let keyPath = keyPath(for: path)
        guard linkStatus(path) != nil, linkStatus(keyPath) != nil else { throw ProtectedDatabaseError.notFound(path: path) }
        let cls = try mapFiles(path: path) { try files.protection(ofItemAt: keyPath) }
        if cls == to { return .alreadyInClass }
        guard cls == from else { throw ProtectedDatabaseError.classMismatch(path: path, expected: from, found: cls) }
        // The record must open this database before it is carried to the new class.
        _ = try readKey(at: path, files: files, expecting: from)   // the record opens this database
        try mapFiles(path: path, cls: from) { try files.setProtection(to, ofItemAt: keyPath) }
        return .changed
    }

    /// Takes in a database written by SQLCipher 4 with a raw key (`PRAGMA key = "x'…'"`, default
    /// SQLCipher 4 settings): writes its key record of class `protection` and switches it to
    /// WAL mode. The file must not be open elsewhere.
    /// - Parameters:
    ///   - path: The SQLCipher 4 database.
    ///   - key: Its 32-byte raw key.
    ///   - protection: The class of the key record to write.
    ///   - files: The protected files of the vault, which keep the key record.
    /// - Throws: ``ProtectedDatabaseError/tampered(path:reason:)`` when page 1 does not
    ///   authenticate under `key` (another key, or other SQLCipher settings).
    public static func adopt(at path: String, key: SecretBytes, protection: FileProtectionClass, files: ProtectedFiles) throws(ProtectedDatabaseError) {
        let fullPath = try codecPath(path)
        guard key.count == KeyRecord.keySize else { throw ProtectedDatabaseError.invalidArgument("a raw key is 32 bytes") }
        let keyPath = keyPath(for: path)
        if FileManager.default.fileExists(atPath: keyPath) || isLink(keyPath) { throw ProtectedDatabaseError.exists(path: keyPath) }
        if FileManager.default.fileExists(atPath: path + "-journal") {
            throw ProtectedDatabaseError.invalidArgument("\(path) has a rollback journal (\(path)-journal): open it once with SQLCipher so it rolls back, then adopt it")
        }
        if let wal = linkStatus(path + "-wal"), wal.size > 32 {
            // SQLCipher's WAL checksums cover ciphertext, this codec's plaintext: its frames
            // would be dropped by the recovery. They must reach the main file first.
            throw ProtectedDatabaseError.invalidArgument("\(path) has a write-ahead log with transactions (\(path)-wal): run `PRAGMA wal_checkpoint(TRUNCATE)` in SQLCipher, close it, then adopt it")
        }
        let (salt, size) = try fileSalt(path)
        guard size >= Int64(SF_DB_PAGE_SIZE), size % Int64(SF_DB_PAGE_SIZE) == 0 else {
            throw ProtectedDatabaseError.notProtectedDatabase(path: path, reason: "its size (\(size) bytes) is not a whole number of 4096-byte pages")
        }
        let check = key.withUnsafeBytes { raw in sf_db_codec_check_first_page(path, raw.bindMemory(to: UInt8.self).baseAddress, raw.count, nil) }
        guard check == 1 else {
            throw ProtectedDatabaseError.tampered(path: path, reason: "its first page does not authenticate under this key (SQLCipher 4 defaults and a raw key are needed)")
        }
        // SQLCipher leaves the file as the umask made it (0644): 0600 before anything else, and
        // so its WAL and shared memory, which SQLite creates with the main file's mode.
        privateModes(path)
        let entry = KeyRecord.Key(salt: salt, key: key.slice(0..<key.count))
        try writeRecord(KeyRecord(keys: [entry]), to: keyPath, protection: protection, files: files)
        do throws(ProtectedDatabaseError) {
            try attach(fullPath, entry)
            defer { _ = sf_db_codec_detach(fullPath) }
            try makeDatabase(at: path, fullPath: fullPath, creating: false)
        } catch {
            unlink(keyPath)
            throw error
        }
    }

    /// The raw key of the database at `path` (32 bytes, in locked memory), for an independent
    /// reader such as SQLCipher (`PRAGMA key = "x'…'"`). Whoever holds it reads the database
    /// without the vault.
    /// - Parameters:
    ///   - path: The database's path.
    ///   - files: The protected files of the vault, which keep the key record.
    /// - Returns: The raw key.
    /// - Throws: ``ProtectedDatabaseError``.
    package static func exportKey(at path: String, files: ProtectedFiles) throws(ProtectedDatabaseError) -> SecretBytes {
        let key = try readKey(at: path, files: files, expecting: nil).key.key
        if let wal = linkStatus(path + "-wal"), wal.size > 32 {
            // Transactions still in the WAL (after a kill): into the main file first, the one
            // part SQLCipher reads (it would drop this WAL, whose checksums are not its own).
            let db = try open(at: path, files: files, kind: .queue)
            try db.close()
        }
        return key
    }

    /// Re-encrypts every page under a new key and salt (for a database key that leaked), crash
    /// safely: the key record first holds both keys, the database is written anew beside the
    /// old one (`PATH-rekey`) and renamed over it, then the record keeps the new key only. A
    /// kill at any point leaves a database that opens (the record may then hold both keys until
    /// the next rekey, which keeps the key of the file in place before it starts). No other
    /// connection may have the database open (in this process or another).
    /// - Parameters:
    ///   - path: The database's path.
    ///   - files: The protected files of the vault, which keep the key record.
    /// - Throws: ``ProtectedDatabaseError``.
    public static func rekey(at path: String, files: ProtectedFiles) throws(ProtectedDatabaseError) {
        let fullPath = try codecPath(path)
        if sf_db_codec_is_live(fullPath) != 0 {
            throw ProtectedDatabaseError.invalidArgument("\(path) is open in this process; close it before a rekey")
        }
        let keyPath = keyPath(for: path)
        let (old, cls, unfinished) = try readKey(at: path, files: files, expecting: nil)
        let staging = rekeyPath(for: path)
        unlink(staging)
        for stale in [staging + "-wal", staging + "-shm"] { unlink(stale) }
        if unfinished {
            // A rekey stopped part-way left both keys: keep the one of the file in place first.
            try writeRecord(KeyRecord(keys: [old]), to: keyPath, protection: cls, files: files)
        }
        let new = try KeyRecord.fresh()
        let stagingFull = try codecPath(staging)
        try writeRecord(KeyRecord(keys: [old, new]), to: keyPath, protection: cls, files: files)
        try testHooks.run(testHooks.afterBothKeys)
        try attach(fullPath, old)
        var attachedStaging = false
        do throws(ProtectedDatabaseError) {
            defer { _ = sf_db_codec_detach(fullPath) }
            try attach(stagingFull, new)
            attachedStaging = true
            var config = Configuration()
            config.prepareDatabase { db in try prepare(db, fullPath: fullPath, guardStatements: false) }
            config.journalMode = .wal
            try makeDatabase(at: staging, fullPath: stagingFull)
            try mapSQLite(path: path) {
                let queue = try DatabaseQueue(path: path, configuration: config)
                _ = try queue.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
                var stagingConfig = Configuration()
                stagingConfig.prepareDatabase { db in try prepare(db, fullPath: stagingFull, guardStatements: false) }
                stagingConfig.journalMode = .wal
                let copy = try DatabaseQueue(path: staging, configuration: stagingConfig)
                // Every page read through the old key and written under the new one.
                try queue.backup(to: copy)
                _ = try copy.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
                try copy.close()
                try queue.close()
            }
            for stale in [staging + "-wal", staging + "-shm"] { unlink(stale) }
            try testHooks.run(testHooks.beforeRename)
            for stale in [path + "-wal", path + "-shm"] { unlink(stale) }
            do { try SecureFile.moveIntoPlace(staging, over: path) } catch {
                throw ProtectedDatabaseError.io("cannot move \(staging) over \(path): \(error)")
            }
        } catch {
            if attachedStaging { _ = sf_db_codec_detach(stagingFull) }
            unlink(staging)
            throw error
        }
        _ = sf_db_codec_detach(stagingFull)
        try testHooks.run(testHooks.afterRename)
        try writeRecord(KeyRecord(keys: [new]), to: keyPath, protection: cls, files: files)
    }

    /// Points where tests stop a rekey (by a throw, or the command line's kill -9 in debug builds).
    package final class TestHooks: @unchecked Sendable {
        package var afterBothKeys: (() throws -> Void)?
        package var beforeRename: (() throws -> Void)?
        package var afterRename: (() throws -> Void)?

        /// Runs `hook`; what it throws becomes ``ProtectedDatabaseError/io(_:)`` with its message.
        func run(_ hook: (() throws -> Void)?) throws(ProtectedDatabaseError) {
            do { try hook?() } catch { throw ProtectedDatabaseError.io("\(error)") }
        }
    }
    package static let testHooks = TestHooks()
}
