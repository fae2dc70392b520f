import Foundation
import TestSupport
import Testing
import Cipher
@testable import Vault

@Suite("Answers, policy, subsets and setup under attack")
struct HardeningTests {
    func rewriteState(_ fixture: VaultFixture, _ change: (inout [String: Any]) -> Void) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: fixture.statePath))
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        change(&object)
        try SecureFile.writeAtomically(try JSONSerialization.data(withJSONObject: object), to: fixture.statePath)
    }

    @Test func rotateKeyRefusesAnAnswerItCouldNotVerify() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: ["Pet?", "Town?", "Teacher?"], answers: ["Rex", "Lyon", "Dupont"], threshold: 2)
        let keyID = try manager.keyID
        #expect(throws: VaultError.unverifiedAnswers(questions: [3])) {
            try manager.rotateKey(passcode: secret("pin"), answers: ["Rex", "Lyon", "TYPO"])
        }
        #expect(throws: VaultError.unverifiedAnswers(questions: [1])) {
            try manager.rotateKey(passcode: secret("pin"), answers: ["TYPO", "Lyon", "Dupont"])
        }
        // The passcode and the answers are one attempt: a right passcode does not clear the count.
        #expect(try manager.failedAttempts == 2, "an unverified answer counts as a failed attempt")
        #expect(throws: VaultError.wrongAnswers(failures: 3, nextAttemptAfter: nil)) {
            try manager.rotateKey(passcode: secret("pin"), answers: ["Rex", "TYPO", "TYPO"])
        }
        #expect(try manager.keyID == keyID, "nothing was rewrapped")
        manager.lock()
        try manager.unlock(answers: ["Rex", "", "Dupont"])
        #expect(throws: VaultError.wrongAnswers(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(answers: ["Rex", "", "TYPO"]) }
        // With every answer right the rotation goes through and every pair still unlocks.
        try manager.unlock(passcode: secret("pin"))
        try manager.rotateKey(passcode: secret("pin"), answers: ["Rex", "Lyon", "Dupont"])
        manager.lock()
        try manager.unlock(answers: ["Rex", "", "Dupont"])
        try manager.unlock(answers: ["", "Lyon", "Dupont"])
    }

    /// A vault whose stored KDF settings lie between the standard and the legacy ceilings (a
    /// custom policy of an earlier version) is not taken for a damaged one: its status reads,
    /// and an unlock is refused before any work with a message naming the way to open it.
    @Test func storedSettingsAboveTheStandardCeilingPointToTheLegacyCeiling() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try fixture.manager().setUp(passcode: secret("pin"))
        let costly = try JSONSerialization.jsonObject(with: JSONEncoder().encode(KDFParameters.pbkdf2SHA256(rounds: 40_000_000)))
        try rewriteState(fixture) { state in
            var passcode = state["passcode"] as? [String: Any] ?? [:]
            passcode["kdf"] = costly
            state["passcode"] = passcode
        }
        let manager = try fixture.manager()
        #expect(try manager.isSetUp)
        do {
            try manager.unlock(passcode: secret("pin"))
            Issue.record("an unlock over the ceiling ran")
        } catch {
            guard case let VaultError.corrupted(detail) = error else { throw error }
            #expect(detail.contains("--legacy-kdf-ceiling") && detail.contains("kdfCeiling: .legacy"), "\(detail)")
        }
        #expect(try fixture.manager().failedAttempts == 0, "a refusal before any work is not a failed attempt")
        // Beyond the legacy ceiling the state itself is refused.
        let hostile = try JSONSerialization.jsonObject(with: JSONEncoder().encode(KDFParameters.pbkdf2SHA256(rounds: 200_000_000)))
        try rewriteState(fixture) { state in
            var passcode = state["passcode"] as? [String: Any] ?? [:]
            passcode["kdf"] = hostile
            state["passcode"] = passcode
        }
        #expect(throws: VaultError.self) { _ = try fixture.manager(kdfCeiling: .legacy).isSetUp }
    }

    @Test func theEraseAfterPolicyIsStoredWithTheVault() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try fixture.manager(attemptPolicy: AttemptPolicy.unlimited.erasing(after: 3)).setUp(passcode: secret("pin"))
        let state = try #require(try VaultState.load(directory: fixture.home))
        #expect(state.eraseAfter == 3 && state.version == VaultState.currentVersion)
        // Opened without the policy: the stored one applies.
        let manager = try fixture.manager(attemptPolicy: .unlimited)
        #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(passcode: secret("x")) }
        #expect(throws: VaultError.wrongPasscode(failures: 2, nextAttemptAfter: nil)) { try manager.unlock(passcode: secret("x")) }
        #expect(throws: VaultError.erased) { try manager.unlock(passcode: secret("x")) }
        #expect(manager.isErased)
    }

    @Test func theStoredPolicyIsAuthenticated() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: AttemptPolicy.unlimited.erasing(after: 3))
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        try rewriteState(fixture) { $0.removeValue(forKey: "eraseAfter") }
        let error = #expect(throws: VaultError.self) { try manager.unlock(passcode: secret("pin")) }
        guard case .corrupted? = error else { Issue.record("not corrupted: \(String(describing: error))"); return }
    }

    @Test func aDamagedAttemptRecordNeverErasesOnTheRightPasscode() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager(attemptPolicy: AttemptPolicy.iOS.erasing(after: 9))
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        // A stray byte appended to the record.
        let handle = try #require(FileHandle(forWritingAtPath: fixture.home + "/attempts"))
        handle.seekToEndOfFile()
        handle.write(Data([0x7A]))
        try handle.close()
        #expect(throws: VaultError.attemptRecordDamaged(retryAfter: .seconds(3600))) { try manager.unlock(passcode: secret("pin")) }
        #expect(try manager.isSetUp && !manager.isErased)
        fixture.clock.advance(3601)
        try manager.unlock(passcode: secret("pin"))
        #expect(try manager.failedAttempts == 0)
        // Failures after a damaged record count from zero towards erasure.
        manager.lock()
        try SecureFile.writeAtomically(Array("garbage".utf8), to: fixture.home + "/attempts")
        let unlimited = try fixture.manager(attemptPolicy: AttemptPolicy.unlimited.erasing(after: 2))
        #expect(throws: VaultError.wrongPasscode(failures: 10, nextAttemptAfter: nil)) { try unlimited.unlock(passcode: secret("x")) }
        #expect(throws: VaultError.erased) { try unlimited.unlock(passcode: secret("x")) }
    }

    @Test func aStateWithExtraOrRepeatedSubsetsIsRefusedBeforeAnyKDF() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"), questions: sampleQuestions, answers: sampleAnswers, threshold: 2)
        manager.lock()
        let original = try SecureFile.read(fixture.statePath)
        let mutations: [(String, ([Any]) -> [Any])] = [
            ("ten thousand copies", { subsets in Array(repeating: subsets, count: 3334).flatMap { $0 } }),
            ("one repeated instead of another", { subsets in [subsets[0], subsets[0], subsets[2]] }),
            ("one extra", { subsets in subsets + [subsets[0]] }),
            ("unsorted indices", { subsets in
                var first = subsets[0] as? [String: Any] ?? [:]
                first["indices"] = [1, 0]
                return [first, subsets[1], subsets[2]]
            }),
        ]
        for (label, mutate) in mutations {
            try SecureFile.writeAtomically(original, to: fixture.statePath)
            try rewriteState(fixture) { object in
                var questions = object["questions"] as? [String: Any] ?? [:]
                questions["subsets"] = mutate(questions["subsets"] as? [Any] ?? [])
                object["questions"] = questions
            }
            let error = #expect(throws: VaultError.self, "\(label)") { try manager.unlock(answers: sampleAnswers) }
            if case .corrupted? = error {} else { Issue.record("\(label): \(String(describing: error))") }
            #expect(try manager.failedAttempts == 0, "\(label): refused before the attempt")
        }
    }

    @Test func initIsAllOrNothingWhenTheDiskIsFull() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let mountPoint = fixture.root + "/tmpfs"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", mountPoint]) == 0 else {
            print("skipping the disk-full setup test: mounting a tmpfs is not permitted here (needs root)")
            return
        }
        defer { _ = Self.run("/bin/umount", [mountPoint]) }
        let home = mountPoint + "/home"
        let manager = try CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: fixture.deviceKey),
                                        attemptPolicy: .unlimited)
        for freePages in [0, 1] {
            // Fill the file system up to exactly `freePages` free pages.
            let filler = mountPoint + "/filler"
            unlink(filler)
            var info = statvfs()
            #expect(statvfs(mountPoint, &info) == 0)
            let free = Int(info.f_bavail) * Int(info.f_frsize)
            _ = FileManager.default.createFile(atPath: filler, contents: Data(count: max(0, free - freePages * 4096)))
            #expect(statvfs(mountPoint, &info) == 0)
            #expect(Int(info.f_bavail) == freePages, "free pages: \(info.f_bavail)")
            #expect(throws: (any Error).self, "\(freePages) free pages") { try manager.setUp(passcode: secret("pin")) }
            #expect(try !manager.isSetUp, "\(freePages) free pages: a failed init leaves no vault")
            #expect(!manager.isUnlocked)
            let names = try FileManager.default.contentsOfDirectory(atPath: home)
            #expect(names == ["vault.lock"], "\(freePages) free pages: \(names)")
        }
        unlink(mountPoint + "/filler")
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        try manager.unlock(passcode: secret("pin"))
    }

    static func run(_ tool: String, _ arguments: [String]) -> Int32 {
        (try? ChildProcess.run(tool, arguments))?.status ?? -1
    }
}
