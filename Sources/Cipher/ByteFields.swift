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

/// Builds the byte layouts of the project's formats: bytes, big-endian integers and
/// length-prefixed fields. One writer for the sealed envelope's header, the vault state's
/// associated data, the keychain's blind-index inputs and records, the embedded-secrets blob and
/// the unlock agent's frame lengths, so a layout is written the same way everywhere.
///
/// Meant for public bytes: it grows an ordinary array, so secrets are assembled in
/// ``SecretBytes`` instead. A record that must pass through an array (a keychain item's
/// plaintext, the input of a sealing call) is written into a writer made with its exact
/// `capacity`, so the array never moves and leaves no copy behind, and its owner zeroes
/// ``bytes`` once the writer is gone.
package struct ByteWriter: Sendable {
    /// The bytes written so far.
    package private(set) var bytes: [UInt8]

    /// A writer starting with `prefix`.
    package init(_ prefix: [UInt8] = [], capacity: Int = 0) {
        bytes = prefix
        bytes.reserveCapacity(max(capacity, prefix.count))
    }

    /// Appends one byte.
    package mutating func byte(_ value: UInt8) {
        bytes.append(value)
    }

    /// Appends `value` in 2 bytes, big-endian.
    package mutating func uint16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xFF))
    }

    /// Appends `value` in 4 bytes, big-endian.
    package mutating func uint32(_ value: UInt32) {
        bytes.append(UInt8(value >> 24))
        bytes.append(UInt8(value >> 16 & 0xFF))
        bytes.append(UInt8(value >> 8 & 0xFF))
        bytes.append(UInt8(value & 0xFF))
    }

    /// Appends `value` in 8 bytes, big-endian.
    package mutating func uint64(_ value: UInt64) {
        uint32(UInt32(value >> 32))
        uint32(UInt32(value & 0xFFFF_FFFF))
    }

    /// Appends bytes as they are, without a length.
    package mutating func raw<Bytes: Collection>(_ field: Bytes) where Bytes.Element == UInt8 {
        bytes.append(contentsOf: field)
    }

    /// Appends a field with a 4-byte big-endian length in front (a length over 2^32 - 1 is
    /// clamped, which only bounds digest inputs: stored fields are far shorter).
    package mutating func field<Bytes: Collection>(_ field: Bytes) where Bytes.Element == UInt8 {
        uint32(UInt32(clamping: field.count))
        bytes.append(contentsOf: field)
    }

    /// Appends a field of at most 255 bytes with a 1-byte length in front.
    /// - Throws: ``CipherError/invalidParameter(_:)`` for a longer field (nothing is appended).
    package mutating func shortField<Bytes: Collection>(_ field: Bytes, _ what: String) throws(CipherError) where Bytes.Element == UInt8 {
        guard field.count <= 255 else { throw CipherError.invalidParameter("the \(what) is \(field.count) bytes; at most 255") }
        bytes.append(UInt8(field.count))
        bytes.append(contentsOf: field)
    }

    /// Appends KDF parameters in their one binary form: scrypt `1 ‖ logN (1) ‖ r (4) ‖ p (4)`,
    /// PBKDF2-HMAC-SHA256 `2 ‖ rounds (4)` (docs/FORMATS.md).
    package mutating func kdfParameters(_ parameters: KDFParameters) {
        switch parameters {
        case let .scrypt(logN, r, p):
            byte(KDFParameters.scryptID)
            byte(logN)
            uint32(r)
            uint32(p)
        case let .pbkdf2SHA256(rounds):
            byte(KDFParameters.pbkdf2SHA256ID)
            uint32(rounds)
        }
    }
}

/// Reads what ``ByteWriter`` writes, with every read bounds-checked: a short read is
/// ``CipherError/truncated(_:)`` naming what was being read and where.
package struct ByteReader: Sendable {
    /// The bytes read from.
    package let bytes: [UInt8]
    /// The offset of the next read.
    package private(set) var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// How many bytes are left.
    package var remaining: Int { bytes.count - offset }

    /// The next `count` bytes.
    package mutating func take(_ count: Int) throws(CipherError) -> ArraySlice<UInt8> {
        guard count >= 0, remaining >= count else {
            throw CipherError.truncated("needed \(count) bytes at offset \(offset), \(remaining) left")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// The next byte.
    package mutating func byte(_ what: String) throws(CipherError) -> UInt8 {
        guard remaining >= 1 else { throw CipherError.truncated("ends before the \(what) at offset \(offset)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// The next 2 bytes as a big-endian integer.
    package mutating func uint16(_ what: String) throws(CipherError) -> UInt16 {
        guard remaining >= 2 else { throw CipherError.truncated("ends before the \(what) at offset \(offset)") }
        return try take(2).reduce(0) { $0 << 8 | UInt16($1) }
    }

    /// The next 4 bytes as a big-endian integer.
    package mutating func uint32(_ what: String) throws(CipherError) -> UInt32 {
        guard remaining >= 4 else { throw CipherError.truncated("ends before the \(what) at offset \(offset)") }
        return try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The next 8 bytes as a big-endian integer.
    package mutating func uint64(_ what: String) throws(CipherError) -> UInt64 {
        guard remaining >= 8 else { throw CipherError.truncated("ends before the \(what) at offset \(offset)") }
        return try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A field with a 4-byte big-endian length in front, of at most `maximum` bytes.
    package mutating func field(_ what: String, maximum: Int = Int(UInt32.max)) throws(CipherError) -> ArraySlice<UInt8> {
        let length = Int(try uint32("length of the \(what)"))
        guard length <= maximum else { throw CipherError.invalidParameter("the \(what) is \(length) bytes; at most \(maximum)") }
        return try take(length)
    }

    /// A field with a 1-byte length in front.
    package mutating func shortField(_ what: String) throws(CipherError) -> ArraySlice<UInt8> {
        let length = Int(try byte("length of the \(what)"))
        return try take(length)
    }

    /// KDF parameters in the form ``ByteWriter/kdfParameters(_:)`` writes. Nothing is validated
    /// beyond the form: callers check the values against their floor and ceiling.
    /// - Throws: ``CipherError/truncated(_:)``, ``CipherError/unsupportedAlgorithm(_:)`` for an unknown KDF id.
    package mutating func kdfParameters() throws(CipherError) -> KDFParameters {
        let kdf = try byte("KDF id")
        switch kdf {
        case KDFParameters.scryptID:
            return .scrypt(logN: try byte("scrypt logN"), r: try uint32("scrypt r"), p: try uint32("scrypt p"))
        case KDFParameters.pbkdf2SHA256ID:
            return .pbkdf2SHA256(rounds: try uint32("PBKDF2 rounds"))
        default:
            throw CipherError.unsupportedAlgorithm("KDF id \(kdf)")
        }
    }
}

extension KDFParameters {
    /// The KDF ids of the binary form.
    static let scryptID: UInt8 = 1
    static let pbkdf2SHA256ID: UInt8 = 2
}
