import Foundation
import Testing
import Cipher
@testable import Vault

@Suite("Security questions")
struct AnswerTests {
    func normalized(_ text: String) throws -> [UInt8] {
        let result = try AnswerNormalization.normalize(secret(text))
        defer { result.wipe() }
        return result.withUnsafeBytes { Array($0) }
    }

    @Test func normalizationTrimsCollapsesAndFolds() throws {
        #expect(try normalized("  Fluffy   the CAT ") == Array("fluffy the cat".utf8))
        #expect(try normalized("fluffy\tthe\ncat") == Array("fluffy the cat".utf8))
        #expect(try normalized("\u{FB01}do") == Array("fido".utf8), "NFKC maps the ligature ﬁ to fi")
        #expect(try normalized("FIDO") == Array("fido".utf8))
        #expect(try normalized("Ｒｅｘ") == Array("rex".utf8), "NFKC maps full-width letters")
        #expect(try normalized("Cafe\u{0301}") == Array("café".precomposedStringWithCanonicalMapping.utf8), "combining accents compose")
        #expect(try normalized("ÉCOLE\u{00A0} normale") == Array("école normale".utf8), "non-ASCII spaces collapse too")
        #expect(try normalized("   ") == [])
        // The ASCII fast path and the Unicode path agree.
        let viaString = AnswerNormalization.normalize("  MiXeD   Case ")
        defer { viaString.wipe() }
        #expect(viaString.withUnsafeBytes { Array($0) } == (try normalized("  MiXeD   Case ")))
    }

    @Test func invalidUTF8IsRejected() throws {
        #expect(throws: VaultError.invalidArgument("an answer is not valid UTF-8")) {
            try AnswerNormalization.normalize(SecretBytes(copying: [0xC3, 0x28]))
        }
    }

    @Test func subsetsAreEnumerated() {
        #expect(CryptoManager.subsets(n: 3, k: 2) == [[0, 1], [0, 2], [1, 2]])
        #expect(CryptoManager.subsets(n: 4, k: 4) == [[0, 1, 2, 3]])
        #expect(CryptoManager.subsets(n: 5, k: 1).count == 5)
        #expect(CryptoManager.binomial(8, 4) == 70)
        #expect(CryptoManager.subsets(n: 8, k: 4).count == 70)
    }

    @Test func thresholdOutOfRangeIsRefused() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        #expect(throws: VaultError.invalidArgument("a threshold of 4 with 3 questions; give 1 to 3")) {
            try manager.setUp(passcode: nil, questions: sampleQuestions, answers: sampleAnswers, threshold: 4)
        }
        #expect(throws: VaultError.invalidArgument("3 questions but 2 answers; give one answer per question")) {
            try manager.setUp(passcode: nil, questions: sampleQuestions, answers: ["a", "b"], threshold: 2)
        }
        #expect(throws: VaultError.self) {
            try manager.setUp(passcode: nil, questions: (1...10).map { "Q\($0)?" }, answers: (1...10).map { "a\($0)" }, threshold: 5)
        }
    }

    @Test func anyTwoOfThreeAnswersUnlock() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: nil, questions: sampleQuestions, answers: sampleAnswers, threshold: 2)
        #expect(try manager.answerThreshold == 2)
        let state = try #require(try VaultState.load(directory: fixture.home))
        #expect(state.questions?.subsets.map(\.indices) == [[0, 1], [0, 2], [1, 2]])
        #expect(Set(state.questions?.subsets.map(\.salt) ?? []).count == 3, "each wrapping has its own salt")
        for answers in [["  fluffy THE cat", "LYON", ""], ["", "lyon", "mrs   dupont"], ["Fluffy the Cat", "", "MRS DUPONT"]] {
            manager.lock()
            try manager.unlock(answers: answers)
            #expect(manager.isUnlocked, "answers \(answers) unlock")
        }
        // Three given, one wrong: the two right ones still unlock.
        manager.lock()
        try manager.unlock(answers: ["Fluffy the Cat", "Paris", "Mrs Dupont"])
        #expect(manager.isUnlocked)
        // Only one right: refused.
        manager.lock()
        #expect(throws: VaultError.wrongAnswers(failures: 1, nextAttemptAfter: nil)) {
            try manager.unlock(answers: ["Fluffy the Cat", "Paris", ""])
        }
        // Too few answers is an argument error, not an attempt.
        #expect(throws: VaultError.invalidArgument("1 answers given; 2 of the 3 questions must be answered")) {
            try manager.unlock(answers: ["Fluffy the Cat", "", ""])
        }
        #expect(try manager.failedAttempts == 1)
    }

    @Test func swappedQuestionIsDetected() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: ["Pet?", "Town?"], answers: ["Rex", "Lyon"], threshold: 2)
        manager.lock()
        // An attacker edits the readable question text in the state file.
        let text = try String(contentsOfFile: fixture.statePath, encoding: .utf8)
        #expect(text.contains("\"Pet?\""))
        try SecureFile.writeAtomically(Array(text.replacingOccurrences(of: "\"Pet?\"", with: "\"Mother's maiden name?\"").utf8),
                                       to: fixture.statePath)
        #expect(try manager.questions == ["Mother's maiden name?", "Town?"])
        // The right answers no longer open (the question text is bound into each wrapping)...
        #expect(throws: VaultError.wrongAnswers(failures: 1, nextAttemptAfter: nil)) {
            try manager.unlock(answers: ["Rex", "Lyon"])
        }
        // ...and the passcode path reports the modification.
        #expect(throws: VaultError.corrupted("the state file was modified (its questions, wrappings or secret section do not authenticate)")) {
            try manager.unlock(passcode: secret("pin"))
        }
        #expect(!manager.isUnlocked)
    }

    @Test func updatingQuestionsReplacesTheAnswers() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: ["Pet?"], answers: ["Rex"])
        let sealed = try manager.encrypt(Array("data".utf8))
        manager.lock()
        #expect(throws: VaultError.locked) { try manager.updateSecurityQuestions(["Town?"], answers: ["Lyon"]) }
        try manager.unlock(passcode: secret("pin"))
        try manager.updateSecurityQuestions(["Town?", "Street?"], answers: ["Lyon", "Rue Neuve"], threshold: 1)
        #expect(fixture.supersededFiles().isEmpty, "the superseded state file was destroyed")
        manager.lock()
        #expect(try manager.questions == ["Town?", "Street?"])
        #expect(throws: VaultError.invalidArgument("2 questions but 1 answers; give one entry per question (empty for unanswered)")) {
            try manager.unlock(answers: ["Rex"])
        }
        try manager.unlock(answers: ["", "rue neuve"])
        #expect(try manager.decrypt(sealed) == Array("data".utf8))
    }
}
