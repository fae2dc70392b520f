import Foundation
import Cipher
import Vault

/// The kinds of item, as the system keychain's item classes.
public enum ItemClass: UInt8, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// A password for a service and account.
    case genericPassword = 1
    /// A password for an account on a server, with protocol, port and path.
    case internetPassword = 2

    /// "generic password" or "internet password".
    public var description: String { self == .genericPassword ? "generic password" : "internet password" }
}

/// What identifies an item: its class and names. Two items with equal keys are the same item.
public struct ItemKey: Sendable, Hashable, CustomStringConvertible {
    /// The item class.
    public var itemClass: ItemClass
    /// The service (generic passwords); empty for internet passwords.
    public var service: String
    /// The account.
    public var account: String
    /// The server (internet passwords).
    public var server: String?
    /// The protocol, for example "https" (internet passwords).
    public var networkProtocol: String?
    /// The port (internet passwords).
    public var port: Int?
    /// The path (internet passwords).
    public var path: String?

    /// A generic password's key.
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Returns: The key.
    public static func generic(service: String, account: String) -> ItemKey {
        ItemKey(itemClass: .genericPassword, service: service, account: account)
    }

    /// An internet password's key.
    /// - Parameters:
    ///   - server: The server name.
    ///   - account: The account name.
    ///   - networkProtocol: The protocol, for example "https".
    ///   - port: The port.
    ///   - path: The path.
    /// - Returns: The key.
    public static func internet(server: String, account: String, networkProtocol: String? = nil,
                                port: Int? = nil, path: String? = nil) -> ItemKey {
        ItemKey(itemClass: .internetPassword, service: "", account: account, server: server,
                networkProtocol: networkProtocol, port: port, path: path)
    }

    /// - Parameters: see the properties.
    public init(itemClass: ItemClass, service: String, account: String, server: String? = nil,
                networkProtocol: String? = nil, port: Int? = nil, path: String? = nil) {
        self.itemClass = itemClass
        self.service = service
        self.account = account
        self.server = server
        self.networkProtocol = networkProtocol
        self.port = port
        self.path = path
    }

    /// The name that the "all accounts of a service" index covers: the service, or the server.
    var groupName: String { itemClass == .genericPassword ? service : (server ?? "") }

    /// The class and names, for messages.
    public var description: String {
        switch itemClass {
        case .genericPassword:
            return "generic password (service \"\(service)\", account \"\(account)\")"
        case .internetPassword:
            var text = "internet password (server \"\(server ?? "")\", account \"\(account)\""
            if let networkProtocol { text += ", protocol \(networkProtocol)" }
            if let port { text += ", port \(port)" }
            if let path { text += ", path \"\(path)\"" }
            return text + ")"
        }
    }
}

/// An item's attributes: its key, accessibility, label, comment and dates.
public struct ItemAttributes: Sendable, Hashable {
    /// The item's class and names.
    public var key: ItemKey
    /// Which class key protects the item.
    public var accessibility: Accessibility
    /// A label for people.
    public var label: String?
    /// A comment.
    public var comment: String?
    /// When the item was first written.
    public var creationDate: Date
    /// When the item was last written.
    public var modificationDate: Date

    /// - Parameters: see the properties.
    public init(key: ItemKey, accessibility: Accessibility, label: String? = nil, comment: String? = nil,
                creationDate: Date, modificationDate: Date) {
        self.key = key
        self.accessibility = accessibility
        self.label = label
        self.comment = comment
        self.creationDate = creationDate
        self.modificationDate = modificationDate
    }
}

extension Accessibility {
    /// How hard the class's key is to reach: whenUnlocked 3, afterFirstUnlock 2, always 1.
    private var strength: Int {
        switch protectionClass {
        case .whenUnlocked: return 3
        case .afterFirstUnlock: return 2
        case .always: return 1
        }
    }

    /// Whether an item of this accessibility is at least as protected as `minimum`: its
    /// protection class is the same or stronger (whenUnlocked > afterFirstUnlock > always), and
    /// it is bound to this device when `minimum` is.
    /// - Parameter minimum: The weakest accessibility accepted.
    /// - Returns: Whether this accessibility is at least as protected.
    func isAtLeast(_ minimum: Accessibility) -> Bool {
        strength >= minimum.strength && (thisDeviceOnly || !minimum.thisDeviceOnly)
    }
}
