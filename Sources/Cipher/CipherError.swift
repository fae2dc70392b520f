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

/// Everything the cipher utilities can fail with. Each message says what went wrong and what to do.
public enum CipherError: Error, Equatable, Sendable {
    /// The OS random generator failed. Nothing was produced; there is no weaker fallback.
    case randomUnavailable(String)
    /// KDF parameters below the safe floor (for example PBKDF2 under 210,000 rounds, scrypt under 2^15).
    case kdfParametersTooWeak(String)
    /// KDF parameters above the ceiling accepted on decryption (scrypt logN over 22): a hostile header.
    case kdfParametersTooExpensive(String)
    /// A parameter outside what the operation accepts (key length, nonce length, count).
    case invalidParameter(String)
    /// The data is not in the sealed-data format (wrong magic) or is shorter than its header says.
    case truncated(String)
    /// The data names a format version this library does not know.
    case unknownVersion(UInt8)
    /// The data names an algorithm or KDF this library does not implement.
    case unsupportedAlgorithm(String)
    /// No key in the keyring has the key id the data was sealed with, or the passphrase/key is wrong.
    case wrongKey(String)
    /// Authentication failed: the data, its header or its context was changed.
    case tampered
    /// Input that is not valid in the named encoding.
    case invalidEncoding(String)
    /// A Codable value could not be encoded or decoded.
    case coding(String)
    /// A file or descriptor operation failed.
    case io(String)
}

extension CipherError: LocalizedError, CustomStringConvertible {
    public var description: String {
        switch self {
        case .randomUnavailable(let why): return "the system random generator failed (\(why)); nothing was generated"
        case .kdfParametersTooWeak(let why): return "key-derivation parameters are below the safe floor: \(why)"
        case .kdfParametersTooExpensive(let why): return "key-derivation parameters exceed the accepted ceiling: \(why); the data may be hostile"
        case .invalidParameter(let why): return "invalid parameter: \(why)"
        case .truncated(let why): return "the sealed data is truncated or not sealed data: \(why)"
        case .unknownVersion(let version): return "unknown sealed-data version \(version); a newer SecureFoundation may read it"
        case .unsupportedAlgorithm(let what): return "unsupported algorithm: \(what)"
        case .wrongKey(let why): return "wrong key: \(why)"
        case .tampered: return "authentication failed: the data, its header or its context was modified (or the passphrase is wrong)"
        case .invalidEncoding(let why): return "invalid encoding: \(why)"
        case .coding(let why): return "cannot encode or decode the value: \(why)"
        case .io(let why): return why
        }
    }
    public var errorDescription: String? { description }
}
