import Foundation

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
        }
    }
}
