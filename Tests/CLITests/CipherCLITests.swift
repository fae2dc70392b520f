import Foundation
import Testing
import Cipher

@Suite struct CipherCLITests {
    @Test func hashMatchesSha256sumFormatAndCheck() throws {
        let scratch = try ScratchDirectory()
        let a = try scratch.file("a.txt", Array("abc".utf8))
        let b = try scratch.file("b.bin", try SecureRandom.bytes(100_000))
        let result = try CLIRunner.run(["hash", a, b])
        #expect(result.status == 0)
        #expect(result.text.hasPrefix("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  \(a)\n"))
        if let sha256sum = CLIRunner.which("sha256sum") {
            let reference = try CLIRunner.runTool(sha256sum, [a, b])
            #expect(result.stdout == reference.stdout)
            let sums = try scratch.file("SUMS", result.stdout)
            let check = try CLIRunner.runTool(sha256sum, ["-c", sums])
            #expect(check.status == 0)
        } else {
            print("sha256sum not installed: skipping the sha256sum -c comparison")
        }
    }

    @Test func hashAlgorithmsAndStdin() throws {
        let stdin = Array("abc".utf8)
        #expect(try CLIRunner.run(["hash"], stdin: stdin).text == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n")
        #expect(try CLIRunner.run(["hash", "-a", "md5", "-"], stdin: stdin).text == "900150983cd24fb0d6963f7d28e17f72  -\n")
        #expect(try CLIRunner.run(["hash", "-a", "sha384"], stdin: stdin).text.hasPrefix("cb00753f45a35e8b"))
        #expect(try CLIRunner.run(["hash", "-a", "sha512"], stdin: stdin).text.hasPrefix("ddaf35a193617aba"))
    }

    @Test func hashMissingFileFailsButHashesTheRest() throws {
        let scratch = try ScratchDirectory()
        let a = try scratch.file("a", Array("abc".utf8))
        let result = try CLIRunner.run(["hash", scratch.path + "/missing", a])
        #expect(result.status == 1)
        #expect(result.stderr.contains("missing"))
        #expect(result.text == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  \(a)\n")
    }

    @Test func hashEscapesNamesAsSha256sumDoes() throws {
        let scratch = try ScratchDirectory()
        let names = ["x\ny", "a\\b", "c\nd\\e", "plain"]
        let paths = try names.enumerated().map { try scratch.file($0.element, [UInt8]("\($0.offset)".utf8)) }
        let result = try CLIRunner.run(["hash"] + paths)
        #expect(result.status == 0)
        let lines = result.text.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("\\") && lines[0].hasSuffix("  " + scratch.path.replacingOccurrences(of: "\\", with: "\\\\") + "/x\\ny"))
        #expect(lines[1].hasSuffix("/a\\\\b") && lines[1].hasPrefix("\\"))
        #expect(!lines[3].hasPrefix("\\"))
        if let sha256sum = CLIRunner.which("sha256sum") {
            #expect(try CLIRunner.runTool(sha256sum, paths).stdout == result.stdout)
            let sums = try scratch.file("SUMS", result.stdout)
            #expect(try CLIRunner.runTool(sha256sum, ["-c", sums]).status == 0)
        }
    }

    @Test func hashCheckReportsLikeSha256sum() throws {
        let scratch = try ScratchDirectory()
        let good = try scratch.file("good", Array("abc".utf8))
        let odd = try scratch.file("odd\\name", Array("def".utf8))
        let newline = try scratch.file("new\nline", Array("ghi".utf8))
        let changed = try scratch.file("changed", Array("old".utf8))
        let listing = try CLIRunner.run(["hash", good, odd, newline, changed]).stdout
        // sha256sum's binary marker and a missing file are read as sha256sum reads them.
        let missingLine = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad *\(scratch.path)/missing\n"
        let sums = try scratch.file("SUMS", listing + Array((missingLine + "not a digest line\n").utf8))
        try Data("new".utf8).write(to: URL(fileURLWithPath: changed))

        let result = try CLIRunner.run(["hash", "--check", sums])
        #expect(result.status == 1)
        #expect(result.text == """
            \(good): OK
            \(odd): OK
            \\\(newline.replacingOccurrences(of: "\n", with: "\\n")): OK
            \(changed): FAILED
            \(scratch.path)/missing: FAILED open or read

            """)
        #expect(result.stderr.contains("WARNING: 1 line is improperly formatted"))
        #expect(result.stderr.contains("WARNING: 1 listed file could not be read"))
        #expect(result.stderr.contains("WARNING: 1 computed checksum did NOT match"))
        if let sha256sum = CLIRunner.which("sha256sum") {
            let reference = try CLIRunner.runTool(sha256sum, ["-c", sums])
            #expect(reference.stdout == result.stdout)
            #expect(reference.status == result.status)
        }

        // All good: exit 0; --quiet prints nothing for matches; --status prints nothing at all.
        let clean = try scratch.file("CLEAN", try CLIRunner.run(["hash", good, odd]).stdout)
        #expect(try CLIRunner.run(["hash", "-c", clean]).status == 0)
        #expect(try CLIRunner.run(["hash", "-c", "--quiet", clean]).stdout.isEmpty)
        let silent = try CLIRunner.run(["hash", "-c", "--status", sums])
        #expect(silent.status == 1 && silent.stdout.isEmpty && silent.stderr.isEmpty)
        // Another algorithm's digests are not properly formatted lines for sha512.
        let wrongAlgorithm = try CLIRunner.run(["hash", "-a", "sha512", "-c", clean])
        #expect(wrongAlgorithm.status == 1)
        #expect(wrongAlgorithm.stderr.contains("no properly formatted sha512 checksum lines found"))
        // --status without --check is a usage error.
        #expect(try CLIRunner.run(["hash", "--status", good]).status == 64)
    }

    @Test func randomWritesExactCounts() throws {
        #expect(try CLIRunner.run(["random", "-n", "1000"]).stdout.count == 1000)
        #expect(try CLIRunner.run(["random", "-n", "0"]).stdout.count == 0)
        let hex = try CLIRunner.run(["random", "-n", "16", "--hex"]).text
        #expect(hex.count == 33 && hex.hasSuffix("\n"))
        let b64 = try CLIRunner.run(["random", "-n", "3", "--base64"]).text
        #expect(b64.count == 5)
        #expect(try CLIRunner.run(["random", "-n", "-1"]).status == 64)
        #expect(try CLIRunner.run(["random", "--hex", "--base64"]).status == 64)
    }

    @Test func sealAndOpenWithAKeyFile() throws {
        let scratch = try ScratchDirectory()
        let key = try scratch.file("key", try SecureRandom.bytes(32))
        let hexKey = try scratch.file("key.hex", Array((Encoding.hex(try SecureRandom.bytes(32)) + "\n").utf8))
        let plaintext = try SecureRandom.bytes(70_000)
        for keyFile in [key, hexKey] {
            let sealed = try CLIRunner.run(["seal", "--key-file", keyFile, "--context", "c1"], stdin: plaintext)
            #expect(sealed.status == 0)
            #expect(Array(sealed.stdout.prefix(4)) == Array("SFSD".utf8))
            let opened = try CLIRunner.run(["open", "--key-file", keyFile, "--context", "c1"], stdin: sealed.stdout)
            #expect(opened.status == 0)
            #expect(opened.stdout == plaintext)
            let wrongContext = try CLIRunner.run(["open", "--key-file", keyFile, "--context", "c2"], stdin: sealed.stdout)
            #expect(wrongContext.status == 2)
            #expect(wrongContext.stdout.isEmpty)
            #expect(wrongContext.stderr.contains("authentication failed"))
        }
    }

    @Test func sealAndOpenWithAPassphraseFileToOutputs() throws {
        let scratch = try ScratchDirectory()
        let pass = try scratch.file("pass", Array("s3cret passphrase\n".utf8))
        let input = try scratch.file("in", Array("hello world".utf8))
        let sealedPath = scratch.path + "/in.sealed"
        let seal = try CLIRunner.run(["seal", "--passphrase-file", pass, "--policy", "interactive",
                                      "--algorithm", "chacha20-poly1305", "-o", sealedPath, input])
        #expect(seal.status == 0, "\(seal.stderr)")
        var info = stat()
        #expect(stat(sealedPath, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let outPath = scratch.path + "/out"
        #expect(try CLIRunner.run(["open", "--passphrase-file", pass, "-o", outPath, sealedPath]).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: outPath)) == Data("hello world".utf8))
        let wrong = try scratch.file("wrong", Array("nope".utf8))
        let failed = try CLIRunner.run(["open", "--passphrase-file", wrong, "-o", scratch.path + "/never", sealedPath])
        #expect(failed.status == 3)   // wrong passphrase (docs/CLI.md)
        #expect(failed.stderr.contains("wrong key"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/never"))
    }

    @Test func relativeOutputPathsInTheWorkingDirectory() throws {
        let scratch = try ScratchDirectory()
        _ = try scratch.file("k", try SecureRandom.bytes(32))
        let sealed = try CLIRunner.run(["seal", "--key-file", "k", "-o", "out"], stdin: [1, 2, 3], directory: scratch.path)
        #expect(sealed.status == 0, "\(sealed.stderr)")
        let opened = try CLIRunner.run(["open", "--key-file", "k", "out"], directory: scratch.path)
        #expect(opened.stdout == [1, 2, 3])
    }

    @Test func badInputsExitNonZeroWithoutCrashing() throws {
        let scratch = try ScratchDirectory()
        let key = try scratch.file("key", try SecureRandom.bytes(32))
        for junk in [[], Array("SFSD".utf8), Array("SFSD\u{1}\u{1}\u{1}\u{8}".utf8), try SecureRandom.bytes(500)] {
            let result = try CLIRunner.run(["open", "--key-file", key], stdin: junk)
            #expect(result.status == 2)   // damaged (docs/CLI.md)
            #expect(result.stderr.hasPrefix("securefoundation: error:"))
        }
        let shortKey = try scratch.file("short", [1, 2, 3])
        #expect(try CLIRunner.run(["seal", "--key-file", shortKey], stdin: [1]).status != 0)
        #expect(try CLIRunner.run(["seal", "--key-file", key, "--passphrase-file", key]).status == 64)
        // No terminal and no passphrase file: a clear error, not a hang.
        // setsid detaches from any controlling terminal, as in CI.
        if let setsid = CLIRunner.which("setsid") {
            let noTTY = try CLIRunner.runTool(setsid, ["-w", CLIRunner.executable, "open"], stdin: [1, 2, 3])
            #expect(noTTY.status == 64)
            #expect(noTTY.stderr.contains("no terminal to read the passphrase from; give it with --passphrase-file FILE"), "\(noTTY.stderr)")
        }
    }

    @Test func everyCommandHasHelpWithAnExample() throws {
        for command in ["hash", "random", "seal", "open"] {
            let help = try CLIRunner.run([command, "--help"])
            #expect(help.status == 0)
            #expect(help.text.contains("securefoundation \(command)") || help.text.contains("Example"))
        }
    }
}
