import Foundation
import Crypto
import GRDB
import Cipher
import CPlatform
import Vault

/// A keychain kept in the application's own storage: service / account / password items, as
/// the system keychain has them, in one SQLite database (WAL mode) under `directory`.
///
/// - Rows are keyed by blind indexes (HMAC-SHA256) of the item's service and names; names and
///   value are sealed together under the class key of the item's accessibility, bound to the
///   accessibility and the row key, so nothing in the file reveals a name or a value and records
///   cannot be moved between items.
/// - Writes are coalesced: setters and deletes return at once, a background writer commits them
///   in one transaction within ``Configuration/coalescingInterval``, and ``flush()`` returns once
///   they are durable. Reads see the caller's pending writes.
/// - Several threads and processes may use one keychain at once; each commit is one SQLite
///   transaction (`BEGIN IMMEDIATE`, `synchronous=FULL`), so a crash loses nothing acknowledged by
///   ``flush()``.
///
/// Thread safety: the in-memory state (pending writes, read cache, generation counters, sealing
/// keys) sits behind one lock, `lock`; the SQLite connections are GRDB serial queues. The class
/// is therefore `@unchecked Sendable`.
public final class Keychain: @unchecked Sendable {
    /// Settings of a keychain.
    public struct Configuration: Sendable {
        /// The database file name inside the directory.
        public var fileName: String = "keychain.sqlite"
        /// How long writes may wait before the background writer commits them (default 50 ms).
        public var coalescingInterval: Duration = .milliseconds(50)
        /// How long a connection waits for another process's lock before failing (default 30 s).
        public var busyTimeout: Duration = .seconds(30)
        /// Opt-in reinstall detection: a path that goes away when the application is reinstalled
        /// (for example a file in its bundle or cache directory). When the marker is missing or
        /// names another installation, every item is wiped on open as stale. nil turns it off.
        public var installMarkerPath: String?
        /// The most rows the read cache holds before it starts over.
        public var readCacheLimit: Int = 1_000_000
        /// Whether a keychain of format 2 (written by earlier releases) is upgraded when opened.
        /// The upgrade binds every row's class as the file states it, so a writer of the data
        /// directory who kept a format-2 file's check value (any copy of a keychain of this
        /// device key from before its upgrade) could relabel a format-3 file as format 2 with
        /// rows of their choosing. Set it to false once every keychain of the application has
        /// been opened by this version: a format-2 file is then refused as corrupted.
        public var upgradesFormat2 = true

        /// The defaults.
        public init() {}
    }

    /// The directory holding the database.
    public let directory: String
    /// The database file.
    public let path: String
    /// The number of items wiped as stale on open by reinstall detection (0 when none or off).
    public private(set) var wipedStaleItems: Int = 0

    private let configuration: Configuration
    private let keySource: any KeychainKeySource
    private let indexKey: SymmetricKey
    private let indexMAC: HMAC<SHA256>
    private let writer: DatabaseQueue
    private let reader: DatabaseQueue
    private let writeQueue = DispatchQueue(label: "securefoundation.keychain.writer", qos: .utility)

    // Guarded by `lock`.
    private let lock = NSLock()
    private var pending: [ItemID: PendingChange] = [:]
    private var inFlight: [ItemID: PendingChange] = [:]
    private var cache: [ItemID: StoredRow] = [:]
    private var commitScheduled = false
    private var knownGeneration: Int64 = 0
    private var lastDataVersion: Int64 = -1
    private var lastWriteError: KeychainError?
    private var closed = false
    private var sealingKeys: [UInt8: (raw: SecretBytes, key: SealingKey, ring: Keyring, fetched: UInt64)] = [:]
    /// The keychain's random id (`keychain_id` in `keychain_meta`), part of every row MAC, so a
    /// row cannot be moved from another keychain of the same device key. Set by `openSchema`.
    private var keychainID: [UInt8] = []
    /// The ids present in the file for services (groups) that saw many existence checks (see
    /// ``exists(_:)``), kept current by this keychain's commits and dropped when another
    /// connection commits.
    private var idSets: [GroupID: Set<ItemID>] = [:]
    private var idSetTotal = 0
    private var existenceChecks: [GroupID: Int] = [:]
    private var largeGroups: Set<GroupID> = []
    private var lastValidation: UInt64 = 0
    // Guarded by `groupLock`.
    private let groupLock = NSLock()
    private var groupCache: [GroupKey: (UInt64, UInt64)] = [:]
    // Used only on `writeQueue`.
    private var lastCheckpoint: UInt64 = 0
    private var checkpointScheduled = false

    // MARK: Opening

    /// Opens (creating if needed) the keychain in `directory`.
    ///
    /// - Parameters:
    ///   - directory: A private directory (created 0700 if missing) that goes away with the application.
    ///   - keySource: Where class keys and the blind-index key come from (usually the Vault's `CryptoManager`).
    ///   - configuration: Settings; see ``Configuration``.
    /// - Throws: ``KeychainError/insecurePermissions(path:detail:)`` for a directory or file open
    ///   to others, ``KeychainError/permissionDenied(path:detail:)``, ``KeychainError/corrupted(_:)``
    ///   for a file that is not a keychain, ``KeychainError/keyUnavailable(_:)`` when the
    ///   blind-index key is not the one the keychain was created with.
    public init(directory: String, keySource: any KeychainKeySource, configuration: Configuration = Configuration()) throws {
        self.directory = directory
        self.path = (directory as NSString).appendingPathComponent(configuration.fileName)
        self.configuration = configuration
        self.keySource = keySource
        do {
            let raw = try keySource.blindIndexKey()
            guard raw.count >= 32 else { throw KeychainError.keyUnavailable("the blind-index key has \(raw.count) bytes; 32 are needed") }
            self.indexKey = raw.symmetricKey
            self.indexMAC = HMAC<SHA256>(key: indexKey)
        } catch {
            throw KeychainError.fromKeySource(error)
        }
        do {
            try SecureFile.ensurePrivateDirectory(directory)
        } catch {
            throw KeychainError.fromFile(error, path: directory)
        }
        try KeychainFiles.prepareDatabaseFile(path)

        var config = GRDB.Configuration()
        config.busyMode = .timeout(TimeInterval(configuration.busyTimeout.components.seconds))
        config.journalMode = .wal
        config.label = "securefoundation.keychain"
        config.prepareDatabase { db in
            // A 32 MiB page cache keeps a large coalesced batch from spilling to the WAL before it
            // commits. (synchronous = FULL is set once GRDB's WAL set-up has run, below.)
            try db.execute(sql: "PRAGMA cache_size = -32768")
            // Checkpoints run on the writer queue after commits (see checkpointIfDue), not
            // inside the commit that flush() waits for.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        do {
            // Both with synchronous = FULL; on a full disk, reads through one exclusive connection
            // (see DiskFull.openConnections).
            (writer, reader) = try DiskFull.openConnections(path: path, configuration: config)
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        try KeychainFiles.checkSidecars(path)
        try openSchema()
    }

    /// Opens (creating if needed) the keychain of a crypto manager: `keychain.sqlite` in the
    /// manager's directory, with the manager as key source.
    /// - Parameters:
    ///   - manager: The Vault module's crypto manager.
    ///   - configuration: Settings; see ``Configuration``.
    /// - Throws: as ``init(directory:keySource:configuration:)``.
    public convenience init(manager: CryptoManager, configuration: Configuration = Configuration()) throws {
        try self.init(directory: manager.directory, keySource: manager, configuration: configuration)
    }

    private func openSchema() throws {
        let check = ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: indexKey)
        let marker = configuration.installMarkerPath
        do {
            let wiped: Int = try writer.inDatabase { db in
                var wiped = 0
                try db.inTransaction(.immediate) {
                    for sql in KeychainSchema.createStatements { try db.execute(sql: sql) }
                    let format = try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'")
                    if format == nil, try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_meta") ?? 0 > 0 {
                        throw KeychainError.corrupted("\(path) has keychain metadata without a format: it was changed by someone without the keychain's keys (restore it from a backup)")
                    }
                    if format == 2 && !configuration.upgradesFormat2 {
                        throw KeychainError.corrupted("\(path) has keychain format 2, which this application no longer upgrades (Configuration.upgradesFormat2 is off): a file put back from before its upgrade, or changed by someone without the keychain's keys")
                    }
                    if let format {
                        guard format == KeychainSchema.formatVersion || format == 2 else {
                            let hint = format < KeychainSchema.formatVersion
                                ? " (format 1 was written only by pre-release builds: read its items with the build that wrote it and store them again)"
                                : " (written by a newer version of the library)"
                            throw KeychainError.corrupted("\(path) has keychain format \(format); this library reads format \(KeychainSchema.formatVersion)\(hint)")
                        }
                    } else {
                        try db.execute(sql: "INSERT INTO keychain_meta (key, value) VALUES ('format', ?), ('generation', 0), ('index_key_check', ?), ('keychain_id', ?)",
                                       arguments: [KeychainSchema.formatVersion, check, Data(try Keychain.newKeychainID())])
                    }
                    // The check value depends on the format, so a format-3 file relabelled as format
                    // 2 (to have its rows bound again by the upgrade) fails here: a format-2 check
                    // exists only in files written before the upgrade.
                    let expected = ItemCodec.indexKeyCheck(format: format ?? KeychainSchema.formatVersion, key: indexKey)
                    guard let stored = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'"),
                          ConstantTime.equals(Array(stored), Array(expected)) else {
                        if format == 2, let stored = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'"),
                           ConstantTime.equals(Array(stored), Array(check)) {
                            throw KeychainError.corrupted("\(path) says format 2 but was written in format 3: it was changed by someone without the keychain's keys (restore it from a backup)")
                        }
                        throw KeychainError.keyUnavailable("the blind-index key is not the one \(path) was created with (another device key?); the items cannot be found with it")
                    }
                    if format == 2 {
                        try db.execute(sql: "INSERT OR REPLACE INTO keychain_meta (key, value) VALUES ('keychain_id', ?)",
                                       arguments: [Data(try Keychain.newKeychainID())])
                    }
                    guard let id = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'keychain_id'"), id.count == 16 else {
                        throw KeychainError.corrupted("\(path) has no valid keychain_id in keychain_meta: it was changed by someone without the keychain's keys (restore it from a backup)")
                    }
                    keychainID = Array(id)
                    if format == 2 { try upgradeFromFormat2(db) }
                    if let marker {
                        wiped = try Reinstall.check(db: db, markerPath: marker)
                    }
                    return .commit
                }
                return wiped
            }
            wipedStaleItems = wiped
            let generation = try reader.inDatabase { db in try Int64.fetchOne(db, sql: KeychainSchema.generationSQL) ?? 0 }
            knownGeneration = generation
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Format 2 to 3, inside the opening transaction (so all or nothing): adds the `row_mac`
    /// column and binds every row's class to it. It needs only the blind-index key, so a locked
    /// vault does not stop it. The rows of a format-2 file are taken at their word here, once:
    /// a class changed in the file before the upgrade cannot be told from the real one.
    private func upgradeFromFormat2(_ db: Database) throws {
        let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('keychain_items')")
        if !columns.contains("row_mac") { try db.execute(sql: KeychainSchema.addMACColumnSQL) }
        let rows = try GRDB.Row.fetchCursor(db, sql: "SELECT item_id, accessibility, sealed FROM keychain_items")
        var tags: [(Data, Data)] = []
        while let row = try rows.next() {
            // A row that does not decode keeps no MAC and is reported as damaged when read.
            let idValue: DatabaseValue = row[0], codeValue: DatabaseValue = row[1], sealedValue: DatabaseValue = row[2]
            guard case .blob(let idData) = idValue.storage, let id = ItemID(idData),
                  case .int64(let code) = codeValue.storage, let accessibility = UInt8(exactly: code),
                  case .blob(let sealed) = sealedValue.storage else { continue }
            let mac = rowMAC(id, accessibility, Array(sealed))
            tags.append((Data(mac), idData))
        }
        for (mac, id) in tags { try db.execute(sql: KeychainSchema.setMACSQL, arguments: [mac, id]) }
        try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'format'", arguments: [KeychainSchema.formatVersion])
        try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'index_key_check'",
                       arguments: [ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: indexKey)])
    }

    /// 16 random bytes.
    private static func newKeychainID() throws -> [UInt8] {
        do { return try SecureRandom.bytes(16) } catch { throw KeychainError.keyUnavailable("no randomness for the keychain id: \(error)") }
    }

    /// The row MAC of this keychain (``ItemCodec/rowMAC(keychain:id:accessibility:sealed:prototype:)``).
    private func rowMAC(_ id: ItemID, _ accessibility: UInt8, _ sealed: [UInt8]) -> [UInt8] {
        ItemCodec.rowMAC(keychain: keychainID, id: id, accessibility: accessibility, sealed: sealed, prototype: indexMAC)
    }

    /// The `synchronous` setting of the writer and reader connections (2 is FULL), for tests.
    func synchronousSettings() throws -> (writer: Int, reader: Int) {
        let writerSetting = try writer.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        let readerSetting = try reader.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        return (writerSetting, readerSetting)
    }

    // MARK: Keys

    /// The row key of an item: its class, its group's blind index and its name index (16 bytes each).
    private func itemID(_ key: ItemKey) -> ItemID {
        ItemID(itemClass: key.itemClass.rawValue, group: group(key.itemClass, key.groupName),
               name: ItemCodec.mac16(ItemCodec.nameIndexInput(key), prototype: indexMAC))
    }

    /// The blind index of a service (or server) within a class: the middle of its items' ids.
    /// Applications use few services, so the last ``groupCacheLimit`` are remembered (saving one
    /// HMAC per call); the cache holds the names the caller passed, never anything from the file.
    private func group(_ itemClass: ItemClass, _ name: String) -> (UInt64, UInt64) {
        let key = GroupKey(itemClass: itemClass.rawValue, name: name)
        if let known = groupLock.withLock({ groupCache[key] }) { return known }
        let value = ItemCodec.mac16(ItemCodec.serviceIndexInput(itemClass: itemClass, name: name), prototype: indexMAC)
        groupLock.withLock {
            if groupCache.count >= Keychain.groupCacheLimit { groupCache.removeAll(keepingCapacity: true) }
            groupCache[key] = value
        }
        return value
    }

    private struct GroupKey: Hashable {
        let itemClass: UInt8
        let name: String
    }

    private static let groupCacheLimit = 256

    /// The sealing key of an accessibility code. For whenUnlocked the key source is asked every
    /// time (so a lock is honoured at once) and nothing is kept: the key lives only as long as the
    /// operation, so no copy of it outlasts a `lock()`. afterFirstUnlock and always keys, once
    /// obtained, stay available for the life of the process by definition, so they are kept; the
    /// source is asked again when the kept key is older than ``classKeyRecheckInterval``, so a
    /// class-key rotation made by another process is followed within that time (until then new
    /// items are sealed under the key it retired, which still opens them).
    private func sealingKey(_ code: UInt8) throws -> (key: SealingKey, ring: Keyring) {
        let accessibility = try ItemCodec.accessibility(code: Int64(code))
        let now = DispatchTime.now().uptimeNanoseconds
        if accessibility.protectionClass != .whenUnlocked, let cached = lock.withLock({ sealingKeys[code] }),
           now &- cached.fetched < Keychain.classKeyRecheckInterval {
            return (cached.key, cached.ring)
        }
        let raw: SecretBytes
        do {
            raw = try keySource.classKey(for: accessibility)
        } catch {
            lock.withLock { sealingKeys[code] = nil }
            throw KeychainError.fromKeySource(error)
        }
        do {
            let key = try SealingKey(key: raw)
            let ring = try Keyring([key])
            if accessibility.protectionClass != .whenUnlocked {
                lock.withLock { sealingKeys[code] = (raw, key, ring, now) }
            }
            return (key, ring)
        } catch {
            throw KeychainError.keyUnavailable("the \(accessibility.name) class key is not a 32-byte key")
        }
    }

    /// How long a kept afterFirstUnlock or always key is used before the source is asked again
    /// (nanoseconds): one second.
    static let classKeyRecheckInterval: UInt64 = 1_000_000_000

    /// Every key that may open a record of the class: the current key, asked of the source again
    /// (a rotation elsewhere replaces it), then the retired ones, newest first.
    private func openingRing(_ code: UInt8) throws -> Keyring {
        let accessibility = try ItemCodec.accessibility(code: Int64(code))
        lock.withLock { sealingKeys[code] = nil }
        let current = try sealingKey(code).key
        let retired: [SecretBytes]
        do {
            retired = try keySource.retiredClassKeys(for: accessibility)
        } catch {
            throw KeychainError.fromKeySource(error)
        }
        var keys = [current]
        for raw in retired {
            guard let key = try? SealingKey(key: raw), !keys.contains(where: { $0.id == key.id }) else { continue }
            keys.append(key)
        }
        do {
            return try Keyring(keys)
        } catch {
            throw KeychainError.keyUnavailable("the \(accessibility.name) class keys do not form a keyring: \(error)")
        }
    }

    // MARK: Class-key rotation

    /// What a re-seal did.
    public struct ResealReport: Sendable, Equatable {
        /// Items sealed again under their class's current key.
        public var resealed: Int
        /// Items that could not be opened (a damaged row, or one sealed under a key that no
        /// longer exists), by item id in hex: they are left as they are. Delete them (by name,
        /// with their service, or with ``deleteAll()``) or restore the file from a backup.
        public var unreadable: [String]

        /// - Parameters: see the properties.
        public init(resealed: Int, unreadable: [String]) {
            self.resealed = resealed
            self.unreadable = unreadable
        }
    }

    /// Replaces the class keys at the key source (for a `CryptoManager`: a new class master and a
    /// new always key, see `CryptoManager.rotateClassKeys()`), then re-seals every item under
    /// the new keys. Afterwards an old copy of the vault's state or of `always.key` opens no
    /// item, even with the passcode of the time.
    ///
    /// Items still sealed under an earlier key (an interrupted run) are re-sealed first, so no
    /// item is ever more than one generation behind; the source keeps a bounded number of
    /// retired generations. Crash safety: each batch of re-sealed rows is one transaction that
    /// replaces a row only if it is still the row that was read, and the retired keys open the
    /// rest; so a kill at any moment leaves every item readable. ``resealUnderCurrentClassKeys()``
    /// (or this again) finishes an interrupted run. Damaged items do not stop it: they are
    /// reported and left alone.
    /// - Returns: The items re-sealed (before and after the rotation) and those that could not be opened.
    /// - Throws: ``KeychainError/invalidArgument(_:)`` when the key source cannot rotate,
    ///   ``KeychainError/interactionNotAllowed(_:_:)`` while the vault is locked, database errors.
    @discardableResult
    public func rotateClassKeys() throws -> ResealReport {
        guard let source = keySource as? any ClassKeyRotatingSource else {
            throw KeychainError.invalidArgument("this keychain's key source cannot rotate class keys (it does not conform to ClassKeyRotatingSource)")
        }
        let before = try resealUnderCurrentClassKeys()
        do {
            try source.rotateClassKeys()
        } catch {
            throw KeychainError.fromKeySource(error)
        }
        lock.withLock { sealingKeys.removeAll() }
        var after = try resealUnderCurrentClassKeys()
        after.resealed += before.resealed
        return after
    }

    /// Re-seals every item whose record names a class key other than its class's current one
    /// (sealed before a class-key rotation), in transactions of at most `resealBatchSize` (256) rows.
    /// A row changed by another writer since it was read is left to that writer; a row that
    /// cannot be opened is reported and left alone. Needs every class key of the items present
    /// (the vault unlocked).
    /// - Returns: The number of items re-sealed (0 when all are current) and the unreadable ones.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)``, database errors.
    @discardableResult
    public func resealUnderCurrentClassKeys() throws -> ResealReport {
        try flush()
        lock.withLock { sealingKeys.removeAll() }
        var batch: [(old: StoredRow, new: StoredRow)] = []
        var report = ResealReport(resealed: 0, unreadable: [])
        for itemClass in ItemClass.allCases {
            // Id by id (a row with a damaged column is skipped, not the end of the run).
            for id in try ids(itemClass: itemClass, group: nil) {
                do {
                    guard let row = try lookup(id) else { continue }
                    let current = try sealingKey(row.accessibility).key
                    guard case .key(let keyID)? = try? Sealed.parseHeader(row.sealed).keySource else {
                        throw KeychainError.corrupted("the sealed record does not parse")
                    }
                    guard keyID != current.id else { continue }
                    let context = ItemCodec.itemContext(accessibility: row.accessibility, id: row.id)
                    let sealed = try withOpened(row, describing: "an item (id \(Encoding.hex(row.id.bytes.prefix(9))))") { plain, _, _ in
                        do {
                            return try Sealed.seal(plain, with: current, context: context)
                        } catch {
                            throw KeychainError.keyUnavailable("sealing failed: \(error)")
                        }
                    }
                    var resealed = row
                    resealed.sealed = sealed
                    resealed.mac = rowMAC(row.id, row.accessibility, sealed)
                    batch.append((row, resealed))
                } catch KeychainError.corrupted {
                    report.unreadable.append(Encoding.hex(id.bytes))
                    continue
                }
                if batch.count >= Keychain.resealBatchSize {
                    report.resealed += try commitReseal(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        report.resealed += try commitReseal(batch)
        return report
    }

    /// Rows re-sealed per transaction.
    static let resealBatchSize = 256

    /// Writes re-sealed rows in one transaction, each only where the row is still as it was read.
    private func commitReseal(_ batch: [(old: StoredRow, new: StoredRow)]) throws -> Int {
        guard !batch.isEmpty else { return 0 }
        do {
            return try writer.inDatabase { db -> Int in
                var changed = 0
                try db.inTransaction(.immediate) {
                    for (old, new) in batch {
                        try db.execute(sql: KeychainSchema.resealSQL,
                                       arguments: [Data(new.sealed), Data(new.mac), old.id.data, Data(old.sealed)])
                        changed += db.changesCount
                    }
                    _ = try Int64.fetchOne(db, sql: KeychainSchema.bumpGenerationSQL)
                    return .commit
                }
                return changed
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    // MARK: Sealing

    private func makeRow(key: ItemKey, value: UnsafeRawBufferPointer, accessibility: Accessibility,
                         label: String?, comment: String?, created: Double?, now: Double) throws -> StoredRow {
        let code = ItemCodec.code(accessibility)
        let sealing = try sealingKey(code).key
        let id = itemID(key)
        var names = ItemCodec.encodeNames(key: key, label: label, comment: comment)
        var plain = ItemCodec.itemPlaintext(names: names, value: value)
        defer {
            Keychain.zero(&names)
            Keychain.zero(&plain)
        }
        do {
            let sealed = try Sealed.seal(plain, with: sealing, context: ItemCodec.itemContext(accessibility: code, id: id))
            return StoredRow(id: id, accessibility: code, sealed: sealed, created: created, modified: now,
                             mac: rowMAC(id, code, sealed))
        } catch {
            throw KeychainError.keyUnavailable("sealing failed: \(error)")
        }
    }

    /// When a ciphertext names a key id the class key does not have, the data may be intact but
    /// sealed under a class key that no longer exists (a vault erased, an always-class key file
    /// replaced); say so beside the tampering explanation.
    static func keyGoneHint(_ error: any Error) -> String {
        if case CipherError.wrongKey = error {
            return ", or it was sealed under a class key that no longer exists (the vault was erased or its key files replaced)"
        }
        return ""
    }

    /// Opens a row's sealed record and hands its plaintext to `body`, zeroing it afterwards.
    private func withOpened<T>(_ row: StoredRow, describing item: @autoclosure () -> String,
                               _ body: (_ plain: [UInt8], _ names: Range<Int>, _ value: Range<Int>) throws -> T) throws -> T {
        // The class binding is checked before the row's accessibility chooses a key: a row whose
        // class, record or id was changed in the file is refused, whatever key it was sealed under.
        let expected = rowMAC(row.id, row.accessibility, row.sealed)
        guard ConstantTime.equals(expected, row.mac) else {
            throw KeychainError.corrupted("\(item()) failed its class binding check: its accessibility, sealed record or id was changed in the file by someone without this keychain's keys")
        }
        let context = ItemCodec.itemContext(accessibility: row.accessibility, id: row.id)
        var plain: [UInt8]
        do {
            do {
                plain = try Sealed.open(row.sealed, with: try sealingKey(row.accessibility).ring, context: context)
            } catch CipherError.wrongKey {
                // Sealed under another generation of the class key: before a rotation (a retired
                // key), or after one made by another process (a newer current key).
                plain = try Sealed.open(row.sealed, with: try openingRing(row.accessibility), context: context)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError.corrupted("\(item()) failed its integrity check (\(error)): changed bytes, or a record moved from another item\(Keychain.keyGoneHint(error))")
        }
        defer { Keychain.zero(&plain) }
        let (names, value) = try ItemCodec.splitItem(plain)
        return try body(plain, names, value)
    }

    private func openValue(_ row: StoredRow, describing item: @autoclosure () -> String) throws -> SecretBytes {
        try withOpened(row, describing: "the item \(item())") { plain, _, value in
            plain.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[value])) }
        }
    }

    private func attributes(of row: StoredRow) throws -> ItemAttributes {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { throw KeychainError.corrupted("unknown item class \(row.itemClass)") }
        let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
        let (key, label, comment) = try withOpened(row, describing: "an item (id \(Encoding.hex(row.id.bytes.prefix(9))))") { plain, names, _ in
            try ItemCodec.decodeNames(plain[names], itemClass: itemClass)
        }
        guard itemID(key) == row.id else {
            throw KeychainError.corrupted("the names of an item do not match its id")
        }
        var created = row.created
        if created == nil {
            created = try? reader.inDatabase { db in
                try Double.fetchOne(db, sql: "SELECT created FROM keychain_items WHERE item_id = ?", arguments: [row.id.data])
            }
        }
        return ItemAttributes(key: key, accessibility: accessibility, label: label, comment: comment,
                              creationDate: Date(timeIntervalSince1970: created ?? row.firstWritten ?? row.modified),
                              modificationDate: Date(timeIntervalSince1970: row.modified))
    }

    /// Zeroes a temporary plaintext buffer (a write the optimiser keeps).
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { sf_secure_zero(base, $0.count) } }
    }

    // MARK: Reading rows

    /// Checks, under `lock`, whether another connection committed since the cache was filled,
    /// and empties the cache if so.
    private func validateCacheLocked(_ db: Database) throws {
        let version = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? 0
        if version == lastDataVersion { return }
        let generation = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.generationSQL)) ?? 0
        lastDataVersion = version
        if generation != knownGeneration {
            cache.removeAll(keepingCapacity: true)
            dropIDSetsLocked()
            knownGeneration = generation
        }
    }

    /// Runs `body` in one read transaction of the reader connection (started with cached
    /// statements, so that a read pays for one lock round rather than one per statement).
    private func inReadTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        // All three prepared before the transaction starts, so that ending it cannot fail on a
        // statement's first preparation (GRDB stops the process if a transaction is left open).
        let begin = try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION")
        let commit = try db.cachedStatement(sql: "COMMIT TRANSACTION")
        let rollback = try db.cachedStatement(sql: "ROLLBACK TRANSACTION")
        try begin.execute()
        do {
            let result = try body()
            try commit.execute()
            return result
        } catch {
            try? rollback.execute()
            throw error
        }
    }

    /// The row of `index`: pending writes first, then the cache, then the database.
    private func lookup(_ index: ItemID) throws -> StoredRow? {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        if let change = pending[index] ?? inFlight[index] {
            if case .put(let row) = change { return row }
            return nil
        }
        do {
            // One trip to the reader: is the cache current, and if the row is not cached, the row.
            // A row not cached is read in the same read transaction as the check (in WAL mode a
            // statement outside a transaction is a read transaction of its own, two fcntl locks).
            let (found, cached) = try reader.inDatabase { db -> (StoredRow?, Bool) in
                if cache[index] != nil {
                    try validateCacheLocked(db)
                    if let row = cache[index] { return (row, true) }
                }
                return try inReadTransaction(db) {
                    try validateCacheLocked(db)
                    guard let row = try GRDB.Row.fetchOne(db.cachedStatement(sql: KeychainSchema.selectOneSQL), arguments: [index.data]) else {
                        return (nil, false)
                    }
                    return (try KeychainSchema.row(from: row), false)
                }
            }
            if let found, !cached {
                if cache.count >= configuration.readCacheLimit { cache.removeAll(keepingCapacity: true) }
                cache[index] = found
            }
            return found
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Whether `index` has an item, for deletes (which must throw itemNotFound at the call).
    ///
    /// Pending writes answer first. Then, for a service that has seen ``idSetThreshold`` checks,
    /// the set of its ids read in one range scan: a delete costs no SQL statement (in WAL mode each
    /// statement outside a transaction is a read transaction of its own, two `fcntl` locks, about
    /// 4 µs, more than the rest of the call). The set is kept current by this keychain's commits
    /// and dropped when another connection has committed, checked at most every 100 ms here and
    /// on every read; an id missing from it is always looked up. So a stale set can only say an
    /// item another process deleted less than 100 ms ago still exists: the delete then succeeds
    /// as a no-op, as it would have a moment earlier. Services with more than
    /// ``idSetGroupLimit`` items are always looked up.
    private func exists(_ index: ItemID) throws -> Bool {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        if let change = pending[index] ?? inFlight[index] {
            if case .put = change { return true }
            return false
        }
        do {
            return try reader.inDatabase { db -> Bool in
                let now = DispatchTime.now().uptimeNanoseconds
                if now &- lastValidation > 100_000_000 {
                    try validateCacheLocked(db)
                    lastValidation = now
                }
                let group = GroupID(index)
                if let ids = idSets[group], ids.contains(index) { return true }
                if cache[index] != nil { return true }
                let found = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.existsSQL), arguments: [index.data]) != nil
                if idSets[group] != nil {
                    if found { idSets[group]!.insert(index); idSetTotal += 1 }
                    return found
                }
                guard !largeGroups.contains(group) else { return found }
                let checks = existenceChecks[group, default: 0] + 1
                existenceChecks[group] = checks
                if checks >= Keychain.idSetThreshold { try loadIDSetLocked(group, db) }
                return found
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Existence checks in one service before its ids are read into a set.
    static let idSetThreshold = 8
    /// The largest service whose ids are kept in a set, and the most ids kept in all.
    static let idSetGroupLimit = 20_000
    static let idSetTotalLimit = 200_000

    /// Reads the ids of one service into ``idSets`` (one range scan), unless it is too large.
    private func loadIDSetLocked(_ group: GroupID, _ db: Database) throws {
        existenceChecks[group] = nil
        let (lower, upper) = ItemID.range(itemClass: group.itemClass, group: (group.g0, group.g1))
        var ids = Set<ItemID>()
        let rows = try Data.fetchCursor(db.cachedStatement(sql: KeychainSchema.selectRangeIDsSQL),
                                        arguments: [lower, upper, Keychain.idSetGroupLimit + 1])
        while let data = try rows.next() {
            guard let id = ItemID(data) else { continue }
            ids.insert(id)
        }
        if ids.count > Keychain.idSetGroupLimit {
            largeGroups.insert(group)
            return
        }
        if idSetTotal + ids.count > Keychain.idSetTotalLimit { dropIDSetsLocked() }
        idSets[group] = ids
        idSetTotal += ids.count
    }

    private func dropIDSetsLocked() {
        idSets.removeAll()
        idSetTotal = 0
        existenceChecks.removeAll()
        largeGroups.removeAll()
    }

    /// Every row of a class (optionally one service or server), database and pending writes merged.
    private func rows(itemClass: ItemClass, group: (UInt64, UInt64)?) throws -> [StoredRow] {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        var result: [ItemID: StoredRow] = [:]
        do {
            try reader.inDatabase { db in
                try validateCacheLocked(db)
                let (lower, upper) = ItemID.range(itemClass: itemClass.rawValue, group: group)
                let rows = try GRDB.Row.fetchCursor(db.cachedStatement(sql: KeychainSchema.selectRangeSQL), arguments: [lower, upper])
                while let row = try rows.next() {
                    let stored = try KeychainSchema.row(from: row)
                    result[stored.id] = stored
                }
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        for overlay in [inFlight, pending] {
            for (index, change) in overlay {
                switch change {
                case .delete: result[index] = nil
                case .put(let row):
                    if row.itemClass == itemClass.rawValue && (group.map { row.id.isIn(group: $0) } ?? true) {
                        result[index] = row
                    } else {
                        result[index] = nil
                    }
                }
            }
        }
        return result.values.sorted { a, b in
            let ta = a.created ?? a.firstWritten ?? a.modified, tb = b.created ?? b.firstWritten ?? b.modified
            if ta != tb { return ta < tb }
            return a.id < b.id
        }
    }

    /// The ids of every item of a class (optionally one service), database and pending writes
    /// merged. No other column is read, so a row with a damaged column is still found (and can
    /// be deleted).
    private func ids(itemClass: ItemClass, group: (UInt64, UInt64)?) throws -> [ItemID] {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        var result = Set<ItemID>()
        do {
            try reader.inDatabase { db in
                let (lower, upper) = ItemID.range(itemClass: itemClass.rawValue, group: group)
                let rows = try Data.fetchCursor(db.cachedStatement(sql: KeychainSchema.selectRangeIDsSQL),
                                                arguments: [lower, upper, Int64.max])
                while let data = try rows.next() {
                    if let id = ItemID(data) { result.insert(id) }
                }
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        for overlay in [inFlight, pending] {
            for (index, change) in overlay where index.itemClass == itemClass.rawValue && (group.map { index.isIn(group: $0) } ?? true) {
                switch change {
                case .delete: result.remove(index)
                case .put: result.insert(index)
                }
            }
        }
        return result.sorted()
    }

    // MARK: Writing

    private func enqueue(_ index: ItemID, _ change: PendingChange) throws {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        // One hash of the id in the common case (a new item): the change goes in first. An
        // update takes the creation date of the change it replaced or of the cached row (nil:
        // the commit keeps the stored date); an item deleted and written again is a new item.
        let replaced = pending.updateValue(change, forKey: index)
        if case .put(var row) = change, row.created == nil {
            switch replaced ?? (inFlight.isEmpty ? nil : inFlight[index]) {
            case .put(let old)?:
                row.created = old.created
                row.firstWritten = old.firstWritten ?? old.modified
            case .delete?: row.created = row.modified
            case nil: if !cache.isEmpty { row.created = cache[index]?.created }
            }
            if row.created != nil || row.firstWritten != nil { pending[index] = .put(row) }
        }
        scheduleLocked(after: configuration.coalescingInterval)
    }

    private func scheduleLocked(after delay: Duration) {
        guard !commitScheduled else { return }
        commitScheduled = true
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        writeQueue.asyncAfter(deadline: .now() + seconds) { [self] in
            do { try commitOnWriteQueue(fromTimer: true) } catch {}
        }
    }

    /// Commits the pending writes in one transaction. Runs on `writeQueue` only.
    /// `fromTimer` is true for the scheduled run; a flush leaves the scheduled run in place (it
    /// will find nothing or the writes made since), so a set-and-flush loop arms one timer per
    /// interval rather than one per flush.
    private func commitOnWriteQueue(fromTimer: Bool = false) throws {
        let batch: [ItemID: PendingChange] = lock.withLock {
            if fromTimer { commitScheduled = false }
            if closed { return [:] }
            inFlight = pending
            // Writes keep arriving at about the same rate: start the next batch at this size.
            pending = Dictionary(minimumCapacity: min(pending.count, 1 << 16))
            return inFlight
        }
        guard !batch.isEmpty else { return }
        let startGeneration: Int64
        do {
            startGeneration = try writer.inDatabase { db -> Int64 in
                var start: Int64 = 0
                try db.inTransaction(.immediate) {
                    let upsert = DirectStatement(try db.cachedStatement(sql: KeychainSchema.upsertSQL))
                    let delete = DirectStatement(try db.cachedStatement(sql: KeychainSchema.deleteSQL))
                    // In index order: neighbouring inserts touch neighbouring B-tree pages.
                    for (index, change) in batch.sorted(by: { $0.key < $1.key }) {
                        switch change {
                        case .put(let row):
                            try upsert.bind(1, id: row.id)
                            try upsert.bind(2, int: Int64(row.accessibility))
                            try upsert.bind(3, blob: row.sealed)
                            try upsert.bind(4, double: row.created)
                            try upsert.bind(5, double: row.modified)
                            try upsert.bind(6, double: row.firstWritten ?? row.modified)
                            try upsert.bind(7, blob: row.mac)
                            try upsert.run(db)
                        case .delete:
                            try delete.bind(1, id: index)
                            try delete.run(db)
                        }
                    }
                    guard let next = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.bumpGenerationSQL)) else {
                        throw KeychainError.corrupted("\(path) has no generation counter in keychain_meta")
                    }
                    start = next - 1
                    return .commit
                }
                return start
            }
        } catch {
            let mapped = KeychainSchema.map(error, path: path)
            lock.withLock {
                for (index, change) in inFlight where pending[index] == nil { pending[index] = change }
                inFlight = [:]
                lastWriteError = mapped
                scheduleLocked(after: .milliseconds(250))
            }
            throw mapped
        }
        defer { checkpointIfDue() }
        // The committed batch is released after the lock is let go (freeing a large batch takes a while).
        let committed: [ItemID: PendingChange] = lock.withLock {
            lastWriteError = nil
            if knownGeneration < startGeneration {
                cache.removeAll(keepingCapacity: true)
                dropIDSetsLocked()
            }
            if knownGeneration <= startGeneration + 1 {
                knownGeneration = startGeneration + 1
                // Cached rows are brought up to date; rows not cached stay uncached (the next read
                // fetches them), so a large batch does not grow the cache by its whole size under
                // the lock.
                if !idSets.isEmpty {
                    for (index, change) in inFlight {
                        let group = GroupID(index)
                        guard idSets[group] != nil else { continue }
                        switch change {
                        case .delete: if idSets[group]!.remove(index) != nil { idSetTotal -= 1 }
                        case .put: if idSets[group]!.insert(index).inserted { idSetTotal += 1 }
                        }
                    }
                }
                if !cache.isEmpty {
                    for (index, change) in inFlight {
                        guard let old = cache[index] else { continue }
                        switch change {
                        case .delete: cache[index] = nil
                        case .put(var row):
                            if row.created == nil { row.created = old.created }
                            cache[index] = row
                        }
                    }
                }
            } else {
                for index in inFlight.keys { cache[index] = nil }
                dropIDSetsLocked()
            }
            defer { inFlight = [:] }
            return inFlight
        }
        _ = committed
    }

    /// Copies committed WAL frames into the database (a passive checkpoint) at most once a second,
    /// as a separate job on `writeQueue`, so that the WAL stays small without a commit (or a
    /// flush) paying for the copy. Runs on `writeQueue` only.
    private func checkpointIfDue() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard !checkpointScheduled, now - lastCheckpoint >= 1_000_000_000 else { return }
        checkpointScheduled = true
        writeQueue.async { [self] in
            checkpointScheduled = false
            lastCheckpoint = DispatchTime.now().uptimeNanoseconds
            guard !lock.withLock({ closed }) else { return }
            _ = try? writer.inDatabase { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        }
    }

    /// Commits every pending write now and returns once it is durable (the commit ran with
    /// `synchronous=FULL`, so the WAL was synced to disk).
    /// - Throws: ``KeychainError/database(_:)`` and the other database errors of the commit; the
    ///   writes stay pending and are retried.
    public func flush() throws {
        try writeQueue.sync {
            try commitOnWriteQueue()
        }
    }

    /// Commits the pending writes durably, then closes the database connections and drops the
    /// class keys and rows held in memory. Afterwards every operation throws
    /// ``KeychainError/database(_:)``. Call it before deleting the
    /// keychain's directory; otherwise the connections close when the object is released.
    /// - Throws: The error of the final commit; the connections are closed regardless.
    public func close() throws {
        let result = Result { try flush() }
        try writeQueue.sync {
            lock.withLock {
                closed = true
                sealingKeys.removeAll()
                cache.removeAll()
            }
            do {
                try writer.close()
                try reader.close()
            } catch {
                throw KeychainSchema.map(error, path: path)
            }
        }
        try result.get()
    }

    /// A keychain released without ``close()`` closes its connections here, each on its own queue
    /// and in a fixed order (writer, then reader), rather than leaving it to the connections'
    /// deinitialisers: dropping an open keychain used to crash the process in optimised builds.
    /// Pending writes cannot be left behind: a scheduled commit keeps the keychain alive until it
    /// has run.
    deinit {
        try? writer.close()
        try? reader.close()
    }

    private func checkOpenLocked() throws {
        if closed { throw KeychainError.database("\(path): the keychain was closed") }
    }

    /// The number of writes not yet committed.
    public var pendingWriteCount: Int { lock.withLock { pending.count + inFlight.count } }

    /// The error of the last background commit, if it failed (the writes stay pending).
    public var lastBackgroundError: KeychainError? { lock.withLock { lastWriteError } }

    // MARK: Core operations

    /// Stores `value` for `key`, replacing an existing item unless `mustNotExist`.
    func store(_ value: UnsafeRawBufferPointer, for key: ItemKey, accessibility: Accessibility,
               label: String? = nil, comment: String? = nil, mustNotExist: Bool = false) throws {
        let index = itemID(key)
        if mustNotExist, try lookup(index) != nil { throw KeychainError.duplicateItem(key.description) }
        let row = try makeRow(key: key, value: value, accessibility: accessibility, label: label, comment: comment,
                              created: nil, now: Date().timeIntervalSince1970)
        try enqueue(index, .put(row))
    }

    /// The value stored for `key`, refused when stored under a class weaker than `minimum`.
    func read(_ key: ItemKey, requiring minimum: Accessibility? = nil) throws -> SecretBytes {
        guard let row = try lookup(itemID(key)) else { throw KeychainError.itemNotFound(key.description) }
        try Keychain.check(row, against: minimum, describing: key.description)
        return try openValue(row, describing: key.description)
    }

    /// Throws ``KeychainError/accessibilityTooWeak(item:stored:required:)`` when `row` is stored
    /// under a class weaker than `minimum`.
    private static func check(_ row: StoredRow, against minimum: Accessibility?, describing item: @autoclosure () -> String) throws {
        guard let minimum else { return }
        let stored = try ItemCodec.accessibility(code: Int64(row.accessibility))
        guard stored.isAtLeast(minimum) else {
            throw KeychainError.accessibilityTooWeak(item: item(), stored: stored, required: minimum)
        }
    }

    /// Deletes `key`'s item; throws itemNotFound when there is none.
    func remove(_ key: ItemKey) throws {
        let index = itemID(key)
        guard try exists(index) else { throw KeychainError.itemNotFound(key.description) }
        try enqueue(index, .delete)
    }

    // MARK: The original API (IMSKeychain)

    /// Stores a password (UTF-8) with accessibility `.always`: readable without unlocking.
    /// - Parameters:
    ///   - password: The password.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when the always-class key is unavailable.
    public func setPassword(_ password: String, forService service: String, account: String) throws {
        var bytes = Array(password.utf8)
        defer { Keychain.zero(&bytes) }
        try bytes.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .always) }
    }

    /// Stores password data with accessibility `.always`.
    /// - Parameters:
    ///   - data: The bytes.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: as ``setPassword(_:forService:account:)``.
    public func setPasswordData(_ data: some DataProtocol, forService service: String, account: String) throws {
        var bytes = Array(data)
        defer { Keychain.zero(&bytes) }
        try bytes.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .always) }
    }

    /// The password of a service and account, as UTF-8 text.
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - minimum: The weakest accessibility accepted (nil: any); an item stored under a
    ///     weaker one is refused.
    /// - Returns: The password (an empty password is returned as "").
    /// - Throws: ``KeychainError/itemNotFound(_:)``, ``KeychainError/notUTF8(_:)``,
    ///   ``KeychainError/interactionNotAllowed(_:_:)``, ``KeychainError/corrupted(_:)``,
    ///   ``KeychainError/accessibilityTooWeak(item:stored:required:)``.
    public func password(forService service: String, account: String, requiring minimum: Accessibility? = nil) throws -> String {
        let key = ItemKey.generic(service: service, account: account)
        let secret = try read(key, requiring: minimum)
        defer { secret.wipe() }
        return try secret.withUnsafeBytes { bytes in
            guard let text = String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) else {
                throw KeychainError.notUTF8(key.description)
            }
            return text
        }
    }

    /// The password data of a service and account.
    /// - Returns: The bytes, in wiped-on-release memory.
    /// - Throws: as ``password(forService:account:requiring:)``.
    public func passwordData(forService service: String, account: String, requiring minimum: Accessibility? = nil) throws -> SecretBytes {
        try read(.generic(service: service, account: account), requiring: minimum)
    }

    /// Stores password data with accessibility `.whenUnlocked`: it needs the crypto manager
    /// unlocked to write and to read.
    /// - Parameters:
    ///   - data: The secret bytes.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` while locked.
    public func setSecurePasswordData(_ data: SecretBytes, forService service: String, account: String) throws {
        try data.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .whenUnlocked) }
    }

    /// Stores a password (UTF-8) with accessibility `.whenUnlocked`.
    /// - Throws: as ``setSecurePasswordData(_:forService:account:)``.
    public func setSecurePassword(_ password: String, forService service: String, account: String) throws {
        try setSecurePasswordData(SecretBytes(utf8: password), forService: service, account: account)
    }

    /// The data of an item stored with ``setSecurePasswordData(_:forService:account:)``. The item
    /// must be of the whenUnlocked class (either variant): one stored under a weaker class is
    /// refused, so a row moved to the always class cannot stand in for it.
    /// - Returns: The bytes.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` while locked,
    ///   ``KeychainError/accessibilityTooWeak(item:stored:required:)``, and as ``password(forService:account:requiring:)``.
    public func securePasswordData(forService service: String, account: String) throws -> SecretBytes {
        try read(.generic(service: service, account: account), requiring: .whenUnlocked)
    }

    /// The text of an item stored with ``setSecurePassword(_:forService:account:)`` (whenUnlocked
    /// required, as ``securePasswordData(forService:account:)``).
    /// - Throws: as ``password(forService:account:requiring:)``.
    public func securePassword(forService service: String, account: String) throws -> String {
        try password(forService: service, account: account, requiring: .whenUnlocked)
    }

    /// Deletes one account of a service (and only that account).
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when there is no such item.
    public func deletePassword(forService service: String, account: String) throws {
        try remove(.generic(service: service, account: account))
    }

    /// Deletes every account of a service (generic passwords). No class key is needed.
    /// - Returns: The number of items deleted.
    /// - Throws: Database errors.
    @discardableResult
    public func deleteAccounts(forService service: String) throws -> Int {
        let ids = try ids(itemClass: .genericPassword, group: group(.genericPassword, service))
        for id in ids { try enqueue(id, .delete) }
        return ids.count
    }

    /// Deletes every item of every class and service.
    /// - Returns: The number of items deleted.
    /// - Throws: Database errors.
    @discardableResult
    public func deleteAll() throws -> Int {
        var count = 0
        for itemClass in ItemClass.allCases {
            let ids = try ids(itemClass: itemClass, group: nil)
            for id in ids { try enqueue(id, .delete) }
            count += ids.count
        }
        return count
    }

    /// The accounts of one service, or of every service (generic passwords).
    /// - Parameter service: The service, or nil for all.
    /// - Returns: The item keys, oldest first.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when an item's class key is
    ///   unavailable (its names are sealed under it); ``KeychainError/corrupted(_:)``.
    public func accounts(forService service: String? = nil) throws -> [ItemKey] {
        let rows = try rows(itemClass: .genericPassword, group: service.map { group(.genericPassword, $0) })
        return try rows.map { try attributes(of: $0).key }
    }

    // MARK: Codable values

    /// Stores a Codable value, encoded with `CanonicalEncoding`.
    /// - Parameters:
    ///   - value: The value.
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - accessibility: Which class key protects it (default `.whenUnlocked`).
    /// - Throws: ``KeychainError/invalidArgument(_:)`` when the value does not encode; otherwise the errors of a write (``KeychainError``).
    public func set<Value: Encodable>(_ value: Value, forService service: String, account: String,
                                      accessibility: Accessibility = .whenUnlocked) throws {
        var data: Data
        do { data = try CanonicalEncoding.encode(value) } catch { throw KeychainError.invalidArgument("the value does not encode: \(error)") }
        defer { data.resetBytes(in: 0..<data.count) }
        try data.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: accessibility) }
    }

    /// Reads a Codable value stored with ``set(_:forService:account:accessibility:)``.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - minimum: The weakest accessibility accepted (nil: any).
    /// - Returns: The value.
    /// - Throws: ``KeychainError/itemNotFound(_:)``, ``KeychainError/corrupted(_:)`` when it does not decode as `type`.
    public func value<Value: Decodable>(_ type: Value.Type, forService service: String, account: String,
                                        requiring minimum: Accessibility? = nil) throws -> Value {
        let secret = try read(.generic(service: service, account: account), requiring: minimum)
        defer { secret.wipe() }
        return try secret.withUnsafeBytes { bytes in
            do { return try CanonicalEncoding.decode(type, from: bytes) } catch {
                throw KeychainError.corrupted("the value of service \"\(service)\", account \"\(account)\" does not decode as \(Value.self): \(error)")
            }
        }
    }

    // MARK: Query API

    /// Adds an item (SecItemAdd).
    /// - Parameters:
    ///   - data: The secret.
    ///   - key: The item's class and names.
    ///   - accessibility: Which class key protects it.
    ///   - label: A label.
    ///   - comment: A comment.
    /// - Throws: ``KeychainError/duplicateItem(_:)`` when the item exists,
    ///   ``KeychainError/interactionNotAllowed(_:_:)`` when the class key is unavailable.
    public func add(_ data: SecretBytes, for key: ItemKey, accessibility: Accessibility = .whenUnlocked,
                    label: String? = nil, comment: String? = nil) throws {
        try data.withUnsafeBytes {
            try store($0, for: key, accessibility: accessibility, label: label, comment: comment, mustNotExist: true)
        }
    }

    /// Adds the item, or replaces the data and class of the existing one, in one write: there is
    /// no moment between "not found" and "add" at which another thread or process can add the
    /// item first, so this never fails with ``KeychainError/duplicateItem(_:)`` (`security
    /// add-generic-password -U`). A label or comment given as nil keeps the existing item's (when
    /// its class key is available to read it); the creation date is kept.
    /// - Parameters:
    ///   - data: The secret.
    ///   - key: The item's class and names.
    ///   - accessibility: Which class key protects it from now on.
    ///   - label: A label, or nil to keep the existing one.
    ///   - comment: A comment, or nil to keep the existing one.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when the class key is unavailable.
    public func addOrUpdate(_ data: SecretBytes, for key: ItemKey, accessibility: Accessibility = .whenUnlocked,
                            label: String? = nil, comment: String? = nil) throws {
        var label = label, comment = comment
        if label == nil || comment == nil, let row = try lookup(itemID(key)), let existing = try? attributes(of: row) {
            label = label ?? existing.label
            comment = comment ?? existing.comment
        }
        try data.withUnsafeBytes { try store($0, for: key, accessibility: accessibility, label: label, comment: comment) }
    }

    /// The items that match `query` (SecItemCopyMatching).
    /// - Parameter query: What to match and what to return.
    /// - Returns: One match for `.one`, every match for `.all`; never empty.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches; ``KeychainError/interactionNotAllowed(_:_:)``
    ///   when a candidate's class key is unavailable; ``KeychainError/corrupted(_:)``.
    public func copyMatching(_ query: KeychainQuery) throws -> [KeychainMatch] {
        let found = try matchingRows(query)
        return try found.map { row, attributes in
            var match = KeychainMatch()
            if query.returning.contains(.attributes) { match.attributes = try attributes ?? self.attributes(of: row) }
            if query.returning.contains(.data) || query.returning.isEmpty {
                match.data = try openValue(row, describing: (attributes?.key.description) ?? query.summary)
            }
            return match
        }
    }

    /// Changes every item that matches `query` (SecItemUpdate); the limit is ignored.
    /// - Parameters:
    ///   - query: The items to change.
    ///   - changes: What to change.
    /// - Returns: The number of items changed.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches, and as ``copyMatching(_:)``.
    @discardableResult
    public func update(_ query: KeychainQuery, with changes: ItemUpdate) throws -> Int {
        var all = query
        all.limit = .all
        let found = try matchingRows(all)
        let now = Date().timeIntervalSince1970
        for (row, known) in found {
            let attributes = try known ?? self.attributes(of: row)
            let data = try changes.data ?? openValue(row, describing: attributes.key.description)
            let label = changes.label ?? attributes.label
            let comment = changes.comment ?? attributes.comment
            let newRow = try data.withUnsafeBytes { bytes in
                try makeRow(key: attributes.key, value: bytes, accessibility: changes.accessibility ?? attributes.accessibility,
                            label: label, comment: comment, created: attributes.creationDate.timeIntervalSince1970, now: now)
            }
            if changes.data == nil { data.wipe() }
            try enqueue(row.id, .put(newRow))
        }
        return found.count
    }

    /// Deletes every item that matches `query` (SecItemDelete); the limit is ignored.
    /// - Returns: The number of items deleted.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches, and as ``copyMatching(_:)``.
    @discardableResult
    public func delete(_ query: KeychainQuery) throws -> Int {
        var all = query
        all.limit = .all
        let found = try matchingRows(all)
        for (row, _) in found { try enqueue(row.id, .delete) }
        return found.count
    }

    /// Rows matching a query, with their attributes when they had to be decrypted to match.
    private func matchingRows(_ query: KeychainQuery) throws -> [(StoredRow, ItemAttributes?)] {
        if let key = query.exactKey {
            guard let row = try lookup(itemID(key)) else { throw KeychainError.itemNotFound(query.summary) }
            try Keychain.check(row, against: query.minimumAccessibility, describing: key.description)
            if query.label == nil && query.accessibility == nil { return [(row, nil)] }
            let attributes = try attributes(of: row)
            guard query.matches(attributes) else { throw KeychainError.itemNotFound(query.summary) }
            return [(row, attributes)]
        }
        let candidates = try rows(itemClass: query.itemClass, group: query.groupName.map { group(query.itemClass, $0) })
        let needsNames = query.account != nil || query.networkProtocol != nil || query.port != nil || query.path != nil || query.label != nil
        var result: [(StoredRow, ItemAttributes?)] = []
        for row in candidates {
            if let wanted = query.accessibility, ItemCodec.code(wanted) != row.accessibility { continue }
            if needsNames {
                let attributes = try attributes(of: row)
                guard query.matches(attributes) else { continue }
                try Keychain.check(row, against: query.minimumAccessibility, describing: attributes.key.description)
                result.append((row, attributes))
            } else {
                try Keychain.check(row, against: query.minimumAccessibility, describing: query.summary)
                result.append((row, nil))
            }
            if query.limit == .one { break }
        }
        guard !result.isEmpty else { throw KeychainError.itemNotFound(query.summary) }
        return result
    }

    /// Every item, without secrets, for listings. Items whose class key is unavailable, or whose
    /// row fails its integrity check, are listed with their class and stored accessibility only
    /// and the reason (``ItemSummary/unavailable``).
    /// - Returns: The summaries, oldest first.
    /// - Throws: Database errors and ``KeychainError/corrupted(_:)``.
    public func summaries() throws -> [ItemSummary] {
        var result: [ItemSummary] = []
        for itemClass in ItemClass.allCases {
            for row in try rows(itemClass: itemClass, group: nil) {
                let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
                do {
                    result.append(ItemSummary(attributes: try attributes(of: row), itemClass: itemClass, accessibility: accessibility, unavailable: nil))
                } catch let error as KeychainError {
                    switch error {
                    case .interactionNotAllowed, .corrupted:
                        // Listed without names; a damaged row does not hide the others.
                        result.append(ItemSummary(attributes: nil, itemClass: itemClass, accessibility: accessibility, unavailable: error))
                    default:
                        throw error
                    }
                }
            }
        }
        return result
    }
}

