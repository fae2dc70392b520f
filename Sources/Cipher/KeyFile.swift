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

/// A file that holds a raw 256-bit key, as ``SealingKey`` and a database's raw SQLCipher key
/// take it: exactly 32 raw bytes, or 64 hex digits (either case) with at most one trailing
/// newline (`\n` or `\r\n`), which is what `random -n 32`, `db export-key` and `openssl rand
/// -hex 32` write. The key is read and decoded in locked memory; no copy of it is left.
public enum KeyFile {
    /// The key's length in bytes.
    public static let keyLength = 32

    /// Reads the key file at `path`.
    /// - Parameter path: The key file.
    /// - Returns: The 32-byte key, in locked memory.
    /// - Throws: ``CipherError/io(_:)`` when the file cannot be read;
    ///   ``CipherError/invalidEncoding(_:)`` when it is not a key file (the message says what a
    ///   key file is).
    public static func read(_ path: String) throws(CipherError) -> SecretBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CipherError.io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let raw = try SecretBytes(readingFrom: fd, maxLength: 1024, trimNewline: false, name: path)
        defer { raw.wipe() }
        return try decode(raw, name: path)
    }

    /// Decodes the bytes of a key file.
    /// - Parameters:
    ///   - raw: The file's bytes.
    ///   - name: What the file is called in the error message.
    /// - Returns: The 32-byte key, in locked memory.
    /// - Throws: ``CipherError/invalidEncoding(_:)`` when `raw` is not a key file.
    public static func decode(_ raw: SecretBytes, name: String = "the key file") throws(CipherError) -> SecretBytes {
        if raw.count == keyLength { return raw.slice(0..<keyLength) }
        let hexDigits = raw.withUnsafeBytes { bytes -> Bool in
            switch bytes.count {
            case 64: return true
            case 65: return bytes[64] == 0x0A
            case 66: return bytes[64] == 0x0D && bytes[65] == 0x0A
            default: return false
            }
        }
        guard hexDigits else {
            throw CipherError.invalidEncoding("\(name) holds \(raw.count) bytes; a key file is exactly 32 raw bytes, or 64 hex digits and at most one newline")
        }
        return try raw.withUnsafeBytes { (bytes) throws(CipherError) -> SecretBytes in
            try SecretBytes(count: keyLength) { (target) throws(CipherError) in
                for index in 0..<keyLength {
                    guard let high = SecretBytes.hexValue(bytes[2 * index]), let low = SecretBytes.hexValue(bytes[2 * index + 1]) else {
                        throw CipherError.invalidEncoding("\(name) is neither 32 raw bytes nor 64 hex digits")
                    }
                    target[index] = high << 4 | low
                }
            }
        }
    }
}

extension SecretBytes {
    /// The bytes as lower-case hex digits, in locked memory (for a secret that must be shown or
    /// written as text, such as a key for SQLCipher's `PRAGMA key = "x'…'"`).
    /// - Parameter newline: Whether a newline follows the digits.
    /// - Returns: Two digits per byte (and the newline).
    public func hexEncoded(newline: Bool = false) -> SecretBytes {
        let digits = Array("0123456789abcdef".utf8)
        return SecretBytes(count: count * 2 + (newline ? 1 : 0)) { out in
            withUnsafeBytes { raw in
                for (index, byte) in raw.enumerated() {
                    out[2 * index] = digits[Int(byte >> 4)]
                    out[2 * index + 1] = digits[Int(byte & 0x0F)]
                }
            }
            if newline { out[count * 2] = 0x0A }
        }
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
