import Foundation
import Testing
import Cipher
@testable import Vault

@Suite("Vault setup and unlock")
struct SetupTests {
    @Test func originalFlowStoresTemporariesThenFinalizes() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        #expect(try manager.isSetUp == false)
        #expect(try manager.hasPasscode == false)
        try manager.storeTemporaryPasscode(secret("correct horse"))
        try manager.storeTemporarySecurityQuestions(["Pet?"], answers: ["Rex"])
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath), "nothing is written before finalize")
        try manager.finalize()
        #expect(manager.isUnlocked, "finalize leaves the vault unlocked, as the original did")
        #expect(try manager.hasPasscode)
        #expect(try manager.hasSecurityQuestions)
        #expect(try manager.questions == ["Pet?"])
        #expect(fixture.mode(fixture.home) == 0o700)
        #expect(fixture.mode(fixture.statePath) == 0o600)
        #expect(fixture.mode(fixture.home + "/attempts") == 0o600)
        manager.lock()
        #expect(!manager.isUnlocked)
        try manager.unlock(passcode: secret("correct horse"))
        #expect(manager.isUnlocked)
        // A second manager on the same directory reads the same vault.
        let other = try fixture.manager()
        #expect(try other.questions == ["Pet?"])
        try other.unlock(answers: [" rex "])
        #expect(other.isUnlocked)
        #expect(try other.keyID == manager.keyID)
    }

    @Test func finalizeFailsAndWipesTemporariesOnBadInput() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.storeTemporaryPasscode(secret("pass"))
        try manager.storeTemporarySecurityQuestions(["Pet?", "Town?"], answers: ["Rex", "   "])
        #expect(throws: VaultError.invalidArgument("an answer is empty (answers are compared after trimming whitespace)")) {
            try manager.finalize()
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath))
        #expect(!manager.isUnlocked)
        // The temporaries were wiped: there is nothing left to finalize.
        #expect(throws: VaultError.invalidArgument("nothing to finalize: store a temporary passcode and/or security questions first")) {
            try manager.finalize()
        }
        #expect(manager.memory.withLock { $0.temporaryPasscode == nil && $0.temporaryAnswers == nil })
    }

    @Test func finalizeWritesNothingWhenTheCommitFails() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        struct Injected: Error {}
        manager.hooks.withLock { $0.beforeCommit = { throw Injected() } }
        try manager.storeTemporaryPasscode(secret("pass"))
        #expect(throws: (any Error).self) { try manager.finalize() }
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath))
        #expect(fixture.supersededFiles().isEmpty)
        #expect(try manager.isSetUp == false)
        #expect(!manager.isUnlocked)
        manager.hooks.withLock { $0.beforeCommit = nil }
        #expect(throws: VaultError.invalidArgument("nothing to finalize: store a temporary passcode and/or security questions first")) {
            try manager.finalize()
        }
    }

    @Test func secondSetupIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("one"))
        #expect(throws: VaultError.alreadySetUp) { try manager.setUp(passcode: secret("two")) }
        manager.lock()
        try manager.unlock(passcode: secret("one"))
    }

    @Test func wrongPasscodeIsReportedAndLeavesAnUnlockedManagerUnlocked() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("right"))
        #expect(manager.isUnlocked)
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) {
            try manager.unlock(passcode: secret("wrong"))
        }
        #expect(manager.isUnlocked, "a failed attempt does not lock an unlocked manager")
        let sealed = try manager.encrypt(Array("still here".utf8))
        #expect(try manager.decrypt(sealed) == Array("still here".utf8))
        manager.lock()
        #expect(throws: VaultError.wrongPasscode(failures: 2, nextAttemptAfter: nil)) {
            try manager.unlock(passcode: secret("wrong"))
        }
        #expect(!manager.isUnlocked)
        #expect(throws: VaultError.locked) { try manager.encrypt([1, 2, 3]) }
    }

    @Test func questionsOnlyVaultHasNoPasscode() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: nil, questions: ["Pet?"], answers: ["Rex"])
        manager.lock()
        #expect(try manager.hasPasscode == false)
        #expect(throws: VaultError.noPasscode) { try manager.unlock(passcode: secret("x")) }
        try manager.unlock(answers: ["REX"])
        #expect(manager.isUnlocked)
    }

    @Test func notSetUpIsReported() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        #expect(throws: VaultError.notSetUp) { try manager.unlock(passcode: secret("x")) }
        #expect(throws: VaultError.invalidArgument("give a passcode, security questions, or both")) {
            try manager.setUp(passcode: nil)
        }
    }

    @Test func asyncUnlockRunsOffThePool() async throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("async"))
        manager.lock()
        try await manager.unlock(passcode: secret("async"))
        #expect(manager.isUnlocked)
    }

    @Test func encryptsBytesAndCodableValues() throws {
        struct Note: Codable, Equatable { var title: String; var body: String }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("codable"))
        let note = Note(title: "t", body: "b")
        let sealed = try manager.encrypt(value: note, context: Array("notes".utf8))
        #expect(Array(sealed.prefix(4)) == Sealed.magic)
        #expect(try manager.decrypt(Note.self, from: sealed, context: Array("notes".utf8)) == note)
        #expect(throws: VaultError.self) { try manager.decrypt(Note.self, from: sealed, context: Array("other".utf8)) }
        // The envelope records the current key id.
        let header = try Sealed.parseHeader(sealed)
        #expect(header.keySource == .key(id: try #require(try manager.keyID)))
    }
}

@Suite("Vault concurrency")
struct ConcurrencyTests {
    @Test func concurrentUseFromManyTasks() async throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let sealed = try manager.encrypt(Array("shared".utf8))
        // Readers and class-key users run while one task locks and unlocks twice.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<50 {
                        do {
                            #expect(try manager.decrypt(sealed) == Array("shared".utf8))
                            _ = try manager.classKey(for: .whenUnlocked)
                        } catch VaultError.locked {
                        } catch VaultError.classKeyUnavailable(_, .locked) {
                        }
                        #expect(try manager.classKey(for: .afterFirstUnlock).count == 32)
                    }
                }
            }
            group.addTask {
                for _ in 0..<2 {
                    manager.lock()
                    try await manager.unlock(passcode: secret("pin"))
                }
            }
            try await group.waitForAll()
        }
        #expect(manager.isUnlocked)
        #expect(try manager.decrypt(sealed) == Array("shared".utf8))
    }

    @Test func twoManagersUpdatingAtOnceKeepAConsistentState() async throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let first = try fixture.manager()
        try first.setUp(passcode: secret("pin"))
        let second = try fixture.manager()
        try await second.unlock(passcode: secret("pin"))
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? first.updateSecurityQuestions(["Pet?"], answers: ["Rex"])) != nil }
            group.addTask { (try? second.updateSecurityQuestions(["Town?"], answers: ["Lyon"])) != nil }
            var results: [Bool] = []
            for await result in group { results.append(result) }
            return results
        }
        // Both may succeed in turn or one may be told the vault changed; the file is never mixed.
        let state = try #require(try VaultState.load(directory: fixture.home))
        #expect(state.questions?.questions == ["Pet?"] || state.questions?.questions == ["Town?"])
        #expect(outcomes.contains(true))
        first.lock()
        try await first.unlock(passcode: secret("pin"))
    }
}

