import Foundation
import Vault

/// Everything protected files can fail with; each message says what to do.
public enum ProtectedFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class's key cannot be used now (the vault is locked, or has not been unlocked since
    /// the process started, or is not set up).
    case locked(FileProtectionClass, ClassKeyUnavailableReason)
    /// A completeUnlessOpen file cannot be written while locked because the class's key pair
    /// has not been made yet: it is made while the vault is unlocked (`vault init`, any
    /// unlocked command, ``ProtectedFiles/prepareClasses()``).
    case noKeyPairYet(FileProtectionClass)
    /// The file is not a protected file (not a binary age file, or of no class this vault has).
    case notProtectedFile(path: String, reason: String)
    /// A thisDeviceOnly class whose key depends on another device's key (a copied data
    /// directory or file), or the device key is missing.
    case wrongDevice(FileProtectionClass, path: String)
    /// The file's header, class stanza, wrapped key or payload does not authenticate.
    case tampered(path: String, reason: String)
    /// The key table of the protected-file classes is damaged, altered or from another vault.
    case keyTable(String)
    /// A file or directory is accessible to others, owned by another user, or cannot be opened.
    case permission(path: String, reason: String)
    /// The file was replaced or written while its header was being rewritten (a class change
    /// or re-wrap); it was left as the other writer made it.
    case modifiedDuringChange(path: String)
    /// The vault failed with its own typed error: a damaged, truncated or rolled-back key file
    /// (`always.key`, `vault.state`), a full disk while it wrote one, an erased vault. The
    /// vault's message says what to do.
    case vault(VaultError)
    /// An argument is not acceptable.
    case invalidArgument(String)
    /// A read, write or file operation failed.
    case io(String)

    public var description: String {
        switch self {
        case let .locked(cls, reason):
            return "the \(cls.name) protected-file class is unavailable: \(reason)"
        case let .noKeyPairYet(cls):
            return "the \(cls.name) key pair of this vault has not been made yet (it is made while the vault is unlocked): unlock once (`vault init` does; so does any `protect` command given --passcode-file or --answers-file, such as `securefoundation protect status DIR --passcode-file pin.txt`; in code `ProtectedFiles.prepareClasses()`), then \(cls.name) files can be written while locked"
        case let .notProtectedFile(path, reason):
            return "\(path) is not a protected file: \(reason)"
        case let .wrongDevice(cls, path):
            return "\(path) is of class \(cls.name), whose key is bound to another device (or the device key is missing); it opens only on the device that wrote it"
        case let .tampered(path, reason):
            return "\(path) was modified or damaged: \(reason); restore it from a backup"
        case let .keyTable(why):
            return "the protected-file key table is unusable: \(why)"
        case let .permission(path, reason):
            return "permission problem with \(path): \(reason)"
        case let .modifiedDuringChange(path):
            return "\(path) was replaced or modified while its header was being rewritten; it was left as it is now: run the change again"
        case let .vault(error):
            return "\(error)"
        case let .invalidArgument(why):
            return "invalid argument: \(why)"
        case let .io(why):
            return why
        }
    }
}
