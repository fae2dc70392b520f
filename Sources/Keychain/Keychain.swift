import Foundation
import Crypto
import Cipher
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
/// The class is a facade (passwords, queries, class-key rotation, legacy import) over two
/// internal parts: an `ItemStore` keeps the file, the caches and the coalesced writer, and an
/// `ItemSealer` makes item ids and seals and opens rows. Both are thread-safe and the facade
/// holds no mutable state of its own, so the class is `Sendable`.
public final class Keychain: Sendable {
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
    public let wipedStaleItems: Int

    package let keySource: any KeychainKeySource
    let itemStore: ItemStore
    let sealer: ItemSealer

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
    public init(directory: String, keySource: any KeychainKeySource, configuration: Configuration = Configuration()) throws(KeychainError) {
        self.directory = directory
        self.path = (directory as NSString).appendingPathComponent(configuration.fileName)
        self.keySource = keySource
        let indexKey: SymmetricKey
        do {
            let raw = try keySource.blindIndexKey()
            guard raw.count >= 32 else { throw KeychainError.keyUnavailable("the blind-index key has \(raw.count) bytes; 32 are needed") }
            indexKey = raw.symmetricKey
        } catch {
            throw KeychainError.fromKeySource(error)
        }
        do {
            try SecureFile.ensurePrivateDirectory(directory)
        } catch {
            throw KeychainError.fromFile(error, path: directory)
        }
        do {
            itemStore = try ItemStore(path: path, configuration: configuration, indexKey: indexKey)
        } catch {
            throw KeychainError.typed(error, path: path)
        }
        sealer = ItemSealer(keySource: keySource, indexKey: indexKey, keychainID: itemStore.keychainID, path: path)
        wipedStaleItems = itemStore.wipedStaleItems
    }

    /// Opens (creating if needed) the keychain of a crypto manager: `keychain.sqlite` in the
    /// manager's directory, with the manager as key source.
    /// - Parameters:
    ///   - manager: The Vault module's crypto manager.
    ///   - configuration: Settings; see ``Configuration``.
    /// - Throws: as ``init(directory:keySource:configuration:)``.
    public convenience init(manager: CryptoManager, configuration: Configuration = Configuration()) throws(KeychainError) {
        try self.init(directory: manager.directory, keySource: manager, configuration: configuration)
    }

    // MARK: Committing and closing

    /// Commits every pending write now and returns once it is durable (the commit ran with
    /// `synchronous=FULL`, so the WAL was synced to disk).
    /// - Throws: ``KeychainError/database(_:)`` and the other database errors of the commit; the
    ///   writes stay pending and are retried. ``KeychainError/closed(path:)`` after ``close()``.
    public func flush() throws(KeychainError) {
        try typed { try itemStore.flush() }
    }

    /// Commits the pending writes durably, then closes the database connections and drops the
    /// class keys and rows held in memory. Afterwards every operation (reads, writes, deletes,
    /// listings, queries, re-sealing, rotation, legacy import, ``flush()``) throws
    /// ``KeychainError/closed(path:)`` at once: no class key is asked of the key source and no
    /// file is read or written. Closing again does nothing. Call it before deleting the
    /// keychain's directory; otherwise the connections close when the object is released.
    /// - Throws: The error of the final commit; the connections are closed regardless.
    public func close() throws(KeychainError) {
        // Pending writes are sealed already: the commit needs no class key.
        sealer.close()
        try typed { try itemStore.close() }
    }

    /// Runs the body of a public operation and gives its failure as a ``KeychainError``
    /// (``KeychainError/typed(_:path:)``): the public API throws that type only.
    func typed<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        do { return try body() } catch { throw KeychainError.typed(error, path: path) }
    }

    /// Throws ``KeychainError/closed(path:)`` once ``close()`` has run: the first step of every
    /// operation, before any key or file is used.
    func requireOpen() throws {
        try itemStore.checkOpen()
    }

    /// The number of writes not yet committed.
    public var pendingWriteCount: Int { itemStore.pendingWriteCount }

    /// The error of the last background commit, if it failed (the writes stay pending).
    public var lastBackgroundError: KeychainError? { itemStore.lastBackgroundError }

    /// The `synchronous` setting of the writer and reader connections (2 is FULL), for tests.
    func synchronousSettings() throws -> (writer: Int, reader: Int) {
        try itemStore.synchronousSettings()
    }

    /// How long a kept afterFirstUnlock or always key is used before the source is asked again
    /// (``ItemSealer/classKeyRecheckInterval``).
    static var classKeyRecheckInterval: UInt64 { ItemSealer.classKeyRecheckInterval }

    // MARK: Core operations

    /// Stores `value` for `key`, replacing an existing item unless `mustNotExist`. `id` is the
    /// item's id when the caller has computed it (``ItemSealer/itemID(_:)`` of `key`).
    func store(_ value: UnsafeRawBufferPointer, for key: ItemKey, id: ItemID? = nil, accessibility: Accessibility,
               label: String? = nil, comment: String? = nil, mustNotExist: Bool = false) throws {
        try requireOpen()
        let index = id ?? sealer.itemID(key)
        if mustNotExist, try itemStore.lookup(index) != nil { throw KeychainError.duplicateItem(key.description) }
        let now = Date().timeIntervalSince1970
        let row = try sealer.makeRow(id: index, key: key, value: value, accessibility: accessibility, label: label, comment: comment,
                                     created: .storedOr(now), modified: now)
        try itemStore.enqueue(index, .put(row))
    }

    /// The value stored for `key`, refused when stored under a class weaker than `minimum`.
    func read(_ key: ItemKey, requiring minimum: Accessibility? = nil) throws -> SecretBytes {
        try requireOpen()
        guard let row = try itemStore.lookup(sealer.itemID(key)) else { throw KeychainError.itemNotFound(key.description) }
        try Keychain.check(row, against: minimum, describing: key.description)
        return try sealer.openValue(row, describing: key.description)
    }

    /// Throws ``KeychainError/accessibilityTooWeak(item:stored:required:)`` when `row` is stored
    /// under a class weaker than `minimum`.
    static func check(_ row: StoredRow, against minimum: Accessibility?, describing item: @autoclosure () -> String) throws {
        guard let minimum else { return }
        let stored = try ItemCodec.accessibility(code: Int64(row.accessibility))
        guard stored.isAtLeast(minimum) else {
            throw KeychainError.accessibilityTooWeak(item: item(), stored: stored, required: minimum)
        }
    }

    /// Deletes `key`'s item; throws itemNotFound when there is none.
    func remove(_ key: ItemKey) throws {
        try requireOpen()
        let index = sealer.itemID(key)
        guard try itemStore.exists(index) else { throw KeychainError.itemNotFound(key.description) }
        try itemStore.enqueue(index, .delete)
    }
}
