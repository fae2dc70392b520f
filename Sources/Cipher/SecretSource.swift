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

/// Where a secret that a program is given comes from: a passcode, the answers, a passphrase, a
/// token PIN, a key file. The one reader of them all, straight into locked memory; never a
/// command-line argument (it shows in process listings and shell history).
///
/// ```swift
/// let passcode = try SecretSource.file("/run/secrets/passcode").read()
/// defer { passcode.wipe() }
/// ```
public enum SecretSource: Sendable {
    /// A file (`-`: standard input), read to its end; see ``read(maxLength:trimNewline:)``
    /// for the trailing newline.
    case file(String)
    /// An environment variable, named: its value is copied straight into locked memory.
    case environment(String)
    /// A secret the caller holds (returned as it is).
    case secret(SecretBytes)
    /// Asked for when needed (a terminal prompt); what the closure throws is passed on unchanged.
    case prompt(@Sendable () throws -> SecretBytes)

    /// Reads the secret.
    /// - Parameters:
    ///   - maxLength: Input longer than this is refused (a file or standard input).
    ///   - trimNewline: Whether one trailing newline (`\n` or `\r\n`) of a file or of standard
    ///     input is dropped, as secret files are usually written (false for a key file read as
    ///     it is).
    /// - Returns: The secret, which may be empty for a file (callers that refuse an empty
    ///   secret say so with their own option's name).
    /// - Throws: ``CipherError/io(_:)`` when the file cannot be read or is larger than
    ///   `maxLength`, or the variable is not set or empty; a prompt's own errors unchanged.
    public func read(maxLength: Int = 64 * 1024, trimNewline: Bool = true) throws -> SecretBytes {
        switch self {
        case .file("-"):
            return try SecretBytes(readingFrom: 0, maxLength: maxLength, trimNewline: trimNewline, name: "standard input")
        case .file(let path):
            let fd: Int32
            do { fd = try FileCalls.open(path, O_RDONLY | O_CLOEXEC) } catch {
                throw CipherError.io("cannot open \(path): \(String(cString: strerror(error.code)))")
            }
            defer { FileCalls.close(fd) }
            return try SecretBytes(readingFrom: fd, maxLength: maxLength, trimNewline: trimNewline, name: path)
        case .environment(let name):
            guard let value = getenv(name) else { throw CipherError.io("the environment variable \(name) is not set") }
            let length = strlen(value)
            guard length > 0 else { throw CipherError.io("the environment variable \(name) is empty") }
            guard length <= maxLength else { throw CipherError.io("the environment variable \(name) is longer than \(maxLength) bytes") }
            return SecretBytes(copying: UnsafeRawBufferPointer(start: value, count: length))
        case .secret(let secret):
            return secret
        case .prompt(let ask):
            return try ask()
        }
    }
}
