import Cipher
import Foundation

/// Where a token's user PIN comes from. The PIN is held in `SecretBytes` and never in a
/// command line: a PIN given as an argument shows in process listings and shell history.
public enum PKCS11PINSource: Sendable {
    /// The first line of a file (one trailing newline dropped); `-` is standard input.
    case file(String)
    /// An environment variable, named (its value is copied straight into locked memory).
    case environment(String)
    /// A PIN the caller holds.
    case secret(SecretBytes)
    /// Asked for when needed (a terminal prompt); a `pin-source` in the URI is used instead.
    case prompt(@Sendable () throws -> SecretBytes)

    /// Reads the PIN.
    /// - Throws: ``HardwareKeyError/pinUnavailable(_:)``.
    /// - Returns: the PIN, in `SecretBytes`.
    public func read() throws(HardwareKeyError) -> SecretBytes {
        let source: SecretSource
        switch self {
        case .file(let path): source = .file(path)
        case .environment(let name): source = .environment(name)
        case .secret(let secret): return secret
        case .prompt(let ask): source = .prompt(ask)
        }
        do {
            return try source.read(maxLength: 4096)
        } catch let error as HardwareKeyError {
            throw error
        } catch let error as CipherError {
            if case .io(let why) = error { throw .pinUnavailable(why) }
            throw .pinUnavailable("\(error)")
        } catch {
            throw .pinUnavailable("\(error)")
        }
    }
}
