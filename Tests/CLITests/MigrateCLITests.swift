import Foundation
import Testing

/// `securefoundation migrate imas-keychain` and `migrate imas-data` on the fixtures of
/// Tests/MigrationTests/Fixtures (made by make_fixtures.py from the original's byte layout).
@Suite struct MigrateCLITests {
    static let fixtures: String = {
        var url = URL(fileURLWithPath: #filePath)
        url.deleteLastPathComponent()
        url.deleteLastPathComponent()
        return url.appendingPathComponent("MigrationTests/Fixtures").path
    }()

    let cli = KeychainCLITests()

    func copy(_ name: String, into home: KeychainCLITests.Home) throws -> String {
        let target = home.path + "/" + name
        try FileManager.default.copyItem(atPath: Self.fixtures + "/" + name, toPath: target)
        return target
    }

    func write(_ content: String, _ name: String, in home: KeychainCLITests.Home) throws -> String {
        let path = home.path + "/" + name
        try Data(content.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
        return path
    }

    @Test func importsTheLegacyKeychainWithAReport() throws {
        let home = try KeychainCLITests.Home()
        let file = try copy("imas-keychain.bplist", into: home)
        let first = try cli.run(home, command: ["migrate", "imas-keychain", file])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "imported 10, skipped 0, failed 0\n")
        let again = try cli.run(home, command: ["migrate", "imas-keychain", file])
        #expect(again.stdout == "imported 0, skipped 10, failed 0\n")
        let found = try cli.run(home, ["find-generic-password", "-s", "mail", "-a", "alice", "-w"])
        #expect(found.stdout == "alice-pw\n")

        // An entry of the wrong type is listed with its reason; the others are imported; exit 2.
        let mixed = home.path + "/mixed.bplist"
        let legacy: [String: Any] = ["notes": ["a": Data("x".utf8), "n": 7]]
        try PropertyListSerialization.data(fromPropertyList: legacy, format: .binary, options: 0).write(to: URL(fileURLWithPath: mixed))
        let partial = try cli.run(home, command: ["migrate", "imas-keychain", mixed])
        #expect(partial.status == 2)
        #expect(partial.stdout.hasPrefix("failed: service \"notes\", account \"n\": the value is neither data nor text"))
        #expect(partial.stdout.hasSuffix("imported 1, skipped 0, failed 1\n"))
    }

    @Test func migratesDataWithTheOldPasscode() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain.bplist", into: home)
        let note = try copy("note.imas", into: home)
        let report = try copy("report.imas", into: home)
        let passcode = try write("1234", "pin.txt", in: home)
        let wrong = try write("4321", "wrong.txt", in: home)
        let answers = try write("Rex\nLyon\n", "answers.txt", in: home)
        let arguments = ["migrate", "imas-data", "--keychain", keychain, "--answers-file", answers, "--secure-service", "api",
                         "--data", note, "--file", report, "--shred"]

        let refused = try cli.run(home, command: arguments + ["--passcode-file", wrong])
        #expect(refused.status == 3)
        #expect(refused.stderr.contains("the old passcode does not unlock the legacy crypto manager"))
        #expect(!FileManager.default.fileExists(atPath: home.path + "/home/vault.state"))

        let done = try cli.run(home, command: arguments + ["--passcode-file", passcode])
        #expect(done.status == 0, "\(done.stderr)")
        let lines = done.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "created vault in \(home.path)/home")
        #expect(lines.contains("re-sealed: api/token"))
        #expect(lines.contains("wrote: \(note).sealed"))
        #expect(lines.contains("wrote: \(report).protected"))
        #expect(lines.contains("migrated: imported 2, re-sealed 3, skipped 0, files 2, failed 0"))
        #expect(lines.last == "shredded 3, not shredded 0")
        for original in [keychain, note, report] { #expect(!FileManager.default.fileExists(atPath: original)) }

        let token = try cli.run(home, ["find-generic-password", "-s", "api", "-a", "token", "-w", "--passcode-file", passcode])
        #expect(token.stdout == "s3cr3t-token\n")
        let unlocked = try cli.run(home, command: ["vault", "unlock", "--passcode-file", passcode])
        #expect(unlocked.status == 0, "\(unlocked.stderr)")
        let out = home.path + "/report.out"
        let read = try cli.run(home, command: ["protect", "read", "-o", out, report + ".protected", "--passcode-file", passcode])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == (try Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/report.plain"))))
    }

    /// A missing legacy keychain is a file error (74), not a database error.
    @Test func aMissingKeychainFileIsAFileError() throws {
        let home = try KeychainCLITests.Home()
        let missing = try cli.run(home, command: ["migrate", "imas-keychain", home.path + "/absent/..."])
        #expect(missing.status == 74, "\(missing.stderr)")
        #expect(missing.stderr.contains("No such file or directory"))
        #expect(!missing.stderr.contains("keychain database error"))
    }

    /// A tampered legacy blob is damaged data: exit 2, nothing written.
    @Test func aTamperedBlobExitsTwo() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain.bplist", into: home)
        let note = try copy("note.imas", into: home)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: note)))
        bytes[bytes.count - 1] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: note))
        let passcode = try write("1234", "pin.txt", in: home)
        let result = try cli.run(home, command: ["migrate", "imas-data", "--keychain", keychain, "--passcode-file", passcode, "--data", note])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("\(note): legacy data rejected"))
        #expect(!FileManager.default.fileExists(atPath: home.path + "/home/vault.state"))
    }

    /// The answers alone (with a new passcode) bring the GenItem across, even with --shred.
    @Test func answersAloneKeepTheGenItem() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain.bplist", into: home)
        let answers = try write("Rex\nLyon\n", "answers.txt", in: home)
        let passcode = try write("new-passcode", "new.txt", in: home)
        let done = try cli.run(home, command: ["migrate", "imas-data", "--keychain", keychain, "--answers-file", answers,
                                               "--new-passcode-file", passcode, "--shred"])
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stdout.contains("re-sealed: org.mitre.imas.crypto-manager/gen-item\n"))
        let found = try cli.run(home, ["find-generic-password", "-s", "org.mitre.imas.crypto-manager", "-a", "gen-item", "-w",
                                       "--passcode-file", passcode])
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.stdout == "qwertyuiopasdfghjklx\n")
    }

    /// A GenItem wrapping left stale by a passcode change: exit 3 with a message about the
    /// GenItem (not the passcode) naming options that exist; each of them works.
    @Test func aStaleGenItemWrappingNamesTheWaysOut() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain-passcode-changed.bplist", into: home)
        let passcode = try write("5678", "pin.txt", in: home)
        let old = try write("1234", "old.txt", in: home)
        let arguments = ["migrate", "imas-data", "--keychain", keychain, "--passcode-file", passcode]
        let refused = try cli.run(home, command: arguments)
        #expect(refused.status == 3)
        #expect(refused.stderr.contains("org.mitre.imas.crypto-manager/gen-item: the GenItem secret does not open: the passcode unwraps the application key but does not unwrap the GenItem key"))
        #expect(!refused.stderr.contains("the old passcode does not unlock the legacy crypto manager"))
        for option in ["--answers-file", "--gen-item-passcode-file", "--leave-out-gen-item"] {
            #expect(refused.stderr.contains(option), "\(option)")
        }
        let help = try cli.run(home, command: ["migrate", "imas-data", "--help"])
        for option in ["--gen-item-passcode-file", "--leave-out-gen-item"] { #expect(help.stdout.contains(option)) }

        let recovered = try cli.run(home, command: arguments + ["--gen-item-passcode-file", old])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout.contains("re-sealed: org.mitre.imas.crypto-manager/gen-item\n"))

        let other = try KeychainCLITests.Home()
        let second = try copy("imas-keychain-passcode-changed.bplist", into: other)
        let pin = try write("5678", "pin.txt", in: other)
        let left = try cli.run(other, command: ["migrate", "imas-data", "--keychain", second, "--passcode-file", pin, "--leave-out-gen-item"])
        #expect(left.status == 0, "\(left.stderr)")
        #expect(left.stdout.contains("left out: org.mitre.imas.crypto-manager/gen-item"))
    }

    /// --shred that cannot shred one input: the migration is reported first, every failure
    /// listed with its reason (no advice to use an option the command lacks), the rest shredded,
    /// exit 1; the same command again, the cause removed, finishes the shredding.
    @Test func aShredFailureIsReportedAfterTheMigration() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain.bplist", into: home)
        let note = try copy("note.imas", into: home)
        let report = try copy("report.imas", into: home)
        let passcode = try write("1234", "pin.txt", in: home)
        let link = home.path + "/note-link"
        try FileManager.default.linkItem(atPath: note, toPath: link)
        let arguments = ["migrate", "imas-data", "--keychain", keychain, "--passcode-file", passcode, "--secure-service", "api",
                         "--data", note, "--file", report, "--shred"]
        let first = try cli.run(home, command: arguments)
        #expect(first.status == 1)
        let lines = first.stdout.split(separator: "\n").map(String.init)
        let migrated = lines.firstIndex { $0.hasPrefix("migrated: imported 2, re-sealed 3") }
        let failed = lines.firstIndex { $0.hasPrefix("not shredded: \(note): it has 2 hard links") }
        #expect(migrated != nil && failed != nil && migrated! < failed!, "\(first.stdout)")
        #expect(lines.contains("shredded: \(report)") && lines.contains("shredded: \(keychain)"))
        #expect(lines.last == "shredded 2, not shredded 1")
        #expect(first.stderr.contains("the migration is done, but 1 legacy file(s) were not shredded"))
        #expect(!first.stdout.contains("--force") && !first.stderr.contains("--force"))

        try FileManager.default.removeItem(atPath: link)
        let again = try cli.run(home, command: arguments)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("legacy keychain \(keychain) is gone"))
        #expect(again.stdout.contains("shredded: \(note)\n"))
        #expect(!FileManager.default.fileExists(atPath: note))
        let token = try cli.run(home, ["find-generic-password", "-s", "api", "-a", "token", "-w", "--passcode-file", passcode])
        #expect(token.stdout == "s3cr3t-token\n")
    }

    /// Running the command again over outputs it wrote skips them (docs/MIGRATING.md).
    @Test func aRerunIsIdempotent() throws {
        let home = try KeychainCLITests.Home()
        let keychain = try copy("imas-keychain.bplist", into: home)
        let note = try copy("note.imas", into: home)
        let passcode = try write("1234", "pin.txt", in: home)
        let arguments = ["migrate", "imas-data", "--keychain", keychain, "--passcode-file", passcode, "--data", note]
        #expect(try cli.run(home, command: arguments).status == 0)
        let again = try cli.run(home, command: arguments)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("skipped: \(note).sealed (exists with the migrated content"))
    }
}
