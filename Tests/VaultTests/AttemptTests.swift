import Foundation
import Testing
import Cipher
@testable import Vault

@Suite("Failed attempts")
struct AttemptTests {
    @Test func iOSScheduleDelays() {
        let policy = AttemptPolicy.iOS
        let expected: [Int: Duration] = [0: .zero, 1: .zero, 2: .zero, 3: .zero, 4: .zero, 5: .seconds(60), 6: .seconds(300),
                                         7: .seconds(900), 8: .seconds(900), 9: .seconds(3600), 10: .seconds(3600), 50: .seconds(3600)]
        for (failures, delay) in expected {
            #expect(policy.delay(afterFailures: failures) == delay, "after \(failures) failures")
        }
        #expect(policy.eraseAfter == nil)
        #expect(policy.erasing(after: 10).eraseAfter == 10)
    }

    @Test func waitIsMeasuredFromTheLastFailureWithAnInjectedClock() {
        let record = AttemptRecord(failures: 5, lastFailure: 1000)
        #expect(record.wait(at: Date(timeIntervalSince1970: 1000), policy: .iOS) == .seconds(60))
        #expect(record.wait(at: Date(timeIntervalSince1970: 1030), policy: .iOS) == .seconds(30))
        #expect(record.wait(at: Date(timeIntervalSince1970: 1060), policy: .iOS) == .zero)
        // A clock set back never makes the wait longer than the delay.
        #expect(record.wait(at: Date(timeIntervalSince1970: 0), policy: .iOS) == .seconds(60))
    }

    @Test func escalatingDelaysWithInjectedClock() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: .iOS)
        try manager.setUp(passcode: secret("1234"))
        manager.lock()
        for failure in 1...4 {
            #expect(throws: VaultError.wrongPasscode(failures: failure, nextAttemptAfter: nil)) {
                try manager.unlock(passcode: secret("0000"))
            }
        }
        #expect(throws: VaultError.wrongPasscode(failures: 5, nextAttemptAfter: .seconds(60))) {
            try manager.unlock(passcode: secret("0000"))
        }
        // Even the right passcode is refused while the delay runs, without running the KDF.
        #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(60))) {
            try manager.unlock(passcode: secret("1234"))
        }
        fixture.clock.advance(45)
        #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(15))) {
            try manager.unlock(passcode: secret("1234"))
        }
        #expect(try manager.nextAttemptDelay == .seconds(15))
        fixture.clock.advance(15)
        #expect(throws: VaultError.wrongPasscode(failures: 6, nextAttemptAfter: .seconds(300))) {
            try manager.unlock(passcode: secret("0000"))
        }
        fixture.clock.advance(300)
        #expect(throws: VaultError.wrongPasscode(failures: 7, nextAttemptAfter: .seconds(900))) {
            try manager.unlock(passcode: secret("0000"))
        }
        fixture.clock.advance(900)
        try manager.unlock(passcode: secret("1234"))
        #expect(manager.isUnlocked)
        #expect(try manager.failedAttempts == 0, "success resets the counter")
    }

    @Test func counterIsSharedBetweenManagers() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let first = try fixture.manager(attemptPolicy: .iOS)
        try first.setUp(passcode: secret("1234"))
        first.lock()
        for _ in 1...3 { _ = try? first.unlock(passcode: secret("bad")) }
        let second = try fixture.manager(attemptPolicy: .iOS)
        #expect(try second.failedAttempts == 3)
        #expect(throws: VaultError.wrongPasscode(failures: 4, nextAttemptAfter: nil)) {
            try second.unlock(passcode: secret("bad"))
        }
        #expect(throws: VaultError.wrongPasscode(failures: 5, nextAttemptAfter: .seconds(60))) {
            try first.unlock(passcode: secret("bad"))
        }
        #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(60))) {
            try second.unlock(passcode: secret("1234"))
        }
    }

    @Test func attemptIsCountedBeforeTheCheckCompletes() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: .iOS)
        try manager.setUp(passcode: secret("1234"))
        manager.lock()
        // Simulate a process killed during the KDF: the check never returns.
        struct Killed: Error {}
        #expect(throws: (any Error).self) {
            _ = try manager.attempt(state: nil, wrong: { VaultError.wrongPasscode(failures: $0, nextAttemptAfter: $1) }) { () -> SecretBytes? in
                #expect((try? AttemptRecord.load(directory: fixture.home).failures) == 1, "recorded before the check")
                throw Killed()
            }
        }
        #expect(try manager.failedAttempts == 1, "an interrupted check stays counted")
        try manager.unlock(passcode: secret("1234"))
        #expect(try manager.failedAttempts == 0)
    }

    @Test func eraseAfterNFailuresDestroysTheWrappedKeys() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: AttemptPolicy.unlimited.erasing(after: 3))
        try manager.setUp(passcode: secret("1234"), questions: ["Pet?"], answers: ["Rex"])
        let sealed = try manager.encrypt(Array("gone".utf8))
        manager.lock()
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(passcode: secret("1")) }
        #expect(throws: VaultError.wrongAnswers(failures: 2, nextAttemptAfter: nil)) { try manager.unlock(answers: ["Tom"]) }
        #expect(throws: VaultError.erased) { try manager.unlock(passcode: secret("2")) }
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath))
        #expect(manager.isErased)
        #expect(throws: VaultError.erased) { try manager.unlock(passcode: secret("1234")) }
        #expect(try manager.isSetUp == false)
        // A new vault can be set up; the old data stays unreadable.
        try manager.setUp(passcode: secret("1234"))
        #expect(!manager.isErased)
        #expect(throws: VaultError.self) { try manager.decrypt(sealed) }
    }

    @Test func interruptedAttemptsStillLeadToErasure() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: AttemptPolicy.unlimited.erasing(after: 2))
        try manager.setUp(passcode: secret("1234"))
        manager.lock()
        // Two attempts that were started but never finished (the process was killed).
        try AttemptRecord(failures: 2, lastFailure: 0).store(directory: fixture.home)
        #expect(throws: VaultError.erased) { try manager.unlock(passcode: secret("1234")) }
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath))
    }

    @Test func explicitEraseRemovesEverything() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("1234"))
        let always = try manager.classKey(for: .always)
        try manager.erase()
        #expect(!manager.isUnlocked)
        #expect(!FileManager.default.fileExists(atPath: fixture.statePath))
        #expect(!FileManager.default.fileExists(atPath: fixture.home + "/always.key"))
        #expect(throws: VaultError.notSetUp) { try manager.unlock(passcode: secret("1234")) }
        #expect(try manager.classKey(for: .always) != always)
    }
}
