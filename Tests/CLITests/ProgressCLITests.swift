import Foundation
import TestSupport
import Testing

/// Progress on standard error (docs/CLI.md, "Progress"): drawn and cleared on a terminal (a
/// pseudo-terminal from util-linux `script`), never written to a pipe.
@Suite("progress on a terminal",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"),
                "util-linux script is not installed; the pseudo-terminal tests are skipped"))
struct ProgressCLITests {
    /// The start of a progress line, and the sequence that clears it.
    static let clearLine = "\r\u{1B}[2K"

    final class Setup {
        let scratch: ScratchDirectory
        let input: String
        init() throws {
            scratch = try ScratchDirectory()
            input = try scratch.file("input.bin", [UInt8](repeating: 0x5A, count: 3 << 20))
            pin = try scratch.file("pin", Array("progress-pin-1357\n".utf8))
            let created = try CLIRunner.run(["vault", "init", "--passcode-file", pin] + home, environment: environment)
            #expect(created.status == 0, "\(created.stderr)")
        }
        let pin: String
        /// The data directory and device key, and the passcode (the first write makes the key pairs).
        var home: [String] { ["--home", scratch.path + "/home", "--device-key", scratch.path + "/dk"] }
        var unlocked: [String] { home + ["--passcode-file", pin] }
        /// Draw at once: the work of a test is shorter than the usual one-second wait.
        let environment = ["SECUREFOUNDATION_PROGRESS_DELAY": "0", "SECUREFOUNDATION_AGENT": "off"]

        /// Runs `securefoundation arguments` with standard error (and input) on a pseudo-terminal
        /// and standard output into `stdout`; returns the terminal's transcript and the status.
        func onTerminal(_ arguments: [String], stdout: String) throws -> (transcript: String, status: Int32) {
            let binary = try BuiltProducts.commandLine
            let command = ([binary] + arguments).map { "'\($0)'" }.joined(separator: " ") + " > '\(stdout)'"
            let result = try ChildProcess.run("/usr/bin/script", ["-qec", command, "/dev/null"],
                                              environment: environment, timeout: .seconds(300))
            return (result.text, result.status)
        }
    }

    @Test func protectWriteAndReadDrawAndClearTheLineOnATerminal() throws {
        let setup = try Setup()
        let written = try setup.onTerminal(["protect", "write", "--class", "none", "-o", setup.scratch.path + "/out.sf", setup.input] + setup.unlocked,
                                           stdout: setup.scratch.path + "/write.out")
        #expect(written.status == 0, "\(written.transcript)")
        #expect(written.transcript.contains(Self.clearLine + "protect write… "), "\(written.transcript.debugDescription)")
        #expect(written.transcript.contains("3.0 MiB"), "\(written.transcript.debugDescription)")
        // The line is cleared at the end: nothing follows the last clearing sequence.
        let afterWrite = written.transcript.components(separatedBy: Self.clearLine).last ?? "?"
        #expect(afterWrite.isEmpty, "\(written.transcript.debugDescription)")

        let read = try setup.onTerminal(["protect", "read", "-o", setup.scratch.path + "/back.bin", setup.scratch.path + "/out.sf"] + setup.home,
                                        stdout: setup.scratch.path + "/read.out")
        #expect(read.status == 0, "\(read.transcript)")
        #expect(read.transcript.contains(Self.clearLine + "protect read… "))
        #expect((read.transcript.components(separatedBy: Self.clearLine).last ?? "?").isEmpty)
        #expect(try Data(contentsOf: URL(fileURLWithPath: setup.scratch.path + "/back.bin")) == Data(repeating: 0x5A, count: 3 << 20))
    }

    /// One style everywhere: `encrypt`, `decrypt` and `hash` draw the same line as `protect`
    /// (age's bar of earlier versions is gone).
    @Test func ageCommandsAndHashDrawTheSameLine() throws {
        let setup = try Setup()
        let key = setup.scratch.path + "/key.txt"
        #expect(try CLIRunner.run(["keygen", "-o", key]).status == 0)
        let recipient = try #require(try CLIRunner.run(["keygen", "-y", key]).text.split(separator: "\n").first.map(String.init))
        let encrypted = try setup.onTerminal(["encrypt", "-r", recipient, "-o", setup.scratch.path + "/out.age", setup.input],
                                             stdout: setup.scratch.path + "/enc.out")
        #expect(encrypted.status == 0, "\(encrypted.transcript)")
        #expect(encrypted.transcript.contains(Self.clearLine + "encrypt… "), "\(encrypted.transcript.debugDescription)")
        #expect(encrypted.transcript.contains("/3.0 MiB"), "\(encrypted.transcript.debugDescription)")
        #expect(!encrypted.transcript.contains("[#"), "\(encrypted.transcript.debugDescription)")
        #expect((encrypted.transcript.components(separatedBy: Self.clearLine).last ?? "?").isEmpty)
        let decrypted = try setup.onTerminal(["decrypt", "-i", key, "-o", setup.scratch.path + "/back.bin", setup.scratch.path + "/out.age"],
                                             stdout: setup.scratch.path + "/dec.out")
        #expect(decrypted.status == 0, "\(decrypted.transcript)")
        #expect(decrypted.transcript.contains(Self.clearLine + "decrypt… "), "\(decrypted.transcript.debugDescription)")
        let hashed = try setup.onTerminal(["hash", setup.input], stdout: setup.scratch.path + "/hash.out")
        #expect(hashed.status == 0, "\(hashed.transcript)")
        #expect(hashed.transcript.contains(Self.clearLine + "hash \(setup.input)… "), "\(hashed.transcript.debugDescription)")
        #expect(hashed.transcript.contains("/3.0 MiB"), "\(hashed.transcript.debugDescription)")
        let line = try String(contentsOfFile: setup.scratch.path + "/hash.out", encoding: .utf8)
        #expect(line.hasSuffix("  \(setup.input)\n"), "\(line)")
    }

    @Test func offOnATerminalWhenAsked() throws {
        let setup = try Setup()
        let binary = try BuiltProducts.commandLine
        let command = ([binary, "protect", "write", "--class", "none", "-o", setup.scratch.path + "/out.sf", setup.input] + setup.unlocked)
            .map { "'\($0)'" }.joined(separator: " ")
        let result = try ChildProcess.run("/usr/bin/script", ["-qec", command, "/dev/null"],
                                          environment: setup.environment.merging(["SECUREFOUNDATION_PROGRESS": "off"]) { $1 },
                                          timeout: .seconds(300))
        #expect(result.status == 0)
        #expect(!result.text.contains("protect write…"))
    }

    @Test func nothingOnAPipe() throws {
        let setup = try Setup()
        let written = try CLIRunner.run(["protect", "write", "--class", "none", "-o", setup.scratch.path + "/out.sf", setup.input] + setup.unlocked,
                                        environment: setup.environment)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(written.stderr.isEmpty)
        let shredded = try CLIRunner.run(["shred", "-u", setup.input], environment: setup.environment)
        #expect(shredded.status == 0, "\(shredded.stderr)")
        #expect(shredded.stderr.isEmpty)
        #expect(shredded.stdout.isEmpty)
    }

    @Test func shredOnATerminal() throws {
        let setup = try Setup()
        let shredded = try setup.onTerminal(["shred", "-u", setup.input], stdout: setup.scratch.path + "/shred.out")
        #expect(shredded.status == 0, "\(shredded.transcript)")
        #expect(shredded.transcript.contains(Self.clearLine + "shred \(setup.input)… "))
        // The amount is known for a regular file: its size times the passes (one here).
        #expect(shredded.transcript.contains("/3.0 MiB"), "\(shredded.transcript.debugDescription)")
        #expect(!FileManager.default.fileExists(atPath: setup.input))
    }
}
