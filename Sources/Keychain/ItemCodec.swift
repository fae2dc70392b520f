import Foundation
import Crypto
import Cipher
import CPlatform
import Vault

/// The byte encodings of the keychain's columns (docs/FORMATS.md, section Keychain).
enum ItemCodec {
    // MARK: Accessibility

    /// Accessibility as stored in the `accessibility` column: 1 whenUnlocked, 2 afterFirstUnlock,
    /// 3 always, plus 0x10 for thisDeviceOnly.
    static func code(_ accessibility: Accessibility) -> UInt8 {
        let base: UInt8
        switch accessibility.protectionClass {
        case .whenUnlocked: base = 1
        case .afterFirstUnlock: base = 2
        case .always: base = 3
        }
        return base | (accessibility.thisDeviceOnly ? 0x10 : 0)
    }

    static func accessibility(code: Int64) throws -> Accessibility {
        let deviceOnly = code & 0x10 != 0
        let protectionClass: ProtectionClass
        switch code & ~0x10 {
        case 1: protectionClass = .whenUnlocked
        case 2: protectionClass = .afterFirstUnlock
        case 3: protectionClass = .always
        default: throw KeychainError.corrupted("unknown accessibility code \(code)")
        }
        return Accessibility(protectionClass, thisDeviceOnly: deviceOnly)
    }

    // MARK: Blind indexes

    /// A presence byte (0 absent, 1 present) and, when present, the text as a field.
    private static func optionalText(_ out: inout ByteWriter, _ text: String?) {
        guard let text else { out.byte(0); return }
        out.byte(1)
        out.field(text.utf8)
    }

    private static let itemContextPrefix = Array("SFKC item v2".utf8) + [0]
    private static let nameIndexPrefix = Array("SFKC name v1".utf8) + [0]
    private static let serviceIndexPrefix = Array("SFKC service v1".utf8) + [0]

    /// The input of the name index: "SFKC name v1", 0, the class byte, then service, account,
    /// server, protocol, port (decimal text) and path, each as a presence byte (0 absent, 1
    /// present) and, when present, a 4-byte big-endian length and the UTF-8 bytes.
    static func nameIndexInput(_ key: ItemKey) -> [UInt8] {
        var out = ByteWriter(nameIndexPrefix, capacity: nameIndexPrefix.count + 1 + 6 * 5 + key.service.utf8.count + key.account.utf8.count
                             + (key.server?.utf8.count ?? 0) + (key.networkProtocol?.utf8.count ?? 0) + 20 + (key.path?.utf8.count ?? 0))
        out.byte(key.itemClass.rawValue)
        optionalText(&out, key.service)
        optionalText(&out, key.account)
        optionalText(&out, key.server)
        optionalText(&out, key.networkProtocol)
        optionalText(&out, key.port.map { String($0) })
        optionalText(&out, key.path)
        return out.bytes
    }

    /// The input of the service index: "SFKC service v1", 0, the class byte, then the service
    /// (generic passwords) or server (internet passwords) as a 4-byte length and the UTF-8 bytes.
    static func serviceIndexInput(itemClass: ItemClass, name: String) -> [UInt8] {
        var out = ByteWriter(serviceIndexPrefix, capacity: serviceIndexPrefix.count + 5 + name.utf8.count)
        out.byte(itemClass.rawValue)
        out.field(name.utf8)
        return out.bytes
    }

    static func mac(_ input: [UInt8], key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: input, using: key))
    }

    /// The first 16 bytes of HMAC-SHA256 from a keyed prototype (the key's pads computed once;
    /// the struct is copied), as two big-endian words.
    static func mac16(_ input: [UInt8], prototype: HMAC<SHA256>) -> (UInt64, UInt64) {
        var hmac = prototype
        // Through a raw buffer: HMAC's generic update costs a third more with an array.
        input.withUnsafeBytes { hmac.update(data: $0) }
        return hmac.finalize().withUnsafeBytes { bytes in (ItemID.word(bytes, 0), ItemID.word(bytes, 8)) }
    }

    // MARK: Class binding

    /// The `index_key_check` value of a format: the first 16 bytes of HMAC-SHA256 under the
    /// blind-index key of "SFKC index key check v1" (format 2) or "SFKC index key check v3"
    /// (format 3). That they differ keeps a format-3 file from passing as a format-2 one.
    static func indexKeyCheck(format: Int64, key: SymmetricKey) -> Data {
        let label = format == 2 ? "SFKC index key check v1" : "SFKC index key check v3"
        return Data(mac(Array(label.utf8), key: key).prefix(16))
    }

    static let rowMACSize = 16
    private static let rowMACPrefix = Array("SFKC row v3".utf8) + [0]

    /// The `row_mac` column: the first 16 bytes of HMAC-SHA256, keyed by the blind-index key, of
    /// "SFKC row v3", 0, the keychain's 16-byte id, the 33-byte item id, the accessibility code,
    /// then the sealed record. Without the blind-index key (a device sub-key, kept outside the
    /// data directory) no one can give a row another class, another record, a record of another
    /// row, or a row of another keychain.
    static func rowMAC(keychain: [UInt8], id: ItemID, accessibility: UInt8, sealed: [UInt8], prototype: HMAC<SHA256>) -> [UInt8] {
        var hmac = prototype
        var head = ByteWriter(rowMACPrefix, capacity: rowMACPrefix.count + keychain.count + ItemID.size + 1)
        head.raw(keychain)
        id.write(to: &head)
        head.byte(accessibility)
        head.bytes.withUnsafeBytes { hmac.update(data: $0) }
        sealed.withUnsafeBytes { hmac.update(data: $0) }
        return hmac.finalize().withUnsafeBytes { Array($0.prefix(rowMACSize)) }
    }

    // MARK: Sealed item

    /// The context (associated data) of an item's sealed record: "SFKC item v2", 0, the
    /// accessibility code, the 33-byte item id.
    static func itemContext(accessibility: UInt8, id: ItemID) -> [UInt8] {
        var out = ByteWriter(itemContextPrefix, capacity: itemContextPrefix.count + 1 + ItemID.size)
        out.byte(accessibility)
        id.write(to: &out)
        return out.bytes
    }

    static let itemRecordVersion: UInt8 = 2
    static let namesRecordVersion: UInt8 = 1

    /// The plaintext of the `sealed` column: version byte 2, the names record as a field (4-byte
    /// big-endian length), then the secret to the end. It holds the secret: the writer has its
    /// exact size, so the array never moves, and the caller zeroes it.
    static func itemPlaintext(names: [UInt8], value: UnsafeRawBufferPointer) -> [UInt8] {
        var out = ByteWriter(capacity: 5 + names.count + value.count)
        out.byte(itemRecordVersion)
        out.field(names)
        out.raw(value)
        return out.bytes
    }

    /// Splits an opened item record into the ranges of its names record and its secret.
    static func splitItem(_ plain: [UInt8]) throws -> (names: Range<Int>, value: Range<Int>) {
        var reader = ByteReader(plain)
        let names = try corruptedUnlessRead("item record") { () -> Range<Int> in
            let version = try reader.byte("record version")
            guard version == itemRecordVersion else { throw KeychainError.corrupted("item record has unknown version \(version)") }
            let start = reader.offset + 4
            return start..<start + (try reader.field("names record")).count
        }
        return (names, names.upperBound..<plain.count)
    }

    /// Runs a read of `what`, reporting a field cut short as ``KeychainError/corrupted(_:)``.
    private static func corruptedUnlessRead<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch CipherError.truncated(let why) {
            throw KeychainError.corrupted("\(what) truncated: \(why)")
        } catch CipherError.invalidParameter(let why) {
            throw KeychainError.corrupted("\(what) is malformed: \(why)")
        }
    }

    // MARK: Names record

    private enum Tag: UInt8 { case service = 1, account, server, networkProtocol, port, path, label, comment }

    /// The names record, the first part of the item record (``itemPlaintext(names:value:)``):
    /// version byte 1, then records of tag (1 byte), 4-byte big-endian length and UTF-8 bytes,
    /// for each field that is present.
    static func encodeNames(key: ItemKey, label: String?, comment: String?) -> [UInt8] {
        let present: [(Tag, String)] = [(.service, key.service), (.account, key.account), (.server, key.server),
                                         (.networkProtocol, key.networkProtocol), (.port, key.port.map { String($0) }),
                                         (.path, key.path), (.label, label), (.comment, comment)]
            .compactMap { tag, text in text.map { (tag, $0) } }
        var out = ByteWriter(capacity: 1 + present.reduce(0) { $0 + 5 + $1.1.utf8.count })
        out.byte(namesRecordVersion)
        for (tag, text) in present {
            out.byte(tag.rawValue)
            out.field(text.utf8)
        }
        return out.bytes
    }

    static func decodeNames(_ record: ArraySlice<UInt8>, itemClass: ItemClass) throws -> (ItemKey, label: String?, comment: String?) {
        var bytes = Array(record)
        defer { zero(&bytes) }
        let fields = try nameFields(bytes)
        var port: Int?
        if let text = fields[Tag.port.rawValue] {
            guard let value = Int(text) else { throw KeychainError.corrupted("names record port is not a number") }
            port = value
        }
        let key = ItemKey(itemClass: itemClass, service: fields[Tag.service.rawValue] ?? "",
                          account: fields[Tag.account.rawValue] ?? "", server: fields[Tag.server.rawValue],
                          networkProtocol: fields[Tag.networkProtocol.rawValue], port: port, path: fields[Tag.path.rawValue])
        return (key, fields[Tag.label.rawValue], fields[Tag.comment.rawValue])
    }

    /// The fields of a names record by tag. Its reader lives only in this call, so the caller's
    /// buffer is unshared again when it zeroes it.
    private static func nameFields(_ bytes: [UInt8]) throws -> [UInt8: String] {
        var reader = ByteReader(bytes)
        return try corruptedUnlessRead("names record") {
            let version = try reader.byte("names version")
            guard version == namesRecordVersion else { throw KeychainError.corrupted("names record has unknown version \(version)") }
            var fields: [UInt8: String] = [:]
            while reader.remaining > 0 {
                let tag = try reader.byte("tag")
                let field = try reader.field("field \(tag)")
                guard let text = String(bytes: field, encoding: .utf8) else {
                    throw KeychainError.corrupted("names record field \(tag) is not UTF-8")
                }
                guard Tag(rawValue: tag) != nil, fields[tag] == nil else { throw KeychainError.corrupted("names record has a bad or repeated tag \(tag)") }
                fields[tag] = text
            }
            return fields
        }
    }

    /// Zeroes a temporary plaintext buffer (a write the optimiser keeps).
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { sf_secure_zero(base, $0.count) } }
    }
}
