import Foundation
import Cipher
import Vault

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
