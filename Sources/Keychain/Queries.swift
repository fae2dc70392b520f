import Foundation
import Cipher
import Vault

extension Keychain {
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
                    label: String? = nil, comment: String? = nil) throws(KeychainError) {
        try typed {
            try requireOpen()
            try data.withUnsafeBytes {
                try store($0, for: key, accessibility: accessibility, label: label, comment: comment, mustNotExist: true)
            }
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
                            label: String? = nil, comment: String? = nil) throws(KeychainError) {
        try typed {
            try requireOpen()
            var label = label, comment = comment
            let id = sealer.itemID(key)
            if label == nil || comment == nil, let row = try itemStore.lookup(id), let existing = try? sealer.attributes(of: row) {
                label = label ?? existing.label
                comment = comment ?? existing.comment
            }
            try data.withUnsafeBytes { try store($0, for: key, id: id, accessibility: accessibility, label: label, comment: comment) }
        }
    }

    /// The items that match `query` (SecItemCopyMatching).
    /// - Parameter query: What to match and what to return.
    /// - Returns: One match for `.one`, every match for `.all`; never empty.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches; ``KeychainError/interactionNotAllowed(_:_:)``
    ///   when a candidate's class key is unavailable; ``KeychainError/corrupted(_:)``.
    public func copyMatching(_ query: KeychainQuery) throws(KeychainError) -> [KeychainMatch] {
        return try typed {
            try requireOpen()
            let found = try matchingRows(query)
            return try found.map { row, attributes in
                var match = KeychainMatch()
                if query.returning.contains(.attributes) { match.attributes = try attributes ?? sealer.attributes(of: row) }
                if query.returning.contains(.data) || query.returning.isEmpty {
                    match.data = try sealer.openValue(row, describing: (attributes?.key.description) ?? query.summary)
                }
                return match
            }
        }
    }

    /// Changes every item that matches `query` (SecItemUpdate); the limit is ignored.
    /// - Parameters:
    ///   - query: The items to change.
    ///   - changes: What to change.
    /// - Returns: The number of items changed.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches, and as ``copyMatching(_:)``.
    @discardableResult
    public func update(_ query: KeychainQuery, with changes: ItemUpdate) throws(KeychainError) -> Int {
        return try typed {
            try requireOpen()
            var all = query
            all.limit = .all
            let found = try matchingRows(all)
            let now = Date().timeIntervalSince1970
            for (row, known) in found {
                let attributes = try known ?? sealer.attributes(of: row)
                let data = try changes.data ?? sealer.openValue(row, describing: attributes.key.description)
                let label = changes.label ?? attributes.label
                let comment = changes.comment ?? attributes.comment
                let newRow = try data.withUnsafeBytes { bytes in
                    try sealer.makeRow(id: row.id, key: attributes.key, value: bytes, accessibility: changes.accessibility ?? attributes.accessibility,
                                       label: label, comment: comment, created: row.created, modified: now)
                }
                if changes.data == nil { data.wipe() }
                try itemStore.enqueue(row.id, .put(newRow))
            }
            return found.count
        }
    }

    /// Deletes every item that matches `query` (SecItemDelete); the limit is ignored.
    /// - Parameter query: What to delete.
    /// - Returns: The number of items deleted.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when nothing matches, and as ``copyMatching(_:)``.
    @discardableResult
    public func delete(_ query: KeychainQuery) throws(KeychainError) -> Int {
        return try typed {
            try requireOpen()
            var all = query
            all.limit = .all
            let found = try matchingRows(all)
            for (row, _) in found { try itemStore.enqueue(row.id, .delete) }
            return found.count
        }
    }

    /// Rows matching a query, with their attributes when they had to be decrypted to match.
    private func matchingRows(_ query: KeychainQuery) throws -> [(StoredRow, ItemAttributes?)] {
        if let key = query.exactKey {
            guard let row = try itemStore.lookup(sealer.itemID(key)) else { throw KeychainError.itemNotFound(query.summary) }
            try Keychain.check(row, against: query.minimumAccessibility, describing: key.description)
            if query.label == nil && query.accessibility == nil { return [(row, nil)] }
            let attributes = try sealer.attributes(of: row)
            guard query.matches(attributes) else { throw KeychainError.itemNotFound(query.summary) }
            return [(row, attributes)]
        }
        let candidates = try itemStore.rows(itemClass: query.itemClass, group: query.groupName.map { sealer.group(query.itemClass, $0) })
        let needsNames = query.account != nil || query.networkProtocol != nil || query.port != nil || query.path != nil || query.label != nil
        var result: [(StoredRow, ItemAttributes?)] = []
        for row in candidates {
            if let wanted = query.accessibility, ItemCodec.code(wanted) != row.accessibility { continue }
            if needsNames {
                let attributes = try sealer.attributes(of: row)
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

    /// Every item, without secrets, and every damaged row: a damaged row neither hides the
    /// others nor is left out. Items whose class key is unavailable (the vault locked) are listed
    /// with their class and stored accessibility only and the reason
    /// (``ItemSummary/unavailable``). A row with a column of the wrong type or out of bounds
    /// (TEXT where a blob belongs, an unknown accessibility code...), a failed class binding or
    /// integrity check, or a key that is not an item id is listed in
    /// ``KeychainListing/damaged`` with its item id and what is wrong.
    /// - Returns: The items (by class, then oldest first) and the damaged rows (by item id).
    /// - Throws: Database errors, ``KeychainError/keyUnavailable(_:)`` when the key source
    ///   fails, ``KeychainError/closed(path:)``; never because of a row.
    public func listing() throws(KeychainError) -> KeychainListing {
        return try typed {
            try requireOpen()
            let (rows, undecoded) = try itemStore.allRowsReportingDamage()
            var items: [ItemSummary] = []
            var damaged = undecoded.map(damagedItem)
            for row in rows {
                guard let itemClass = ItemClass(rawValue: row.itemClass) else {
                    damaged.append(damagedItem(row, .corrupted("a keychain_items row has the unknown item class \(row.itemClass) in its item_id")))
                    continue
                }
                let accessibility: Accessibility
                do {
                    accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
                } catch let error as KeychainError {
                    damaged.append(damagedItem(row, error))
                    continue
                }
                do {
                    items.append(ItemSummary(attributes: try sealer.attributes(of: row), itemClass: itemClass,
                                             accessibility: accessibility, unavailable: nil))
                } catch let error as KeychainError {
                    switch error {
                    case .interactionNotAllowed:
                        items.append(ItemSummary(attributes: nil, itemClass: itemClass, accessibility: accessibility, unavailable: error))
                    case .corrupted:
                        damaged.append(damagedItem(row, error))
                    default:
                        throw error
                    }
                }
            }
            damaged.sort { $0.itemID < $1.itemID }
            return KeychainListing(items: items, damaged: damaged)
        }
    }

    /// Every item, without secrets, for listings. Items whose class key is unavailable, or whose
    /// row fails its integrity check or has a column of the wrong type (while its class and
    /// accessibility read), are listed with their class and stored accessibility only and the
    /// reason (``ItemSummary/unavailable``). ``listing()`` reports damaged rows apart, with
    /// their item ids; prefer it.
    /// - Returns: The summaries, by class then oldest first, the damaged rows last.
    /// - Throws: ``KeychainError/damagedItems(_:)`` naming the rows whose class or
    ///   accessibility cannot be read (so that they cannot be summarised), rather than leaving
    ///   them out; database errors.
    public func summaries() throws(KeychainError) -> [ItemSummary] {
        return try typed {
            try requireOpen()
            let listing = try listing()
            var result = listing.items
            var unlisted: [DamagedItem] = []
            for item in listing.damaged {
                if let itemClass = item.itemClass, let accessibility = item.accessibility {
                    result.append(ItemSummary(attributes: nil, itemClass: itemClass, accessibility: accessibility, unavailable: item.error))
                } else {
                    unlisted.append(item)
                }
            }
            guard unlisted.isEmpty else { throw KeychainError.damagedItems(unlisted) }
            return result
        }
    }

    /// A damaged row that decoded, with what is wrong.
    func damagedItem(_ row: StoredRow, _ error: KeychainError) -> DamagedItem {
        DamagedItem(itemID: Encoding.hex(row.id.bytes), itemClass: ItemClass(rawValue: row.itemClass),
                    accessibility: try? ItemCodec.accessibility(code: Int64(row.accessibility)), error: error)
    }

    /// A row that did not decode, with what is wrong.
    func damagedItem(_ row: ItemStore.UndecodedRow) -> DamagedItem {
        DamagedItem(itemID: row.key, itemClass: row.id.flatMap { ItemClass(rawValue: $0.itemClass) },
                    accessibility: row.accessibility.flatMap { try? ItemCodec.accessibility(code: Int64($0)) }, error: row.error)
    }
}
