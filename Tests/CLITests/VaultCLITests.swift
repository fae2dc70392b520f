import Foundation
import TestSupport
import Testing

/// Runs the built `securefoundation vault …` with --home and files: exit codes, messages, files.
@Suite("vault command")
struct VaultCLITests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// A temporary directory holding the vault home, the device key and the secret files.
    final class Workspace {
        let directory: TemporaryDirectory
        var root: String { directory.path }
        var home: String { root + "/home" }
        var deviceKey: String { root + "/config/device.key" }

        init() throws {
            directory = try TemporaryDirectory(prefix: "sf-vault-cli")
        }

        func file(_ name: String, _ content: String) throws -> String {
            try directory.file(name, content)
        }

        func vault(_ arguments: [String]) throws -> Result { try run(["vault"] + arguments) }

        func run(_ arguments: [String], home: String? = nil) throws -> Result {
            let result = try ChildProcess.run(try BuiltProducts.commandLine,
                                              arguments + ["--home", home ?? self.home, "--device-key", deviceKey],
                                              timeout: .seconds(300))
            return Result(status: result.status, stdout: result.text, stderr: result.errorText)
        }

        func mode(_ path: String) -> mode_t {
            var info = stat()
            _ = lstat(path, &info)
            return info.st_mode & 0o777
        }
    }

    @Test func initStatusUnlockAndWrongPasscode() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234-abcd\n")
        let bad = try ws.file("bad", "nope\n")
        let answers = try ws.file("answers", "Rex\nLyon\nMrs Dupont\n")
        let created = try ws.vault(["init", "--passcode-file", pin, "--question", "Pet?", "--question", "Town?",
                                    "--question", "Teacher?", "--answers-file", answers, "--threshold", "2"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.hasPrefix("created vault in \(ws.home) (key id "))
        #expect(ws.mode(ws.home) == 0o700)
        #expect(ws.mode(ws.home + "/vault.state") == 0o600)

        let status = try ws.vault(["status"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("state: set up\npasscode: yes\nsecurity questions: 3, any 2 unlock\n  1. Pet?\n  2. Town?\n  3. Teacher?\n"))
        #expect(status.stdout.contains("failed attempts: 0"))
        #expect(status.stdout.contains("erase after: never (unless --erase-after is given)\n"))

        let wrong = try ws.vault(["unlock", "--passcode-file", bad])
        #expect(wrong.status == 3)
        #expect(wrong.stderr == "securefoundation: error: wrong passcode (1 failed attempt in a row)\n")
        // The counter is shared between processes.
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 1"))

        let right = try ws.vault(["unlock", "--passcode-file", pin])
        #expect(right.status == 0, "\(right.stderr)")
        #expect(right.stdout.hasPrefix("unlocked (key id "))
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 0"))

        let partial = try ws.file("partial", "  rex \n\nMRS   DUPONT\n")
        #expect(try ws.vault(["unlock", "--answers-file", partial]).status == 0)
        let one = try ws.file("one", "rex\n\n\n")
        let tooFew = try ws.vault(["unlock", "--answers-file", one])
        #expect(tooFew.status == 1)
        #expect(tooFew.stderr.contains("1 answers given; 2 of the 3 questions must be answered"))
    }

    @Test func theKDFWorkComesFromKdfThenTheEnvironmentThenInteractive() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234-abcd\n")
        func logN(_ home: String) throws -> Int? {
            let data = try Data(contentsOf: URL(fileURLWithPath: home + "/vault.state"))
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            let kdf = (json?["passcode"] as? [String: Any])?["kdf"] as? [String: Any]
            return (kdf?["scrypt"] as? [String: Any])?["logN"] as? Int
        }
        func initialise(_ home: String, _ extra: [String], _ environment: [String: String]) throws -> ChildProcess.Result {
            try ChildProcess.run(try BuiltProducts.commandLine, ["vault", "init", "--passcode-file", pin, "--home", ws.root + "/" + home,
                                                                "--device-key", ws.root + "/" + home + ".key"] + extra,
                                 environment: environment, timeout: .seconds(300))
        }
        #expect(try initialise("a", [], ["SECUREFOUNDATION_KDF": ""]).status == 0)
        #expect(try logN(ws.root + "/a") == 16)
        #expect(try initialise("b", [], ["SECUREFOUNDATION_KDF": "minimum"]).status == 0)
        #expect(try logN(ws.root + "/b") == 15)
        #expect(try initialise("c", ["--kdf", "interactive"], ["SECUREFOUNDATION_KDF": "minimum"]).status == 0)
        #expect(try logN(ws.root + "/c") == 16)
        let wrong = try initialise("d", [], ["SECUREFOUNDATION_KDF": "fast"])
        #expect(wrong.status == 64)
        #expect(wrong.errorText.contains("$SECUREFOUNDATION_KDF must be interactive, sensitive, minimum"), "\(wrong.errorText)")
        #expect(!FileManager.default.fileExists(atPath: ws.root + "/d/vault.state"))
    }

    @Test func delaysAndErasureHaveTheirExitCodes() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234")
        let bad = try ws.file("bad", "0000")
        #expect(try ws.vault(["init", "--passcode-file", pin]).status == 0)
        for attempt in 1...4 {
            let result = try ws.vault(["unlock", "--passcode-file", bad])
            #expect(result.status == 3, "attempt \(attempt)")
        }
        let fifth = try ws.vault(["unlock", "--passcode-file", bad])
        #expect(fifth.status == 3)
        #expect(fifth.stderr == "securefoundation: error: wrong passcode (5 failed attempts in a row); the next attempt is accepted in 1 min\n")
        let waiting = try ws.vault(["unlock", "--passcode-file", pin])
        #expect(waiting.status == 4)
        #expect(waiting.stderr.contains("too many failed attempts; try again in"))
        #expect(try ws.vault(["status"]).stdout.contains("next attempt in: "))
        // With --erase-after 5 the next attempt destroys the keys (five attempts already failed).
        let erased = try ws.vault(["unlock", "--passcode-file", pin, "--erase-after", "5"])
        #expect(erased.status == 5)
        #expect(!FileManager.default.fileExists(atPath: ws.home + "/vault.state"))
        #expect(try ws.vault(["status"]).stdout.contains("state: erased"))
        #expect(try ws.vault(["unlock", "--passcode-file", pin]).status == 5)
    }

    @Test func changePasscodeQuestionsRotateAndErase() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "first pin")
        let newPin = try ws.file("newpin", "second pin")
        let answers = try ws.file("answers", "Rex\nLyon\n")
        #expect(try ws.vault(["init", "--passcode-file", pin, "--question", "Pet?", "--question", "Town?", "--answers-file", answers]).status == 0)
        let keyID = try ws.vault(["status"]).stdout.split(separator: "\n").first { $0.hasPrefix("key id: ") }

        let changed = try ws.vault(["change-passcode", "--passcode-file", pin, "--new-passcode-file", newPin])
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try ws.vault(["unlock", "--passcode-file", pin]).status == 3)
        #expect(try ws.vault(["unlock", "--passcode-file", newPin]).status == 0)

        // Forgotten passcode: prove with the answers.
        let reset = try ws.vault(["change-passcode", "--answers-file", answers, "--new-passcode-file", pin])
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(try ws.vault(["unlock", "--passcode-file", pin]).status == 0)

        let newAnswers = try ws.file("newanswers", "Blue\nPizza\nParis\n")
        let questions = try ws.vault(["change-questions", "--passcode-file", pin, "--question", "Colour?", "--question", "Food?",
                                      "--question", "City?", "--new-answers-file", newAnswers, "--threshold", "2"])
        #expect(questions.status == 0, "\(questions.stderr)")
        #expect(try ws.vault(["status"]).stdout.contains("security questions: 3, any 2 unlock\n  1. Colour?\n  2. Food?\n  3. City?\n"))
        #expect(try ws.vault(["unlock", "--answers-file", answers]).status == 1, "the old answers are of the wrong count")
        #expect(try ws.vault(["unlock", "--answers-file", try ws.file("two", "blue\n\nparis\n")]).status == 0)
        #expect(try ws.vault(["status"]).stdout.split(separator: "\n").first { $0.hasPrefix("key id: ") } == keyID,
                "changing secrets keeps the key")

        let rotated = try ws.vault(["rotate-key", "--passcode-file", pin, "--answers-file", newAnswers])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.stdout.hasPrefix("key rotated: "))
        #expect(try ws.vault(["status"]).stdout.split(separator: "\n").first { $0.hasPrefix("key id: ") } != keyID)

        #expect(try ws.vault(["erase"]).status == 64, "erase needs --yes")
        let erased = try ws.vault(["erase", "--yes"])
        #expect(erased.status == 0)
        #expect(!FileManager.default.fileExists(atPath: ws.home + "/vault.state"))
        #expect(try ws.vault(["status"]).stdout.contains("state: not set up"))
    }

    @Test func killingTheProcessMidCheckKeepsTheAttemptCounted() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234")
        // scrypt 2^18 (about 1 s) leaves time to kill the check while the KDF runs.
        #expect(try ws.vault(["init", "--passcode-file", pin, "--kdf", "sensitive"]).status == 0)
        let process = try ChildProcess.start(try BuiltProducts.commandLine,
                                             ["vault", "unlock", "--passcode-file", pin, "--home", ws.home, "--device-key", ws.deviceKey])
        // Wait until the attempt is recorded (before the KDF), then kill -9 during the KDF.
        var recorded = false
        for _ in 0..<500 {
            if let record = try? String(contentsOfFile: ws.home + "/attempts", encoding: .utf8), record.contains("\"failures\":1") {
                recorded = true
                break
            }
            usleep(10_000)
        }
        process.kill()
        let ended = try process.wait(timeout: .seconds(30))
        #expect(recorded, "the attempt was recorded while the check ran")
        #expect(ended.signalled, "the check was still running when killed")
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 1"))
        #expect(try ws.vault(["unlock", "--passcode-file", pin]).status == 0)
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 0"))
    }

    @Test func insecureHomeIsRefusedWithAFix() throws {
        let ws = try Workspace()
        try FileManager.default.createDirectory(atPath: ws.home, withIntermediateDirectories: true)
        chmod(ws.home, 0o755)
        let result = try ws.vault(["status"])
        #expect(result.status == 74)   // refused as insecure (docs/CLI.md)
        #expect(result.stderr.contains("refusing \(ws.home): its mode 755 lets group or others in. Fix it with: chmod 700 \(ws.home)"))
    }

    /// Every regular file under `directory`, recursively.
    static func files(under directory: String) -> [String] { FileTree.regularFiles(under: directory) }

    @Test func eraseLeavesNoWorkingCopyOfTheVaultBehind() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "first pin")
        let newPin = try ws.file("newpin", "second pin")
        #expect(try ws.vault(["init", "--passcode-file", pin]).status == 0)
        // What a change-passcode killed just after writing its temporary file leaves: a
        // complete state in `.sf-*.tmp`.
        let leftover = ws.home + "/.sf-0sszU9bCZNcBq7Lw.tmp"
        try Data(contentsOf: URL(fileURLWithPath: ws.home + "/vault.state")).write(to: URL(fileURLWithPath: leftover))
        chmod(leftover, 0o600)
        #expect(try ws.vault(["change-passcode", "--passcode-file", pin, "--new-passcode-file", newPin]).status == 0)
        let erased = try ws.vault(["erase", "--yes"])
        #expect(erased.status == 0, "\(erased.stderr)")
        #expect(erased.stdout == "erased the vault in \(ws.home)\n")
        let left = Self.files(under: ws.home)
        #expect(left == [ws.home + "/vault.lock"])
        // Each file left, as the state of a fresh home, unlocks with neither passcode.
        for file in left + [leftover] where FileManager.default.fileExists(atPath: file) {
            let fresh = try Workspace()
            try FileManager.default.createDirectory(atPath: fresh.home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(contentsOf: URL(fileURLWithPath: file)).write(to: URL(fileURLWithPath: fresh.home + "/vault.state"))
            chmod(fresh.home + "/vault.state", 0o600)
            for passcode in [pin, newPin] {
                let result = try fresh.vault(["unlock", "--passcode-file", passcode])
                #expect(result.status != 0, "\(file) unlocks: \(result.stdout)")
            }
        }
    }

    @Test func theEraseAfterPolicyGivenAtInitApplies() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234")
        let bad = try ws.file("bad", "0000")
        #expect(try ws.vault(["init", "--passcode-file", pin, "--erase-after", "2"]).status == 0)
        #expect(try ws.vault(["status"]).stdout.contains("erase after: 2 failed attempts in a row\n"))
        #expect(try ws.vault(["unlock", "--passcode-file", bad]).status == 3)
        let second = try ws.vault(["unlock", "--passcode-file", bad])
        #expect(second.status == 5, "\(second.stderr)")
        #expect(try ws.vault(["status"]).stdout.contains("state: erased"))
    }

    /// After rotate-class-keys, an old copy of vault.state and always.key with the passcode of
    /// the time opens no keychain item; the real vault opens them all.
    @Test func rotateClassKeysLeavesOldCopiesUseless() throws {
        let ws = try Workspace()
        let pin = try ws.file("pin", "1234")
        #expect(try ws.vault(["init", "--passcode-file", pin]).status == 0)
        for (account, accessibility) in [("wu", "whenUnlocked"), ("afu", "afterFirstUnlockThisDeviceOnly"), ("al", "always")] {
            let add = try ws.run(["keychain", "add-generic-password", "-s", "svc", "-a", account, "-w", "v-\(account)",
                                  "--accessibility", accessibility, "--passcode-file", pin])
            #expect(add.status == 0, "\(add.stderr)")
        }
        let stale = ws.root + "/stale"
        try FileManager.default.createDirectory(atPath: stale, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        for name in ["vault.state", "always.key"] { try FileManager.default.copyItem(atPath: ws.home + "/" + name, toPath: stale + "/" + name) }

        let rotated = try ws.vault(["rotate-class-keys", "--passcode-file", pin])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.stdout == "class keys rotated; keychain items re-sealed: 3\nprotected-file class identities re-sealed: 8\n")
        let again = try ws.vault(["rotate-class-keys", "--reseal-only", "--passcode-file", pin])
        #expect(again.stdout == "class keys unchanged; keychain items re-sealed: 0\nprotected-file class identities re-sealed: 0\n")
        for account in ["wu", "afu", "al"] {
            let find = try ws.run(["keychain", "find-generic-password", "-s", "svc", "-a", account, "-w", "--passcode-file", pin])
            #expect(find.status == 0 && find.stdout == "v-\(account)\n", "\(find.stderr)")
        }
        // The attacker's home: the old state and always key beside the current keychain.
        try FileManager.default.copyItem(atPath: ws.home + "/keychain.sqlite", toPath: stale + "/keychain.sqlite")
        for account in ["wu", "afu", "al"] {
            let find = try ws.run(["keychain", "find-generic-password", "-s", "svc", "-a", account, "-w", "--passcode-file", pin], home: stale)
            #expect(find.status == 2 && find.stdout.isEmpty, "\(account): \(find.status) \(find.stdout)")
        }
        let wrong = try ws.vault(["rotate-class-keys", "--passcode-file", try ws.file("bad", "0000")])
        #expect(wrong.status == 3)
    }

    @Test func usageErrors() throws {
        let ws = try Workspace()
        #expect(try ws.vault(["init", "--question", "Pet?"]).status == 64)
        #expect(try ws.vault(["unlock", "--passcode-file", "a", "--answers-file", "b"]).status == 64)
        // No terminal and no --passcode-file: a usage error that names the option, and nothing
        // is created (no data directory, lock or device key).
        let fresh = try ScratchDirectory()
        let noTTY = try CLIRunner.run(["vault", "init", "--home", fresh.path + "/home", "--device-key", fresh.path + "/config/device.key"])
        #expect(noTTY.status == 64)
        #expect(noTTY.stderr.contains("no terminal to read the passcode from; give it with --passcode-file FILE"), "\(noTTY.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: fresh.path).isEmpty)
        let help = try ws.vault(["unlock", "--help"])
        #expect(help.stdout.contains("Exit status: 0 unlocked, 3 wrong passcode, answers or token PIN"))
    }
}
