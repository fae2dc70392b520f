import Foundation
import Testing
import Cipher
@testable import Vault

@Suite("Keys, classes and files")
struct KeyTests {
    @Test func updatePasscodeKeepsDataReadableAndShredsTheOldWrapping() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pass"))
        let sealed = try manager.encrypt(Array("payload".utf8))
        let keyID = try manager.keyID
        let oldState = try SecureFile.read(fixture.statePath)
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) {
            try manager.updatePasscode(current: secret("not it"), new: secret("new pass"))
        }
        try manager.updatePasscode(current: secret("old pass"), new: secret("new pass"))
        #expect(try manager.keyID == keyID, "the application key does not change")
        #expect(try SecureFile.read(fixture.statePath) != oldState)
        #expect(fixture.supersededFiles().isEmpty)
        try expectPasscodeChanged(manager, from: "old pass", to: "new pass", sealed: sealed, plaintext: "payload")
        manager.lock()
        try manager.updatePasscode(current: secret("new pass"), new: secret("x"))
        #expect(manager.isUnlocked, "a change from a locked vault leaves it unlocked")
    }

    @Test func leftoverSupersededFilesAreDestroyedButTheLiveStateIsKept() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        // A crash after linking the live file (same inode) and one after the rename (old inode).
        #expect(link(fixture.statePath, fixture.home + "/.superseded-live") == 0)
        try SecureFile.writeAtomically(Array("old wrapping".utf8), to: fixture.home + "/.superseded-old")
        let reopened = try fixture.manager()
        #expect(fixture.supersededFiles().isEmpty)
        manager.lock()
        try reopened.unlock(passcode: secret("pin"))
    }

    @Test func rotationKeepsOldDataReadableAndClassKeysStable() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: sampleQuestions, answers: sampleAnswers, threshold: 2)
        let before = try manager.encrypt(Array("before".utf8))
        let oldID = try #require(try manager.keyID)
        let classBefore = try manager.classKey(for: .whenUnlocked)
        let afterFirstBefore = try manager.classKey(for: .afterFirstUnlockThisDeviceOnly)
        #expect(throws: VaultError.invalidArgument("all 3 answers are required to rotate the key")) {
            try manager.rotateKey(passcode: secret("pin"))
        }
        let newID = try manager.rotateKey(passcode: secret("pin"), answers: sampleAnswers)
        #expect(newID != oldID)
        #expect(try manager.keyID == newID)
        let after = try manager.encrypt(Array("after".utf8))
        #expect(try Sealed.parseHeader(after).keySource == .key(id: newID))
        #expect(try manager.decrypt(before) == Array("before".utf8))
        #expect(try manager.classKey(for: .whenUnlocked) == classBefore)
        manager.lock()
        try manager.unlock(answers: ["", "lyon", "mrs dupont"])
        #expect(try manager.decrypt(before) == Array("before".utf8))
        #expect(try manager.decrypt(after) == Array("after".utf8))
        #expect(try manager.classKey(for: .whenUnlocked) == classBefore)
        #expect(try manager.classKey(for: .afterFirstUnlockThisDeviceOnly) == afterFirstBefore)
        // A second rotation keeps both older keys.
        try manager.rotateKey(passcode: secret("pin"), answers: sampleAnswers)
        manager.lock()
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.decrypt(before) == Array("before".utf8))
        #expect(try manager.decrypt(after) == Array("after".utf8))
    }

    @Test func classKeyAvailabilityFollowsTheLockState() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlocked, .notSetUp)) { try manager.classKey(for: .whenUnlocked) }
        #expect(throws: VaultError.classKeyUnavailable(.afterFirstUnlock, .notSetUp)) { try manager.classKey(for: .afterFirstUnlock) }
        let always = try manager.classKey(for: .always)
        #expect(always.count == 32)
        #expect(fixture.mode(fixture.home + "/always.key") == 0o600)

        try manager.setUp(passcode: secret("pin"))
        let whenUnlocked = try manager.classKey(for: .whenUnlocked)
        let afterFirst = try manager.classKey(for: .afterFirstUnlock)
        #expect(whenUnlocked != afterFirst)
        #expect(whenUnlocked != always)
        manager.lock()
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlocked, .locked)) { try manager.classKey(for: .whenUnlocked) }
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlockedThisDeviceOnly, .locked)) {
            try manager.classKey(for: .whenUnlockedThisDeviceOnly)
        }
        #expect(try manager.classKey(for: .afterFirstUnlock) == afterFirst, "afterFirstUnlock survives lock()")
        #expect(try manager.classKey(for: .always) == always)
        // Another manager in this process sees the first unlock too.
        #expect(try fixture.manager().classKey(for: .afterFirstUnlock) == afterFirst)

        // A process that has not unlocked yet (the cache is per process).
        let state = try #require(try VaultState.load(directory: fixture.home))
        FirstUnlockCache.remove(vaultID: state.vaultID)
        #expect(throws: VaultError.classKeyUnavailable(.afterFirstUnlock, .noFirstUnlockYet)) { try manager.classKey(for: .afterFirstUnlock) }
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.classKey(for: .whenUnlocked) == whenUnlocked)
        #expect(try manager.classKey(for: .afterFirstUnlock) == afterFirst)
    }

    @Test func thisDeviceOnlyKeysNeedTheSameDeviceKey() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let here = try fixture.manager()
        try here.setUp(passcode: secret("pin"))
        // The same data directory with another device key (copied to another machine): the
        // state names its device key, so the unlock is refused.
        let otherDevice = try SecretBytes.random(count: 32)
        #expect(throws: VaultError.deviceKey(CryptoManager.otherDeviceKeyText)) {
            try fixture.manager(deviceKey: otherDevice).unlock(passcode: secret("pin"))
        }
        // The class keys another device key would give.
        let elsewhere = try here.deviceBoundKeys(deviceKey: otherDevice)
        for accessibility in Accessibility.allValues {
            let a = try here.classKey(for: accessibility)
            let b = try elsewhere.classKey(for: accessibility)
            #expect((a == b) == !accessibility.thisDeviceOnly, "\(accessibility)")
        }
        let key = try SealingKey(key: try here.classKey(for: .alwaysThisDeviceOnly), id: [1])
        let sealed = try Sealed.seal(Array("device secret".utf8), with: key)
        let otherKey = try SealingKey(key: try elsewhere.classKey(for: .alwaysThisDeviceOnly), id: [1])
        #expect(throws: CipherError.tampered) { try Sealed.open(sealed, with: otherKey) }
        #expect(try Sealed.open(sealed, with: key) == Array("device secret".utf8))
        #expect(try here.deviceSubkey(purpose: "keychain blind index v1") != elsewhere.deviceSubkey(purpose: "keychain blind index v1"))
        #expect(try here.deviceSubkey(purpose: "a") != (try here.deviceSubkey(purpose: "b")))
    }

    @Test func missingDeviceKeyIsATypedReason() throws {
        struct Broken: DeviceKeyProvider {
            func deviceKey() throws -> SecretBytes { throw VaultError.deviceKey("no key here") }
        }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try CryptoManager(directory: fixture.home, deviceKeyProvider: Broken(), policy: .minimum, attemptPolicy: .unlimited)
        #expect(throws: VaultError.classKeyUnavailable(.alwaysThisDeviceOnly, .deviceKeyMissing)) {
            try manager.classKey(for: .alwaysThisDeviceOnly)
        }
        #expect(try manager.classKey(for: .always).count == 32)
        #expect(throws: VaultError.deviceKey("no key here")) { try manager.deviceSubkey(purpose: "x") }
    }

    @Test func fileDeviceKeyIsCreatedPrivateAndStable() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let path = fixture.root + "/config/securefoundation/device.key"
        let provider = FileDeviceKeyProvider(path: path)
        let first = try provider.deviceKey()
        #expect(first.count == 32)
        #expect(fixture.mode(path) == 0o600)
        #expect(fixture.mode(fixture.root + "/config/securefoundation") == 0o700)
        #expect(try provider.deviceKey() == first)
        chmod(path, 0o644)
        #expect(throws: VaultError.insecurePermissions(path: path, reason: "its mode 644 lets group or others in", fix: "chmod 600 \(path)")) {
            try provider.deviceKey()
        }
        #expect(FileDeviceKeyProvider.defaultPath(environment: ["XDG_CONFIG_HOME": "/x/cfg", "HOME": "/h"]) == "/x/cfg/securefoundation/device.key")
        #expect(FileDeviceKeyProvider.defaultPath(environment: ["HOME": "/h"]) == "/h/.config/securefoundation/device.key")
        #expect(VaultPaths.defaultDirectory(environment: ["SECUREFOUNDATION_HOME": "/s", "XDG_DATA_HOME": "/d", "HOME": "/h"]) == "/s")
        #expect(VaultPaths.defaultDirectory(environment: ["XDG_DATA_HOME": "/d", "HOME": "/h"]) == "/d/securefoundation")
        #expect(VaultPaths.defaultDirectory(environment: ["HOME": "/h"]) == "/h/.local/share/securefoundation")
    }

    @Test func insecurePermissionsAreRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        chmod(fixture.statePath, 0o644)
        #expect(throws: VaultError.insecurePermissions(path: fixture.statePath, reason: "its mode 644 lets group or others in",
                                                       fix: "chmod 600 \(fixture.statePath)")) {
            try manager.unlock(passcode: secret("pin"))
        }
        chmod(fixture.statePath, 0o600)
        chmod(fixture.home, 0o755)
        #expect(throws: VaultError.insecurePermissions(path: fixture.home, reason: "its mode 755 lets group or others in",
                                                       fix: "chmod 700 \(fixture.home)")) {
            _ = try fixture.manager()
        }
        chmod(fixture.home, 0o700)
        guard geteuid() == 0 else {
            print("skipping the foreign-owner case: changing a file's owner needs root")
            return
        }
        chown(fixture.statePath, 12345, 12345)
        #expect(throws: VaultError.self) { try manager.hasPasscode }
        do {
            _ = try manager.hasPasscode
        } catch {
            guard case let VaultError.insecurePermissions(_, reason, _) = error else { throw error }
            #expect(reason.contains("owned by uid 12345"))
        }
    }

    @Test func lockStateChangesAreObserved() async throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        let stream = manager.lockStateChanges
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        manager.lock()
        try await manager.unlock(passcode: secret("pin"))
        var seen: [LockState] = []
        for await state in stream {
            seen.append(state)
            if seen.count == 4 { break }
        }
        #expect(seen == [.locked, .unlocked, .locked, .unlocked])
    }

    @Test func accessibilityNamesRoundTrip() {
        let names = Accessibility.allValues.map(\.name)
        #expect(names == ["whenUnlocked", "afterFirstUnlock", "always",
                          "whenUnlockedThisDeviceOnly", "afterFirstUnlockThisDeviceOnly", "alwaysThisDeviceOnly"])
        for accessibility in Accessibility.allValues { #expect(Accessibility(name: accessibility.name) == accessibility) }
        #expect(Accessibility(name: "never") == nil)
        #expect(Accessibility(name: "ThisDeviceOnly") == nil)
    }
}

@Suite("Retiring keys")
struct RetireTests {
    @Test func resealThenRemoveRetiredKeys() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let oldID = try #require(try manager.keyID)
        let old = try manager.encrypt(Array("old".utf8), context: [9])
        let kept = try manager.encrypt(Array("kept".utf8))
        try manager.rotateKey(passcode: secret("pin"))
        #expect(try manager.retiredKeyIDs == [oldID])
        let resealed = try manager.reseal(kept)
        #expect(try Sealed.parseHeader(resealed).keySource == .key(id: try #require(try manager.keyID)))
        try manager.removeRetiredKeys([oldID])
        #expect(try manager.retiredKeyIDs.isEmpty)
        #expect(fixture.supersededFiles().isEmpty)
        #expect(try manager.decrypt(resealed) == Array("kept".utf8))
        #expect(throws: VaultError.self) { try manager.decrypt(old, context: [9]) }
        manager.lock()
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.retiredKeyIDs.isEmpty)
        #expect(try manager.decrypt(resealed) == Array("kept".utf8))
        #expect(throws: VaultError.self) { try manager.decrypt(old, context: [9]) }
    }
}

@Suite("Passcode recovery")
struct RecoveryTests {
    @Test func forgottenPasscodeIsResetWithTheAnswers() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("forgotten"), questions: ["Pet?", "Town?"], answers: ["Rex", "Lyon"], threshold: 1)
        let sealed = try manager.encrypt(Array("kept".utf8))
        manager.lock()
        #expect(throws: VaultError.wrongAnswers(failures: 1, nextAttemptAfter: nil)) {
            try manager.resetPasscode(answers: [secret("Tom"), secret("")], new: secret("fresh"))
        }
        #expect(!manager.isUnlocked)
        try manager.resetPasscode(answers: [secret(""), secret("LYON")], new: secret("fresh"))
        #expect(manager.isUnlocked)
        try expectPasscodeChanged(manager, from: "forgotten", to: "fresh", sealed: sealed, plaintext: "kept")
    }

    @Test func aQuestionsOnlyVaultCanGainAPasscode() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: nil, questions: ["Pet?"], answers: ["Rex"])
        try manager.updatePasscode(current: nil, new: secret("new"))
        #expect(try manager.hasPasscode)
        manager.lock()
        try manager.unlock(passcode: secret("new"))
        #expect(throws: VaultError.invalidArgument("the current passcode is required to change it")) {
            try manager.updatePasscode(current: nil, new: secret("other"))
        }
    }
}
