import Cipher

/// A `pkcs11:` URI (RFC 7512) naming a key in a token: `pkcs11:token=Fleet;object=tls;id=%01`.
///
/// Path attributes select the token (`token`, `manufacturer`, `serial`, `model`, `slot-id`,
/// `slot-description`, `slot-manufacturer`, `library-manufacturer`, `library-description`;
/// `library-version` is accepted and not checked) and the object (`object` = CKA_LABEL, `id` = CKA_ID, `type`); values are percent-decoded.
/// Query attributes: `pin-source=file:/PATH` (or an absolute path) reads the PIN from that
/// file; `module-path=/PATH` names the module (under the same loading rules as one given by
/// option). Refused with ``HardwareKeyError/invalidURI(_:)``: `pin-value` (a PIN in a URI
/// ends up in shell history and process listings), `module-name` (a module is loaded by path
/// only), `pin-source` naming a program, unknown attributes not starting with `x-`, repeated
/// attributes and malformed `%` escapes. A `type` other than `private` (or `secret-key` for
/// ``PKCS11SecretKey``) is refused when the key is opened.
public struct PKCS11URI: Sendable, Equatable, CustomStringConvertible {
    /// Token attributes: CK_TOKEN_INFO fields (label, manufacturer, model, serial).
    public var token: String?
    public var manufacturer: String?
    public var model: String?
    public var serial: String?
    /// Slot attributes.
    public var slotID: UInt?
    public var slotDescription: String?
    public var slotManufacturer: String?
    /// Library attributes (CK_INFO).
    public var libraryManufacturer: String?
    public var libraryDescription: String?
    /// The object's CKA_LABEL, as bytes (percent-decoded).
    public var object: [UInt8]?
    /// The object's CKA_ID.
    public var id: [UInt8]?
    /// `type=`: `private`, `public`, `cert`, `secret-key` or `data`.
    public var type: String?
    /// `pin-source`: the file the PIN is read from.
    public var pinFile: String?
    /// `module-path`: the module to load.
    public var modulePath: String?

    /// The text it was parsed from.
    public let text: String

    /// Parses `text`.
    /// - Throws: ``HardwareKeyError/invalidURI(_:)`` saying what is wrong.
    /// - Parameter text: a `pkcs11:` URI (RFC 7512), at most 4096 bytes.
    public init(_ text: String) throws(HardwareKeyError) {
        self.text = text
        guard text.utf8.count <= 4096 else { throw .invalidURI("longer than 4096 bytes") }
        guard text.hasPrefix("pkcs11:") else { throw .invalidURI("it does not start with pkcs11:") }
        let rest = text.dropFirst("pkcs11:".count)
        let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts[0]
        let query = parts.count > 1 ? parts[1] : ""
        var seen = Set<String>()
        for attribute in path.split(separator: ";", omittingEmptySubsequences: true) {
            let (name, value) = try Self.pair(attribute, seen: &seen)
            switch name {
            case "token": token = try Self.string(value, name)
            case "manufacturer": manufacturer = try Self.string(value, name)
            case "model": model = try Self.string(value, name)
            case "serial": serial = try Self.string(value, name)
            case "slot-description": slotDescription = try Self.string(value, name)
            case "slot-manufacturer": slotManufacturer = try Self.string(value, name)
            case "library-manufacturer": libraryManufacturer = try Self.string(value, name)
            case "library-description": libraryDescription = try Self.string(value, name)
            case "library-version": break
            case "slot-id":
                guard let number = UInt(try Self.string(value, name)) else { throw .invalidURI("slot-id is not a decimal number") }
                slotID = number
            case "object": object = value
            case "id":
                guard !value.isEmpty else { throw .invalidURI("id= is empty") }
                id = value
            case "type":
                let kind = try Self.string(value, name)
                guard ["private", "public", "cert", "secret-key", "data"].contains(kind) else {
                    throw .invalidURI("type=\(kind) is not private, public, cert, secret-key or data")
                }
                type = kind
            default:
                guard name.hasPrefix("x-") else { throw .invalidURI("unknown path attribute \(name)") }
            }
        }
        for attribute in query.split(separator: "&", omittingEmptySubsequences: true) {
            let (name, value) = try Self.pair(attribute, seen: &seen)
            switch name {
            case "pin-source":
                let source = try Self.string(value, name)
                if source.hasPrefix("file:") {
                    var file = String(source.dropFirst("file:".count))
                    // file:///path and file:/path both name /path.
                    if file.hasPrefix("//") { file = String(file.dropFirst(2)) }
                    guard file.hasPrefix("/") else { throw .invalidURI("pin-source=file: needs an absolute path") }
                    pinFile = file
                } else if source.hasPrefix("/") {
                    pinFile = source
                } else {
                    throw .invalidURI("pin-source must be file:/PATH (a program or other scheme is not run)")
                }
            case "pin-value":
                throw .invalidURI("pin-value is refused: a PIN in a URI ends up in shell history and process listings; "
                    + "use pin-source=file:/PATH, --pin-file, --pin-env or the prompt")
            case "module-name":
                throw .invalidURI("module-name is refused: a module is loaded by absolute path only (module-path= or --module)")
            case "module-path":
                let module = try Self.string(value, name)
                guard module.hasPrefix("/") else { throw .invalidURI("module-path must be absolute") }
                modulePath = module
            default:
                guard name.hasPrefix("x-") else { throw .invalidURI("unknown query attribute \(name)") }
            }
        }
    }

    public var description: String { text }

    /// A short text naming the token the URI selects, for messages.
    var tokenDescription: String {
        var parts: [String] = []
        if let token { parts.append("token=\(token)") }
        if let serial { parts.append("serial=\(serial)") }
        if let model { parts.append("model=\(model)") }
        if let manufacturer { parts.append("manufacturer=\(manufacturer)") }
        if let slotID { parts.append("slot-id=\(slotID)") }
        return parts.isEmpty ? "any token" : parts.joined(separator: ";")
    }

    /// A short text naming the object the URI selects, for messages.
    var objectDescription: String {
        var parts: [String] = []
        if let object { parts.append("object=\(String(decoding: object, as: UTF8.self))") }
        if let id { parts.append("id=" + Self.percentHex(id)) }
        return parts.isEmpty ? "any key" : parts.joined(separator: ";")
    }

    /// Every byte as `%xx` (lower-case hex), as an `id` is written in a URI.
    static func percentHex(_ bytes: [UInt8]) -> String {
        Encoding.hex(bytes).utf8.enumerated().reduce(into: "") { out, pair in
            if pair.offset % 2 == 0 { out += "%" }
            out.append(Character(Unicode.Scalar(pair.element)))
        }
    }

    private static func pair(_ attribute: Substring, seen: inout Set<String>) throws(HardwareKeyError) -> (String, [UInt8]) {
        guard let equals = attribute.firstIndex(of: "=") else { throw .invalidURI("attribute \(attribute) has no =") }
        let name = String(attribute[..<equals])
        guard !name.isEmpty else { throw .invalidURI("an attribute has no name") }
        guard seen.insert(name).inserted else { throw .invalidURI("attribute \(name) appears twice") }
        return (name, try percentDecoded(attribute[attribute.index(after: equals)...], name))
    }

    /// RFC 3986 percent-decoding: `%HH` is one byte; a `%` not followed by two hex digits is refused.
    static func percentDecoded(_ text: Substring, _ name: String) throws(HardwareKeyError) -> [UInt8] {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard let high = hex(bytes[safe: index + 1]), let low = hex(bytes[safe: index + 2])
                else { throw .invalidURI("\(name): % must be followed by two hexadecimal digits") }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(byte)
                index += 1
            }
        }
        return out
    }

    private static func hex(_ byte: UInt8?) -> UInt8? {
        switch byte {
        case .some(let b) where b >= 0x30 && b <= 0x39: b - 0x30
        case .some(let b) where b >= 0x41 && b <= 0x46: b - 0x41 + 10
        case .some(let b) where b >= 0x61 && b <= 0x66: b - 0x61 + 10
        default: nil
        }
    }

    private static func string(_ value: [UInt8], _ name: String) throws(HardwareKeyError) -> String {
        guard let text = String(validating: value, as: UTF8.self) else { throw .invalidURI("\(name) is not UTF-8") }
        return text
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
