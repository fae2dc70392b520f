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

/// One result of ``Keychain/copyMatching(_:)``: the attributes, the data, or both, as asked.
public struct KeychainMatch: Sendable {
    /// The attributes, if the query asked for them.
    public var attributes: ItemAttributes?
    /// The secret data, if the query asked for it.
    public var data: SecretBytes?

    /// - Parameters: see the properties.
    public init(attributes: ItemAttributes? = nil, data: SecretBytes? = nil) {
        self.attributes = attributes
        self.data = data
    }
}

/// A query in the spirit of SecItemCopyMatching, SecItemUpdate and SecItemDelete. A nil field
/// matches anything.
public struct KeychainQuery: Sendable {
    /// How many items a query returns.
    public enum Limit: Sendable {
        /// The first match.
        case one
        /// Every match.
        case all
    }

    /// What a query returns.
    public struct Return: OptionSet, Sendable {
        /// The option bits.
        public let rawValue: Int
        /// - Parameter rawValue: The option bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// The secret data.
        public static let data = Return(rawValue: 1)
        /// The attributes.
        public static let attributes = Return(rawValue: 2)
    }

    /// The item class to search.
    public var itemClass: ItemClass
    /// The service (generic passwords).
    public var service: String?
    /// The account.
    public var account: String?
    /// The server (internet passwords).
    public var server: String?
    /// The protocol (internet passwords).
    public var networkProtocol: String?
    /// The port (internet passwords).
    public var port: Int?
    /// The path (internet passwords).
    public var path: String?
    /// The label.
    public var label: String?
    /// The accessibility.
    public var accessibility: Accessibility?
    /// The weakest class the caller accepts: a matching item stored under a weaker one (see
    /// `Accessibility.isAtLeast(_:)`) is refused with ``KeychainError/accessibilityTooWeak(item:stored:required:)``
    /// rather than returned, changed or deleted.
    public var minimumAccessibility: Accessibility?
    /// One item (the first found) or all matching items.
    public var limit: Limit
    /// What ``Keychain/copyMatching(_:)`` returns.
    public var returning: Return

    /// - Parameters: see the properties.
    public init(itemClass: ItemClass = .genericPassword, service: String? = nil, account: String? = nil,
                server: String? = nil, networkProtocol: String? = nil, port: Int? = nil, path: String? = nil,
                label: String? = nil, accessibility: Accessibility? = nil, minimumAccessibility: Accessibility? = nil,
                limit: Limit = .one, returning: Return = .data) {
        self.minimumAccessibility = minimumAccessibility
        self.itemClass = itemClass
        self.service = service
        self.account = account
        self.server = server
        self.networkProtocol = networkProtocol
        self.port = port
        self.path = path
        self.label = label
        self.accessibility = accessibility
        self.limit = limit
        self.returning = returning
    }

    /// The exact item key, when the query names every field of one.
    var exactKey: ItemKey? {
        switch itemClass {
        case .genericPassword:
            guard let service, let account else { return nil }
            return .generic(service: service, account: account)
        case .internetPassword:
            // Optional key fields that are nil here could be anything: only an exact lookup when all are given.
            guard let server, let account, let networkProtocol, let port, let path else { return nil }
            return .internet(server: server, account: account, networkProtocol: networkProtocol, port: port, path: path)
        }
    }

    /// The service index to narrow candidates with, if the query names the service (or server).
    var groupName: String? { itemClass == .genericPassword ? service : server }

    func matches(_ attributes: ItemAttributes) -> Bool {
        let key = attributes.key
        guard key.itemClass == itemClass else { return false }
        if let service, itemClass == .genericPassword, key.service != service { return false }
        if let account, key.account != account { return false }
        if let server, key.server != server { return false }
        if let networkProtocol, key.networkProtocol != networkProtocol { return false }
        if let port, key.port != port { return false }
        if let path, key.path != path { return false }
        if let label, attributes.label != label { return false }
        if let accessibility, attributes.accessibility != accessibility { return false }
        return true
    }

    var summary: String {
        var parts = ["class \(itemClass)"]
        if let service { parts.append("service \"\(service)\"") }
        if let account { parts.append("account \"\(account)\"") }
        if let server { parts.append("server \"\(server)\"") }
        if let networkProtocol { parts.append("protocol \(networkProtocol)") }
        if let port { parts.append("port \(port)") }
        if let path { parts.append("path \"\(path)\"") }
        if let label { parts.append("label \"\(label)\"") }
        if let accessibility { parts.append("accessibility \(accessibility.name)") }
        if let minimumAccessibility { parts.append("at least \(minimumAccessibility.name)") }
        return parts.joined(separator: ", ")
    }
}

/// The changes ``Keychain/update(_:with:)`` applies to every matching item. A nil field is left as it is.
public struct ItemUpdate: Sendable {
    /// New secret data.
    public var data: SecretBytes?
    /// A new accessibility (the item is sealed again under the new class key).
    public var accessibility: Accessibility?
    /// A new label (`.some(nil)` removes it).
    public var label: String??
    /// A new comment (`.some(nil)` removes it).
    public var comment: String??

    /// - Parameters: see the properties.
    public init(data: SecretBytes? = nil, accessibility: Accessibility? = nil, label: String?? = nil, comment: String?? = nil) {
        self.data = data
        self.accessibility = accessibility
        self.label = label
        self.comment = comment
    }
}

/// A summary of a stored item for listings, without its secret. Items whose class key is
/// unavailable are listed with their accessibility only.
public struct ItemSummary: Sendable {
    /// The attributes, or nil when the class key needed to decrypt the names is unavailable or
    /// the row failed its integrity check (see ``unavailable``).
    public var attributes: ItemAttributes?
    /// The item class (stored in the clear).
    public var itemClass: ItemClass
    /// The accessibility (stored in the clear).
    public var accessibility: Accessibility
    /// Why the names could not be read, when `attributes` is nil.
    public var unavailable: KeychainError?

    /// - Parameters: see the properties.
    public init(attributes: ItemAttributes?, itemClass: ItemClass, accessibility: Accessibility, unavailable: KeychainError?) {
        self.attributes = attributes
        self.itemClass = itemClass
        self.accessibility = accessibility
        self.unavailable = unavailable
    }
}

/// A row of the keychain file that cannot be listed as an item: a column holds a value of the
/// wrong type or out of bounds, the row fails its class binding or integrity check, or its key
/// is not an item id. Someone who can write the keychain's file (or a damaged disk) made it so.
public struct DamagedItem: Sendable, CustomStringConvertible {
    /// The row's key (`item_id`) in hex, as ``Keychain/ResealReport/unreadable`` names items; a
    /// key that is not a blob is shown as SQLite quotes it.
    public var itemID: String
    /// The item class the key names, when it names one.
    public var itemClass: ItemClass?
    /// The accessibility stored in the row, when it is a known code.
    public var accessibility: Accessibility?
    /// What is wrong: a ``KeychainError/corrupted(_:)`` naming the column or the check that failed.
    public var error: KeychainError

    /// - Parameters: see the properties.
    public init(itemID: String, itemClass: ItemClass?, accessibility: Accessibility?, error: KeychainError) {
        self.itemID = itemID
        self.itemClass = itemClass
        self.accessibility = accessibility
        self.error = error
    }

    /// "item id …: what is wrong".
    public var description: String { "item id \(itemID): \(error)" }
}

/// Every item of a keychain, without secrets, and the rows that are damaged
/// (``Keychain/listing()``): a damaged row neither hides the others nor goes unreported.
public struct KeychainListing: Sendable {
    /// The items, by class then oldest first: with their attributes, or, when their class key is
    /// unavailable (the vault locked), with their class and accessibility only
    /// (``ItemSummary/unavailable`` says why).
    public var items: [ItemSummary]
    /// The damaged rows, by item id.
    public var damaged: [DamagedItem]

    /// - Parameters: see the properties.
    public init(items: [ItemSummary], damaged: [DamagedItem]) {
        self.items = items
        self.damaged = damaged
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
    public func isAtLeast(_ minimum: Accessibility) -> Bool {
        strength >= minimum.strength && (thisDeviceOnly || !minimum.thisDeviceOnly)
    }
}
