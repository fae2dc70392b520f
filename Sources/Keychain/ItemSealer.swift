import Foundation
import Crypto
import Cipher
import CPlatform
import Vault

/// Item sealing: the blind indexes that make an item's id, the class keys (asked of the key
/// source, some kept for a while), and the building and opening of rows: a record sealed under
/// its class key and bound to its row by the row MAC (docs/FORMATS.md, section Keychain). It
/// touches no file: ``ItemStore`` stores what it builds.
///
/// Thread safety: the kept class keys and service indexes sit behind `lock`; the rest is
/// immutable. The class is therefore `@unchecked Sendable`.
final class ItemSealer: @unchecked Sendable {
    private let keySource: any KeychainKeySource
    /// HMAC-SHA256 keyed by the blind-index key (the key's pads computed once; copied per use).
    private let indexMAC: HMAC<SHA256>
    /// The keychain's id, part of every row MAC.
    private let keychainID: [UInt8]
    /// The database file, for the error of a closed keychain.
    private let path: String

    // Guarded by `lock`.
    private let lock = NSLock()
    /// Set by ``close()``: no class key is asked for or kept afterwards.
    private var closed = false
    private var classKeys: [Accessibility: (raw: SecretBytes, key: SealingKey, ring: Keyring, fetched: UInt64)] = [:]
    private var groupCache: [GroupKey: (UInt64, UInt64)] = [:]

    /// - Parameters:
    ///   - keySource: Where the class keys come from.
    ///   - indexKey: The blind-index key.
    ///   - keychainID: The keychain's id (``ItemStore/keychainID``).
    ///   - path: The database file (named by ``KeychainError/closed(path:)``).
    init(keySource: any KeychainKeySource, indexKey: SymmetricKey, keychainID: [UInt8], path: String) {
        self.keySource = keySource
        self.indexMAC = HMAC<SHA256>(key: indexKey)
        self.keychainID = keychainID
        self.path = path
    }

    // MARK: Blind indexes

    /// The row key of an item: its class, its group's blind index and its name index (16 bytes each).
    func itemID(_ key: ItemKey) -> ItemID {
        ItemID(itemClass: key.itemClass.rawValue, group: group(key.itemClass, key.groupName),
               name: ItemCodec.mac16(ItemCodec.nameIndexInput(key), prototype: indexMAC))
    }

    /// The blind index of a service (or server) within a class: the middle of its items' ids.
    /// Applications use few services, so the last ``groupCacheLimit`` are remembered (saving one
    /// HMAC per call); the cache holds the names the caller passed, never anything from the file.
    func group(_ itemClass: ItemClass, _ name: String) -> (UInt64, UInt64) {
        let key = GroupKey(itemClass: itemClass.rawValue, name: name)
        if let known = lock.withLock({ groupCache[key] }) { return known }
        let value = ItemCodec.mac16(ItemCodec.serviceIndexInput(itemClass: itemClass, name: name), prototype: indexMAC)
        lock.withLock {
            if groupCache.count >= ItemSealer.groupCacheLimit { groupCache.removeAll(keepingCapacity: true) }
            groupCache[key] = value
        }
        return value
    }

    private struct GroupKey: Hashable {
        let itemClass: UInt8
        let name: String
    }

    private static let groupCacheLimit = 256

    /// The row MAC of this keychain (``ItemCodec/rowMAC(keychain:id:accessibility:sealed:prototype:)``).
    private func rowMAC(_ id: ItemID, _ accessibility: UInt8, _ sealed: [UInt8]) -> [UInt8] {
        ItemCodec.rowMAC(keychain: keychainID, id: id, accessibility: accessibility, sealed: sealed, prototype: indexMAC)
    }

    // MARK: Class keys

    /// The sealing key of an accessibility. For whenUnlocked the key source is asked every
    /// time (so a lock is honoured at once) and nothing is kept: the key lives only as long as the
    /// operation, so no copy of it outlasts a `lock()`. afterFirstUnlock and always keys, once
    /// obtained, stay available for the life of the process by definition, so they are kept; the
    /// source is asked again when the kept key is older than ``classKeyRecheckInterval``, so a
    /// class-key rotation made by another process is followed within that time (until then new
    /// items are sealed under the key it retired, which still opens them).
    private func sealingKey(_ accessibility: Accessibility) throws -> (key: SealingKey, ring: Keyring) {
        let now = DispatchTime.now().uptimeNanoseconds
        let (isClosed, kept) = lock.withLock { (closed, classKeys[accessibility]) }
        if isClosed { throw KeychainError.closed(path: path) }
        if accessibility.protectionClass != .whenUnlocked, let cached = kept,
           now &- cached.fetched < ItemSealer.classKeyRecheckInterval {
            return (cached.key, cached.ring)
        }
        let raw: SecretBytes
        do {
            raw = try keySource.classKey(for: accessibility)
        } catch {
            lock.withLock { classKeys[accessibility] = nil }
            throw KeychainError.fromKeySource(error)
        }
        do {
            let key = try SealingKey(key: raw)
            let ring = try Keyring([key])
            if accessibility.protectionClass != .whenUnlocked {
                // Not kept when the keychain was closed meanwhile.
                lock.withLock { if !closed { classKeys[accessibility] = (raw, key, ring, now) } }
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
    private func openingRing(_ accessibility: Accessibility) throws -> Keyring {
        lock.withLock { classKeys[accessibility] = nil }
        let current = try sealingKey(accessibility).key
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

    /// Forgets the kept class keys (after a rotation).
    func dropClassKeys() {
        lock.withLock { classKeys.removeAll() }
    }

    /// Forgets the kept class keys for good: from now on every use of a class key throws
    /// ``KeychainError/closed(path:)`` without asking the key source.
    func close() {
        lock.withLock {
            closed = true
            classKeys.removeAll()
        }
    }

    // MARK: Sealing

    /// A row holding `value` and the names of `key`, sealed under the class key of
    /// `accessibility` and bound to `id`.
    /// - Parameters:
    ///   - id: The item's id, ``itemID(_:)`` of `key` (computed once by the caller).
    ///   - key: The item's class and names.
    ///   - value: The secret.
    ///   - accessibility: Which class key seals it.
    ///   - label: A label.
    ///   - comment: A comment.
    ///   - created: The creation date.
    ///   - modified: The modification date, in seconds since 1970.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when the class key is unavailable.
    func makeRow(id: ItemID, key: ItemKey, value: UnsafeRawBufferPointer, accessibility: Accessibility,
                 label: String?, comment: String?, created: CreationDate, modified: Double) throws -> StoredRow {
        let code = ItemCodec.code(accessibility)
        let sealing = try sealingKey(accessibility).key
        var names = ItemCodec.encodeNames(key: key, label: label, comment: comment)
        var plain = ItemCodec.itemPlaintext(names: names, value: value)
        defer {
            ItemCodec.zero(&names)
            ItemCodec.zero(&plain)
        }
        do {
            let sealed = try Sealed.seal(plain, with: sealing, context: ItemCodec.itemContext(accessibility: code, id: id))
            return StoredRow(id: id, accessibility: code, sealed: sealed, created: created, modified: modified,
                             mac: rowMAC(id, code, sealed))
        } catch {
            throw KeychainError.keyUnavailable("sealing failed: \(error)")
        }
    }

    /// `row` sealed again under its class's current key, or nil when it already is.
    /// - Throws: ``KeychainError/corrupted(_:)`` for a row that does not open;
    ///   ``KeychainError/interactionNotAllowed(_:_:)`` when the class key is unavailable.
    func resealed(_ row: StoredRow) throws -> StoredRow? {
        let current = try sealingKey(try ItemCodec.accessibility(code: Int64(row.accessibility))).key
        guard case .key(let keyID)? = try? Sealed.parseHeader(row.sealed).keySource else {
            throw KeychainError.corrupted("the sealed record does not parse")
        }
        guard keyID != current.id else { return nil }
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
        return resealed
    }

    // MARK: Opening

    /// When a ciphertext names a key id the class key does not have, the data may be intact but
    /// sealed under a class key that no longer exists (a vault erased, an always-class key file
    /// replaced); say so beside the tampering explanation.
    private static func keyGoneHint(_ error: any Error) -> String {
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
        let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
        let context = ItemCodec.itemContext(accessibility: row.accessibility, id: row.id)
        var plain: [UInt8]
        do {
            do {
                plain = try Sealed.open(row.sealed, with: try sealingKey(accessibility).ring, context: context)
            } catch CipherError.wrongKey {
                // Sealed under another generation of the class key: before a rotation (a retired
                // key), or after one made by another process (a newer current key).
                plain = try Sealed.open(row.sealed, with: try openingRing(accessibility), context: context)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError.corrupted("\(item()) failed its integrity check (\(error)): changed bytes, or a record moved from another item\(ItemSealer.keyGoneHint(error))")
        }
        defer { ItemCodec.zero(&plain) }
        let (names, value) = try ItemCodec.splitItem(plain)
        return try body(plain, names, value)
    }

    /// The secret of a row.
    func openValue(_ row: StoredRow, describing item: @autoclosure () -> String) throws -> SecretBytes {
        try withOpened(row, describing: "the item \(item())") { plain, _, value in
            plain.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[value])) }
        }
    }

    /// The attributes of a row (its names decrypted; they must give its id).
    func attributes(of row: StoredRow) throws -> ItemAttributes {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { throw KeychainError.corrupted("unknown item class \(row.itemClass)") }
        let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
        let (key, label, comment) = try withOpened(row, describing: "an item (id \(Encoding.hex(row.id.bytes.prefix(9))))") { plain, names, _ in
            try ItemCodec.decodeNames(plain[names], itemClass: itemClass)
        }
        guard itemID(key) == row.id else {
            throw KeychainError.corrupted("the names of an item do not match its id")
        }
        return ItemAttributes(key: key, accessibility: accessibility, label: label, comment: comment,
                              creationDate: Date(timeIntervalSince1970: row.created.seconds),
                              modificationDate: Date(timeIntervalSince1970: row.modified))
    }
}
