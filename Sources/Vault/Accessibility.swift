import Foundation

/// The data-protection classes, as in iOS Data Protection.
///
/// - ``whenUnlocked``: available only while the vault is unlocked; gone on ``CryptoManager/lock()``.
/// - ``afterFirstUnlock``: available from the first unlock in this process until the process ends;
///   it survives ``CryptoManager/lock()``.
/// - ``always``: available without any unlock.
public enum ProtectionClass: String, Sendable, Hashable, Codable, CaseIterable {
    /// Only while the vault is unlocked.
    case whenUnlocked
    /// From the first unlock until the process ends.
    case afterFirstUnlock
    /// Always; needs no unlock.
    case always
}

/// A protection class, optionally bound to this device (the key then also depends on the device key).
public struct Accessibility: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The protection class.
    public var protectionClass: ProtectionClass
    /// Whether the key also depends on the device key, so a copied data directory opens nothing elsewhere.
    public var thisDeviceOnly: Bool

    /// Creates an accessibility.
    /// - Parameters:
    ///   - protectionClass: The protection class.
    ///   - thisDeviceOnly: Whether the key also depends on the device key.
    public init(_ protectionClass: ProtectionClass, thisDeviceOnly: Bool = false) {
        self.protectionClass = protectionClass
        self.thisDeviceOnly = thisDeviceOnly
    }

    /// Only while unlocked.
    public static let whenUnlocked = Accessibility(.whenUnlocked)
    /// From the first unlock until the process ends.
    public static let afterFirstUnlock = Accessibility(.afterFirstUnlock)
    /// Always.
    public static let always = Accessibility(.always)
    /// Only while unlocked, and only with this device's key.
    public static let whenUnlockedThisDeviceOnly = Accessibility(.whenUnlocked, thisDeviceOnly: true)
    /// From the first unlock until the process ends, and only with this device's key.
    public static let afterFirstUnlockThisDeviceOnly = Accessibility(.afterFirstUnlock, thisDeviceOnly: true)
    /// Always, but only with this device's key.
    public static let alwaysThisDeviceOnly = Accessibility(.always, thisDeviceOnly: true)

    /// Every accessibility, in a stable order.
    package static let allValues: [Accessibility] = [
        .whenUnlocked, .afterFirstUnlock, .always,
        .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
    ]

    /// The stable text name: "whenUnlocked", "afterFirstUnlockThisDeviceOnly", and so on.
    public var name: String { protectionClass.rawValue + (thisDeviceOnly ? "ThisDeviceOnly" : "") }

    /// Parses a name produced by ``name``.
    /// - Parameter name: For example "alwaysThisDeviceOnly".
    public init?(name: String) {
        if name.hasSuffix("ThisDeviceOnly") {
            guard let protectionClass = ProtectionClass(rawValue: String(name.dropLast("ThisDeviceOnly".count))) else { return nil }
            self.init(protectionClass, thisDeviceOnly: true)
        } else {
            guard let protectionClass = ProtectionClass(rawValue: name) else { return nil }
            self.init(protectionClass)
        }
    }

    /// The same as ``name``.
    public var description: String { name }
}

/// Why a class key is unavailable.
public enum ClassKeyUnavailableReason: Sendable, Equatable, CustomStringConvertible {
    /// The class needs the vault unlocked and it is locked.
    case locked
    /// The class needs one unlock since the process started, and there has been none.
    case noFirstUnlockYet
    /// No vault has been set up in this directory.
    case notSetUp
    /// The device key could not be read (a thisDeviceOnly class, or the device-key provider failed).
    case deviceKeyMissing

    /// What the reason means and what to do about it.
    public var description: String {
        switch self {
        case .locked: return "the vault is locked; unlock it with the passcode or the security answers"
        case .noFirstUnlockYet: return "the vault has not been unlocked since this process started; unlock it once"
        case .notSetUp: return "no vault has been set up in this directory; run `securefoundation vault init`"
        case .deviceKeyMissing: return "the device key is missing or unreadable; this data was bound to another device or the device key was removed"
        }
    }
}

/// Whether the vault's application key is in memory.
public enum LockState: String, Sendable, Hashable, Codable {
    /// The application key is not in memory.
    case locked
    /// The application key is in memory.
    case unlocked
}
