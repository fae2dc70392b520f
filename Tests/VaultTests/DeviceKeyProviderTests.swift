import Foundation
import Testing
import Cipher
@testable import Vault

/// Counts how often the key is taken from it.
final class CountingProvider: DeviceKeyProvider, @unchecked Sendable {
    let key: SecretBytes
    private let lock = NSLock()
    private var reads = 0
    init(_ key: SecretBytes) { self.key = key }
    var count: Int { lock.withLock { reads } }
    func deviceKey() throws -> SecretBytes {
        lock.withLock { reads += 1 }
        return key.slice(0..<key.count)
    }
}

func hexOf(_ key: SecretBytes) -> String { key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() } }

@Suite("Device-key providers", .serialized)
struct DeviceKeyProviderTests {
    @Test func recordRoundTripsAndRefusesAnotherKey() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        let vaultID = try #require(try manager.vaultID)
        let key = try SecretBytes.random(count: 32)
        var record = DeviceKeyRecord(kind: .file, path: fixture.root + "/device.key", check: DeviceKeyRecord.checkValue(of: key))
        try record.save(directory: fixture.home, filePath: fixture.keyFile)
        record.vaultID = vaultID
        #expect(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile) == record)
        // Beside the device key, named by the vault's id; nothing in the data directory.
        let trusted = DeviceKeyRecord.trustedPath(vaultID: vaultID, filePath: fixture.keyFile)
        #expect(trusted == fixture.root + "/config/vaults/" + Encoding.hex(vaultID) + ".device-key.provider")
        var info = stat()
        #expect(lstat(trusted, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(lstat(fixture.root + "/config/vaults", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(access(fixture.home + "/device-key.provider", F_OK) != 0)
        // The file provider creates its own key, which is not this record's: refused, not used.
        #expect(throws: VaultError.self) { try record.provider().deviceKey() }
        do {
            _ = try record.provider().deviceKey()
        } catch {
            guard case let VaultError.deviceKey(why) = error else { throw error }
            #expect(why.contains("is not this vault's"))
        }
        // Hostile records are refused with corrupted, never trusted.
        for bad in [#"{"check":"AAAA","format":"securefoundation-device-key-provider","kind":"file","version":1}"#,
                    #"{"check":"AAAAAAAAAAAAAAAAAAAAAA==","format":"securefoundation-device-key-provider","kind":"keyring","version":1}"#,
                    #"{"check":"AAAAAAAAAAAAAAAAAAAAAA==","format":"securefoundation-device-key-provider","kind":"file","version":3}"#,
                    #"{"backing":"systemd-credential","check":"AAAAAAAAAAAAAAAAAAAAAA==","format":"securefoundation-device-key-provider","kind":"keyring","name":"k","timeout":5,"version":2}"#,
                    #"{"check":"AAAAAAAAAAAAAAAAAAAAAA==","format":"securefoundation-device-key-provider","kind":"systemd-credential","name":"../x","version":1}"#,
                    "not json"] {
            try SecureFile.writeAtomically(Array(bad.utf8), to: trusted)
            #expect(throws: VaultError.self) { try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile) }
        }
    }

    @Test func keyringCachesTheBackingKeyWithATimeout() throws {
        guard let keyring = KeyringDeviceKeyProvider.newProcessKeyring(named: "sf-test-" + UUID().uuidString) else {
            print("skipping: the kernel keyring is not available here (add_key refused)")
            return
        }
        let backing = CountingProvider(try SecretBytes.random(count: 32))
        let description = "securefoundation:test:" + UUID().uuidString
        let provider = KeyringDeviceKeyProvider(description: description, timeout: 1, keyring: keyring, backing: backing)
        #expect(hexOf(try provider.deviceKey()) == hexOf(backing.key))
        #expect(backing.count == 1)
        // From the kernel now, not from the backing provider.
        #expect(hexOf(try provider.deviceKey()) == hexOf(backing.key))
        #expect(backing.count == 1)
        // After the timeout the kernel has dropped it.
        let expired = (0..<100).contains { _ in
            usleep(100_000)
            return (try? KeyringDeviceKeyProvider.read(description: description, keyring: keyring)) == nil
        }
        #expect(expired)
        #expect(hexOf(try provider.deviceKey()) == hexOf(backing.key))
        #expect(backing.count == 2)
        #expect(provider.evict())
        #expect(try KeyringDeviceKeyProvider.read(description: description, keyring: keyring) == nil)
        #expect(!provider.evict())
    }

    @Test func systemdCredentialWithTheHostKey() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        guard let sealed = try fixture.hostSealedCredential() else { return }
        let (key, credential) = sealed
        // Decrypted outside a unit with systemd-creds decrypt.
        let provider = SystemdCredentialDeviceKeyProvider(name: "sf-device-key", encryptedCredential: credential)
        #expect(hexOf(try provider.deviceKey()) == hexOf(key))
        // A credential under another name does not decrypt (the name is authenticated).
        let renamed = SystemdCredentialDeviceKeyProvider(name: "other-name", encryptedCredential: credential)
        #expect(throws: VaultError.self) { try renamed.deviceKey() }
        // A vault whose thisDeviceOnly keys depend on it.
        let manager = try CryptoManager(directory: fixture.home, deviceKeyProvider: provider, policy: .minimum, attemptPolicy: .unlimited)
        let always = try manager.classKey(for: .alwaysThisDeviceOnly)
        let same = try CryptoManager(directory: fixture.home, deviceKeyProvider: StaticDeviceKeyProvider(key: key), policy: .minimum, attemptPolicy: .unlimited)
        #expect(hexOf(always) == hexOf(try same.classKey(for: .alwaysThisDeviceOnly)))
        // A credential file that was tampered with is refused.
        var bytes = try SecureFile.read(credential)
        bytes[bytes.count / 2] ^= 1
        try SecureFile.writeAtomically(bytes, to: credential)
        #expect(throws: VaultError.self) { try provider.deviceKey() }
    }

    /// A keyring cache in front of a systemd credential names the credential apart from its own
    /// description (record version 2); version 1 kept only the description, so the cache asked
    /// systemd-creds for a credential of the wrong name.
    @Test func keyringInFrontOfASystemdCredentialReadsTheCredential() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try fixture.manager().setUp(passcode: SecretBytes(utf8: "1234"))
        let key = try SecretBytes.random(count: 32)
        let credential = fixture.root + "/credstore/device-key.cred"
        let record = DeviceKeyRecord(kind: .keyring, name: "securefoundation:device-key:test", sealedPath: credential, timeout: 60,
                                     backing: .systemdCredential, backingName: "sf-device-key", check: DeviceKeyRecord.checkValue(of: key))
        try record.save(directory: fixture.home, filePath: fixture.keyFile)
        let loaded = try #require(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile))
        #expect(loaded.kind == record.kind && loaded.name == record.name && loaded.backingName == record.backingName && loaded.version == 3)
        let inner = loaded.backingRecord()
        #expect(inner.kind == .systemdCredential && inner.name == "sf-device-key" && inner.sealedPath == credential)
        #expect(inner.timeout == nil && inner.backing == nil)
        // Version 1 (kept in the data directory) is read and upgraded when adopted: the
        // credential is taken to have the default name.
        let v1 = #"{"backing":"systemd-credential","check":"AAAAAAAAAAAAAAAAAAAAAA==","format":"securefoundation-device-key-provider","kind":"keyring","name":"securefoundation:device-key:abc","sealedPath":"/x.cred","timeout":600,"version":1}"#
        try SecureFile.writeAtomically(Array(v1.utf8), to: fixture.home + "/device-key.provider")
        let legacy = try #require(try DeviceKeyRecord.loadLegacy(directory: fixture.home))
        #expect(legacy.version == 2 && legacy.backingName == DeviceKeyRecord.defaultCredentialName)
        // Adopted only where the vault has no record beside the device key yet.
        let vaultID = try #require(try DeviceKeyRecord.vaultID(ofHome: fixture.home))
        #expect(throws: VaultError.self) { _ = try DeviceKeyRecord.adoptLegacy(directory: fixture.home, filePath: fixture.keyFile) }
        unlink(DeviceKeyRecord.trustedPath(vaultID: vaultID, filePath: fixture.keyFile))
        _ = try DeviceKeyRecord.adoptLegacy(directory: fixture.home, filePath: fixture.keyFile)
        let upgraded = try #require(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile))
        #expect(upgraded.version == 3 && upgraded.backingName == DeviceKeyRecord.defaultCredentialName)
        #expect(upgraded.backingRecord().name == DeviceKeyRecord.defaultCredentialName)
        #expect(upgraded.name == "securefoundation:device-key:abc")

        guard geteuid() == 0, ExternalTool.find("systemd-creds") != nil else {
            print("skipping the systemd-creds half: needs root and systemd-creds")
            return
        }
        do {
            try SystemdCredentialDeviceKeyProvider.seal(key, name: "sf-device-key", to: credential, withKey: "host")
        } catch {
            print("skipping the systemd-creds half: systemd-creds encrypt --with-key=host does not work here: \(error)")
            return
        }
        // The provider behind the cache decrypts the credential under its own name.
        #expect(hexOf(try record.backingRecord().uncheckedProvider(filePath: nil).deviceKey()) == hexOf(key))
    }

    @Test func systemdCredentialFromTheCredentialsDirectory() throws {
        // What a unit with LoadCredentialEncrypted= sees: $CREDENTIALS_DIRECTORY/NAME in plain.
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let directory = fixture.root + "/credentials"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = try SecretBytes.random(count: 32)
        try key.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: directory + "/sf-device-key") }
        setenv("CREDENTIALS_DIRECTORY", directory, 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }
        #expect(hexOf(try SystemdCredentialDeviceKeyProvider(name: "sf-device-key").deviceKey()) == hexOf(key))
        #expect(throws: VaultError.self) { try SystemdCredentialDeviceKeyProvider(name: "absent").deviceKey() }
        try SecureFile.writeAtomically(Array("short".utf8), to: directory + "/short")
        #expect(throws: VaultError.self) { try SystemdCredentialDeviceKeyProvider(name: "short").deviceKey() }
    }
}
