import Foundation
import Cipher

/// Everything reading an embedded secret can fail with. Messages name the secret, never its value.
public enum EmbeddedSecretsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The generated data or the key shares in the binary were altered (or the blob is not one
    /// this library wrote). Rebuild the program; do not trust this binary.
    case tampered(String)
    /// The secrets were sealed with a run-time share and none was found where the manifest said.
    case runtimeShareMissing(String)
    /// A run-time share was found but it is not the one the secrets were sealed with.
    case runtimeShareWrong(String)
    /// The blob holds no secret of that name and type (the generated code and the blob disagree).
    case notFound(String)
    /// A value decoded from the blob is not of its declared type (for example an Int that is not a number).
    case invalidValue(String)
    /// A Cipher call failed: a credential file holding the run-time share cannot be read, the
    /// system random generator failed, or a salt, nonce, name or value given to
    /// ``SealedSecretsFormat/seal(_:manifestVersion:buildKey:runtimeShare:)`` is out of range.
    /// Its `description` is the `CipherError`'s own.
    case cipher(CipherError)

    public var description: String {
        switch self {
        case let .tampered(detail):
            return "embedded secrets: the sealed data or key shares were altered (\(detail)); rebuild the program from its sources"
        case let .runtimeShareMissing(detail):
            return "embedded secrets: the run-time share is missing: \(detail); supply it where the manifest says before reading a secret"
        case let .runtimeShareWrong(detail):
            return "embedded secrets: the run-time share is wrong: \(detail); supply the share the program was built with"
        case let .notFound(name):
            return "embedded secrets: no secret \"\(name)\" of that type in the sealed data; regenerate the code from the manifest"
        case let .invalidValue(name):
            return "embedded secrets: the secret \"\(name)\" does not decode as its declared type; regenerate the code from the manifest"
        case let .cipher(error):
            return error.description
        }
    }
}
