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

/// The canonical encoding of Codable values: JSON with sorted keys, no whitespace, unescaped
/// slashes, dates as seconds since 1970 and data as base64. The same value gives the same bytes
/// on every run and platform (for types whose own `encode(to:)` is deterministic).
public enum CanonicalEncoding {
    /// Encodes `value` canonically.
    /// - Parameter value: The value.
    /// - Returns: Its canonical JSON bytes.
    /// - Throws: ``CipherError/coding(_:)``.
    public static func encode<Value: Encodable>(_ value: Value) throws(CipherError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.dataEncodingStrategy = .base64
        encoder.nonConformingFloatEncodingStrategy = .throw
        do { return try encoder.encode(value) } catch { throw CipherError.coding("\(error)") }
    }

    /// Decodes a value written by ``encode(_:)``.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: Canonical (or any valid) JSON bytes.
    /// - Returns: The decoded value.
    /// - Throws: ``CipherError/coding(_:)``.
    public static func decode<Value: Decodable>(_ type: Value.Type, from data: some DataProtocol) throws(CipherError) -> Value {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        decoder.dataDecodingStrategy = .base64
        do { return try decoder.decode(type, from: Data(data)) } catch { throw CipherError.coding("\(error)") }
    }
}
