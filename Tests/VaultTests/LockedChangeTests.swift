import Foundation
import Testing
import Cipher
@testable import Vault

/// Changing the passcode and rotating the key from a locked vault: the secrets are checked once,
/// as one counted attempt, with no unlock before.
@Suite("Changes from a locked vault")
struct LockedChangeTests {
    /// Records the attempts a manager counts (one step per attempt, before its KDF runs).
    final class AttemptLog: Sendable {
        private let steps = Protected<[String]>([])
        init(_ manager: CryptoManager) {
            let steps = self.steps
            manager.hooks.withLock { hooks in hooks.step = { label in steps.withLock { $0.append(label) } } }
        }
        var attempts: Int { steps.withLock { $0.filter { $0 == "attempt counted" }.count } }
        func reset() { steps.withLock { $0 = [] } }
    }

    @Test func aWrongOldPasscodeCountsExactlyOneAttempt() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"))
        manager.lock()
        let log = AttemptLog(manager)
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) {
            try manager.updatePasscode(current: secret("not it"), new: secret("new pin"))
        }
        #expect(log.attempts == 1)
        #expect(try manager.failedAttempts == 1)
        #expect(!manager.isUnlocked)
        #expect(try manager.hasPasscode)
        // The old passcode still opens: nothing was written.
        try manager.unlock(passcode: secret("old pin"))
    }

    @Test func changingThePasscodeOfALockedVaultRunsOneCheck() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"))
        let sealed = try manager.encrypt(Array("kept".utf8))
        let keyID = try manager.keyID
        manager.lock()
        let log = AttemptLog(manager)
        try manager.updatePasscode(current: secret("old pin"), new: secret("new pin"))
        #expect(log.attempts == 1, "one check of the old passcode, no unlock before it")
        #expect(try manager.failedAttempts == 0)
        #expect(manager.isUnlocked)
        #expect(try manager.keyID == keyID)
        #expect(fixture.supersededFiles().isEmpty)
        try expectPasscodeChanged(manager, from: "old pin", to: "new pin", sealed: sealed, plaintext: "kept")
    }

    @Test func aLockedVaultWithoutAPasscodeCannotGainOneUnlocked() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: nil, questions: ["Pet?"], answers: ["Rex"])
        manager.lock()
        #expect(throws: VaultError.locked) { try manager.updatePasscode(current: nil, new: secret("new")) }
        #expect(try !manager.hasPasscode)
    }

    @Test func rotatingTheKeyOfALockedVaultCountsOneAttempt() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: sampleQuestions, answers: sampleAnswers, threshold: 2)
        let before = try manager.encrypt(Array("before".utf8))
        let oldID = try #require(try manager.keyID)
        let classKey = try manager.classKey(for: .whenUnlocked)
        manager.lock()
        let log = AttemptLog(manager)

        #expect(throws: VaultError.invalidArgument("all 3 answers are required to rotate the key")) {
            try manager.rotateKey(passcode: secret("pin"))
        }
        #expect(log.attempts == 0, "a missing secret is refused before any attempt")
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) {
            try manager.rotateKey(passcode: secret("not it"), answers: sampleAnswers)
        }
        #expect(throws: VaultError.wrongAnswers(failures: 2, nextAttemptAfter: nil)) {
            try manager.rotateKey(passcode: secret("pin"), answers: ["wrong", "wrong", "wrong"])
        }
        #expect(throws: VaultError.unverifiedAnswers(questions: [3])) {
            try manager.rotateKey(passcode: secret("pin"), answers: ["Fluffy the Cat", "Lyon", "TYPO"])
        }
        #expect(log.attempts == 3, "one attempt per call")
        #expect(try manager.failedAttempts == 3)
        #expect(try manager.keyID == oldID, "nothing was written")
        #expect(!manager.isUnlocked)

        log.reset()
        let newID = try manager.rotateKey(passcode: secret("pin"), answers: sampleAnswers)
        #expect(log.attempts == 1, "the passcode and every answer are one attempt")
        #expect(try manager.failedAttempts == 0)
        #expect(newID != oldID)
        #expect(try manager.keyID == newID)
        #expect(try manager.decrypt(before) == Array("before".utf8))
        #expect(try manager.classKey(for: .whenUnlocked) == classKey)
        manager.lock()
        try manager.unlock(answers: ["", "lyon", "mrs dupont"])
        #expect(try manager.decrypt(before) == Array("before".utf8))
        #expect(try manager.retiredKeyIDs == [oldID])
    }

    @Test func anUnlockedVaultStillChecksTheSecretsOnce() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let log = AttemptLog(manager)
        try manager.rotateKey(passcode: secret("pin"))
        try manager.updatePasscode(current: secret("pin"), new: secret("new pin"))
        #expect(log.attempts == 2)
        #expect(manager.isUnlocked)
    }
}
