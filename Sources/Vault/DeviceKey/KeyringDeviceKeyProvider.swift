import Foundation
import Cipher
import CPlatform

/// The device key cached in the Linux kernel keyring, in front of another provider.
///
/// The first read takes the key from `backing` (a file, a systemd credential, the TPM) and adds
/// it to the keyring as a `user` key with a timeout; later reads, from any process of the user
/// that can search that keyring, take it from the kernel until the timeout, so the slower or
/// rarer source (a TPM unseal, a credential decryption) is asked once per period. The key never
/// touches the disk on this path; the kernel wipes it when it expires or is evicted. Raw
/// `add_key`/`keyctl` system calls (no libkeyutils).
public struct KeyringDeviceKeyProvider: DeviceKeyProvider {
    /// The key's description in the keyring.
    public let keyDescription: String
    /// Seconds the cached key lives.
    public let timeout: Int
    /// The keyring searched and added to (default: the user keyring, `@u`).
    public let keyring: Int32
    /// Where the key comes from when the keyring does not hold it.
    public let backing: any DeviceKeyProvider

    /// - Parameters:
    ///   - description: The key's description in the keyring.
    ///   - timeout: Seconds the cached key lives.
    ///   - keyring: The keyring (nil: the user keyring, `@u`).
    ///   - backing: Where the key comes from when the keyring does not hold it.
    public init(description: String, timeout: Int = 600, keyring: Int32? = nil, backing: any DeviceKeyProvider) {
        self.keyDescription = description
        self.timeout = timeout
        self.keyring = keyring ?? sf_keyring_spec_user()
        self.backing = backing
    }

    /// Possessor: everything; same user: view, read, search (the same-uid boundary of the
    /// agent; search also lets a session that does not possess the key invalidate it).
    static let permissions: UInt32 = 0x3f0b_0000

    /// The device key from the keyring, else from the backing provider (then cached).
    /// - Returns: The 32-byte device key.
    /// - Throws: The backing provider's error when the keyring does not hold the key.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        try deviceKey(accepting: { _ in true })
    }

    /// The device key, taken from the keyring only when `accepts` takes it: a cached key it
    /// refuses (left by an erased vault whose home path a new vault reuses, or by a key source
    /// replaced since) is set aside and the backing provider asked; a key from the backing
    /// provider that `accepts` takes replaces the cached one, one it refuses is returned
    /// uncached (for the caller to refuse) and the stale entry is evicted.
    /// - Parameter accepts: Whether a key is the one wanted (a record's check value).
    /// - Returns: The 32-byte device key.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for a provider without a description or
    ///   timeout, ``VaultError/deviceKey(_:)`` from the keyring, and the backing provider's errors.
    public func deviceKey(accepting accepts: (SecretBytes) -> Bool) throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            guard !keyDescription.isEmpty, timeout > 0 else { throw VaultError.invalidArgument("a keyring provider needs a description and a positive timeout") }
            if let cached = try Self.read(description: keyDescription, keyring: keyring) {
                if accepts(cached) { return cached }
                cached.wipe()
            }
            let key = try backing.deviceKey()
            guard accepts(key) else {
                evict()
                return key
            }
            if !cache(key) {
                // The key is still good; only the cache failed (no keyring in this container,
                // quota): nothing stays cached without its timeout and permissions.
                evict()
            }
            return key
        }
    }

    /// Caches `key` in `keyring` with its permissions and timeout set before anyone else can
    /// find it. The key is made in this process's keyring, which this process possesses, so
    /// that setting them is allowed even where the target keyring is not reachable from the
    /// session (a service's own session keyring does not link the user keyring: a key added
    /// there directly got the kernel's default mask and no timeout, which the process could
    /// then not change, and the same user's other sessions could not evict it); then it is
    /// linked into `keyring` (displacing an entry of the same description) and unlinked from
    /// the process keyring. Returns whether the key is cached.
    func cache(_ key: SecretBytes) -> Bool {
        let staging = sf_keyring_spec_process()
        let serial = key.withUnsafeBytes { sf_keyring_add("user", keyDescription, $0.baseAddress, $0.count, staging) }
        guard serial > 0 else { return false }
        defer { _ = sf_keyring_unlink(serial, staging) }
        guard sf_keyring_set_permissions(serial, Self.permissions) == 0,
              sf_keyring_set_timeout(serial, UInt32(clamping: timeout)) == 0,
              sf_keyring_link(serial, keyring) == 0 else {
            _ = sf_keyring_invalidate(serial)
            return false
        }
        return true
    }

    /// The cached key, or nil when the keyring holds none (or it expired).
    static func read(description: String, keyring: Int32) throws -> SecretBytes? {
        let serial = sf_keyring_search(keyring, "user", description)
        guard serial > 0 else {
            switch -serial {
            case ENOKEY, EKEYEXPIRED, EKEYREVOKED, ENOENT, ENOSYS, EPERM, EACCES: return nil
            default: return nil
            }
        }
        var length = 0
        let key = SecretBytes(count: 64) { buffer in
            let n = sf_keyring_read(serial, buffer.baseAddress, buffer.count)
            length = n < 0 ? -1 : n
        }
        defer { key.wipe() }
        guard length == 32 else { return nil }
        return key.slice(0..<32)
    }

    /// Removes the cached key at once (the next read asks the backing provider).
    /// - Returns: Whether a key was removed.
    @discardableResult
    package func evict() -> Bool {
        Self.evict(description: keyDescription, keyring: keyring)
    }

    /// Removes the key cached under `description` in `keyring` (default: the user keyring) at
    /// once, as `keyctl invalidate` does.
    /// - Parameters:
    ///   - description: The key's description in the keyring.
    ///   - keyring: The keyring's serial number (nil: the user keyring).
    /// - Returns: Whether a key was removed.
    @discardableResult
    package static func evict(description: String, keyring: Int32? = nil) -> Bool {
        guard !description.isEmpty else { return false }
        let keyring = keyring ?? sf_keyring_spec_user()
        var removed = false
        // Bounded: one search finds one key; a second pass catches a key linked twice.
        for _ in 0..<4 {
            let serial = sf_keyring_search(keyring, "user", description)
            guard serial > 0, sf_keyring_invalidate(serial) == 0 else { break }
            removed = true
        }
        return removed
    }

    /// A new empty keyring linked into this process's keyring (gone when the process ends), or
    /// nil where keyrings are unavailable. Tests use it to stay apart from the user's keyring.
    /// - Parameter name: The new keyring's description.
    /// - Returns: The keyring's serial number, or nil.
    package static func newProcessKeyring(named name: String) -> Int32? {
        let serial = sf_keyring_add("keyring", name, nil, 0, sf_keyring_spec_process())
        return serial > 0 ? serial : nil
    }

    /// Whether the kernel keyring can be used here (add_key may be filtered in containers).
    package static var isAvailable: Bool {
        let probe = sf_keyring_add("keyring", "securefoundation-probe", nil, 0, sf_keyring_spec_process())
        return probe > 0
    }
}
