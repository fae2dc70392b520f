import Foundation
import Testing
import Cipher
@testable import Vault

/// The kernel-keyring cache of the device key is named by the home's path only: an erase must
/// remove it, and a cached key that is not the vault's must not stop the vault (the backing
/// provider is asked and the entry replaced). These use the user keyring (`@u`), as the record's
/// provider does, with descriptions of their own, removed at the end.
@Suite("Device key: keyring cache across vaults", .serialized)
struct KeyringCacheTests {
    static func available() -> Bool {
        guard KeyringDeviceKeyProvider.isAvailable else {
            print("skipping: the kernel keyring is not available here (add_key filtered)")
            return false
        }
        return true
    }

    static func keyringRecord(_ keyFile: String, description: String) throws -> DeviceKeyRecord {
        let key = try FileDeviceKeyProvider(path: keyFile).deviceKey()
        defer { key.wipe() }
        return DeviceKeyRecord(kind: .keyring, path: keyFile, name: description, timeout: 30, backing: .file,
                               check: DeviceKeyRecord.checkValue(of: key))
    }

    /// The user keyring's entry `description`, as the record's provider sees it.
    static func entry(_ description: String) -> KeyringDeviceKeyProvider {
        KeyringDeviceKeyProvider(description: description, timeout: 30, backing: FileDeviceKeyProvider(path: "/nonexistent/device.key"))
    }

    /// The key cached under `description` (hex), or nil.
    static func cached(_ description: String) throws -> String? {
        try KeyringDeviceKeyProvider.read(description: description, keyring: entry(description).keyring).map(hexOf)
    }

    /// The review's attack: a vault with the keyring provider, erased, then a new vault made at
    /// the same path with a new device key behind the same keyring description. The erase
    /// evicted the cached key, so the new vault works at once.
    @Test func eraseEvictsTheCachedDeviceKey() throws {
        guard Self.available() else { return }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let description = String("securefoundation:test-erase:" + UUID().uuidString.prefix(8))
        defer { Self.entry(description).evict() }
        let firstKeyFile = fixture.root + "/first/device.key"
        let first = try DeviceKeyRotationProviderTests.vault(fixture, record: try Self.keyringRecord(firstKeyFile, description: description))
        _ = try first.classKey(for: .alwaysThisDeviceOnly)
        let firstKey = hexOf(try FileDeviceKeyProvider(path: firstKeyFile).deviceKey())
        guard try Self.cached(description) == firstKey else {
            print("skipping: the keyring did not cache the key here")
            return
        }
        try first.erase()
        #expect(try Self.cached(description) == nil)

        // A new vault at the same path, its device key in another file, the same description.
        let secondKeyFile = fixture.root + "/second/device.key"
        let record = try Self.keyringRecord(secondKeyFile, description: description)
        let second = try DeviceKeyRotationProviderTests.vault(fixture, record: record)
        #expect(try second.classKey(for: .alwaysThisDeviceOnly).count == 32)
        let secondKey = hexOf(try FileDeviceKeyProvider(path: secondKeyFile).deviceKey())
        #expect(hexOf(try record.provider().deviceKey()) == secondKey)
        #expect(try Self.cached(description) == secondKey)
    }

    /// A key cached under the vault's description that fails the record's check (left by
    /// another vault, or by a key source replaced since) is not used: the backing provider's key
    /// is, and replaces the cached one. A backing key that fails too is refused as before, and
    /// not cached.
    @Test func aCachedKeyOfAnotherVaultFallsBackToTheBackingProvider() throws {
        guard Self.available() else { return }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let description = String("securefoundation:test-stale:" + UUID().uuidString.prefix(8))
        defer { Self.entry(description).evict() }
        let staleFile = fixture.root + "/stale/device.key"
        let stale = KeyringDeviceKeyProvider(description: description, timeout: 30, backing: FileDeviceKeyProvider(path: staleFile))
        let staleKey = hexOf(try stale.deviceKey())
        guard try Self.cached(description) == staleKey else {
            print("skipping: the keyring did not cache the key here")
            return
        }
        let keyFile = fixture.root + "/config/device.key"
        let record = try Self.keyringRecord(keyFile, description: description)
        let ownKey = hexOf(try FileDeviceKeyProvider(path: keyFile).deviceKey())
        #expect(hexOf(try record.provider().deviceKey()) == ownKey)
        #expect(try Self.cached(description) == ownKey)
        // A vault made with the record works, the stale entry put back first.
        Self.entry(description).evict()
        _ = try stale.deviceKey()
        #expect(try Self.cached(description) == staleKey)
        let manager = try DeviceKeyRotationProviderTests.vault(fixture, record: record)
        #expect(try manager.classKey(for: .alwaysThisDeviceOnly).count == 32)
        #expect(try Self.cached(description) == ownKey)

        // Neither the cache nor the backing file holds the vault's key: refused, nothing cached.
        var foreign = record
        foreign.check = Data(repeating: 0, count: 16)
        #expect(throws: VaultError.self) { try foreign.provider().deviceKey() }
        #expect(try Self.cached(description) == nil)
    }
}
