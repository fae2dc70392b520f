import Foundation
import Crypto
import Cipher
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

    static func itemClass(code: Int64) throws -> ItemClass {
        guard let value = UInt8(exactly: code), let itemClass = ItemClass(rawValue: value) else {
            throw KeychainError.corrupted("unknown item class \(code)")
        }
        return itemClass
    }

    // MARK: Blind indexes

    private static func appendField(_ out: inout [UInt8], _ text: String?) {
        guard let text else { out.append(0); return }
        out.append(1)
        appendBytes(&out, Array(text.utf8))
    }

    private static func appendBytes(_ out: inout [UInt8], _ bytes: [UInt8]) {
        appendUInt32(&out, UInt32(truncatingIfNeeded: bytes.count))
        out += bytes
    }

    private static func appendUInt32(_ out: inout [UInt8], _ value: UInt32) {
        out += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// The input of the name index: "SFKC name v1", 0, the class byte, then service, account,
    /// server, protocol, port (decimal text) and path, each as a presence byte (0 absent, 1
    /// present) and, when present, a 4-byte big-endian length and the UTF-8 bytes.
    static func nameIndexInput(_ key: ItemKey) -> [UInt8] {
        var out = Array("SFKC name v1".utf8) + [0, key.itemClass.rawValue]
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
        var out = Array("SFKC service v1".utf8) + [0, itemClass.rawValue]
        appendBytes(&out, Array(name.utf8))
        return out
    }

    static func mac(_ input: [UInt8], key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: input, using: key))
    }

    /// HMAC-SHA256 from a keyed prototype (the key's pads computed once; the struct is copied).
    static func mac(_ input: [UInt8], prototype: HMAC<SHA256>) -> BlindIndex {
        var hmac = prototype
        hmac.update(data: input)
        return hmac.finalize().withUnsafeBytes { BlindIndex($0) }
    }

    // MARK: Contexts (associated data)

    /// The context of a value: "SFKC value v1", 0, class byte, accessibility code, name index.
    static func valueContext(itemClass: UInt8, accessibility: UInt8, nameIndex: BlindIndex) -> [UInt8] {
        Array("SFKC value v1".utf8) + [0, itemClass, accessibility] + nameIndex.bytes
    }

    /// The context of the names: "SFKC names v1", 0, class byte, accessibility code, name index.
    static func namesContext(itemClass: UInt8, accessibility: UInt8, nameIndex: BlindIndex) -> [UInt8] {
        Array("SFKC names v1".utf8) + [0, itemClass, accessibility] + nameIndex.bytes
    }

    // MARK: Names record

    private enum Tag: UInt8 { case service = 1, account, server, networkProtocol, port, path, label, comment }

    /// The plaintext of the `names` column: version byte 1, then records of tag (1 byte),
    /// 4-byte big-endian length and UTF-8 bytes, for each field that is present.
    static func encodeNames(key: ItemKey, label: String?, comment: String?) -> [UInt8] {
        var out: [UInt8] = [1]
        func put(_ tag: Tag, _ text: String?) {
            guard let text else { return }
            out.append(tag.rawValue)
            appendBytes(&out, Array(text.utf8))
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

    static func decodeNames(_ bytes: [UInt8], itemClass: ItemClass) throws -> (ItemKey, label: String?, comment: String?) {
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
}

/// A 32-byte blind index held inline (four big-endian words), so that dictionary keys hash and
/// compare without allocation. Its order is the byte order of the index (as SQLite sorts blobs).
struct BlindIndex: Hashable, Comparable, Sendable {
    private var w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    /// From exactly 32 bytes.
    init(_ bytes: UnsafeRawBufferPointer) {
        func word(_ offset: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<offset + 8 { value = value << 8 | UInt64(bytes[index]) }
            return value
        }
        w0 = word(0); w1 = word(8); w2 = word(16); w3 = word(24)
    }

    /// From a database blob; nil unless it has 32 bytes.
    init?(_ data: Data) {
        guard data.count == 32 else { return nil }
        self = data.withUnsafeBytes { BlindIndex($0) }
    }

    /// The 32 bytes.
    var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(32)
        for word in [w0, w1, w2, w3] {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return out
    }

    /// The 32 bytes as a database blob.
    var data: Data { Data(bytes) }

    static func < (a: BlindIndex, b: BlindIndex) -> Bool {
        (a.w0, a.w1, a.w2, a.w3) < (b.w0, b.w1, b.w2, b.w3)
    }
}
