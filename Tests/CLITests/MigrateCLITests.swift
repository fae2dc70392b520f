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
        #expect(lines.last == "imported 2, re-sealed 3, skipped 0, files 2, failed 0")
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
}
