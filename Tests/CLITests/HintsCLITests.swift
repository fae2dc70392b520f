import Foundation
import Testing

/// What a new user meets: hints that name the right option, read-only commands that create
/// nothing, and run-time errors without the usage text.
@Suite struct HintsCLITests {
    @Test func shreddingAHardLinkNamesForce() throws {
        let scratch = try ScratchDirectory()
        let file = try scratch.file("f", [1, 2, 3])
        #expect(link(file, scratch.path + "/g") == 0)
        let result = try CLIRunner.run(["shred", file])
        #expect(result.status == 1)
        #expect(result.stderr.contains("--force"))
        #expect(try CLIRunner.run(["shred", "--force", file]).status == 0)
    }

    @Test func keychainHintsNameTheOptionThatHelps() throws {
        let scratch = try ScratchDirectory()
        let home = scratch.path + "/home"
        // No vault: the default class needs one; the hint names vault init and --accessibility always.
        let noVault = try CLIRunner.run(["keychain", "add-generic-password", "--home", home, "--device-key", scratch.path + "/dk",
                                         "-s", "s", "-a", "a", "-w", "secret"])
        #expect(noVault.status == 36)
        #expect(noVault.stderr.contains("securefoundation vault init") && noVault.stderr.contains("--accessibility always"))
        let add = ["keychain", "add-generic-password", "--home", home, "--device-key", scratch.path + "/dk",
                   "-s", "s", "-a", "a", "-w", "secret", "--accessibility", "always"]
        #expect(try CLIRunner.run(add).status == 0)
        let duplicate = try CLIRunner.run(add)
        #expect(duplicate.status == 45)
        #expect(duplicate.stderr.contains("add -U to update it"))
        #expect(try CLIRunner.run(add + ["-U"]).status == 0)
    }

    @Test func trailingPasswordFlagPrompts() throws {
        guard let setsid = CLIRunner.which("setsid") else {
            print("setsid not installed: skipping the prompt test")
            return
        }
        let scratch = try ScratchDirectory()
        // Without a terminal the prompt fails with a clear error, not with "missing value for -w".
        let result = try CLIRunner.runTool(setsid, ["-w", CLIRunner.executable, "keychain", "add-generic-password",
                                                    "--home", scratch.path + "/home", "--device-key", scratch.path + "/dk",
                                                    "--accessibility", "always", "-s", "s", "-a", "a", "-w"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("no terminal"), "\(result.stderr)")
        #expect(!result.stderr.contains("Missing value"))
    }

    @Test func outputIntoAMissingDirectoryNamesThatDirectory() throws {
        let scratch = try ScratchDirectory()
        let pass = try scratch.file("pass", Array("passphrase\n".utf8))
        let result = try CLIRunner.run(["seal", "--passphrase-file", pass, "-o", scratch.path + "/missing/out"],
                                       stdin: Array("plaintext".utf8))
        #expect(result.status == 74)
        #expect(result.stderr.contains("write into directory \(scratch.path)/missing failed: No such file or directory"), "\(result.stderr)")
        #expect(!result.stderr.contains(".sf-"))
    }

    @Test func readOnlyVaultCommandsCreateNothing() throws {
        let scratch = try ScratchDirectory()
        let typo = scratch.path + "/typo"
        let status = try CLIRunner.run(["vault", "status", "--home", typo, "--device-key", scratch.path + "/dk"])
        #expect(status.status == 0)
        #expect(status.text.contains("directory: \(typo) (does not exist)\nstate: not set up\n"))
        #expect(!FileManager.default.fileExists(atPath: typo))
        let erase = try CLIRunner.run(["vault", "erase", "--home", typo, "--device-key", scratch.path + "/dk", "--yes"])
        #expect(erase.status == 1)
        #expect(erase.stderr == "securefoundation: error: nothing to erase: \(typo) does not exist (check --home)\n")
        #expect(!FileManager.default.fileExists(atPath: typo))
    }

    @Test func emptyPasscodeOnStdinNamesPasscodeFile() throws {
        let scratch = try ScratchDirectory()
        let home = scratch.path + "/home"
        let pass = try scratch.file("pass", Array("correct horse 12\n".utf8))
        let initialized = try CLIRunner.run(["vault", "init", "--home", home, "--device-key", scratch.path + "/dk",
                                             "--passcode-file", pass])
        #expect(initialized.status == 0, "\(initialized.stderr)")
        let unlock = try CLIRunner.run(["vault", "unlock", "--home", home, "--device-key", scratch.path + "/dk",
                                        "--passcode-file", "-"])
        #expect(unlock.status == 1)
        #expect(unlock.stderr == "securefoundation: error: standard input is empty: --passcode-file - reads the passcode from it\n")
    }
}
