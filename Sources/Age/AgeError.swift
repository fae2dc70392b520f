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
import Cipher

/// Everything the age module can fail with.
///
/// The first five cases are the failure categories of the age specification and of its
/// conformance test kit; they stay apart so a caller (and the CLI's exit code) can tell a
/// malformed header from a wrong key from a damaged payload.
public enum AgeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The header does not parse: bad version line, malformed stanza, a recipient stanza that
    /// its identity rejects as malformed (wrong share length, all-zero shared secret, excessive
    /// scrypt work factor), an scrypt stanza mixed with others, or a missing nonce.
    case headerFailure(String)
    /// A file key was unwrapped, but the header MAC does not match: the header was altered.
    case headerMACFailure
    /// The header parsed, but no identity (key or passphrase) unwraps any of its stanzas.
    case noMatchingIdentity(String)
    /// The STREAM payload does not authenticate all the way to a final chunk: truncation,
    /// tampering, or trailing data. Only the plaintext verified before the failure was released.
    case payloadFailure(String)
    /// The ASCII armor is not strict PEM with the label `AGE ENCRYPTED FILE`.
    case armorFailure(String)
    /// A recipient string (`age1…`, `age1pq1…`, an SSH public key, `age1NAME1…`) or
    /// recipients file line is not valid, or a plugin failed to wrap the file key.
    case invalidRecipient(String)
    /// An identity string (`AGE-SECRET-KEY-1…`, `AGE-PLUGIN-…`) or identity file (SSH private
    /// key, encrypted identity file) is not valid, a passphrase-protected SSH key was needed, or
    /// a plugin failed to unwrap.
    case invalidIdentity(String)
    /// A parameter the caller passed is not acceptable (for example no recipients).
    case invalidArgument(String)
    /// A read, write or file operation failed.
    case io(String)
    /// In-place encryption replaced the plaintext with the age file, but overwriting the old
    /// plaintext blocks failed; they may still be on the disk.
    case plaintextNotShredded(String)
    /// A Cipher call failed (for example the system random generator, while making a file key,
    /// nonce, salt or ephemeral share). Its `description` is the `CipherError`'s own.
    case cipher(CipherError)
    /// An error that is not age's own, passed on with its own text: what an ``AgeIdentity`` or
    /// ``AgeRecipient`` of another module, or a passphrase provider given to this module, threw,
    /// or a failure of the crypto library. ``External/error`` is that error.
    case external(External)

    /// An error thrown by code outside the age module (see ``AgeError/external(_:)``).
    ///
    /// Two are equal when they are of the same type and print the same.
    public struct External: Error, Sendable, Equatable, CustomStringConvertible {
        /// The error as it was thrown.
        public let error: any Error

        /// Wraps `error`.
        /// - Parameter error: The error thrown outside the age module.
        public init(_ error: any Error) { self.error = error }

        /// The error's own description.
        public var description: String { String(describing: error) }

        /// Whether two wrapped errors are of the same type and print the same.
        /// - Parameters:
        ///   - a: One wrapped error.
        ///   - b: The other.
        /// - Returns: True when both are of one type with one description.
        public static func == (a: External, b: External) -> Bool {
            type(of: a.error) == type(of: b.error) && a.description == b.description
        }
    }

    public var description: String {
        switch self {
        case .headerFailure(let why): return "invalid age header: \(why)"
        case .headerMACFailure: return "the age header MAC does not match: the header was modified"
        case .noMatchingIdentity(let why): return "no identity matched any of the recipients: \(why)"
        case .payloadFailure(let why): return "the age payload failed to decrypt: \(why); only the plaintext verified before this point was written"
        case .armorFailure(let why): return "invalid ASCII armor: \(why)"
        case .invalidRecipient(let why): return "invalid recipient: \(why)"
        case .invalidIdentity(let why): return "invalid identity: \(why)"
        case .invalidArgument(let why): return "invalid argument: \(why)"
        case .io(let why): return why
        case .plaintextNotShredded(let why): return "the file was encrypted in place, but its old plaintext blocks could not be overwritten: \(why)"
        case .cipher(let error): return error.description
        case .external(let error): return error.description
        }
    }

    /// `error` as an ``AgeError``, printing as it did: an ``AgeError`` as it is, a
    /// `CipherError` as ``cipher(_:)``, a `SecureFile.Failure` as ``io(_:)`` (its
    /// description), anything else as ``external(_:)``.
    static func wrap(_ error: any Error) -> AgeError {
        if let error = error as? AgeError { return error }
        if let error = error as? CipherError { return .cipher(error) }
        if let error = error as? SecureFile.Failure { return .io(error.description) }
        return .external(External(error))
    }
}
