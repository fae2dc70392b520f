import Foundation
import Cipher

/// The key of a keychain row (the `item_id` column): 33 bytes, held inline so that dictionary
/// keys hash and compare without allocation. Byte 0 is the item class; bytes 1–16 the first 16
/// bytes of the group's blind index (service, or server), so every item of a service sits in one
/// key range; bytes 17–32 the first 16 bytes of the item's name index. Its order is the byte
/// order of the id (as SQLite sorts blobs).
struct ItemID: Hashable, Comparable, Sendable {
    static let size = 33

    let itemClass: UInt8
    private let g0: UInt64, g1: UInt64, n0: UInt64, n1: UInt64

    init(itemClass: UInt8, group: (UInt64, UInt64), name: (UInt64, UInt64)) {
        self.itemClass = itemClass
        (g0, g1) = group
        (n0, n1) = name
    }

    /// From a database blob; nil unless it has 33 bytes.
    init?(_ data: Data) {
        guard data.count == ItemID.size else { return nil }
        let parts = data.withUnsafeBytes { bytes in
            (bytes[0], ItemID.word(bytes, 1), ItemID.word(bytes, 9), ItemID.word(bytes, 17), ItemID.word(bytes, 25))
        }
        self.init(itemClass: parts.0, group: (parts.1, parts.2), name: (parts.3, parts.4))
    }

    /// A big-endian word at `offset`.
    static func word(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<offset + 8 { value = value << 8 | UInt64(bytes[index]) }
        return value
    }

    /// Appends the 33 bytes.
    func write(to out: inout ByteWriter) {
        out.byte(itemClass)
        out.uint64(g0)
        out.uint64(g1)
        out.uint64(n0)
        out.uint64(n1)
    }

    /// The 33 bytes.
    var bytes: [UInt8] {
        var out = ByteWriter(capacity: ItemID.size)
        write(to: &out)
        return out.bytes
    }

    /// Writes the 33 bytes to the start of `raw` (which has room for them).
    func write(to raw: UnsafeMutableRawBufferPointer) {
        precondition(raw.count >= ItemID.size)
        raw[0] = itemClass
        raw.storeBytes(of: g0.bigEndian, toByteOffset: 1, as: UInt64.self)
        raw.storeBytes(of: g1.bigEndian, toByteOffset: 9, as: UInt64.self)
        raw.storeBytes(of: n0.bigEndian, toByteOffset: 17, as: UInt64.self)
        raw.storeBytes(of: n1.bigEndian, toByteOffset: 25, as: UInt64.self)
    }

    /// The 33 bytes as a database blob.
    var data: Data {
        var data = Data(count: ItemID.size)
        data.withUnsafeMutableBytes { write(to: $0) }
        return data
    }

    /// The first and last possible ids of a class (group nil) or of one group of a class: every
    /// id of it lies in `lower...upper`.
    static func range(itemClass: UInt8, group: (UInt64, UInt64)?) -> (lower: Data, upper: Data) {
        var prefix = ByteWriter([itemClass], capacity: 1 + 16)
        if let group {
            prefix.uint64(group.0)
            prefix.uint64(group.1)
        }
        let rest = size - prefix.bytes.count
        return (Data(prefix.bytes + [UInt8](repeating: 0, count: rest)), Data(prefix.bytes + [UInt8](repeating: 0xFF, count: rest)))
    }

    var groupWords: (UInt64, UInt64) { (g0, g1) }

    /// Whether the id belongs to the group.
    func isIn(group: (UInt64, UInt64)) -> Bool { g0 == group.0 && g1 == group.1 }

    static func < (a: ItemID, b: ItemID) -> Bool {
        (a.itemClass, a.g0, a.g1, a.n0, a.n1) < (b.itemClass, b.g0, b.g1, b.n0, b.n1)
    }
}

/// A class and a service's (or server's) blind index: the group of item ids sharing a prefix.
struct GroupID: Hashable {
    let itemClass: UInt8
    let g0: UInt64
    let g1: UInt64

    init(_ id: ItemID) {
        itemClass = id.itemClass
        (g0, g1) = id.groupWords
    }
}
