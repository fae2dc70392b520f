import Foundation
import Testing
import Cipher
@testable import Vault

@Suite("State file robustness")
struct StateFileTests {
    func rewrite(_ fixture: VaultFixture, _ change: (inout [String: Any]) -> Void) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: fixture.statePath))
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        change(&object)
        try SecureFile.writeAtomically(try JSONSerialization.data(withJSONObject: object), to: fixture.statePath)
    }

    @Test func damagedStateFilesAreTypedErrorsNotCrashes() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: ["Pet?", "Town?"], answers: ["Rex", "Lyon"], threshold: 1)
        manager.lock()
        let original = try SecureFile.read(fixture.statePath)
        func expectCorrupted(_ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                try manager.unlock(passcode: secret("pin"))
                Issue.record("\(label): unlocked", sourceLocation: sourceLocation)
            } catch {
                if case .corrupted = error {} else { Issue.record("\(label): \(error)", sourceLocation: sourceLocation) }
            }
            manager.lock()
        }
        let cases: [(String, [UInt8])] = [
            ("empty", []),
            ("truncated", Array(original.prefix(original.count / 2))),
            ("not JSON", Array("hello".utf8)),
            ("binary", (0..<200).map { UInt8($0 % 256) }),
        ]
        for (label, bytes) in cases {
            try SecureFile.writeAtomically(bytes, to: fixture.statePath)
            expectCorrupted(label)
        }
        let mutations: [(String, (inout [String: Any]) -> Void)] = [
            ("version 5", { $0["version"] = 5 }),
            ("other format", { $0["format"] = "something-else" }),
            ("short vault id", { $0["vaultID"] = "AAAA" }),
            ("no unlock method", { $0.removeValue(forKey: "passcode"); $0.removeValue(forKey: "questions") }),
            ("weak KDF", { object in
                var passcode = object["passcode"] as? [String: Any] ?? [:]
                passcode["kdf"] = ["scrypt": ["logN": 10, "r": 8, "p": 1]]
                object["passcode"] = passcode
            }),
            ("hostile KDF", { object in
                var passcode = object["passcode"] as? [String: Any] ?? [:]
                passcode["kdf"] = ["scrypt": ["logN": 40, "r": 8, "p": 1]]
                object["passcode"] = passcode
            }),
            ("threshold 0", { object in
                var questions = object["questions"] as? [String: Any] ?? [:]
                questions["threshold"] = 0
                object["questions"] = questions
            }),
            ("subset index out of range", { object in
                var questions = object["questions"] as? [String: Any] ?? [:]
                questions["subsets"] = [["indices": [7], "salt": "AAAAAAAAAAAAAAAAAAAAAA==", "wrapped": "AAAA"]]
                object["questions"] = questions
            }),
            ("short wrapped key", { object in
                var passcode = object["passcode"] as? [String: Any] ?? [:]
                passcode["wrapped"] = "AAAA"
                object["passcode"] = passcode
            }),
            ("secret section replaced", { $0["secrets"] = Data(repeating: 1, count: 62).base64EncodedString() }),
            ("a subset dropped", { object in
                var questions = object["questions"] as? [String: Any] ?? [:]
                questions["subsets"] = Array((questions["subsets"] as? [Any] ?? []).prefix(1))
                object["questions"] = questions
            }),
        ]
        for (label, mutation) in mutations {
            try SecureFile.writeAtomically(original, to: fixture.statePath)
            try rewrite(fixture, mutation)
            expectCorrupted(label)
        }
        #expect(!manager.isUnlocked)
        // The untouched file still opens.
        try SecureFile.writeAtomically(original, to: fixture.statePath)
        try manager.unlock(passcode: secret("pin"))
    }

    @Test func aWrappingMovedFromAnotherVaultDoesNotOpen() throws {
        let a = try VaultFixture(), b = try VaultFixture()
        defer { a.cleanup(); b.cleanup() }
        try a.manager().setUp(passcode: secret("pin A"))
        try b.manager().setUp(passcode: secret("pin B"))
        let other = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: b.statePath))) as? [String: Any]
        try rewrite(a) { $0["passcode"] = other?["passcode"] }
        let manager = try a.manager()
        // B's passcode derives B's KEK, but the wrapping is bound to B's vault and key id.
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(passcode: secret("pin B")) }
        #expect(throws: VaultError.wrongPasscode(failures: 2, nextAttemptAfter: nil)) { try manager.unlock(passcode: secret("pin A")) }
    }

    @Test func aLastFailureInTheFutureRestartsTheDelayInsteadOfExtendingIt() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: .iOS)
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        // Five failures dated one day ahead (the clock was set back since).
        let ahead = fixture.clock.now.timeIntervalSince1970 + 86_400
        try SecureFile.writeAtomically(Array("{\"failures\":5,\"lastFailure\":\(ahead)}".utf8), to: fixture.home + "/attempts")
        #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(60))) { try manager.unlock(passcode: secret("pin")) }
        fixture.clock.advance(61)
        try manager.unlock(passcode: secret("pin"))
    }

    @Test func damagedAttemptRecordIsTheWorstCaseNotAReset() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: .iOS)
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        try SecureFile.writeAtomically(Array("garbage".utf8), to: fixture.home + "/attempts")
        #expect(try manager.failedAttempts == 9)
        #expect(throws: VaultError.attemptRecordDamaged(retryAfter: .seconds(3600))) { try manager.unlock(passcode: secret("pin")) }
        // The worst case is a wait that runs out, not a permanent lockout.
        fixture.clock.advance(1800)
        #expect(throws: VaultError.tooManyAttempts(retryAfter: .seconds(1800))) { try manager.unlock(passcode: secret("pin")) }
        fixture.clock.advance(1801)
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.failedAttempts == 0)
        manager.lock()
        try SecureFile.writeAtomically(Array("{\"failures\":9223372036854775807,\"lastFailure\":0}".utf8), to: fixture.home + "/attempts")
        #expect(try manager.failedAttempts == 1_000_000, "hostile counts are clamped, never overflow")
        try SecureFile.writeAtomically([UInt8](), to: fixture.home + "/attempts")
        #expect(try manager.failedAttempts == 0, "an empty record (crash before the first write) is no record")
    }
}
