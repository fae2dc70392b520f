import Foundation
import Synchronization
import Testing
import Cipher
@testable import Vault

@Suite("Class-key rotation")
struct ClassKeyRotationTests {
    static let classes: [Accessibility] = [.whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly, .alwaysThisDeviceOnly]

    @Test func anOldStateCopyAndPasscodeDoNotReachKeysOfANewGeneration() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"))
        var old: [String: SecretBytes] = [:]
        for accessibility in Self.classes { old[accessibility.name] = try manager.classKey(for: accessibility) }
        let oldState = try SecureFile.read(fixture.statePath)
        let oldAlways = try SecureFile.read(fixture.home + "/always.key")
        for accessibility in Self.classes { #expect(try manager.retiredClassKeys(for: accessibility).isEmpty) }

        try manager.updatePasscode(current: secret("old pin"), new: secret("new pin"))
        try manager.rotateClassKeys()
        for accessibility in Self.classes {
            let key = try manager.classKey(for: accessibility)
            #expect(key != old[accessibility.name], "\(accessibility.name) changed")
            #expect(try manager.retiredClassKeys(for: accessibility) == [try #require(old[accessibility.name])])
        }
        let new = try manager.classKey(for: .whenUnlocked)
        let newAlways = try manager.classKey(for: .always)
        #expect(try VaultState.load(directory: fixture.home)?.version == VaultState.currentVersion)

        // A fresh unlock reads the same generations back.
        manager.lock()
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlocked, .locked)) { try manager.retiredClassKeys(for: .whenUnlocked) }
        try manager.unlock(passcode: secret("new pin"))
        #expect(try manager.classKey(for: .whenUnlocked) == new)
        #expect(try manager.retiredClassKeys(for: .whenUnlocked) == [try #require(old["whenUnlocked"])])

        // A second rotation keeps both earlier generations, newest first; the count is bounded.
        try manager.rotateClassKeys()
        #expect(try manager.retiredClassKeys(for: .whenUnlocked) == [new, try #require(old["whenUnlocked"])])
        #expect(try manager.retiredClassKeys(for: .always) == [newAlways, try #require(old["always"])])
        for _ in 0..<VaultSecrets.maximumRetiredClassMasters { try manager.rotateClassKeys() }
        #expect(try manager.retiredClassKeys(for: .whenUnlocked).count == VaultSecrets.maximumRetiredClassMasters)
        #expect(try manager.retiredClassKeys(for: .always).count == VaultSecrets.maximumRetiredClassMasters)
        let current = try manager.classKey(for: .whenUnlocked)
        let currentAlways = try manager.classKey(for: .always)

        // The old copy of the state and of always.key, opened with the old passcode elsewhere.
        let copy = fixture.root + "/copy"
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try SecureFile.writeAtomically(oldState, to: copy + "/vault.state")
        try SecureFile.writeAtomically(oldAlways, to: copy + "/always.key")
        let thief = try CryptoManager(directory: copy, deviceKeyProvider: StaticDeviceKeyProvider(key: fixture.deviceKey),
                                      attemptPolicy: .unlimited)
        try thief.unlock(passcode: secret("old pin"))
        let stolen = try thief.classKey(for: .whenUnlocked)
        #expect(stolen == old["whenUnlocked"])
        #expect(stolen != current && stolen != new)
        #expect(try thief.classKey(for: .always) != currentAlways)
        #expect(try thief.retiredClassKeys(for: .whenUnlocked).isEmpty)
        FirstUnlockCache.remove(vaultID: try #require(try VaultState.load(directory: copy)?.vaultID))
    }

    @Test func anotherManagerFollowsARotationAndLocksWhenItCannot() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let a = try fixture.manager()
        try a.setUp(passcode: secret("pin"))
        let b = try fixture.manager()
        try b.unlock(passcode: secret("pin"))
        let old = try b.classKey(for: .whenUnlocked)
        let oldAfterFirst = try b.classKey(for: .afterFirstUnlockThisDeviceOnly)

        try a.rotateClassKeys()
        // b notices that vault.state changed and re-reads the class master with its key.
        #expect(try b.classKey(for: .whenUnlocked) == a.classKey(for: .whenUnlocked))
        #expect(try b.classKey(for: .whenUnlocked) != old)
        #expect(try b.retiredClassKeys(for: .whenUnlocked) == [old])
        #expect(try b.classKey(for: .afterFirstUnlockThisDeviceOnly) != oldAfterFirst)
        #expect(try b.retiredClassKeys(for: .afterFirstUnlockThisDeviceOnly) == [oldAfterFirst])
        #expect(try b.classKey(for: .always) == a.classKey(for: .always))

        // After a key rotation elsewhere b cannot open the new state: it locks rather than go on
        // sealing under keys that are no longer the vault's.
        try a.rotateKey(passcode: secret("pin"))
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlocked, .locked)) { try b.classKey(for: .whenUnlocked) }
        #expect(!b.isUnlocked)
        try b.unlock(passcode: secret("pin"))
        #expect(try b.classKey(for: .whenUnlocked) == a.classKey(for: .whenUnlocked))
    }

    @Test func anInterruptedRotationLeavesEveryKeyReadable() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let oldAlways = try manager.classKey(for: .always)
        let oldMaster = try manager.classKey(for: .whenUnlocked)
        // The always key is written, then the process dies before the state is.
        let snapshot = fixture.root + "/killed"
        manager.hooks.withLock { hooks in
            hooks.step = { label in if label == "always key rotated" { EraseLeftoverTests.copyTree(fixture.home, to: snapshot) } }
        }
        try manager.rotateClassKeys()
        manager.hooks.withLock { $0.step = nil }
        let reopened = try CryptoManager(directory: snapshot, deviceKeyProvider: StaticDeviceKeyProvider(key: fixture.deviceKey),
                                         attemptPolicy: .unlimited)
        try reopened.unlock(passcode: secret("pin"))
        #expect(try reopened.classKey(for: .whenUnlocked) == oldMaster, "the state was not replaced")
        #expect(try reopened.classKey(for: .always) != oldAlways)
        #expect(try reopened.retiredClassKeys(for: .always) == [oldAlways])
        #expect(Array(try FileManager.default.contentsOfDirectory(atPath: snapshot)).filter(CryptoManager.isLeftover).isEmpty)
    }

    /// The always-key file a rotation replaces holds raw keys: it is crypto-erased (moved into
    /// `.erasing/` and destroyed), like a superseded state, not left in a freed inode.
    @Test func theReplacedAlwaysKeyFileIsCryptoErased() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        _ = try manager.classKey(for: .always)   // creates always.key
        let steps = Mutex<[String]>([])
        manager.hooks.withLock { hooks in hooks.step = { label in steps.withLock { $0.append(label) } } }
        try manager.rotateClassKeys()
        manager.hooks.withLock { $0.step = nil }
        let moved = steps.withLock { $0 }.filter { $0.hasPrefix("moved .superseded-") }
        #expect(moved.count == 2, "the superseded always.key and vault.state: \(steps.withLock { $0 })")
        let order = steps.withLock { $0 }
        let alwaysRotated = try #require(order.firstIndex(of: "always key rotated"))
        #expect(order[..<alwaysRotated].contains { $0.hasPrefix("moved .superseded-") }, "\(order)")
        #expect(Array(try FileManager.default.contentsOfDirectory(atPath: fixture.home)).filter(CryptoManager.isLeftover).isEmpty)
    }
}
