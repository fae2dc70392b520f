import Foundation
import Cipher

extension CryptoManager {
    // MARK: Class keys

    /// The key of a protection class (a new copy each call; wipe it when done).
    ///
    /// - whenUnlocked: needs the manager unlocked.
    /// - afterFirstUnlock: needs one unlock of this vault since the process started (survives ``lock()``).
    /// - always: needs no unlock; it is a random key kept in the data directory (`always.key`).
    /// - thisDeviceOnly variants also mix in the device key.
    ///
    /// whenUnlocked and afterFirstUnlock come from the class master, a random key sealed in the
    /// state under the application key, so they stay the same across key rotation.
    ///
    /// - Parameter accessibility: The class.
    /// - Returns: 32 key bytes.
    /// - Throws: ``VaultError/classKeyUnavailable(_:_:)`` with the reason, or permission errors.
    public func classKey(for accessibility: Accessibility) throws -> SecretBytes {
        let base: SecretBytes
        switch accessibility.protectionClass {
        case .whenUnlocked:
            if let unlocked = memory.withLock({ $0.unlocked }), let key = try? unlocked.classKey(.whenUnlocked) {
                base = key
            } else {
                let setUp = try loadState() != nil
                throw VaultError.classKeyUnavailable(accessibility, setUp ? .locked : .notSetUp)
            }
        case .afterFirstUnlock:
            if let unlocked = memory.withLock({ $0.unlocked }), let cached = FirstUnlockCache.key(vaultID: unlocked.vaultID) {
                base = cached
            } else if let state = try loadState() {
                guard let cached = FirstUnlockCache.key(vaultID: state.vaultID) else {
                    throw VaultError.classKeyUnavailable(accessibility, .noFirstUnlockYet)
                }
                base = cached
            } else {
                throw VaultError.classKeyUnavailable(accessibility, .notSetUp)
            }
        case .always:
            base = try alwaysKey()
        }
        guard accessibility.thisDeviceOnly else { return base }
        defer { base.wipe() }
        let device: SecretBytes
        do {
            device = try cachedDeviceKey()
        } catch let error as VaultError {
            if case .insecurePermissions = error { throw error }
            throw VaultError.classKeyUnavailable(accessibility, .deviceKeyMissing)
        }
        defer { device.wipe() }
        return KeyHierarchy.deviceBound(base, deviceKey: device, protectionClass: accessibility.protectionClass)
    }

    /// A sub-key of the device key for a named purpose: HKDF-SHA256(device key, info = purpose).
    /// Needs no unlock. Example: the keychain's blind-index key, purpose "keychain blind index v1".
    ///
    /// - Parameter purpose: A fixed, versioned name of what the key is for.
    /// - Returns: 32 key bytes.
    /// - Throws: ``VaultError/deviceKey(_:)`` or ``VaultError/insecurePermissions(path:reason:fix:)``.
    public func deviceSubkey(purpose: String) throws -> SecretBytes {
        guard !purpose.isEmpty else { throw VaultError.invalidArgument("the purpose of a device sub-key is empty") }
        let device = try cachedDeviceKey()
        defer { device.wipe() }
        return KeyDerivation.hkdf(device, info: purpose)
    }

    /// A copy of the device key, read once from the provider and then kept in locked memory.
    func cachedDeviceKey() throws -> SecretBytes {
        if let key = memory.withLock({ $0.deviceKey }) { return key.copy() }
        let key: SecretBytes
        do {
            key = try deviceKeyProvider.deviceKey()
        } catch {
            throw VaultError.wrap(error)
        }
        guard key.count == 32 else {
            key.wipe()
            throw VaultError.deviceKey("the device key is \(key.count) bytes, not 32")
        }
        memory.withLock { memory in
            if memory.deviceKey == nil { memory.deviceKey = key.copy() }
        }
        return key
    }

    /// The always-class key: `always.key` in the data directory, created on first use.
    func alwaysKey() throws -> SecretBytes {
        try vaultCall {
            if access(alwaysKeyPath, F_OK) != 0 {
                try KeyFile.createExclusively(path: alwaysKeyPath, key: SecretBytes.random(count: 32))
            }
            return try KeyFile.read(path: alwaysKeyPath, what: "always-class key")
        }
    }

    // MARK: Encryption with the application key

    /// Seals bytes under the application key (the sealed-data format of the Cipher module; the
    /// key id is recorded, so data stays readable after ``rotateKey(passcode:answers:)``).
    ///
    /// - Parameters:
    ///   - plaintext: The bytes.
    ///   - context: Associated data the sealed bytes are bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``VaultError/locked``.
    public func encrypt<Plaintext: DataProtocol>(_ plaintext: Plaintext, context: [UInt8] = []) throws -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.seal(plaintext, with: unlocked.keyring, context: context) }
    }

    /// Opens bytes sealed by ``encrypt(_:context:)`` under the current or a retired application key.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)`` when the data was modified,
    ///   sealed under another vault's key, or bound to another context.
    public func decrypt(_ sealed: [UInt8], context: [UInt8] = []) throws -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.open(sealed, with: unlocked.keyring, context: context) }
    }

    /// Seals a Codable value (canonical JSON) under the application key.
    /// - Throws: ``VaultError/locked``.
    public func encrypt<Value: Encodable>(value: Value, context: [UInt8] = []) throws -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.seal(value: value, with: unlocked.keyring, context: context) }
    }

    /// Opens a Codable value sealed by ``encrypt(value:context:)``.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)``.
    public func decrypt<Value: Decodable>(_ type: Value.Type, from sealed: [UInt8], context: [UInt8] = []) throws -> Value {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.open(type, from: sealed, with: unlocked.keyring, context: context) }
    }

    // MARK: Test support

    /// The application key in hex, for the memory-scan test only. Never use it in an application.
    @_spi(Testing)
    public func _applicationKeyHexForTesting() -> String? {
        memory.withLock { memory in
            memory.unlocked?.appKey.withUnsafeBytes { bytes in
                let digits = Array("0123456789abcdef")
                var text = ""
                for byte in bytes { text.append(digits[Int(byte >> 4)]); text.append(digits[Int(byte & 0x0F)]) }
                return text
            }
        }
    }
}
