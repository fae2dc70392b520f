import Foundation
import Testing
import TestSupport
import Cipher
@testable import Vault
import HardwareDeviceKeys

/// `DeviceKeyRotation` under the TPM and systemd-credential providers: the new key is sealed
/// the same way (same PCRs, same credential name), replaces the old one, and the record's check
/// value follows; the thisDeviceOnly keys change.
@Suite("Device-key rotation: providers", .serialized)
struct DeviceKeyRotationProviderTests {
    /// A vault whose device key comes from `record`, set up with a passcode.
    static func vault(_ fixture: VaultFixture, record: DeviceKeyRecord) throws -> CryptoManager {
        try FileManager.default.createDirectory(atPath: fixture.home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let manager = try CryptoManager(directory: fixture.home, deviceKeyProvider: record.provider(filePath: fixture.keyFile), policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        try record.save(directory: fixture.home, filePath: fixture.keyFile)
        return manager
    }

    static func rotateAndCheck(_ fixture: VaultFixture, _ manager: CryptoManager, files: [String], options: DeviceKeyRotation.Options) throws {
        let before = try manager.classKey(for: .alwaysThisDeviceOnly)
        let oldFiles = files.map { FileManager.default.contents(atPath: $0) }
        let report = try DeviceKeyRotation.rotate(manager: manager, filePath: fixture.keyFile, dependents: [], options: options)
        let record = try #require(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile))
        #expect(record.check == report.newCheck)
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile) == nil)
        for (index, path) in files.enumerated() {
            #expect(FileManager.default.contents(atPath: path) != oldFiles[index], "\(path) was not replaced")
            #expect(access(path + ".retired", F_OK) != 0)
        }
        let fresh = try CryptoManager(directory: fixture.home, deviceKeyProvider: record.provider(filePath: fixture.keyFile), policy: .minimum, attemptPolicy: .unlimited)
        let after = try fresh.classKey(for: .alwaysThisDeviceOnly)
        #expect(hexOf(after) != hexOf(before))
        // The always key itself (not bound to the device) did not change.
        #expect(hexOf(try fresh.classKey(for: .always)) == hexOf(try manager.classKey(for: .always)))
    }

    @Test func tpmRotationKeepsThePCRBinding() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        guard let tpm = try SoftwareTPM.orSkip(root: fixture.root) else { return }
        defer { tpm.stop() }
        // The record names no TCTI: the tools take it from the environment (this suite is serialized).
        setenv("TPM2TOOLS_TCTI", tpm.tcti, 1)
        defer { unsetenv("TPM2TOOLS_TCTI") }
        let key = try SecretBytes.random(count: 32)
        let prefix = fixture.root + "/sealed/device-key.tpm"
        try TPM2DeviceKeyProvider.seal(key, to: prefix, pcrs: [16], tcti: tpm.tcti)
        // Only the TPM's: the PKCS #11 kind stays unregistered in this process
        // (DeviceKeyHardwareTests shows its refusal).
        HardwareDeviceKeys.register([.tpm2])
        let manager = try Self.vault(fixture, record: DeviceKeyRecord(kind: .tpm2, sealedPath: prefix, pcrs: [16], check: DeviceKeyRecord.checkValue(of: key)))
        try Self.rotateAndCheck(fixture, manager, files: [prefix + ".pub", prefix + ".priv"], options: .init(tcti: tpm.tcti))
        let record = try #require(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile))
        #expect(record.pcrs == [16] && record.sealedPath == prefix)
        #expect(try tpm.tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "cd", count: 32)]) == 0)
        do {
            _ = try record.provider(filePath: fixture.keyFile).deviceKey()
            Issue.record("the new key unsealed after a PCR change")
        } catch {
            guard case let VaultError.deviceKey(why) = error else { throw error }
            #expect(why.contains("PCRs 16 differ"), "\(why)")
        }
    }

    @Test func systemdCredentialRotationWithTheHostKey() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        guard let sealed = try fixture.hostSealedCredential() else { return }
        let (key, credential) = sealed
        let manager = try Self.vault(fixture, record: DeviceKeyRecord(kind: .systemdCredential, name: "sf-device-key", sealedPath: credential,
                                                                      check: DeviceKeyRecord.checkValue(of: key)))
        try Self.rotateAndCheck(fixture, manager, files: [credential], options: .init(credentialWithKey: "host"))
    }

    /// The keyring provider in front of a key file: the new key replaces the file and the cached
    /// old key is evicted, so the next read takes the new one (a cache left in place would hand
    /// out the old key, refused by the new check value).
    @Test func keyringRotationEvictsTheCachedOldKey() throws {
        guard KeyringDeviceKeyProvider.isAvailable else {
            print("skipping: the kernel keyring is not available here (add_key filtered)")
            return
        }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let keyFile = fixture.root + "/config/device.key"
        let old = try FileDeviceKeyProvider(path: keyFile).deviceKey()
        let description = "securefoundation:test-rotation:" + UUID().uuidString.prefix(8)
        let cache = KeyringDeviceKeyProvider(description: description, timeout: 30, backing: FileDeviceKeyProvider(path: keyFile))
        defer { cache.evict() }
        let manager = try Self.vault(fixture, record: DeviceKeyRecord(kind: .keyring, path: keyFile, name: description, timeout: 30, backing: .file,
                                                                      check: DeviceKeyRecord.checkValue(of: old)))
        _ = try manager.classKey(for: .alwaysThisDeviceOnly)
        let cached = try KeyringDeviceKeyProvider.read(description: description, keyring: cache.keyring)
        guard let cached, hexOf(cached) == hexOf(old) else {
            print("skipping: the keyring did not cache the key here")
            return
        }
        try Self.rotateAndCheck(fixture, manager, files: [keyFile], options: .init())
        let after = try KeyringDeviceKeyProvider.read(description: description, keyring: cache.keyring)
        #expect(after.map(hexOf) != hexOf(old))
        let record = try #require(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile))
        #expect(record.kind == .keyring && record.backing == .file)
        #expect(hexOf(try record.provider(filePath: fixture.keyFile).deviceKey()) != hexOf(old))
    }

    /// A journal that is not one, or of a future version, is refused with the reason.
    @Test func damagedJournalIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        let vaultID = try #require(try manager.vaultID)
        let path = DeviceKeyRotation.journalPath(vaultID: vaultID, filePath: fixture.keyFile)
        try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(path))
        try SecureFile.writeAtomically(Array("{\"format\":\"x\"}".utf8), to: path)
        #expect(throws: VaultError.self) { _ = try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile) }
        let check = Data(repeating: 1, count: 16)
        let record = DeviceKeyRecord(kind: .file, path: "/tmp/k", check: check)
        var journal = DeviceKeyRotation.Journal(phase: .rekeying, vaultID: vaultID, oldCheck: check, newCheck: check,
                                                hadRecord: false, final: record, staged: DeviceKeyRecord(kind: .file, path: "/tmp/k.rotating", check: check),
                                                filePath: nil, moves: [DeviceKeyRotation.Move(from: "/tmp/k.rotating", to: "/tmp/k")])
        journal.version = 3
        try SecureFile.writeAtomically(try CanonicalEncoding.encode(journal), to: path)
        do {
            _ = try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile)
            Issue.record("a journal of version 3 was accepted")
        } catch {
            guard case let VaultError.corrupted(why) = error else { throw error }
            #expect(why.contains("version 3 is not supported"))
        }
        // The consistent journal is read; one of another vault is refused.
        journal.version = 2
        try SecureFile.writeAtomically(try CanonicalEncoding.encode(journal), to: path)
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile) == journal)
        journal.vaultID = Data(repeating: 0, count: 16)
        try SecureFile.writeAtomically(try CanonicalEncoding.encode(journal), to: path)
        #expect(throws: VaultError.self) { _ = try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile) }
        #expect(throws: VaultError.self) { _ = try DeviceKeyRotation.resume(manager: manager, filePath: fixture.keyFile, dependents: []) }
    }
}
