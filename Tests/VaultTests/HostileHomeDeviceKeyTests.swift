import Foundation
import Testing
import Cipher
@testable import Vault

/// A process that can write the data directory, and knows no secret, must not choose or
/// replace the device key, nor make a rotation move files (docs/SECURITY.md, "Security fixes").
@Suite("Device key: a hostile data directory", .serialized)
struct HostileHomeDeviceKeyTests {
    /// A vault whose device key is the file `fixture.keyFile`, resolved as the command line does.
    static func vault(_ fixture: VaultFixture) throws -> CryptoManager {
        let manager = try CryptoManager(directory: fixture.home,
                                        deviceKeyProvider: try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        _ = try manager.classKey(for: .alwaysThisDeviceOnly)
        return manager
    }

    static func json(_ object: [String: Any]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    /// The attack: a key file of the attacker's in the home and a provider record naming it,
    /// with that key's check value. The record used to be accepted, so the attacker knew the
    /// device key (and could forge the device MACs of the protected-file key table).
    @Test func aPlantedProviderRecordDoesNotChooseTheDeviceKey() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        _ = try Self.vault(fixture)
        let realKey = try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey()
        let attackerKey = try SecretBytes.random(count: 32)
        let attackerFile = fixture.home + "/attacker.key"
        try attackerKey.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: attackerFile) }
        for version in [1, 2, 3] {
            try SecureFile.writeAtomically(try Self.json([
                "format": "securefoundation-device-key-provider", "version": version, "kind": "file", "path": attackerFile,
                "check": DeviceKeyRecord.checkValue(of: attackerKey).base64EncodedString(),
            ]), to: fixture.home + "/" + DeviceKeyRecord.fileName)
            let provider = try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile)
            do {
                let key = try provider.deviceKey()
                Issue.record("version \(version): a record planted in the data directory gave a device key (the attacker's: \(key == attackerKey))")
            } catch {
                guard case let VaultError.deviceKey(why) = error else { throw error }
                #expect(why.contains("--adopt") && why.contains("data directory"), "\(why)")
            }
            // The vault itself still opens (only what needs the device key waits).
            let manager = try CryptoManager(directory: fixture.home, deviceKeyProvider: provider, policy: .minimum, attemptPolicy: .unlimited)
            try manager.unlock(passcode: SecretBytes(utf8: "1234"))
            #expect(throws: VaultError.self) { _ = try manager.classKey(for: .alwaysThisDeviceOnly) }
        }
        // Once the vault has a record beside the device key, adopting a planted one is refused
        // and changes nothing.
        let trusted = DeviceKeyRecord(kind: .file, path: fixture.keyFile, check: DeviceKeyRecord.checkValue(of: realKey))
        try trusted.save(directory: fixture.home, filePath: fixture.keyFile)
        try SecureFile.writeAtomically(try Self.json([
            "format": "securefoundation-device-key-provider", "version": 2, "kind": "file", "path": attackerFile,
            "check": DeviceKeyRecord.checkValue(of: attackerKey).base64EncodedString(),
        ]), to: fixture.home + "/" + DeviceKeyRecord.fileName)
        #expect(throws: VaultError.self) { _ = try DeviceKeyRecord.adoptLegacy(directory: fixture.home, filePath: fixture.keyFile) }
        #expect(try DeviceKeyRecord.load(directory: fixture.home, filePath: fixture.keyFile)?.path == fixture.keyFile)
        #expect(try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile).deviceKey() == realKey)
        // Removing the planted file restores the real key; the real key file never changed.
        unlink(fixture.home + "/" + DeviceKeyRecord.fileName)
        #expect(try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile).deviceKey() == realKey)
        #expect(try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey() == realKey)
    }

    /// The attack: a rotation journal in the home, phase `switching`, whose moves put a file of
    /// the attacker's over a file of the user's and a known key over the device key. Resuming
    /// used to perform the moves and crypto-erase the real device key.
    @Test func aPlantedRotationJournalMovesNothing() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try Self.vault(fixture)
        let vaultID = try #require(try manager.vaultID)
        let real = try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey()
        let victim = fixture.root + "/authorized_keys"
        try SecureFile.writeAtomically(Array("the user's own\n".utf8), to: victim)
        let evil = fixture.home + "/evil"
        try SecureFile.writeAtomically(Array("ssh-ed25519 attacker\n".utf8), to: evil)
        let attackerKey = try SecretBytes.random(count: 32)
        let staged = fixture.home + "/known.key"
        try attackerKey.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: staged) }
        let newCheck = DeviceKeyRecord.checkValue(of: attackerKey).base64EncodedString()
        let record: [String: Any] = ["format": "securefoundation-device-key-provider", "version": 2, "kind": "file",
                                     "path": fixture.keyFile, "check": newCheck]
        var stagedRecord = record
        stagedRecord["path"] = staged
        let journal: [String: Any] = [
            "format": "securefoundation-device-key-rotation", "version": 1, "phase": "switching",
            "vaultID": vaultID.base64EncodedString(), "oldCheck": DeviceKeyRecord.checkValue(of: real).base64EncodedString(),
            "newCheck": newCheck, "hadRecord": false, "final": record, "staged": stagedRecord, "filePath": fixture.keyFile,
            "moves": [["from": evil, "to": victim], ["from": staged, "to": fixture.keyFile]],
        ]
        for version in [1, 2] {
            var planted = journal
            planted["version"] = version
            try SecureFile.writeAtomically(try Self.json(planted), to: fixture.home + "/" + DeviceKeyRotation.journalName)
            // Not read as a journal: the device key is still the real one, nothing is pending.
            #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyFile) == nil)
            #expect(try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile).deviceKey() == real)
            do {
                _ = try DeviceKeyRotation.resume(manager: manager, filePath: fixture.keyFile, dependents: [])
                Issue.record("version \(version): a planted journal was resumed")
            } catch {
                guard case let VaultError.deviceKey(why) = error else { throw error }
                #expect(why.contains("nothing was changed"), "\(why)")
            }
            #expect(FileManager.default.contents(atPath: victim) == Data("the user's own\n".utf8))
            #expect(try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey() == real)
            #expect(access(evil, F_OK) == 0 && access(staged, F_OK) == 0)
        }
        // Even where a journal may live (beside the device key), renames other than the staged
        // files of its own provider are refused before anything is touched.
        var trusted = journal
        trusted["version"] = 2
        let trustedPath = DeviceKeyRotation.journalPath(vaultID: vaultID, filePath: fixture.keyFile)
        try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(trustedPath))
        try SecureFile.writeAtomically(try Self.json(trusted), to: trustedPath)
        do {
            _ = try DeviceKeyRotation.resume(manager: manager, filePath: fixture.keyFile, dependents: [])
            Issue.record("a journal with moves of its own choosing was resumed")
        } catch {
            guard case let VaultError.corrupted(why) = error else { throw error }
            #expect(why.contains("not the staged files"), "\(why)")
        }
        #expect(FileManager.default.contents(atPath: victim) == Data("the user's own\n".utf8))
        #expect(try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey() == real)
    }

    /// The attack: a systemd credential sealed with the null key (`--with-key=tpm2-absent`,
    /// which any user can make) holding a key of the attacker's choice. `systemd-creds decrypt`
    /// accepts it with a warning; the provider refuses it before decrypting.
    @Test func aNullKeyCredentialIsRefused() throws {
        guard let tool = ExternalTool.find("systemd-creds") else {
            print("skipping: systemd-creds is not installed")
            return
        }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try SecureFile.ensurePrivateDirectory(fixture.root + "/credstore")
        let path = fixture.root + "/credstore/sf-device-key.cred"
        let attackerKey = try SecretBytes.random(count: 32)
        let made = try ExternalTool.run([tool, "encrypt", "--name=sf-device-key", "--with-key=tpm2-absent", "-", path], input: attackerKey)
        made.output.wipe()
        guard made.status == 0 else {
            print("skipping: systemd-creds encrypt --with-key=tpm2-absent failed here: \(made.error)")
            return
        }
        do {
            let key = try SystemdCredentialDeviceKeyProvider(name: "sf-device-key", encryptedCredential: path).deviceKey()
            Issue.record("a null-key credential gave a device key (the attacker's: \(key == attackerKey))")
        } catch {
            guard case let VaultError.deviceKey(why) = error else { throw error }
            #expect(why.contains("null key"), "\(why)")
        }
        // Nor is such a credential ever written.
        #expect(throws: VaultError.self) {
            try SystemdCredentialDeviceKeyProvider.seal(attackerKey, name: "sf-device-key", to: fixture.root + "/credstore/x.cred", withKey: "tpm2-absent")
        }
        #expect(access(fixture.root + "/credstore/x.cred", F_OK) != 0)
    }
}
