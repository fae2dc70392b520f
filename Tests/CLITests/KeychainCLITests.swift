import Foundation
import TestSupport
import Testing
import Synchronization

/// Runs the built `securefoundation keychain …` and checks exit codes and output bytes.
@Suite struct KeychainCLITests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static let binary: String? = BuiltProducts.path(of: "securefoundation", environment: "SECUREFOUNDATION_BIN")

    /// A private temporary directory: the data directory, device key and files of one test.
    final class Home: Sendable {
        let directory: TemporaryDirectory
        var path: String { directory.path }
        init() throws { directory = try TemporaryDirectory(prefix: "kc-cli") }
    }

    func run(_ home: Home, _ arguments: [String], stdin: String? = nil) throws -> Result {
        try run(home, command: ["keychain"] + arguments, stdin: stdin)
    }

    func run(_ home: Home, command arguments: [String], stdin: String? = nil) throws -> Result {
        let binary = try #require(Self.binary, "build the CLI first: swift build")
        let result = try ChildProcess.run(binary, arguments + ["--home", home.path + "/home", "--device-key", home.path + "/device.key"],
                                          stdin: .text(stdin ?? ""), environment: ["XDG_CONFIG_HOME": home.path + "/config"],
                                          timeout: .seconds(300))
        return Result(status: result.status, stdout: result.text, stderr: result.errorText)
    }

    @Test func addFindDeleteWithSecurityExitCodes() throws {
        let home = try Home()
        let add = try run(home, ["add-generic-password", "-s", "mail", "-a", "alice", "-w", "hunter2", "--accessibility", "always"])
        #expect(add.status == 0, "\(add.stderr)")
        // An existing item without -U is an error; with -U it is updated (password from stdin).
        let duplicate = try run(home, ["add-generic-password", "-s", "mail", "-a", "alice", "-w", "x", "--accessibility", "always"])
        #expect(duplicate.status == 45)
        #expect(duplicate.stderr.contains("duplicate item"))
        let update = try run(home, ["add-generic-password", "-U", "-s", "mail", "-a", "alice", "-w", "-", "--accessibility", "always"],
                             stdin: "from-stdin\n")
        #expect(update.status == 0, "\(update.stderr)")

        let find = try run(home, ["find-generic-password", "-s", "mail", "-a", "alice", "-w"])
        #expect(find.status == 0)
        #expect(find.stdout == "from-stdin\n")
        let attributes = try run(home, ["find-generic-password", "-s", "mail"])
        #expect(attributes.status == 0)
        #expect(attributes.stdout.contains("\"acct\"<blob>=\"alice\""))
        #expect(attributes.stdout.contains("\"svce\"<blob>=\"mail\""))
        #expect(!attributes.stdout.contains("from-stdin"))

        let missing = try run(home, ["find-generic-password", "-s", "mail", "-a", "bob", "-w"])
        #expect(missing.status == 44)
        #expect(missing.stdout.isEmpty)

        let delete = try run(home, ["delete-generic-password", "-s", "mail", "-a", "alice"])
        #expect(delete.status == 0)
        #expect(try run(home, ["delete-generic-password", "-s", "mail", "-a", "alice"]).status == 44)
        #expect(try run(home, ["find-generic-password", "-s", "mail", "-a", "alice"]).status == 44)
    }

    @Test func dumpListsWithoutSecretsAndLockedItemsNeedThePasscode() throws {
        let home = try Home()
        #expect(try run(home, ["add-generic-password", "-s", "svc-one", "-a", "acct-one", "-w", "SECRET-ONE", "--accessibility", "alwaysThisDeviceOnly", "-l", "Label One"]).status == 0)
        #expect(try run(home, ["add-generic-password", "-s", "svc-two", "-a", "acct-two", "-w", "SECRET-TWO", "--accessibility", "always"]).status == 0)
        let dump = try run(home, ["dump-keychain"])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdout.contains("\"svce\"<blob>=\"svc-one\""))
        #expect(dump.stdout.contains("\"labl\"<blob>=\"Label One\""))
        #expect(dump.stdout.contains("\"pdmn\"<string>=\"alwaysThisDeviceOnly\""))
        #expect(dump.stdout.contains("\"acct\"<blob>=\"acct-two\""))
        #expect(!dump.stdout.contains("SECRET"))

        // whenUnlocked (the default) needs a vault, and there is none here: refused with 36,
        // and the hint says how to get one or which class needs none.
        let locked = try run(home, ["add-generic-password", "-s", "svc", "-a", "acct", "-w", "pw"])
        #expect(locked.status == 36)
        #expect(locked.stderr.contains("whenUnlocked class key is unavailable"))
        #expect(locked.stderr.contains("vault init") && locked.stderr.contains("--accessibility always"))

        let bad = try run(home, ["add-generic-password", "-s", "svc", "-a", "acct", "-w", "pw", "--accessibility", "sometimes"])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("unknown accessibility"))
    }

    @Test func whenUnlockedItemsWithThePasscode() throws {
        let home = try Home()
        let pin = home.path + "/pin.txt"
        try "2468\n".write(toFile: pin, atomically: true, encoding: .utf8)
        let setUp = try run(home, command: ["vault", "init", "--passcode-file", pin])
        #expect(setUp.status == 0, "\(setUp.stderr)")
        let add = try run(home, ["add-generic-password", "-s", "bank", "-a", "me", "-w", "-", "--passcode-file", pin], stdin: "s3cret\n")
        #expect(add.status == 0, "\(add.stderr)")
        let locked = try run(home, ["find-generic-password", "-s", "bank", "-a", "me", "-w"])
        #expect(locked.status == 36)
        #expect(locked.stdout.isEmpty)
        let found = try run(home, ["find-generic-password", "-s", "bank", "-a", "me", "-w", "--passcode-file", pin])
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.stdout == "s3cret\n")
        // Locked, the listing shows the item's class but not its names.
        let dump = try run(home, ["dump-keychain"])
        #expect(dump.status == 0)
        #expect(dump.stdout.contains("\"pdmn\"<string>=\"whenUnlocked\""))
        #expect(!dump.stdout.contains("bank"))
        #expect(try run(home, ["dump-keychain", "--passcode-file", pin]).stdout.contains("\"svce\"<blob>=\"bank\""))
        // No class key is needed to delete.
        #expect(try run(home, ["delete-generic-password", "-s", "bank", "-a", "me"]).status == 0)
    }

    @Test func helpHasExamples() throws {
        let home = try Home()
        for verb in ["add-generic-password", "find-generic-password", "delete-generic-password", "dump-keychain"] {
            let help = try run(home, [verb, "--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("securefoundation keychain \(verb)"), "\(verb)")
        }
    }
}

/// Attacks and faults through the command line: a mistyped column, a row moved to a weaker
/// class, concurrent `-U`.
@Suite struct KeychainCLIRobustnessTests {
    let cli = KeychainCLITests()

    private func sqlite(_ home: KeychainCLITests.Home, _ script: String) throws -> Int32 {
        try ChildProcess.run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.executescript(sys.argv[2])
            db.commit()
            """, home.path + "/home/keychain.sqlite", script]).status
    }

    @Test(arguments: ["created = 'abc'", "accessibility = 'xyz'", "sealed = 12345", "modified = 'x'"])
    func aMistypedColumnExitsWithAnErrorNotASignal(assignment: String) throws {
        let home = try KeychainCLITests.Home()
        #expect(try cli.run(home, ["add-generic-password", "-s", "mail", "-a", "alice", "-w", "pw", "--accessibility", "always"]).status == 0)
        #expect(try cli.run(home, ["add-generic-password", "-s", "news", "-a", "bob", "-w", "pw2", "--accessibility", "always"]).status == 0)
        // mail/alice's row is the older one.
        guard try sqlite(home, "UPDATE keychain_items SET \(assignment) WHERE created = (SELECT min(created) FROM keychain_items)") == 0 else {
            Issue.record("python3 with sqlite3 is needed"); return
        }
        let find = try cli.run(home, ["find-generic-password", "-s", "mail", "-a", "alice", "-w"])
        #expect(find.status == 2, "\(find.status) \(find.stderr)")   // damaged item (docs/CLI.md)
        #expect(find.stderr.contains("keychain corrupted or tampered with"), "\(find.stderr)")
        #expect(find.stdout.isEmpty)
        let other = try cli.run(home, ["find-generic-password", "-s", "news", "-a", "bob", "-w"])
        #expect(other.status == 0 && other.stdout == "pw2\n", "\(other.stderr)")
        #expect(try cli.run(home, ["delete-generic-password", "-s", "mail", "-a", "alice"]).status == 0)
    }

    /// A row edited with the sqlite3 tool (TEXT where the sealed record's blob belongs):
    /// dump-keychain lists every other item on stdout, names the damaged one on stderr and exits 2.
    @Test func dumpListsTheOthersAndNamesADamagedItem() throws {
        guard let sqlite3 = ChildProcess.which("sqlite3") else {
            print("skipped: the sqlite3 tool is not installed (apt-get install sqlite3)"); return
        }
        let home = try KeychainCLITests.Home()
        for (service, account) in [("mail", "alice"), ("news", "bob"), ("web", "carol")] {
            #expect(try cli.run(home, ["add-generic-password", "-s", service, "-a", account, "-w", "pw", "--accessibility", "always"]).status == 0)
        }
        let database = home.path + "/home/keychain.sqlite"
        let victim = try ChildProcess.run(sqlite3, [database, "SELECT hex(item_id) FROM keychain_items ORDER BY created LIMIT 1 OFFSET 1;"])
        let id = victim.text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        #expect(victim.status == 0 && id.count == 66, "\(victim.errorText)")
        let edit = try ChildProcess.run(sqlite3, [database, "UPDATE keychain_items SET sealed = 'text' WHERE hex(item_id) = upper('\(id)');"])
        #expect(edit.status == 0, "\(edit.errorText)")

        let dump = try cli.run(home, ["dump-keychain"])
        #expect(dump.status == 2, "\(dump.status) \(dump.stderr)")
        #expect(dump.stdout.contains("\"acct\"<blob>=\"alice\""))
        #expect(dump.stdout.contains("\"acct\"<blob>=\"carol\""))
        #expect(!dump.stdout.contains("bob"))
        #expect(dump.stderr.contains("damaged item \(id) (generic password, always): keychain corrupted or tampered with: a keychain_items row"), "\(dump.stderr)")
        #expect(dump.stderr.contains("1 keychain item(s) are damaged (item id \(id))"), "\(dump.stderr)")
        // Deleted by its names, the listing is whole again.
        #expect(try cli.run(home, ["delete-generic-password", "-s", "news", "-a", "bob"]).status == 0)
        let clean = try cli.run(home, ["dump-keychain"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(clean.stderr.isEmpty)
    }

    @Test func minimumAccessibilityRefusesAWeakerItem() throws {
        let home = try KeychainCLITests.Home()
        #expect(try cli.run(home, ["add-generic-password", "-s", "api", "-a", "token", "-w", "t", "--accessibility", "always"]).status == 0)
        let refused = try cli.run(home, ["find-generic-password", "-s", "api", "-a", "token", "-w", "--minimum-accessibility", "afterFirstUnlock"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("stored as always, weaker than the afterFirstUnlock required"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        let accepted = try cli.run(home, ["find-generic-password", "-s", "api", "-a", "token", "-w", "--minimum-accessibility", "always"])
        #expect(accepted.status == 0 && accepted.stdout == "t\n")
    }

    /// Several processes run `add-generic-password -U` on one item while another deletes it:
    /// every -U succeeds (it used to update, find nothing, then fail to add as a duplicate).
    @Test func concurrentUpsertsNeverReportADuplicate() throws {
        let home = try KeychainCLITests.Home()
        #expect(try cli.run(home, ["add-generic-password", "-s", "race", "-a", "a", "-w", "0", "--accessibility", "always"]).status == 0)
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<15 {
                do {
                    if worker == 0 {
                        _ = try cli.run(home, ["delete-generic-password", "-s", "race", "-a", "a"])
                    } else {
                        let result = try cli.run(home, ["add-generic-password", "-U", "-s", "race", "-a", "a", "-w", "\(worker)-\(round)", "--accessibility", "always"])
                        if result.status != 0 { failures.withLock { $0.append("\(result.status): \(result.stderr)") } }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
    }
}
