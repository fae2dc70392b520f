// Stand-ins for the Vault module's contract types (ProtectionClass, Accessibility,
// ClassKeyUnavailableReason), used until the Vault module provides them. Delete this file when
// the Vault module defines them.

/// The protection classes of stored secrets.
public enum ProtectionClass: String, Sendable, Hashable, Codable, CaseIterable {
    /// Available only while the crypto manager is unlocked.
    case whenUnlocked
    /// Available once the crypto manager has been unlocked since the process started.
    case afterFirstUnlock
    /// Always available (needs only the device key).
    case always
}

/// A protection class, optionally bound to this device.
public struct Accessibility: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The protection class.
    public var protectionClass: ProtectionClass
    /// Whether the key also depends on the device key.
    public var thisDeviceOnly: Bool

    /// - Parameters:
    ///   - protectionClass: The protection class.
    ///   - thisDeviceOnly: Whether the key also depends on the device key.
    public init(_ protectionClass: ProtectionClass, thisDeviceOnly: Bool = false) {
        self.protectionClass = protectionClass
        self.thisDeviceOnly = thisDeviceOnly
    }

    public static let whenUnlocked = Accessibility(.whenUnlocked)
    public static let afterFirstUnlock = Accessibility(.afterFirstUnlock)
    public static let always = Accessibility(.always)
    public static let whenUnlockedThisDeviceOnly = Accessibility(.whenUnlocked, thisDeviceOnly: true)
    public static let afterFirstUnlockThisDeviceOnly = Accessibility(.afterFirstUnlock, thisDeviceOnly: true)
    public static let alwaysThisDeviceOnly = Accessibility(.always, thisDeviceOnly: true)

    /// The stable text name, for example "whenUnlocked" or "afterFirstUnlockThisDeviceOnly".
    public var name: String { protectionClass.rawValue + (thisDeviceOnly ? "ThisDeviceOnly" : "") }

    /// Parses a name written by ``name``.
    public init?(name: String) {
        var base = name
        var deviceOnly = false
        if base.hasSuffix("ThisDeviceOnly") { base.removeLast("ThisDeviceOnly".count); deviceOnly = true }
        guard let protectionClass = ProtectionClass(rawValue: base) else { return nil }
        self.init(protectionClass, thisDeviceOnly: deviceOnly)
    }

    public var description: String { name }
}

/// Why a class key is unavailable.
public enum ClassKeyUnavailableReason: Sendable, Equatable {
    case locked, noFirstUnlockYet, notSetUp, deviceKeyMissing
}
