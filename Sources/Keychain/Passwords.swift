import Foundation
import Cipher
import Vault

extension Keychain {
    // MARK: The original API (IMSKeychain)

    /// Stores a password (UTF-8) with accessibility `.always`: readable without unlocking.
    /// - Parameters:
    ///   - password: The password.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when the always-class key is unavailable.
    public func setPassword(_ password: String, forService service: String, account: String) throws(KeychainError) {
        try typed {
            var bytes = Array(password.utf8)
            defer { ItemCodec.zero(&bytes) }
            try bytes.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .always) }
        }
    }

    /// Stores password data with accessibility `.always`.
    /// - Parameters:
    ///   - data: The bytes.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: as ``setPassword(_:forService:account:)``.
    public func setPasswordData(_ data: some DataProtocol, forService service: String, account: String) throws(KeychainError) {
        try typed {
            var bytes = Array(data)
            defer { ItemCodec.zero(&bytes) }
            try bytes.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .always) }
        }
    }

    /// The password of a service and account, as UTF-8 text.
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - minimum: The weakest accessibility accepted (nil: any); an item stored under a
    ///     weaker one is refused.
    /// - Returns: The password (an empty password is returned as "").
    /// - Throws: ``KeychainError/itemNotFound(_:)``, ``KeychainError/notUTF8(_:)``,
    ///   ``KeychainError/interactionNotAllowed(_:_:)``, ``KeychainError/corrupted(_:)``,
    ///   ``KeychainError/accessibilityTooWeak(item:stored:required:)``.
    public func password(forService service: String, account: String, requiring minimum: Accessibility? = nil) throws(KeychainError) -> String {
        return try typed {
            let key = ItemKey.generic(service: service, account: account)
            let secret = try read(key, requiring: minimum)
            defer { secret.wipe() }
            return try secret.withUnsafeBytes { bytes in
                guard let text = String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) else {
                    throw KeychainError.notUTF8(key.description)
                }
                return text
            }
        }
    }

    /// The password data of a service and account.
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - minimum: The weakest accessibility accepted (nil: any).
    /// - Returns: The bytes, in wiped-on-release memory.
    /// - Throws: as ``password(forService:account:requiring:)``.
    public func passwordData(forService service: String, account: String, requiring minimum: Accessibility? = nil) throws(KeychainError) -> SecretBytes {
        try typed { try read(.generic(service: service, account: account), requiring: minimum) }
    }

    /// Stores password data with accessibility `.whenUnlocked`: it needs the crypto manager
    /// unlocked to write and to read.
    /// - Parameters:
    ///   - data: The secret bytes.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` while locked.
    public func setSecurePasswordData(_ data: SecretBytes, forService service: String, account: String) throws(KeychainError) {
        try typed {
            try data.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: .whenUnlocked) }
        }
    }

    /// Stores a password (UTF-8) with accessibility `.whenUnlocked`.
    /// - Parameters:
    ///   - password: The password.
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: as ``setSecurePasswordData(_:forService:account:)``.
    public func setSecurePassword(_ password: String, forService service: String, account: String) throws(KeychainError) {
        try setSecurePasswordData(SecretBytes(utf8: password), forService: service, account: account)
    }

    /// The data of an item stored with ``setSecurePasswordData(_:forService:account:)``. The item
    /// must be of the whenUnlocked class (either variant): one stored under a weaker class is
    /// refused, so a row moved to the always class cannot stand in for it.
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Returns: The bytes.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` while locked,
    ///   ``KeychainError/accessibilityTooWeak(item:stored:required:)``, and as ``password(forService:account:requiring:)``.
    public func securePasswordData(forService service: String, account: String) throws(KeychainError) -> SecretBytes {
        return try typed {
            try read(.generic(service: service, account: account), requiring: .whenUnlocked)
        }
    }

    /// The text of an item stored with ``setSecurePassword(_:forService:account:)`` (whenUnlocked
    /// required, as ``securePasswordData(forService:account:)``).
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Returns: The password.
    /// - Throws: as ``password(forService:account:requiring:)``.
    public func securePassword(forService service: String, account: String) throws(KeychainError) -> String {
        try password(forService: service, account: account, requiring: .whenUnlocked)
    }

    /// Deletes one account of a service (and only that account).
    /// - Parameters:
    ///   - service: The service name.
    ///   - account: The account name.
    /// - Throws: ``KeychainError/itemNotFound(_:)`` when there is no such item.
    public func deletePassword(forService service: String, account: String) throws(KeychainError) {
        try typed {
            try remove(.generic(service: service, account: account))
        }
    }

    /// Deletes every account of a service (generic passwords). No class key is needed.
    /// - Parameter service: The service name.
    /// - Returns: The number of items deleted.
    /// - Throws: Database errors.
    @discardableResult
    public func deleteAccounts(forService service: String) throws(KeychainError) -> Int {
        return try typed {
            try requireOpen()
            let ids = try itemStore.ids(itemClass: .genericPassword, group: sealer.group(.genericPassword, service))
            for id in ids { try itemStore.enqueue(id, .delete) }
            return ids.count
        }
    }

    /// Deletes every item of every class and service.
    /// - Returns: The number of items deleted.
    /// - Throws: Database errors.
    @discardableResult
    public func deleteAll() throws(KeychainError) -> Int {
        return try typed {
            try requireOpen()
            var count = 0
            for itemClass in ItemClass.allCases {
                let ids = try itemStore.ids(itemClass: itemClass, group: nil)
                for id in ids { try itemStore.enqueue(id, .delete) }
                count += ids.count
            }
            return count
        }
    }

    /// The accounts of one service, or of every service (generic passwords).
    /// - Parameter service: The service, or nil for all.
    /// - Returns: The item keys, oldest first.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)`` when an item's class key is
    ///   unavailable (its names are sealed under it); ``KeychainError/damagedItems(_:)`` naming
    ///   every damaged row of the service(s) (a column of the wrong type, a failed check), never
    ///   leaving one out: ``listing()`` gives the other items beside them.
    public func accounts(forService service: String? = nil) throws(KeychainError) -> [ItemKey] {
        return try typed {
            try requireOpen()
            let (rows, undecoded) = try itemStore.rowsReportingDamage(itemClass: .genericPassword,
                                                                     group: service.map { sealer.group(.genericPassword, $0) })
            var damaged = undecoded.map(damagedItem)
            var keys: [ItemKey] = []
            for row in rows {
                do {
                    keys.append(try sealer.attributes(of: row).key)
                } catch let error as KeychainError {
                    guard case .corrupted = error else { throw error }
                    damaged.append(damagedItem(row, error))
                }
            }
            guard damaged.isEmpty else { throw KeychainError.damagedItems(damaged.sorted { $0.itemID < $1.itemID }) }
            return keys
        }
    }

    // MARK: Codable values

    /// Stores a Codable value, encoded with `CanonicalEncoding`.
    /// - Parameters:
    ///   - value: The value.
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - accessibility: Which class key protects it (default `.whenUnlocked`).
    /// - Throws: ``KeychainError/invalidArgument(_:)`` when the value does not encode; otherwise the errors of a write (``KeychainError``).
    public func set<Value: Encodable>(_ value: Value, forService service: String, account: String,
                                      accessibility: Accessibility = .whenUnlocked) throws(KeychainError) {
        try typed {
            try requireOpen()
            var data: Data
            do { data = try CanonicalEncoding.encode(value) } catch { throw KeychainError.invalidArgument("the value does not encode: \(error)") }
            defer { data.resetBytes(in: 0..<data.count) }
            try data.withUnsafeBytes { try store($0, for: .generic(service: service, account: account), accessibility: accessibility) }
        }
    }

    /// Reads a Codable value stored with ``set(_:forService:account:accessibility:)``.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - service: The service name.
    ///   - account: The account name.
    ///   - minimum: The weakest accessibility accepted (nil: any).
    /// - Returns: The value.
    /// - Throws: ``KeychainError/itemNotFound(_:)``, ``KeychainError/corrupted(_:)`` when it does not decode as `type`.
    public func value<Value: Decodable>(_ type: Value.Type, forService service: String, account: String,
                                        requiring minimum: Accessibility? = nil) throws(KeychainError) -> Value {
        return try typed {
            let secret = try read(.generic(service: service, account: account), requiring: minimum)
            defer { secret.wipe() }
            return try secret.withUnsafeBytes { bytes in
                do { return try CanonicalEncoding.decode(type, from: bytes) } catch {
                    throw KeychainError.corrupted("the value of service \"\(service)\", account \"\(account)\" does not decode as \(Value.self): \(error)")
                }
            }
        }
    }
}
