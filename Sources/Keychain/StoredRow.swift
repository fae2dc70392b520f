import Foundation

/// One row of the `keychain_items` table, as held in memory.
struct StoredRow: Sendable {
    var id: ItemID
    var accessibility: UInt8
    /// The sealed-data envelope of the item record (names and secret).
    var sealed: [UInt8]
    /// When the item was created.
    var created: CreationDate
    /// When the item was last written, in seconds since 1970.
    var modified: Double
    /// The row's class binding (the `row_mac` column): the first 16 bytes of HMAC-SHA256 under
    /// the blind-index key of the keychain id, the item id, the accessibility code and the sealed
    /// record, so that a row's class cannot be changed by anyone without that key
    /// (``ItemCodec/rowMAC(keychain:id:accessibility:sealed:prototype:)``, docs/FORMATS.md).
    var mac: [UInt8]

    var itemClass: UInt8 { id.itemClass }
}

/// When an item was created, in seconds since 1970.
///
/// A write of an item whose row this process has not read does not know the creation date in
/// the file, and writes must not wait for a read: it carries ``storedOr(_:)``, which the commit
/// resolves (the file's date where the row exists). Rows that ``ItemStore`` hands out carry
/// ``at(_:)`` only: a pending write of that kind is resolved against the row it replaces when it
/// is read.
enum CreationDate: Sendable, Equatable {
    /// This date, replacing the one in the file: a row read from the file, an item deleted and
    /// written again before a commit, an update of an item that was read.
    case at(Double)
    /// The date in the file when the item is there at the commit; otherwise this one, the time
    /// of the first of the pending writes of the item.
    case storedOr(Double)

    /// The date, or the date of a new item.
    var seconds: Double {
        switch self {
        case .at(let seconds), .storedOr(let seconds): return seconds
        }
    }

    /// Whether the date replaces the one in the file.
    var isKnown: Bool {
        if case .at = self { return true }
        return false
    }
}

/// A change waiting for the background writer.
enum PendingChange: Sendable {
    case put(StoredRow)
    case delete
}
