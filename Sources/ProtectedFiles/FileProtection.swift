import Foundation
import Vault

/// The four data-protection classes of a file, as in `NSFileProtectionType`.
///
/// | FileProtection | iOS (`NSFileProtectionType`) | Keychain accessibility of its key | Read | Write |
/// |---|---|---|---|---|
/// | ``complete`` | `.complete` | `whenUnlocked` | unlocked | unlocked |
/// | ``completeUnlessOpen`` | `.completeUnlessOpen` | `whenUnlocked` (identity) | unlocked | any time |
/// | ``completeUntilFirstUserAuthentication`` | `.completeUntilFirstUserAuthentication` | `afterFirstUnlock` | after the first unlock | after the first unlock |
/// | ``none`` | `.none` | `always` | any time | any time |
public enum FileProtection: String, Sendable, Hashable, Codable, CaseIterable {
    /// Readable and writable only while the vault is unlocked.
    case complete
    /// Writable at any time (only the class recipient is used); readable only while unlocked.
    case completeUnlessOpen
    /// Readable and writable from the first unlock of the process until it ends, also after `lock()`.
    case completeUntilFirstUserAuthentication
    /// Protected by the data directory's always key (and the device key with thisDeviceOnly) only.
    case none

    /// The vault protection class whose key seals this class's identity.
    public var vaultClass: ProtectionClass {
        switch self {
        case .complete, .completeUnlessOpen: return .whenUnlocked
        case .completeUntilFirstUserAuthentication: return .afterFirstUnlock
        case .none: return .always
        }
    }

    /// The name of the iOS constant (`NSFileProtectionComplete`, ...).
    public var iOSName: String {
        switch self {
        case .complete: return "NSFileProtectionComplete"
        case .completeUnlessOpen: return "NSFileProtectionCompleteUnlessOpen"
        case .completeUntilFirstUserAuthentication: return "NSFileProtectionCompleteUntilFirstUserAuthentication"
        case .none: return "NSFileProtectionNone"
        }
    }
}

/// A file protection class, optionally bound to this device: each of the eight has its own
/// X25519 key pair.
public struct FileProtectionClass: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The protection.
    public var protection: FileProtection
    /// Whether the class key also depends on the device key, so a copied data directory opens
    /// nothing elsewhere.
    public var thisDeviceOnly: Bool

    /// Creates a class.
    /// - Parameters:
    ///   - protection: When the class's files can be read.
    ///   - thisDeviceOnly: Whether the class key also depends on the device key.
    public init(_ protection: FileProtection, thisDeviceOnly: Bool = false) {
        self.protection = protection
        self.thisDeviceOnly = thisDeviceOnly
    }

    public static let complete = FileProtectionClass(.complete)
    public static let completeUnlessOpen = FileProtectionClass(.completeUnlessOpen)
    public static let completeUntilFirstUserAuthentication = FileProtectionClass(.completeUntilFirstUserAuthentication)
    public static let none = FileProtectionClass(.none)
    public static let completeThisDeviceOnly = FileProtectionClass(.complete, thisDeviceOnly: true)
    public static let completeUnlessOpenThisDeviceOnly = FileProtectionClass(.completeUnlessOpen, thisDeviceOnly: true)
    public static let completeUntilFirstUserAuthenticationThisDeviceOnly = FileProtectionClass(.completeUntilFirstUserAuthentication, thisDeviceOnly: true)
    public static let noneThisDeviceOnly = FileProtectionClass(.none, thisDeviceOnly: true)

    /// All eight classes, in a stable order.
    package static let allValues: [FileProtectionClass] =
        FileProtection.allCases.map { FileProtectionClass($0) } + FileProtection.allCases.map { FileProtectionClass($0, thisDeviceOnly: true) }

    /// The vault accessibility whose class key seals this class's identity.
    public var accessibility: Accessibility { Accessibility(protection.vaultClass, thisDeviceOnly: thisDeviceOnly) }

    /// The stable name: "complete", "completeUnlessOpenThisDeviceOnly", and so on (used in the
    /// class stanza, the key table and the command line).
    public var name: String { protection.rawValue + (thisDeviceOnly ? "ThisDeviceOnly" : "") }

    /// Parses a name produced by ``name``.
    /// - Parameter name: The class's stable name; nil for any other string.
    public init?(name: String) {
        if name.hasSuffix("ThisDeviceOnly") {
            guard let protection = FileProtection(rawValue: String(name.dropLast("ThisDeviceOnly".count))) else { return nil }
            self.init(protection, thisDeviceOnly: true)
        } else {
            guard let protection = FileProtection(rawValue: name) else { return nil }
            self.init(protection)
        }
    }

    public var description: String { name }
}
