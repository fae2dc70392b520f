import Foundation
import Testing
import Cipher
import Vault
import Keychain
import ProtectedFiles
@testable import Migration
import TestSupport
extension CryptoManager {
    /// Seals `bytes` under the vault key (unlocking with the fixtures' passcode), then locks.
    func encryptForTest(_ bytes: [UInt8]) throws -> [UInt8] {
        try unlock(passcode: SecretBytes(utf8: "1234"))
        defer { lock() }
        return try encrypt(bytes)
    }
}

/// The shared temporary directory (TestSupport), with the fixtures copied in.
extension TemporaryDirectory {
    func sub(_ name: String) -> String { path(name) }

    /// Copies a fixture here and returns its new path.
    func copy(_ fixture: String) throws -> String {
        let target = sub(fixture)
        try FileManager.default.copyItem(atPath: Fixtures.path(fixture), toPath: target)
        return target
    }
}

/// The files written by Fixtures/make_fixtures.py (Python `cryptography`, from the original's
/// byte layout; committed, so the tests need no Python).
enum Fixtures {
    static let directory: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path
    }()
    static func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
    static func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path(name)))) }

    struct Blob: Decodable { let name: String; let key: String; let blob: String; let plaintext: String? }
    struct KDF: Decodable { let secret: String; let salt: String; let key: String }
    struct Vectors: Decodable { let blobs: [Blob]; let pbkdf2: [KDF] }
    static func vectors() throws -> Vectors { try JSONDecoder().decode(Vectors.self, from: Data(try bytes("vectors.json"))) }
    static func sharedKey() throws -> [UInt8] {
        try Encoding.fromHex(String(decoding: try bytes("shared-key.hex"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

func migrationError(_ body: () throws -> Void) -> MigrationError? {
    do { try body(); return nil } catch let error as MigrationError { return error } catch { return nil }
}

func plain(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

@Suite struct LegacyCipherTests {
    @Test func legacyBlobsDecryptToTheirPlaintexts() throws {
        var opened = 0
        for vector in try Fixtures.vectors().blobs {
            guard let expected = vector.plaintext else { continue }
            let key = SecretBytes(copying: try Encoding.fromHex(vector.key))
            let plaintext = try LegacyCipher.open(try Encoding.fromHex(vector.blob), key: key)
            #expect(plain(plaintext) == (try Encoding.fromHex(expected)), "\(vector.name)")
            opened += 1
        }
        #expect(opened == 10)
    }

    /// A padding error, a checksum error and a wrong key give one error, with one message: the
    /// unauthenticated format must not tell an attacker which check failed.
    @Test func paddingAndChecksumErrorsAreIdentical() throws {
        var messages = Set<String>()
        var rejected = 0
        for vector in try Fixtures.vectors().blobs where vector.plaintext == nil {
            let key = SecretBytes(copying: try Encoding.fromHex(vector.key))
            let error = migrationError { _ = try LegacyCipher.open(try Encoding.fromHex(vector.blob), key: key) }
            #expect(error == .legacyDataRejected, "\(vector.name): \(String(describing: error))")
            messages.insert(error.map { String(describing: $0) } ?? "none")
            rejected += 1
        }
        #expect(rejected == 6)
        #expect(messages.count == 1)
    }

    /// Every single-bit change of a blob's last block is rejected with that same error (or,
    /// about once in 256 flips of the padding byte, accepted as other bytes: never a crash).
    @Test func everyFlipOfTheLastBlockGivesTheSameError() throws {
        let vector = try #require(try Fixtures.vectors().blobs.first { $0.name == "aes256-31" })
        let key = SecretBytes(copying: try Encoding.fromHex(vector.key))
        let blob = try Encoding.fromHex(vector.blob)
        var rejected = 0
        for index in (blob.count - 16)..<blob.count {
            for bit in 0..<8 {
                var damaged = blob
                damaged[index] ^= 1 << bit
                let error = migrationError { _ = try LegacyCipher.open(damaged, key: key) }
                if error != nil { #expect(error == .legacyDataRejected) ; rejected += 1 }
            }
        }
        #expect(rejected >= 120)
    }

    @Test func impossibleLengthsAndKeysAreRefused() throws {
        let key = SecretBytes(copying: [UInt8](repeating: 1, count: 32))
        for count in [0, 15, 16, 31, 33, 47] {
            guard case .legacyFormat? = migrationError({ _ = try LegacyCipher.open([UInt8](repeating: 0, count: count), key: key) }) else {
                Issue.record("\(count) bytes accepted"); continue
            }
        }
        let odd = SecretBytes(copying: [UInt8](repeating: 1, count: 20))
        guard case .legacyFormat? = migrationError({ _ = try LegacyCipher.open([UInt8](repeating: 0, count: 32), key: odd) }) else {
            Issue.record("a 20-byte key accepted"); return
        }
    }

    @Test func keyDerivationMatchesTheOriginal() throws {
        let vectors = try Fixtures.vectors().pbkdf2
        #expect(vectors.count == 3)
        for vector in vectors {
            let key = try LegacyCipher.deriveKey(SecretBytes(utf8: vector.secret), salt: try Encoding.fromHex(vector.salt))
            #expect(plain(key) == (try Encoding.fromHex(vector.key)), "\(vector.secret)")
        }
    }

    @Test("the decoder's errors are typed: a caller switches over MigrationError without a cast")
    func typedErrors() throws {
        let key = SecretBytes(copying: [UInt8](repeating: 1, count: 20))
        do {
            _ = try LegacyCipher.open([UInt8](repeating: 0, count: 32), key: key)
            Issue.record("a 20-byte key was accepted")
        } catch {
            switch error {
            case .legacyFormat(let detail): #expect(detail.contains("not 20"), "\(detail)")
            case .legacyDataRejected, .wrongPasscode, .wrongAnswers, .genItemNotOpened, .missingLegacyState, .invalidArgument, .failed:
                Issue.record("\(error)")
            }
        }
        do {
            _ = try LegacyCryptoManager(accounts: [:])
            Issue.record("a legacy state without a salt was accepted")
        } catch {
            guard case .missingLegacyState = error else { Issue.record("\(error)"); return }
        }
    }
}

@Suite struct LegacyCryptoManagerTests {
    func legacy() throws -> LegacyCryptoManager {
        let contents = try Keychain.readLegacyKeychain(at: Fixtures.path("imas-keychain.bplist"))
        var accounts: [String: [UInt8]] = [:]
        for entry in contents.entries where entry.service == LegacyCryptoManager.service { accounts[entry.account] = entry.value }
        return try LegacyCryptoManager(accounts: accounts)
    }

    @Test func unwrapsTheApplicationKeyWithThePasscodeOrTheAnswers() throws {
        let legacy = try legacy()
        #expect(legacy.questions == ["First pet?", "Birth town?"])
        let expected = try Fixtures.sharedKey()
        #expect(plain(try legacy.applicationKey(passcode: SecretBytes(utf8: "1234"))) == expected)
        #expect(plain(try legacy.applicationKey(answers: [SecretBytes(utf8: "Rex"), SecretBytes(utf8: "Lyon")])) == expected)
        #expect(plain(try #require(try legacy.genItemSecret(passcode: SecretBytes(utf8: "1234")))) == Array("qwertyuiopasdfghjklx".utf8))
    }

    @Test func wrongCredentialsAreTypedErrors() throws {
        let legacy = try legacy()
        #expect(migrationError { _ = try legacy.applicationKey(passcode: SecretBytes(utf8: "1235")) } == .wrongPasscode)
        #expect(migrationError { _ = try legacy.applicationKey(answers: [SecretBytes(utf8: "rex"), SecretBytes(utf8: "Lyon")]) } == .wrongAnswers)
    }

    @Test func missingOrHostileStateIsRefused() throws {
        guard case .missingLegacyState? = migrationError({ _ = try LegacyCryptoManager(accounts: [:]) }) else {
            Issue.record("no salt accepted"); return
        }
        guard case .missingLegacyState? = migrationError({ _ = try LegacyCryptoManager(accounts: ["salt": [1, 2, 3]]) }) else {
            Issue.record("no wrapped key accepted"); return
        }
        let questions = Array("{\"a\":1}".utf8).map { $0 ^ 0x9C }
        guard case .legacyFormat? = migrationError({
            _ = try LegacyCryptoManager(accounts: ["salt": [1], "shared-key.passcode": [], "security-questions": questions])
        }) else { Issue.record("questions that are not an array accepted"); return }
        // A wrapped key of a hostile length is a wrong passcode, not a crash.
        let short = try LegacyCryptoManager(accounts: ["salt": [1], "shared-key.passcode": [1, 2, 3]])
        guard case .legacyFormat? = migrationError({ _ = try short.applicationKey(passcode: SecretBytes(utf8: "x")) }) else {
            Issue.record("a 3-byte wrapped key accepted"); return
        }
    }
}

@Suite struct IMASMigrationTests {
    struct Setup {
        let dir: TemporaryDirectory
        let manager: CryptoManager
        let keychainFile: String
        let note: String
        let report: String
    }

    func setup(keychain fixture: String = "imas-keychain.bplist") throws -> Setup {
        let dir = try TemporaryDirectory()
        let manager = try CryptoManager(directory: dir.sub("home"), deviceKeyProvider: FileDeviceKeyProvider(path: dir.sub("device.key")),
                                        attemptPolicy: .unlimited)
        return Setup(dir: dir, manager: manager, keychainFile: try dir.copy(fixture), note: try dir.copy("note.imas"),
                     report: try dir.copy("report.imas"))
    }

    func plan(_ s: Setup) -> IMASMigration.Plan {
        var plan = IMASMigration.Plan(legacyKeychain: s.keychainFile)
        plan.passcode = SecretBytes(utf8: "1234")
        plan.answers = [SecretBytes(utf8: "Rex"), SecretBytes(utf8: "Lyon")]
        plan.secureServices = ["api"]
        plan.dataFiles = [s.note]
        plan.protectedFiles = [s.report]
        return plan
    }

    @Test func migratesTheVaultItemsDataAndFiles() throws {
        let s = try setup()
        var plan = plan(s)
        plan.shredOriginals = true
        let report = try IMASMigration.run(plan, manager: s.manager)
        #expect(report.createdVault)
        #expect(report.imported == ["mail/alice", "mail/bob"])
        #expect(report.resealed.sorted() == ["api/refresh", "api/token", "org.mitre.imas.crypto-manager/gen-item"])
        #expect(report.skipped.isEmpty)
        #expect(report.written == [s.note + ".sealed", s.report + ".protected"])
        #expect(report.shredded.count == 3)

        // The new vault keeps the passcode and the questions with their answers.
        s.manager.lock()
        try s.manager.unlock(passcode: SecretBytes(utf8: "1234"))
        s.manager.lock()
        try s.manager.unlock(answers: ["Rex", "Lyon"])
        #expect(try s.manager.questions == ["First pet?", "Birth town?"])

        let keychain = try Keychain(manager: s.manager)
        #expect(try keychain.password(forService: "mail", account: "alice") == "alice-pw")
        #expect(try keychain.securePassword(forService: "api", account: "token") == "s3cr3t-token")
        #expect(try keychain.securePasswordData(forService: "api", account: "refresh").count == 0)
        #expect(try keychain.securePassword(forService: LegacyCryptoManager.service, account: "gen-item") == "qwertyuiopasdfghjklx")
        // The crypto manager's legacy state is consumed, not imported.
        #expect(throws: KeychainError.self) { _ = try keychain.passwordData(forService: LegacyCryptoManager.service, account: "salt") }

        let sealed = Array(try Data(contentsOf: URL(fileURLWithPath: s.note + ".sealed")))
        #expect(try s.manager.decrypt(sealed) == Array("Meeting notes: the legacy data comes across.".utf8))
        let files = ProtectedFiles(manager: s.manager)
        #expect(try files.read(at: s.report + ".protected") == (try Fixtures.bytes("report.plain")))
        #expect(try files.protection(ofItemAt: s.report + ".protected") == .complete)

        for original in [s.keychainFile, s.note, s.report] { #expect(!FileManager.default.fileExists(atPath: original)) }
    }

    /// One damaged secure value stops the run before anything is written: no vault, no item, no
    /// output, no original shredded.
    @Test func aDamagedValueStopsTheRunBeforeAnyWrite() throws {
        let s = try setup(keychain: "imas-keychain-damaged.bplist")
        var plan = plan(s)
        plan.shredOriginals = true
        guard case .failed(let reasons)? = migrationError({ _ = try IMASMigration.run(plan, manager: s.manager) }) else {
            Issue.record("a damaged value was accepted"); return
        }
        #expect(reasons.map(\.description) == ["api/token: \(MigrationError.legacyDataRejected)"])
        #expect(reasons.map(\.kind) == [.damaged])
        #expect(try !s.manager.isSetUp)
        #expect(!FileManager.default.fileExists(atPath: s.note + ".sealed"))
        #expect(!FileManager.default.fileExists(atPath: s.report + ".protected"))
        for original in [s.keychainFile, s.note, s.report] { #expect(FileManager.default.fileExists(atPath: original)) }
    }

    @Test func aWrongPasscodeOrWrongAnswersWriteNothing() throws {
        let s = try setup()
        var plan = plan(s)
        plan.passcode = SecretBytes(utf8: "0000")
        #expect(migrationError { _ = try IMASMigration.run(plan, manager: s.manager) } == .wrongPasscode)
        plan.passcode = SecretBytes(utf8: "1234")
        plan.answers = [SecretBytes(utf8: "Rex"), SecretBytes(utf8: "Paris")]
        #expect(migrationError { _ = try IMASMigration.run(plan, manager: s.manager) } == .wrongAnswers)
        #expect(try !s.manager.isSetUp)
    }

    /// A second run (after one that stopped half way, or a repeated command) unlocks the vault
    /// it created, skips what exists, and writes nothing twice.
    @Test func aSecondRunSkipsWhatExists() throws {
        let s = try setup()
        var plan = plan(s)
        plan.dataFiles = []
        plan.protectedFiles = []
        _ = try IMASMigration.run(plan, manager: s.manager)
        s.manager.lock()
        let again = try IMASMigration.run(plan, manager: s.manager)
        #expect(!again.createdVault)
        #expect(again.imported.isEmpty && again.resealed.isEmpty)
        #expect(again.skipped.count == 5)
        plan.overwrite = true
        #expect(try IMASMigration.run(plan, manager: s.manager).imported.count == 2)
    }

    /// Answers alone (a forgotten passcode) unlock the legacy key; the new vault takes a new passcode.
    @Test func answersAloneWithANewPasscode() throws {
        let s = try setup()
        var plan = plan(s)
        plan.passcode = nil
        plan.newPasscode = SecretBytes(utf8: "new-passcode")
        plan.dataFiles = [s.note]
        plan.protectedFiles = []
        let report = try IMASMigration.run(plan, manager: s.manager)
        // The answers key alone opens the GenItem (as the original's GenItemReset does).
        #expect(report.resealed.sorted() == ["api/refresh", "api/token", IMASMigration.genItemName])
        s.manager.lock()
        try s.manager.unlock(passcode: SecretBytes(utf8: "new-passcode"))
        let sealed = Array(try Data(contentsOf: URL(fileURLWithPath: s.note + ".sealed")))
        #expect(try s.manager.decrypt(sealed).count == 44)
        #expect(try Keychain(manager: s.manager).securePassword(forService: LegacyCryptoManager.service, account: "gen-item") == "qwertyuiopasdfghjklx")
    }

    /// After a change of answers the GenItem stays under the old answers key: the new answers
    /// alone cannot open it, and the run stops before any write and before any shredding,
    /// naming it and the ways to include it; the passcode it was made with includes it, and
    /// leaving it out is an explicit choice.
    @Test func aGenItemTheCredentialsCannotOpenStopsTheRun() throws {
        let s = try setup(keychain: "imas-keychain-answers-changed.bplist")
        var plan = plan(s)
        plan.passcode = nil
        plan.answers = [SecretBytes(utf8: "Max"), SecretBytes(utf8: "Paris")]
        plan.newPasscode = SecretBytes(utf8: "new-passcode")
        plan.shredOriginals = true
        guard case .failed(let failures)? = migrationError({ _ = try IMASMigration.run(plan, manager: s.manager) }) else {
            Issue.record("a GenItem that does not open was passed over"); return
        }
        #expect(failures.map(\.subject) == [IMASMigration.genItemName])
        #expect(failures.map(\.kind) == [.notOpened])
        #expect(failures.first?.reason.contains("these answers do not decrypt it") == true)
        #expect(failures.first?.reason.contains("Include it with the answers or the passcode it was made with") == true)
        #expect(try !s.manager.isSetUp)
        for original in [s.keychainFile, s.note, s.report] { #expect(FileManager.default.fileExists(atPath: original)) }

        plan.genItemPasscode = SecretBytes(utf8: "1234")
        plan.shredOriginals = false
        let report = try IMASMigration.run(plan, manager: s.manager)
        #expect(report.resealed.contains(IMASMigration.genItemName))
        #expect(try Keychain(manager: s.manager).securePassword(forService: LegacyCryptoManager.service, account: "gen-item") == "qwertyuiopasdfghjklx")

        let other = try setup(keychain: "imas-keychain-answers-changed.bplist")
        var leave = self.plan(other)
        leave.passcode = nil
        leave.answers = plan.answers
        leave.newPasscode = plan.newPasscode
        leave.leaveOutGenItem = true
        let left = try IMASMigration.run(leave, manager: other.manager)
        #expect(left.leftOut == [IMASMigration.genItemName])
        #expect(!left.resealed.contains(IMASMigration.genItemName))
    }

    /// The original's passcode change re-wrapped the application key but not the GenItem key:
    /// the current passcode unlocks everything else, and the error names the GenItem wrapping,
    /// not the passcode. The old passcode or the answers recover it.
    @Test func aStaleGenItemWrappingIsNamedNotThePasscode() throws {
        let s = try setup(keychain: "imas-keychain-passcode-changed.bplist")
        var plan = plan(s)
        plan.passcode = SecretBytes(utf8: "5678")
        plan.answers = nil
        guard case .failed(let failures)? = migrationError({ _ = try IMASMigration.run(plan, manager: s.manager) }) else {
            Issue.record("a stale GenItem wrapping was passed over"); return
        }
        #expect(failures.map(\.subject) == [IMASMigration.genItemName])
        let reason = failures.first?.reason ?? ""
        #expect(reason.contains("the passcode unwraps the application key but does not unwrap the GenItem key (account gen-itemk)"), "\(reason)")
        #expect(!reason.contains("does not unlock the legacy crypto manager"))
        #expect(try !s.manager.isSetUp)

        plan.genItemPasscode = SecretBytes(utf8: "1234")
        #expect(try IMASMigration.run(plan, manager: s.manager).resealed.contains(IMASMigration.genItemName))
        #expect(try Keychain(manager: s.manager).securePassword(forService: LegacyCryptoManager.service, account: "gen-item") == "qwertyuiopasdfghjklx")

        let other = try setup(keychain: "imas-keychain-passcode-changed.bplist")
        var withAnswers = self.plan(other)
        withAnswers.passcode = SecretBytes(utf8: "5678")
        #expect(try IMASMigration.run(withAnswers, manager: other.manager).resealed.contains(IMASMigration.genItemName))
    }

    /// A legacy input that cannot be shredded (a second hard link) after a migration that
    /// succeeded: listed with its reason, the others still shredded, and a second run of the
    /// same plan (the legacy keychain gone) checks the outputs and finishes the shredding.
    @Test func aShredFailureIsListedAndARerunFinishesTheShredding() throws {
        let s = try setup()
        var plan = plan(s)
        plan.shredOriginals = true
        let link = s.dir.sub("note-link")
        try FileManager.default.linkItem(atPath: s.note, toPath: link)
        let report = try IMASMigration.run(plan, manager: s.manager)
        #expect(report.written == [s.note + ".sealed", s.report + ".protected"])
        #expect(report.notShredded.map(\.path) == [s.note])
        #expect(report.notShredded.first?.reason.contains("hard links") == true)
        #expect(report.notShredded.first?.reason.contains("--force") == false)
        #expect(report.shredded.map(\.path) == [s.report, s.keychainFile])
        #expect(FileManager.default.fileExists(atPath: s.note))

        try FileManager.default.removeItem(atPath: link)
        s.manager.lock()
        let again = try IMASMigration.run(plan, manager: s.manager)
        #expect(again.legacyKeychainGone)
        #expect(again.skippedFiles == [s.note + ".sealed", s.report + ".protected"])
        #expect(again.shredded.map(\.path) == [s.note])
        #expect(again.notShredded.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: s.note))
        // A third run has nothing left to do.
        s.manager.lock()
        #expect(try IMASMigration.run(plan, manager: s.manager).shredded.isEmpty)
    }

    /// A rerun over outputs written before skips them when they hold what their inputs
    /// decrypt to, refuses one of other content (nothing written), and replaces with overwrite.
    @Test func aRerunSkipsOutputsThatExist() throws {
        let s = try setup()
        let plan = plan(s)
        _ = try IMASMigration.run(plan, manager: s.manager)
        s.manager.lock()
        let again = try IMASMigration.run(plan, manager: s.manager)
        #expect(!again.createdVault)
        #expect(again.written.isEmpty)
        #expect(again.skippedFiles == [s.note + ".sealed", s.report + ".protected"])

        s.manager.lock()
        let sealed = s.note + ".sealed"
        try Data(try s.manager.encryptForTest(Array("other".utf8))).write(to: URL(fileURLWithPath: sealed))
        s.manager.lock()
        guard case .failed(let failures)? = migrationError({ _ = try IMASMigration.run(plan, manager: s.manager) }) else {
            Issue.record("an output of other content was kept"); return
        }
        #expect(failures.map(\.subject) == [sealed])
        var replace = plan
        replace.overwrite = true
        s.manager.lock()
        #expect(try IMASMigration.run(replace, manager: s.manager).written.contains(sealed))
        #expect(try s.manager.decrypt(Array(try Data(contentsOf: URL(fileURLWithPath: sealed)))).count == 44)
    }

    /// A tampered legacy data file is damaged data (a `damaged` failure), not a wrong secret.
    @Test func aTamperedBlobIsDamaged() throws {
        let s = try setup()
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: s.note)))
        bytes[bytes.count - 1] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: s.note))
        guard case .failed(let failures)? = migrationError({ _ = try IMASMigration.run(plan(s), manager: s.manager) }) else {
            Issue.record("a tampered blob was accepted"); return
        }
        #expect(failures.map(\.kind) == [.damaged])
        #expect(failures.map(\.subject) == [s.note])
    }

    /// The keychain import reports an entry of the wrong type with its reason and imports the rest.
    @Test func importReportsEntriesItCannotRead() throws {
        let dir = try TemporaryDirectory()
        let file = dir.sub("...")
        let legacy: [String: Any] = ["mail": ["alice": Data("pw".utf8), "count": 42, "note": "text"]]
        try PropertyListSerialization.data(fromPropertyList: legacy, format: .binary, options: 0).write(to: URL(fileURLWithPath: file))
        let contents = try Keychain.readLegacyKeychain(at: file)
        #expect(contents.entries.map(\.account) == ["alice", "note"])
        #expect(contents.failed.count == 1 && contents.failed.first?.account == "count")
        #expect(contents.failed.first?.reason.hasPrefix("the value is neither data nor text") == true)
    }
}

@Suite struct LegacyKeychainGuardTests {
    static let cases: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzRegressionTests/Cases/legacyPlist").path
    }()

    /// A binary property list holding a set (found by fuzzing) crashed the process inside
    /// Foundation's bridging of the parsed list; the guard now refuses every type a legacy
    /// keychain cannot hold before the parser sees the bytes.
    @Test func aSetIsRefusedBeforeParsing() throws {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: Self.cases + "/set-inside-an-account.bplist")))
        do {
            _ = try Keychain.parseLegacyKeychain(bytes, name: "hostile")
            Issue.record("a property list with a set was parsed")
        } catch {
            guard case .legacyFormat(let detail) = error else { throw error }
            #expect(detail == "hostile is refused unparsed: its binary property list holds an object of type 0xc (a set, UID or unknown type), which a legacy keychain never holds")
        }
    }

    /// A UID (the type of keyed archives) is refused the same way.
    @Test func aUIDIsRefused() throws {
        // bplist00, root dict {"s": {"a": UID(1)}}: objects 0 dict, 1 "s", 2 dict, 3 "a", 4 UID.
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        func object(_ content: [UInt8]) { offsets.append(bytes.count); bytes += content }
        object([0xD1, 1, 2])
        object([0x51, UInt8(ascii: "s")])
        object([0xD1, 3, 4])
        object([0x51, UInt8(ascii: "a")])
        object([0x80, 0x01])
        let table = bytes.count
        bytes += offsets.map { UInt8($0) }
        bytes += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 5] + [UInt8](repeating: 0, count: 8) + [0, 0, 0, 0, 0, 0, 0, UInt8(table)]
        do {
            _ = try Keychain.parseLegacyKeychain(bytes, name: "uid")
            Issue.record("a property list with a UID was parsed")
        } catch {
            guard case .legacyFormat(let detail) = error else { throw error }
            #expect(detail.contains("type 0x8"))
        }
    }
}
