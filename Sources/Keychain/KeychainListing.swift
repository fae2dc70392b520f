import Foundation
import Cipher
import Vault

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
