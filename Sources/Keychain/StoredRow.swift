import Foundation

/// One row of the `keychain_items` table, as held in memory.
struct StoredRow: Sendable {
    var id: ItemID
    var accessibility: UInt8
    /// The sealed-data envelope of the item record (names and secret).
    var sealed: [UInt8]
    /// Seconds since 1970; nil when the database keeps the stored creation date (an update of an
    /// item this process has not read).
    var created: Double?
    var modified: Double
    /// The creation date a new row gets when `created` is nil: the time of the first of several
    /// writes of the item that were pending together (nil: `modified`).
    var firstWritten: Double? = nil
    /// The row's class binding (the `row_mac` column): the first 16 bytes of HMAC-SHA256 under
    /// the blind-index key of the id, the accessibility code and the sealed record, so that a
    /// row's class cannot be changed by anyone without that key (docs/FORMATS.md).
    var mac: [UInt8]

    var itemClass: UInt8 { id.itemClass }
}

/// A change waiting for the background writer.
enum PendingChange: Sendable {
    case put(StoredRow)
    case delete
}
