import Foundation
import TestSupport
import Testing

/// The front program (`securefoundation-front`, installed as `securefoundation`; docs/CLI.md,
/// "Installed programs"): a plain `encrypt` or `decrypt` runs in it, every other command line
/// in the full program it starts, with the same bytes, messages and exit statuses either way.
@Suite("front program")
struct FrontProgramTests {
    /// The built front program (`$SECUREFOUNDATION_FRONT_BIN` when set, for example the one
    /// `scripts/build-release` installs; the full program must then be where it looks).
    static var front: String {
        get throws { try BuiltProducts.executable("securefoundation-front", environment: "SECUREFOUNDATION_FRONT_BIN") }
    }

    /// The built full program (`$SECUREFOUNDATION_FULL_BIN` when set, for example the one
    /// `scripts/build-release` installs in libexec): not `$SECUREFOUNDATION_BIN`, which may name
    /// a front program when the whole command-line suite runs through one.
    static var full: String {
        get throws { try BuiltProducts.executable("securefoundation", environment: "SECUREFOUNDATION_FULL_BIN") }
    }

    static func run(_ program: String, _ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:],
                    directory: String? = nil) throws -> CLIRunner.Result {
        CLIRunner.Result(try ChildProcess.run(program, arguments, stdin: .bytes(stdin), environment: environment, directory: directory,
                                              timeout: .seconds(120)))
    }

    static func runFull(_ arguments: [String]) throws -> CLIRunner.Result { try run(try full, arguments) }

    static func bytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 5) } }

    /// `directory/bin/securefoundation`: a copy of the front program, alone or with the full
    /// program at `directory/libexec/securefoundation/securefoundation` (`full`: what to put
    /// there, copied; nil for nothing).
    static func install(in directory: String, full: String?) throws -> String {
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
        let installed = directory + "/bin/securefoundation"
        try manager.copyItem(atPath: try front, toPath: installed)
        if let full {
            try manager.createDirectory(atPath: directory + "/libexec/securefoundation", withIntermediateDirectories: true)
            try manager.copyItem(atPath: full, toPath: directory + "/libexec/securefoundation/securefoundation")
        }
        return installed
    }

    @Test("encrypt and decrypt run in the front program alone, interoperable with age; anything else needs the full program")
    func frontAlone() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-front")
        defer { withExtendedLifetime(temporary) {} }
        let dir = URL(fileURLWithPath: temporary.path).resolvingSymlinksInPath().path
        let key = try Self.runFull(["keygen", "-o", dir + "/key.txt"])
        #expect(key.status == 0, "\(key.stderr)")
        let recipient = String(key.stderr.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Public key: ".count))
        // No full program anywhere near this copy: what works, works in the front program itself.
        let alone = try Self.install(in: dir + "/alone", full: nil)
        let plaintext = Self.bytes(200_000)
        let encrypted = try Self.run(alone, ["encrypt", "-r", recipient], stdin: plaintext)
        #expect(encrypted.status == 0 && encrypted.stderr.isEmpty, "\(encrypted.stderr)")
        #expect(encrypted.stdout.starts(with: Array("age-encryption.org/v1\n".utf8)))
        let decrypted = try Self.run(alone, ["decrypt", "-i", dir + "/key.txt"], stdin: encrypted.stdout)
        #expect(decrypted.status == 0 && decrypted.stdout == plaintext, "\(decrypted.stderr)")
        if let age = CLIRunner.which("age") {
            let theirs = try CLIRunner.runTool(age, ["-d", "-i", dir + "/key.txt"], stdin: encrypted.stdout)
            #expect(theirs.status == 0 && theirs.stdout == plaintext, "\(theirs.stderr)")
            let fromAge = try CLIRunner.runTool(age, ["-r", recipient, "-a"], stdin: plaintext)
            let ours = try Self.run(alone, ["decrypt", "-i", dir + "/key.txt", "-o", dir + "/from-age"], stdin: fromAge.stdout)
            #expect(ours.status == 0, "\(ours.stderr)")
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: dir + "/from-age"))) == plaintext)
        }
        // Errors of the work itself are reported by the front program, as the full one reports them.
        let missing = try Self.run(alone, ["decrypt", "-i", dir + "/none.txt"], stdin: encrypted.stdout)
        #expect(missing.status == 74)
        #expect(missing.stderr == "securefoundation: error: cannot open \(dir)/none.txt: No such file or directory\n")
        // Everything else is the full program's; without it, one line says what is missing.
        for line in [["--version"], ["encrypt"], ["encrypt", "--help"], ["keygen"], ["decrypt", "-i", "a", "-i", "-", "--passphrase-file", "-", "x"]] {
            let result = try Self.run(alone, line)
            #expect(result.status == 1, "\(line)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr == "securefoundation: error: this is the front program, which runs encrypt and decrypt only, and the full program is not installed beside it: looked for \(dir)/alone/libexec/securefoundation/securefoundation and \(dir)/alone/bin/securefoundation (scripts/build-release --install DIR installs both)\n", "\(line)")
        }
        // A `securefoundation` in the working directory and on the PATH (one who controls either
        // chooses it) is never taken for the full program: the same refusal, and the decoy never ran.
        let decoy = dir + "/decoy"
        try FileManager.default.createDirectory(atPath: decoy, withIntermediateDirectories: true)
        try Data("#!/bin/sh\ntouch \(decoy)/ran\n".utf8).write(to: URL(fileURLWithPath: decoy + "/securefoundation"))
        #expect(chmod(decoy + "/securefoundation", 0o755) == 0)
        let lured = try Self.run(alone, ["--version"], environment: ["PATH": decoy + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")],
                                 directory: decoy)
        #expect(lured.status == 1 && lured.stderr.contains("the full program is not installed beside it"), "\(lured.stderr)")
        #expect(access(decoy + "/ran", F_OK) != 0)
    }

    @Test("the same command lines give the same output, messages and exit status through the front program as in the full program")
    func sameAsTheFullProgram() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-front")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let full = try Self.full
        let key = try Self.runFull(["keygen", "-o", dir + "/key.txt"])
        let other = try Self.runFull(["keygen", "-o", dir + "/other.txt"])
        #expect(key.status == 0 && other.status == 0)
        let recipient = String(key.stderr.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Public key: ".count))
        let plaintext = Self.bytes(70_000)
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/plain"))
        let sealed = try Self.runFull(["encrypt", "-r", recipient, "-o", dir + "/sealed.age", dir + "/plain"])
        #expect(sealed.status == 0, "\(sealed.stderr)")
        var damaged = try Array(Data(contentsOf: URL(fileURLWithPath: dir + "/sealed.age")))
        damaged[damaged.count - 100] ^= 1
        try Data(damaged).write(to: URL(fileURLWithPath: dir + "/damaged.age"))
        try Data("pass\n".utf8).write(to: URL(fileURLWithPath: dir + "/pass.txt"))
        let lines: [(arguments: [String], stdin: [UInt8])] = [
            // Run by the front program.
            (["decrypt", "-i", dir + "/key.txt", dir + "/sealed.age"], []),
            (["decrypt", "-i", dir + "/other.txt", dir + "/sealed.age"], []),
            (["decrypt", "-i", dir + "/key.txt", dir + "/damaged.age"], []),
            (["decrypt", "-i", dir + "/key.txt", "-o", dir + "/link", dir + "/sealed.age"], []),
            (["decrypt", "-i", dir + "/key.txt", dir + "/missing.age"], []),
            (["encrypt", "-r", "age1notakey", dir + "/plain"], []),
            (["encrypt", "-r", recipient, "-o", dir + "/no/such/dir/x.age", dir + "/plain"], []),
            (["encrypt", "-R", dir + "/missing.txt", dir + "/plain"], []),
            (["decrypt", "--passphrase-file", dir + "/pass.txt", dir + "/sealed.age"], []),
            // Handed to the full program: usage errors, help, other commands, the version.
            (["encrypt"], []),
            (["encrypt", "-p", "-r", recipient, dir + "/plain"], []),
            (["decrypt", "--output=" + dir + "/x", dir + "/sealed.age"], []),
            (["decrypt", "--help"], []),
            (["keygen", "-y", dir + "/key.txt"], []),
            (["keygen", "-y"], Array(try String(contentsOfFile: dir + "/key.txt", encoding: .utf8).utf8)),
            (["hash", "-a", "sha256", dir + "/plain"], []),
            (["--version"], []),
            (["no-such-command"], []),
            ([], []),
        ]
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/elsewhere")
        for (arguments, stdin) in lines {
            let ours = try Self.run(try Self.front, arguments, stdin: stdin)
            let theirs = try Self.run(full, arguments, stdin: stdin)
            #expect(ours.status == theirs.status, "\(arguments): \(ours.stderr)")
            #expect(ours.stdout == theirs.stdout, "\(arguments)")
            #expect(ours.stderr == theirs.stderr, "\(arguments)")
        }
        // The front program's own output of an encryption opens as the full program's does.
        let encrypted = try Self.run(try Self.front, ["encrypt", "-r", recipient, "-a", dir + "/plain"])
        #expect(encrypted.status == 0 && encrypted.text.hasPrefix("-----BEGIN AGE ENCRYPTED FILE-----\n"))
        let opened = try Self.run(full, ["decrypt", "-i", dir + "/key.txt"], stdin: encrypted.stdout)
        #expect(opened.status == 0 && opened.stdout == plaintext)
    }

    @Test("installed: bin/securefoundation finds libexec/securefoundation/securefoundation, with the program name and environment it was given")
    func installedLayout() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-front")
        defer { withExtendedLifetime(temporary) {} }
        let dir = URL(fileURLWithPath: temporary.path).resolvingSymlinksInPath().path
        let full = try Self.full
        let installed = try Self.install(in: dir, full: full)
        let version = try Self.run(installed, ["--version"])
        let expected = try Self.run(full, ["--version"])
        #expect(version.status == 0 && version.stdout == expected.stdout && !version.stdout.isEmpty, "\(version.stderr)")
        // Reached through a symbolic link elsewhere: found relative to the file itself.
        try FileManager.default.createDirectory(atPath: dir + "/elsewhere", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir + "/elsewhere/securefoundation", withDestinationPath: installed)
        let viaLink = try Self.run(dir + "/elsewhere/securefoundation", ["random", "-n", "16", "--hex"])
        #expect(viaLink.status == 0 && viaLink.text.count == 33, "\(viaLink.stderr)")
        // Started as the age plugin, the front program is the plugin itself (AgentWire), and
        // answers exactly as the full program started under that name does.
        try FileManager.default.createSymbolicLink(atPath: dir + "/elsewhere/age-plugin-securefoundation", withDestinationPath: installed)
        try FileManager.default.createSymbolicLink(atPath: dir + "/age-plugin-securefoundation", withDestinationPath: full)
        let plugin = try Self.run(dir + "/elsewhere/age-plugin-securefoundation", ["--age-plugin=no-such-state-machine"])
        let direct = try Self.run(dir + "/age-plugin-securefoundation", ["--age-plugin=no-such-state-machine"])
        #expect(plugin.status == direct.status && plugin.stdout == direct.stdout && plugin.stderr == direct.stderr)
        #expect(plugin.status != 0 && !plugin.stderr.contains("front program"), "\(plugin.stderr)")
        // It needs no full program: a front program alone, with the plugin link, still answers.
        let alone = dir + "/alone"
        try FileManager.default.createDirectory(atPath: alone, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: installed, toPath: alone + "/securefoundation")
        try FileManager.default.createSymbolicLink(atPath: alone + "/age-plugin-securefoundation", withDestinationPath: alone + "/securefoundation")
        let lonePlugin = try Self.run(alone + "/age-plugin-securefoundation", ["--age-plugin=no-such-state-machine"])
        #expect(lonePlugin.status == direct.status && lonePlugin.stderr == direct.stderr, "\(lonePlugin.stderr)")
        // An upgrade: the link the one program made (to bin/securefoundation, now the front
        // program) still works and is kept.
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation", withDestinationPath: installed)
        let kept = try Self.run(installed, ["agent", "install-plugin"])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.text == "\(dir)/bin/age-plugin-securefoundation -> \(installed)\n")
        let viaOldLink = try Self.run(dir + "/bin/age-plugin-securefoundation", ["--age-plugin=no-such-state-machine"])
        #expect(viaOldLink.status == direct.status && viaOldLink.stderr == direct.stderr)
        unlink(dir + "/bin/age-plugin-securefoundation")
        // `agent install-plugin` links the front program (which runs the plugin without starting
        // the full one) into the directory of the command the user ran (on the PATH).
        let link = try Self.run(installed, ["agent", "install-plugin"])
        #expect(link.status == 0, "\(link.stderr)")
        #expect(link.text == "\(dir)/bin/age-plugin-securefoundation -> \(installed)\n")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation") == installed)
        // A link to the full program (made before the front program ran the plugin) is replaced
        // by one to the front program; a link to anything else is refused and left.
        unlink(dir + "/bin/age-plugin-securefoundation")
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation",
                                                   withDestinationPath: dir + "/libexec/securefoundation/securefoundation")
        let replaced = try Self.run(installed, ["agent", "install-plugin"])
        #expect(replaced.status == 0 && replaced.text == "\(dir)/bin/age-plugin-securefoundation -> \(installed)\n", "\(replaced.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation") == installed)
        unlink(dir + "/bin/age-plugin-securefoundation")
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation", withDestinationPath: "/bin/true")
        let other = try Self.run(installed, ["agent", "install-plugin"])
        #expect(other.status != 0 && other.stderr.contains("is a link to /bin/true"), "\(other.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation") == "/bin/true")
        // The swap stages at one name: a stale staged link is replaced, anything else there refused.
        unlink(dir + "/bin/age-plugin-securefoundation")
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation",
                                                   withDestinationPath: dir + "/libexec/securefoundation/securefoundation")
        try Data("not a link".utf8).write(to: URL(fileURLWithPath: dir + "/bin/age-plugin-securefoundation.new"))
        let blocked = try Self.run(installed, ["agent", "install-plugin"])
        #expect(blocked.status != 0 && blocked.stderr.contains("age-plugin-securefoundation.new exists and is not a symbolic link"), "\(blocked.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation")
                == dir + "/libexec/securefoundation/securefoundation")
        unlink(dir + "/bin/age-plugin-securefoundation.new")
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation.new", withDestinationPath: "/nowhere")
        let swapped = try Self.run(installed, ["agent", "install-plugin"])
        #expect(swapped.status == 0 && swapped.text == "\(dir)/bin/age-plugin-securefoundation -> \(installed)\n", "\(swapped.stderr)")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/bin/age-plugin-securefoundation.new")) == nil)
        // A hand-off mark naming another file beside it (not a front program's name) is ignored:
        // the link names the full program that ran, in its own directory.
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: dir + "/bin/other-tool"))
        unlink(dir + "/libexec/securefoundation/age-plugin-securefoundation")
        let misnamed = try Self.run(dir + "/libexec/securefoundation/securefoundation", ["agent", "install-plugin"],
                                    environment: ["SECUREFOUNDATION_FRONT_HANDOFF": dir + "/bin/other-tool"])
        #expect(misnamed.status == 0 && misnamed.text == "\(dir)/libexec/securefoundation/age-plugin-securefoundation -> \(dir)/libexec/securefoundation/securefoundation\n",
                "\(misnamed.stderr)")
        unlink(dir + "/libexec/securefoundation/age-plugin-securefoundation")
        // A planted mark, given to the full program directly, names no front program of it: ignored.
        let fullInstalled = dir + "/libexec/securefoundation/securefoundation"
        try FileManager.default.createDirectory(atPath: dir + "/planted/bin", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir + "/planted/bin/securefoundation"))
        unlink(dir + "/bin/age-plugin-securefoundation")
        let planted = try Self.run(fullInstalled, ["agent", "install-plugin"],
                                   environment: ["SECUREFOUNDATION_FRONT_HANDOFF": dir + "/planted/bin/securefoundation"])
        #expect(planted.status == 0, "\(planted.stderr)")
        #expect(planted.text == "\(dir)/libexec/securefoundation/age-plugin-securefoundation -> \(fullInstalled)\n")
        #expect(access(dir + "/planted/bin/age-plugin-securefoundation", F_OK) != 0)
        // The mark of a hand-off: set, the front program does not hand off again.
        let marked = try Self.run(installed, ["--version"], environment: ["SECUREFOUNDATION_FRONT_HANDOFF": "1"])
        #expect(marked.status == 1 && marked.stderr.contains("was started with SECUREFOUNDATION_FRONT_HANDOFF set"), "\(marked.stderr)")
    }

    @Test("a front program installed where the full one belongs stops with an error instead of starting itself again")
    func noLoop() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-front")
        defer { withExtendedLifetime(temporary) {} }
        let dir = URL(fileURLWithPath: temporary.path).resolvingSymlinksInPath().path
        let installed = try Self.install(in: dir, full: try Self.front)
        let result = try Self.run(installed, ["--version"])
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == "securefoundation: error: \(dir)/libexec/securefoundation/securefoundation was started with SECUREFOUNDATION_FRONT_HANDOFF set: by another front program, so this front program is installed where the full program belongs (install the full program there: scripts/build-release --install), or the variable was left in the environment (unset it)\n")
        // A plain encryption still works: it never needs the full program.
        let key = try Self.runFull(["keygen"])
        let recipient = String(key.text.split(separator: "\n")[1].dropFirst("# public key: ".count))
        let encrypted = try Self.run(installed, ["encrypt", "-r", recipient], stdin: Self.bytes(10))
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
    }
}
