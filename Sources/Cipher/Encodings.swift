#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Transport encodings: base64, base64url without padding, hex and percent-encoding.
/// Decoders are strict: any character outside the encoding is an error, never skipped.
public enum Encoding {
    /// Standard base64 with padding (RFC 4648 §4).
    /// - Parameter bytes: The bytes to encode.
    /// - Returns: Padded base64 text.
    public static func base64<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
    }

    /// Decodes standard padded base64.
    /// - Parameter text: Padded base64 text.
    /// - Returns: The decoded bytes.
    /// - Throws: ``CipherError/invalidEncoding(_:)``.
    public static func fromBase64(_ text: String) throws(CipherError) -> [UInt8] {
        guard text.utf8.count % 4 == 0, let data = Data(base64Encoded: text) else {
            throw CipherError.invalidEncoding("not valid padded base64")
        }
        return [UInt8](data)
    }

    /// base64url without padding (RFC 4648 §5), as used in URLs and tokens.
    /// - Parameter bytes: The bytes to encode.
    /// - Returns: Unpadded base64url text.
    public static func base64URL<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let standard = base64(bytes).utf8
        return String(decoding: standard.lazy.filter { $0 != 0x3D }.map { $0 == 0x2B ? 0x2D : $0 == 0x2F ? 0x5F : $0 }, as: UTF8.self)
    }

    /// Decodes unpadded base64url; padding or standard-alphabet characters are refused.
    /// - Parameter text: Unpadded base64url text.
    /// - Returns: The decoded bytes.
    /// - Throws: ``CipherError/invalidEncoding(_:)``.
    public static func fromBase64URL(_ text: String) throws(CipherError) -> [UInt8] {
        guard text.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }),
              text.utf8.count % 4 != 1 else {
            throw CipherError.invalidEncoding("not valid unpadded base64url")
        }
        var standard = String(decoding: text.utf8.map { $0 == 0x2D ? 0x2B : $0 == 0x5F ? 0x2F : $0 }, as: UTF8.self)
        while standard.utf8.count % 4 != 0 { standard += "=" }
        let decoded = try fromBase64(standard)
        // Refuse non-canonical encodings (unused low bits set).
        guard base64URL(decoded) == text else { throw CipherError.invalidEncoding("non-canonical base64url") }
        return decoded
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lower-case hex.
    /// - Parameter bytes: The bytes to encode.
    /// - Returns: Two lower-case hex digits per byte.
    public static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex in either case.
    /// - Parameter text: Hex digits, either case, two per byte.
    /// - Returns: The decoded bytes.
    /// - Throws: ``CipherError/invalidEncoding(_:)`` on an odd length or a non-hex character.
    public static func fromHex(_ text: String) throws(CipherError) -> [UInt8] {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { throw CipherError.invalidEncoding("hex has an odd number of digits") }
        func value(_ c: UInt8) throws(CipherError) -> UInt8 {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x61...0x66: return c - 0x61 + 10
            case 0x41...0x46: return c - 0x41 + 10
            default: throw CipherError.invalidEncoding("'\(Character(Unicode.Scalar(c)))' is not a hex digit")
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            out.append(try value(chars[index]) << 4 | value(chars[index + 1]))
            index += 2
        }
        return out
    }

    /// Percent-encodes every byte except RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`),
    /// so the result is safe in any URL component or form body.
    /// - Parameter text: The text (its UTF-8 bytes are encoded).
    /// - Returns: The percent-encoded text.
    public static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E:
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + hex([byte]).uppercased()
            }
        }
        return out
    }

    /// Decodes percent-encoding; the result must be UTF-8.
    /// - Parameter text: Percent-encoded text.
    /// - Returns: The decoded text.
    /// - Throws: ``CipherError/invalidEncoding(_:)`` on a malformed escape or invalid UTF-8.
    public static func percentDecode(_ text: String) throws(CipherError) -> String {
        let chars = Array(text.utf8)
        var out = [UInt8]()
        var index = 0
        while index < chars.count {
            if chars[index] == 0x25 {
                guard index + 2 < chars.count + 0, index + 2 <= chars.count - 1 else {
                    throw CipherError.invalidEncoding("truncated percent escape")
                }
                out.append(contentsOf: try fromHex(String(decoding: chars[(index + 1)...(index + 2)], as: UTF8.self)))
                index += 3
            } else {
                out.append(chars[index])
                index += 1
            }
        }
        guard let string = String(bytes: out, encoding: .utf8) else {
            throw CipherError.invalidEncoding("percent-decoded bytes are not UTF-8")
        }
        return string
    }
}
