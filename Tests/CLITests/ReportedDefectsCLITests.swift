import Foundation
import TestSupport
import Testing

/// Statuses and side effects that users found wrong: a read of an empty data directory creates
/// nothing, and a modified sealed file is reported as damaged wherever the format can tell.
@Suite("reported command defects")
struct ReportedDefectsCLITests {
    /// `keychain find-generic-password` (and the other commands that only read or delete) in a
    /// data directory without a vault or a keychain: exit 5, and no directory, lock, keychain or
    /// device key is made.
    @Test func keychainReadsInAnEmptyHomeCreateNothing() throws {
        let scratch = try ScratchDirectory()
        let common = ["--home", scratch.path + "/home", "--device-key", scratch.path + "/config/device.key"]
        for arguments in [["find-generic-password", "-s", "mail", "-a", "alice", "-w"],
                          ["delete-generic-password", "-s", "mail", "-a", "alice"],
                          ["dump-keychain"]] {
            let result = try CLIRunner.run(["keychain"] + arguments + common)
            #expect(result.status == 5, "\(arguments[0]): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("vault init"), "\(arguments[0]): \(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty, "\(arguments[0]) created files")
        }
        // A keychain of `always` items needs no vault: it is still read.
        let added = try CLIRunner.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-",
                                       "--accessibility", "always"] + common, stdin: Array("pw\n".utf8))
        #expect(added.status == 0, "\(added.stderr)")
        let found = try CLIRunner.run(["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w"] + common)
        #expect(found.status == 0 && found.text == "pw\n", "\(found.stderr)")
        #expect(try CLIRunner.run(["keychain", "find-generic-password", "-s", "mail", "-a", "bob"] + common).status == 44)
    }

    /// One error prefix: a mistake found by the argument parser reads like any other error.
    @Test func parserErrorsHaveTheCommandsPrefix() throws {
        let unknown = try CLIRunner.run(["hash", "--no-such-option"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("securefoundation: error: "), "\(unknown.stderr)")
        #expect(!unknown.stderr.contains("Error: "), "\(unknown.stderr)")
        let missing = try CLIRunner.run(["vault", "unlock", "--passcode-file"])
        #expect(missing.status == 64 && missing.stderr.hasPrefix("securefoundation: error: "), "\(missing.stderr)")
    }

    /// A modified sealed file: key mode tells tampering (exit 2); a header whose KDF parameters
    /// or algorithm were changed is damaged (exit 2, before any key derivation); passphrase mode
    /// cannot tell a wrong passphrase from a modified file (both fail the tag): exit 3, and the
    /// message says both.
    @Test func aModifiedSealedFileIsDamaged() throws {
        let scratch = try ScratchDirectory()
        let key = try scratch.file("key", Array(repeating: 7, count: 32))
        let pass = try scratch.file("pass", "correct horse\n")
        let keySealed = try CLIRunner.run(["seal", "--key-file", key], stdin: Array("hello".utf8)).stdout
        let passSealed = try CLIRunner.run(["seal", "--passphrase-file", pass], stdin: Array("hello".utf8)).stdout
        #expect(keySealed.count > 30 && passSealed.count > 40)

        var flipped = keySealed
        flipped[flipped.count - 3] ^= 1
        let keyTampered = try CLIRunner.run(["open", "--key-file", key, try scratch.file("k.sealed", flipped)])
        #expect(keyTampered.status == 2, "\(keyTampered.stderr)")

        // Passphrase mode: offset 7 is the KDF id (scrypt), 8 its logN.
        var heavier = passSealed
        heavier[8] = 40
        let tooExpensive = try CLIRunner.run(["open", "--passphrase-file", pass, try scratch.file("h.sealed", heavier)])
        #expect(tooExpensive.status == 2, "\(tooExpensive.stderr)")
        var lighter = passSealed
        lighter[8] = 4
        #expect(try CLIRunner.run(["open", "--passphrase-file", pass, try scratch.file("l.sealed", lighter)]).status == 2)
        var algorithm = passSealed
        algorithm[5] = 9
        #expect(try CLIRunner.run(["open", "--passphrase-file", pass, try scratch.file("a.sealed", algorithm)]).status == 2)

        var body = passSealed
        body[body.count - 3] ^= 1
        let passTampered = try CLIRunner.run(["open", "--passphrase-file", pass, try scratch.file("p.sealed", body)])
        #expect(passTampered.status == 3 && passTampered.stderr.contains("the passphrase is wrong, or the data or its context was modified"),
                "\(passTampered.stderr)")
    }
}
