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

    private static func appendField(_ out: inout [UInt8], _ text: String?) {
        guard let text else { out.append(0); return }
        out.append(1)
        appendText(&out, text)
    }

    /// A 4-byte big-endian length, then the UTF-8 bytes.
    private static func appendText(_ out: inout [UInt8], _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            appendUInt32(&out, UInt32(truncatingIfNeeded: utf8.count))
            out.append(contentsOf: utf8)
        }
    }

    private static func appendUInt32(_ out: inout [UInt8], _ value: UInt32) {
        out.append(UInt8(value >> 24))
        out.append(UInt8(value >> 16 & 0xFF))
        out.append(UInt8(value >> 8 & 0xFF))
        out.append(UInt8(value & 0xFF))
    }

    private static let itemContextPrefix = Array("SFKC item v2".utf8)
    private static let nameIndexPrefix = Array("SFKC name v1".utf8) + [0]
    private static let serviceIndexPrefix = Array("SFKC service v1".utf8) + [0]

    /// The input of the name index: "SFKC name v1", 0, the class byte, then service, account,
    /// server, protocol, port (decimal text) and path, each as a presence byte (0 absent, 1
    /// present) and, when present, a 4-byte big-endian length and the UTF-8 bytes.
    static func nameIndexInput(_ key: ItemKey) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(nameIndexPrefix.count + 1 + 6 * 5 + key.service.utf8.count + key.account.utf8.count
                            + (key.server?.utf8.count ?? 0) + (key.networkProtocol?.utf8.count ?? 0) + 20 + (key.path?.utf8.count ?? 0))
        out += nameIndexPrefix
        out.append(key.itemClass.rawValue)
        appendField(&out, key.service)
        appendField(&out, key.account)
        appendField(&out, key.server)
        appendField(&out, key.networkProtocol)
        appendField(&out, key.port.map { String($0) })
        appendField(&out, key.path)
        return out
    }

    /// The input of the service index: "SFKC service v1", 0, the class byte, then the service
    /// (generic passwords) or server (internet passwords) as a 4-byte length and the UTF-8 bytes.
    static func serviceIndexInput(itemClass: ItemClass, name: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(serviceIndexPrefix.count + 5 + name.utf8.count)
        out += serviceIndexPrefix
        out.append(itemClass.rawValue)
        appendText(&out, name)
        return out
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
        var head = [UInt8]()
        head.reserveCapacity(rowMACPrefix.count + keychain.count + ItemID.size + 1)
        head += rowMACPrefix
        head += keychain
        id.append(to: &head)
        head.append(accessibility)
        head.withUnsafeBytes { hmac.update(data: $0) }
        sealed.withUnsafeBytes { hmac.update(data: $0) }
        return hmac.finalize().withUnsafeBytes { Array($0.prefix(rowMACSize)) }
    }

    // MARK: Sealed item

    /// The context (associated data) of an item's sealed record: "SFKC item v2", 0, the
    /// accessibility code, the 33-byte item id.
    static func itemContext(accessibility: UInt8, id: ItemID) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(itemContextPrefix.count + 2 + ItemID.size)
        out += itemContextPrefix
        out.append(0)
        out.append(accessibility)
        id.append(to: &out)
        return out
    }

    /// The plaintext of the `sealed` column: version byte 2, the names record's length (4 bytes,
    /// big-endian), the names record, then the secret to the end.
    static func itemPlaintext(names: [UInt8], value: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(5 + names.count + value.count)
        out.append(2)
        appendUInt32(&out, UInt32(truncatingIfNeeded: names.count))
        out += names
        out += value
        return out
    }

    /// Splits an opened item record into the ranges of its names record and its secret.
    static func splitItem(_ plain: [UInt8]) throws -> (names: Range<Int>, value: Range<Int>) {
        guard plain.count >= 5, plain[0] == 2 else {
            throw KeychainError.corrupted("item record has unknown version \(plain.first.map { String($0) } ?? "none")")
        }
        let length = Int(plain[1]) << 24 | Int(plain[2]) << 16 | Int(plain[3]) << 8 | Int(plain[4])
        guard plain.count - 5 >= length else { throw KeychainError.corrupted("item record's names overrun the record") }
        return (5..<5 + length, 5 + length..<plain.count)
    }

    // MARK: Names record

    private enum Tag: UInt8 { case service = 1, account, server, networkProtocol, port, path, label, comment }

    /// The names record, the first part of the item record (``itemPlaintext(names:value:)``):
    /// version byte 1, then records of tag (1 byte), 4-byte big-endian length and UTF-8 bytes,
    /// for each field that is present.
    static func encodeNames(key: ItemKey, label: String?, comment: String?) -> [UInt8] {
        var out: [UInt8] = [1]
        func put(_ tag: Tag, _ text: String?) {
            guard let text else { return }
            out.append(tag.rawValue)
            appendText(&out, text)
        }
        put(.service, key.service)
        put(.account, key.account)
        put(.server, key.server)
        put(.networkProtocol, key.networkProtocol)
        put(.port, key.port.map { String($0) })
        put(.path, key.path)
        put(.label, label)
        put(.comment, comment)
        return out
    }

    static func decodeNames(_ record: ArraySlice<UInt8>, itemClass: ItemClass) throws -> (ItemKey, label: String?, comment: String?) {
        var bytes = Array(record)
        defer { zero(&bytes) }
        guard bytes.first == 1 else { throw KeychainError.corrupted("names record has unknown version \(bytes.first.map { String($0) } ?? "none")") }
        var fields: [UInt8: String] = [:]
        var offset = 1
        while offset < bytes.count {
            guard bytes.count - offset >= 5 else { throw KeychainError.corrupted("names record truncated at byte \(offset)") }
            let tag = bytes[offset]
            let length = Int(bytes[offset + 1]) << 24 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
            offset += 5
            guard bytes.count - offset >= length else { throw KeychainError.corrupted("names record field \(tag) overruns the record") }
            guard let text = String(bytes: bytes[offset..<offset + length], encoding: .utf8) else {
                throw KeychainError.corrupted("names record field \(tag) is not UTF-8")
            }
            guard Tag(rawValue: tag) != nil, fields[tag] == nil else { throw KeychainError.corrupted("names record has a bad or repeated tag \(tag)") }
            fields[tag] = text
            offset += length
        }
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

    /// Zeroes a temporary plaintext buffer (a write the optimiser keeps).
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { sf_secure_zero(base, $0.count) } }
    }
}
