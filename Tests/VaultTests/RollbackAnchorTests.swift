import Foundation
import Testing
import Cipher
@testable import Vault

/// The rollback anchor beside the device key (CONFIG/vaults/VAULTID.anchor) and the version-3
/// state: a data directory put back from a copy, a state file from a backup, a deleted attempt
/// record and a swapped device key are detected; a writer killed before it advanced the anchor
/// leaves a vault that opens.
@Suite("Rollback anchor")
struct RollbackAnchorTests {
    /// A manager whose device key is the file `fixture.keyFile`, so the anchor lives in
    /// `root/config/vaults/`.
    func manager(_ fixture: VaultFixture, attemptPolicy: AttemptPolicy = .unlimited) throws -> CryptoManager {
        let clock = fixture.clock
        return try CryptoManager(directory: fixture.home, deviceKeyProvider: FileDeviceKeyProvider(path: fixture.keyFile),
                                 policy: .interactive, attemptPolicy: attemptPolicy, clock: { clock.now })
    }

    /// The regular files of `directory` (name → bytes).
    func snapshot(_ directory: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            var info = stat()
            guard lstat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            files[name] = try SecureFile.read(directory + "/" + name)
        }
        return files
    }

    /// Puts `files` back as the only regular files of `directory` (0600), as a restore from a copy does.
    func restore(_ files: [String: [UInt8]], to directory: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            var info = stat()
            if lstat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG { unlink(directory + "/" + name) }
        }
        for (name, bytes) in files { try SecureFile.writeAtomically(bytes, to: directory + "/" + name) }
    }

    func anchorPath(_ fixture: VaultFixture, _ manager: CryptoManager) throws -> String {
        let anchor = try #require(try manager.rollbackAnchor)
        #expect(anchor.path == fixture.root + "/config/vaults/" + Encoding.hex(try #require(try manager.vaultID)) + ".anchor")
        return anchor.path
    }

    @Test func theAnchorIsBesideTheDeviceKeyAndCountsGenerations() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("old"))
        let path = try anchorPath(fixture, manager)
        #expect(fixture.mode(path) == 0o600 && fixture.mode(fixture.root + "/config/vaults") == 0o700)
        let anchor = try #require(try manager.rollbackAnchor)
        #expect(try anchor.current(RollbackAnchor.vaultState) == 1)
        try manager.updatePasscode(current: secret("old"), new: secret("new"))
        #expect(try anchor.current(RollbackAnchor.vaultState) == 2)
        #expect(try VaultState.load(directory: fixture.home)?.generation == 2)
        // Advancing is max: never lower.
        #expect(try anchor.advance(RollbackAnchor.shareRevocations, to: 5) == 5)
        #expect(try anchor.advance(RollbackAnchor.shareRevocations, to: 3) == 5)
        #expect(try anchor.current(RollbackAnchor.shareRevocations) == 5)
        #expect(throws: VaultError.rolledBack(file: "f", found: 4, expected: 5)) {
            try anchor.check(RollbackAnchor.shareRevocations, found: 4, file: "f")
        }
        try anchor.check(RollbackAnchor.shareRevocations, found: 7, file: "f")
        #expect(try anchor.current(RollbackAnchor.shareRevocations) == 7)
        // A library user without a device-key place (a key in memory) has no anchor.
        #expect(try fixture.manager().rollbackAnchor == nil)
    }

    @Test func anAnchorThatIsNotOneIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        let path = try anchorPath(fixture, manager)
        let original = try SecureFile.read(path)
        for bad in ["{}", "not json", #"{"counters":{},"format":"securefoundation-rollback-anchor","vaultID":"AAAAAAAAAAAAAAAAAAAAAA==","version":1}"#,
                    #"{"counters":{"vault.state":1},"format":"securefoundation-rollback-anchor","vaultID":"\#(Data(try #require(try manager.vaultID)).base64EncodedString())","version":2}"#] {
            try SecureFile.writeAtomically(Array(bad.utf8), to: path)
            let error = #expect(throws: VaultError.self) { try manager.unlock(passcode: secret("pin")) }
            guard case .corrupted? = error else { Issue.record("\(bad): \(String(describing: error))"); continue }
        }
        try SecureFile.writeAtomically(original, to: path)
        chmod(path, 0o644)
        #expect(throws: VaultError.self) { try manager.unlock(passcode: secret("pin")) }
        chmod(path, 0o600)
        try manager.unlock(passcode: secret("pin"))
    }

    /// The whole data directory copied before a passcode change and put back afterwards (the
    /// old passcode would open it again): refused at unlock.
    @Test func aWholeHomePutBackAfterAPasscodeChangeIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("old leaked pin"))
        let sealed = try manager.encrypt(Array("data".utf8))
        let backup = try snapshot(fixture.home)
        try manager.updatePasscode(current: secret("old leaked pin"), new: secret("new pin"))
        manager.lock()
        try restore(backup, to: fixture.home)

        let restored = try self.manager(fixture)
        #expect(throws: VaultError.rolledBack(file: fixture.statePath, found: 1, expected: 2)) {
            try restored.unlock(passcode: secret("old leaked pin"))
        }
        #expect(!restored.isUnlocked)
        // A change from the rolled-back state is refused too (it would write over the anchor).
        #expect(throws: VaultError.rolledBack(file: fixture.statePath, found: 1, expected: 2)) {
            try restored.updatePasscode(current: secret("old leaked pin"), new: secret("attacker's"))
        }
        let error = VaultError.rolledBack(file: fixture.statePath, found: 1, expected: 2)
        #expect(error.description.contains("rolled back") && error.description.contains("anchor"))
        // The user who restored on purpose deletes the anchor: the copy opens again.
        unlink(try anchorPath(fixture, restored))
        try restored.unlock(passcode: secret("old leaked pin"))
        #expect(try restored.decrypt(sealed) == Array("data".utf8))
    }

    /// vault.state alone from a backup taken before a key rotation: refused.
    @Test func aStateFromBeforeAKeyRotationIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("pin"))
        let before = try SecureFile.read(fixture.statePath)
        try manager.rotateKey(passcode: secret("pin"))
        try manager.rotateClassKeys()
        #expect(try VaultState.load(directory: fixture.home)?.generation == 3)
        manager.lock()
        try SecureFile.writeAtomically(before, to: fixture.statePath)
        #expect(throws: VaultError.rolledBack(file: fixture.statePath, found: 1, expected: 3)) {
            try manager.unlock(passcode: secret("pin"))
        }
        #expect(throws: VaultError.rolledBack(file: fixture.statePath, found: 1, expected: 3)) {
            try manager.rotateKey(passcode: secret("pin"))
        }
    }

    /// A writer killed after writing vault.state, before advancing the anchor: the newer state
    /// opens, and the anchor is advanced then.
    @Test func aStateNewerThanTheAnchorOpensAndAdvancesIt() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("old"))
        let path = try anchorPath(fixture, manager)
        let anchorBefore = try SecureFile.read(path)
        try manager.updatePasscode(current: secret("old"), new: secret("new"))
        manager.lock()
        try SecureFile.writeAtomically(anchorBefore, to: path)
        let anchor = try #require(try manager.rollbackAnchor)
        #expect(try anchor.current(RollbackAnchor.vaultState) == 1)
        try manager.unlock(passcode: secret("new"))
        #expect(try anchor.current(RollbackAnchor.vaultState) == 2)
    }

    /// Deleting or zeroing HOME/attempts after failures does not reset the delay.
    @Test func deletingTheAttemptRecordDoesNotResetTheDelay() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let policy = AttemptPolicy(delays: [.zero, .zero, .seconds(600)])
        let manager = try manager(fixture, attemptPolicy: policy)
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        for failures in 1...3 {
            #expect(throws: VaultError.self) { try manager.unlock(passcode: secret("guess \(failures)")) }
        }
        #expect(try manager.failedAttempts == 3)
        let attempts = fixture.home + "/" + AttemptRecord.fileName
        for tamper in ["delete", "zero"] {
            if tamper == "delete" {
                unlink(attempts)
            } else {
                try AttemptRecord().store(directory: fixture.home)
            }
            let fresh = try self.manager(fixture, attemptPolicy: policy)
            #expect(try fresh.failedAttempts == 3, "\(tamper)")
            #expect(try fresh.nextAttemptDelay > .seconds(590), "\(tamper)")
            #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(600)), "\(tamper)") {
                try fresh.unlock(passcode: secret("pin"))
            }
        }
        // Once the delay ran out the right passcode clears both records.
        fixture.clock.advance(601)
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.failedAttempts == 0)
        #expect(try #require(try manager.rollbackAnchor).attempts() == nil)
    }

    /// A damaged HOME/attempts is still read as the longest delay, never as a reason to erase.
    @Test func aDamagedAttemptRecordKeepsItsBehaviourWithAnAnchor() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture, attemptPolicy: AttemptPolicy.iOS.erasing(after: 3))
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        try SecureFile.writeAtomically(Array("garbage".utf8), to: fixture.home + "/" + AttemptRecord.fileName)
        #expect(throws: VaultError.attemptRecordDamaged(retryAfter: .seconds(3600))) { try manager.unlock(passcode: secret("pin")) }
        #expect(try manager.isSetUp)
    }

    /// A version-2 state is upgraded at its next unlock; put back afterwards, it is refused.
    @Test func aVersion2StatePutBackAfterItsUpgradeIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try SecureFile.ensurePrivateDirectory(fixture.home)
        let v2 = Array(VaultKnownAnswerTests.stateV2.utf8)
        try SecureFile.writeAtomically(v2, to: fixture.statePath)
        let manager = try manager(fixture)
        try manager.unlock(answers: ["rex", "", "Mrs Dupont"])
        let upgraded = try #require(try VaultState.load(directory: fixture.home))
        #expect(upgraded.version == VaultState.currentVersion && upgraded.generation == 1)
        #expect(upgraded.deviceCheck == DeviceKeyRecord.checkValue(of: try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey()))
        #expect(try #require(try manager.rollbackAnchor).current(RollbackAnchor.vaultState) == 1)
        manager.lock()
        try SecureFile.writeAtomically(v2, to: fixture.statePath)
        #expect(throws: VaultError.rolledBack(file: fixture.statePath, found: 0, expected: 1)) {
            try manager.unlock(answers: ["rex", "", "Mrs Dupont"])
        }
        FirstUnlockCache.remove(vaultID: upgraded.vaultID)
    }

    /// The device key replaced by another one (a key file and a provider record that agree
    /// with each other, as a restore from another machine leaves them): detected at unlock.
    @Test func aSwappedDeviceKeyIsDetectedAtUnlock() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try manager(fixture)
        try manager.setUp(passcode: secret("pin"))
        let state = try #require(try VaultState.load(directory: fixture.home))
        let original = try FileDeviceKeyProvider(path: fixture.keyFile).deviceKey()
        #expect(state.deviceCheck == DeviceKeyRecord.checkValue(of: original))
        manager.lock()

        let other = try SecretBytes.random(count: 32)
        try other.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: fixture.keyFile) }
        // With a provider record naming the other key.
        try DeviceKeyRecord(kind: .file, path: fixture.keyFile, check: DeviceKeyRecord.checkValue(of: other))
            .save(directory: fixture.home, filePath: fixture.keyFile)
        let recorded = try CryptoManager(directory: fixture.home,
                                         deviceKeyProvider: try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile),
                                         policy: .interactive, attemptPolicy: .unlimited)
        #expect(throws: VaultError.deviceKey(CryptoManager.otherDeviceKeyText)) { try recorded.unlock(passcode: secret("pin")) }
        #expect(!recorded.isUnlocked)

        // Without a record: the key file it falls back to is checked against the state.
        unlink(DeviceKeyRecord.trustedPath(vaultID: state.vaultID, filePath: fixture.keyFile))
        let fallback = try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyFile)
        #expect(throws: VaultError.self) { try fallback.deviceKey() }
        let unrecorded = try CryptoManager(directory: fixture.home, deviceKeyProvider: fallback, policy: .interactive, attemptPolicy: .unlimited)
        #expect(throws: VaultError.deviceKey(CryptoManager.otherDeviceKeyText)) { try unrecorded.unlock(passcode: secret("pin")) }
        // The plain key-file provider of a library user: refused as well, and never used.
        let plain = try self.manager(fixture)
        #expect(throws: VaultError.deviceKey(CryptoManager.otherDeviceKeyText)) { try plain.deviceSubkey(purpose: "x") }
        #expect(throws: VaultError.deviceKey(CryptoManager.otherDeviceKeyText)) { try plain.unlock(passcode: secret("pin")) }

        // The vault's own key back: it opens.
        try original.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: fixture.keyFile) }
        try self.manager(fixture).unlock(passcode: secret("pin"))
    }

    /// The check value and the generation are authenticated: changed in the file, the secret
    /// section no longer opens.
    @Test func theGenerationAndDeviceCheckAreAuthenticated() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try fixture.manager().setUp(passcode: secret("pin"))
        let original = try SecureFile.read(fixture.statePath)
        for (label, mutate) in [("generation", { (object: inout [String: Any]) in object["generation"] = 9 }),
                                ("deviceCheck", { (object: inout [String: Any]) in object["deviceCheck"] = Data(count: 16).base64EncodedString() }),
                                ("no deviceCheck", { (object: inout [String: Any]) in object.removeValue(forKey: "deviceCheck") })] {
            var object = try #require(try JSONSerialization.jsonObject(with: Data(original)) as? [String: Any])
            mutate(&object)
            try SecureFile.writeAtomically(try JSONSerialization.data(withJSONObject: object), to: fixture.statePath)
            let manager = try fixture.manager()
            let error = #expect(throws: VaultError.self, "\(label)") { try manager.unlock(passcode: secret("pin")) }
            switch error {
            case .corrupted?, .deviceKey?: break
            default: Issue.record("\(label): \(String(describing: error))")
            }
        }
    }
}
