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

/// Random bytes and strings from the system CSPRNG. Fails closed: an OS failure throws,
/// never falls back to a weaker generator.
public enum SecureRandom {
    /// Fills `buffer` with random bytes.
    /// - Parameter buffer: The bytes to overwrite.
    /// - Throws: ``CipherError/randomUnavailable(_:)``.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CipherError) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        if let code = SystemRandom.fill(base, buffer.count) {
            MemoryProtection.zero(base, buffer.count)
            throw CipherError.randomUnavailable(String(cString: strerror(code)))
        }
    }

    /// Exactly `count` random bytes, for public values such as salts and nonces.
    /// Use ``SecretBytes/random(count:)`` for keys.
    /// - Parameter count: How many bytes.
    /// - Returns: The random bytes.
    /// - Throws: ``CipherError/invalidParameter(_:)`` for a negative count, ``CipherError/randomUnavailable(_:)``.
    public static func bytes(_ count: Int) throws(CipherError) -> [UInt8] {
        guard count >= 0 else { throw CipherError.invalidParameter("byte count \(count) is negative") }
        var result = [UInt8](repeating: 0, count: count)
        try result.withUnsafeMutableBytes { bytes in Result { () throws(CipherError) in try fill(bytes) } }.get()
        return result
    }

    /// A uniformly random integer in `0..<upperBound`, by rejection sampling (no modulo bias).
    /// - Parameter upperBound: The exclusive upper bound (at least 1).
    /// - Returns: A number in `0..<upperBound`.
    /// - Throws: ``CipherError/invalidParameter(_:)`` for a zero bound, ``CipherError/randomUnavailable(_:)``.
    public static func uniform(below upperBound: UInt64) throws(CipherError) -> UInt64 {
        guard upperBound > 0 else { throw CipherError.invalidParameter("upper bound must be positive") }
        let limit = UInt64.max - (UInt64.max % upperBound)
        while true {
            var value: UInt64 = 0
            try withUnsafeMutableBytes(of: &value) { (bytes) throws(CipherError) in try fill(bytes) }
            if value < limit { return value % upperBound }
        }
    }

    /// The default alphabet for random strings: letters, digits and the printable ASCII punctuation.
    public static let fullAlphabet: [Character] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    /// Letters and digits only.
    public static let alphanumeric: [Character] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    /// A string of `length` characters, each drawn uniformly from `alphabet`.
    /// - Parameters:
    ///   - length: How many characters.
    ///   - alphabet: The characters to draw from.
    /// - Returns: The random string.
    /// - Throws: ``CipherError/invalidParameter(_:)`` for an empty alphabet or negative length.
    public static func string(length: Int, alphabet: [Character] = fullAlphabet) throws(CipherError) -> String {
        guard length >= 0 else { throw CipherError.invalidParameter("length \(length) is negative") }
        guard !alphabet.isEmpty else { throw CipherError.invalidParameter("the alphabet is empty") }
        var result = ""
        result.reserveCapacity(length)
        for _ in 0..<length {
            result.append(alphabet[Int(try uniform(below: UInt64(alphabet.count)))])
        }
        return result
    }
}
