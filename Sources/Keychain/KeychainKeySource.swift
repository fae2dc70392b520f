import Cipher
import Vault

/// Where a keychain gets its keys: one key per accessibility (the class keys) and the key of the
/// blind indexes that stand in for service and account names.
///
/// The Vault module's `CryptoManager` is the usual source. A source must throw rather than
/// return a key it does not have; the keychain reports ``KeychainError/interactionNotAllowed(_:_:)``
/// for a source error that names an unavailable class key.
public protocol KeychainKeySource: Sendable {
    /// The 32-byte key of a protection class.
    /// - Parameter accessibility: The item's accessibility.
    /// - Returns: The key; the keychain does not wipe it (the source owns it).
    /// - Throws: An error saying why the key is unavailable (locked, no first unlock yet...).
    func classKey(for accessibility: Accessibility) throws -> SecretBytes

    /// The 32-byte key of the blind indexes. It must be available without unlocking and must not
    /// change for the life of the keychain (a different key makes every item unreachable).
    /// - Returns: The key.
    /// - Throws: An error when the key cannot be obtained.
    func blindIndexKey() throws -> SecretBytes

    /// The keys of a protection class's earlier generations, newest first, for opening items
    /// sealed before a class-key rotation (records name their key by fingerprint). The default
    /// is none. The keychain uses them for the opening that needed them and keeps none (the
    /// source owns them, as with ``classKey(for:)``).
    /// - Parameter accessibility: The item's accessibility.
    /// - Returns: The retired keys, newest first (the caller wipes them).
    /// - Throws: As ``classKey(for:)``.
    func retiredClassKeys(for accessibility: Accessibility) throws -> [SecretBytes]
}

extension KeychainKeySource {
    /// No earlier generations.
    /// - Parameter accessibility: The accessibility whose retired keys are wanted.
    /// - Returns: An empty array.
    /// - Throws: Never.
    public func retiredClassKeys(for accessibility: Accessibility) -> [SecretBytes] { [] }
}

/// A key source whose class keys can be replaced by new ones (the earlier generations staying
/// available through ``KeychainKeySource/retiredClassKeys(for:)``). ``Keychain/rotateClassKeys()``
/// uses it.
public protocol ClassKeyRotatingSource: KeychainKeySource {
    /// Replaces every class key with a new one; the replaced keys become retired keys.
    /// - Throws: An error saying why the keys cannot be rotated (for example a locked vault).
    func rotateClassKeys() throws
}

/// A key source that derives every key from one 32-byte master key with HKDF-SHA256, with no
/// lock state of its own. For tools, servers without a passcode, and tests.
///
/// Thread safety: immutable after init; the keys are derived once and only read afterwards.
public final class StaticKeySource: KeychainKeySource, @unchecked Sendable {
    private let keys: [Accessibility: SecretBytes]
    private let indexKey: SecretBytes

    /// - Parameter masterKey: 32 bytes or more of key material; it is not retained.
    /// - Throws: ``KeychainError/invalidArgument(_:)`` for a key shorter than 32 bytes.
    public init(masterKey: SecretBytes) throws(KeychainError) {
        guard masterKey.count >= 32 else {
            throw KeychainError.invalidArgument("a master key needs at least 32 bytes, not \(masterKey.count)")
        }
        var keys: [Accessibility: SecretBytes] = [:]
        for protectionClass in ProtectionClass.allCases {
            for deviceOnly in [false, true] {
                let accessibility = Accessibility(protectionClass, thisDeviceOnly: deviceOnly)
                keys[accessibility] = KeyDerivation.hkdf(masterKey, info: "keychain class key v1 \(accessibility.name)")
            }
        }
        self.keys = keys
        self.indexKey = KeyDerivation.hkdf(masterKey, info: "keychain blind index v1")
    }

    /// - Parameter accessibility: The accessibility whose key is wanted.
    /// - Returns: The derived key of `accessibility`.
    /// - Throws: Never in practice: every accessibility has a key
    ///   (``KeychainError/invalidArgument(_:)`` otherwise).
    public func classKey(for accessibility: Accessibility) throws(KeychainError) -> SecretBytes {
        guard let key = keys[accessibility] else {
            throw KeychainError.invalidArgument("no key for accessibility \(accessibility.name)")
        }
        return key
    }

    /// - Returns: The derived blind-index key.
    /// - Throws: Never: the key is derived at initialization.
    public func blindIndexKey() throws(KeychainError) -> SecretBytes { indexKey }
}

/// The Vault's `rotateClassKeys()` replaces the class master and the always key; its
/// `retiredClassKeys(for:)` gives the earlier generations (at most 16).
extension CryptoManager: ClassKeyRotatingSource {}

extension CryptoManager: KeychainKeySource {
    /// The keychain's blind-index key: the device sub-key for the purpose "keychain blind index v1".
    /// It needs no unlock, and a keychain opened with another device key finds none of its items.
    /// - Returns: 32 key bytes.
    /// - Throws: The Vault module's device-key errors.
    public func blindIndexKey() throws(VaultError) -> SecretBytes {
        try deviceSubkey(purpose: "keychain blind index v1")
    }
}
