import Foundation
import TestSupport
import Testing

/// `age-plugin-securefoundation` with the real `age`: protected files open through the unlock
/// agent while it is unlocked, and the class rules hold (locked → refused with the plugin's
/// message, unlocked → opens, after `agent lock` → refused again).
@Suite(.serialized) struct AgePluginCLITests {
    final class Setup: @unchecked Sendable {
        private let directory: TemporaryDirectory
        var root: String { directory.path }
        let socket: String
        let passcodeFile: String
        let bin: String
        let environment: [String: String]

        init() throws {
            directory = try TemporaryDirectory.short(prefix: "sf-ageplug")
            try directory.directory("run")
            try directory.directory("bin")
            let root = directory.path
            socket = root + "/run/agent.sock"
            bin = root + "/bin"
            passcodeFile = root + "/pin.txt"
            try Data("1234-abcd\n".utf8).write(to: URL(fileURLWithPath: passcodeFile))
            environment = ["SECUREFOUNDATION_AGENT_SOCKET": socket, "SECUREFOUNDATION_HOME": root + "/home",
                           "XDG_CONFIG_HOME": root + "/config",
                           "PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        }

        var home: [String] { ["--home", root + "/home", "--device-key", root + "/device.key"] }

        func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments, stdin: stdin, environment: environment)
        }

        func age(_ arguments: [String]) throws -> CLIRunner.Result {
            CLIRunner.Result(try ChildProcess.run(CLIRunner.which("age")!, arguments, environment: environment, timeout: .seconds(120)))
        }

        func cleanup() {
            _ = try? run(["agent", "stop", "--socket", socket])
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    static let hasAge = CLIRunner.which("age") != nil

    /// The same run with the plugin link naming the full program, then the front program (what
    /// `agent install-plugin` links when the front program handed it the command): both run
    /// AgentWire's plugin, with the same messages.
    @Test(.enabled(if: hasAge, "needs age (Debian package age)"), arguments: ["full program", "front program"])
    func realAgeOpensProtectedFilesThroughTheAgent(plugin: String) throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--kdf", "minimum"] + setup.home).status == 0)
        let plain = setup.root + "/plain.txt"
        try Data("meeting notes\n".utf8).write(to: URL(fileURLWithPath: plain))
        for cls in ["complete", "completeUntilFirstUserAuthentication", "none"] {
            let write = try setup.run(["protect", "write", "--class", cls, "-o", setup.root + "/\(cls).age", plain, "--passcode-file", setup.passcodeFile] + setup.home)
            #expect(write.status == 0, "\(write.stderr)")
        }
        // A file written by `age -r CLASS_RECIPIENT` has no class stanza: the agent finds its class.
        let export = try setup.run(["protect", "export-identity", "--class", "complete", "-o", setup.root + "/complete.key",
                                    "--passcode-file", setup.passcodeFile] + setup.home)
        let classRecipient = try #require(export.stderr.split(whereSeparator: { " \n`()".contains($0) }).first { $0.hasPrefix("age1") },
                                          "the class recipient: \(export.stderr)")
        let noStanza = setup.root + "/plain-age.age"
        #expect(try setup.age(["-r", String(classRecipient), "-o", noStanza, plain]).status == 0)

        // The link `age` runs; a second install keeps it; something else in the way is refused.
        let install = try setup.run(["agent", "install-plugin", "--dir", setup.bin])
        #expect(install.status == 0, "\(install.stderr)")
        #expect(try setup.run(["agent", "install-plugin", "--dir", setup.bin]).status == 0)
        let other = setup.root + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: other + "/age-plugin-securefoundation"))
        #expect(try setup.run(["agent", "install-plugin", "--dir", other]).status != 0)
        if plugin == "front program" {
            let link = setup.bin + "/age-plugin-securefoundation"
            unlink(link)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: try FrontProgramTests.front)
        }

        let start = try setup.run(["agent", "start", "--socket", setup.socket] + setup.home)
        #expect(start.status == 0, "\(start.stderr)")
        let complete = setup.root + "/complete.age"
        let afterFirst = setup.root + "/completeUntilFirstUserAuthentication.age"

        // Locked, never unlocked: complete and afterFirstUnlock files refused, with the plugin's message; none opens.
        var result = try setup.age(["-d", "-j", "securefoundation", complete])
        #expect(result.status == 1)
        #expect(result.stderr.contains("securefoundation plugin: the unlock agent at \(setup.socket) is locked, so the vault's complete files stay closed; unlock it with `securefoundation agent unlock`"), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        result = try setup.age(["-d", "-j", "securefoundation", afterFirst])
        #expect(result.status == 1)
        #expect(result.stderr.contains("has not been unlocked since it started"), "\(result.stderr)")
        // The project's own decrypt shows the plugin's reason as age does (it said only that the
        // plugin "exited before the end of the protocol").
        let own = try setup.run(["decrypt", "-j", "securefoundation", complete])
        #expect(own.status == 1 && own.stdout.isEmpty)
        #expect(own.stderr.contains("is locked, so the vault's complete files stay closed; unlock it with `securefoundation agent unlock`"), "\(own.stderr)")
        #expect(!own.stderr.contains("exited before the end of the protocol"), "\(own.stderr)")
        result = try setup.age(["-d", "-j", "securefoundation", setup.root + "/none.age"])
        #expect(result.status == 0 && result.text == "meeting notes\n", "\(result.stderr)")

        // Unlocked: everything opens, with -j and with an identity file naming the class.
        #expect(try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile]).status == 0)
        for path in [complete, afterFirst, noStanza] {
            result = try setup.age(["-d", "-j", "securefoundation", path])
            #expect(result.status == 0 && result.text == "meeting notes\n", "\(path): \(result.stderr)")
        }
        let identity = try setup.run(["agent", "plugin-identity", "--class", "complete"] + ["--home", setup.root + "/home"])
        #expect(identity.status == 0)
        #expect(identity.text.contains("\nAGE-PLUGIN-SECUREFOUNDATION-1"))
        let identityFile = setup.root + "/sf-complete.txt"
        try Data(identity.stdout).write(to: URL(fileURLWithPath: identityFile))
        result = try setup.age(["-d", "-i", identityFile, complete])
        #expect(result.status == 0 && result.text == "meeting notes\n", "\(result.stderr)")
        // That identity is for complete files only: another class's file is no match (with the plugin's note).
        result = try setup.age(["-d", "-i", identityFile, afterFirst])
        #expect(result.status == 1)
        #expect(result.stderr.contains("this identity opens complete files only"), "\(result.stderr)")

        // Locked again: complete refused, afterFirstUnlock still opens (until the agent stops).
        #expect(try setup.run(["agent", "lock", "--socket", setup.socket]).status == 0)
        result = try setup.age(["-d", "-j", "securefoundation", complete])
        #expect(result.status == 1 && result.stderr.contains("is locked, so the vault's complete files stay closed"), "\(result.stderr)")
        result = try setup.age(["-d", "-j", "securefoundation", afterFirst])
        #expect(result.status == 0 && result.text == "meeting notes\n", "\(result.stderr)")

        // A header altered to claim a weaker class does not open: the key is wrapped to complete.
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: complete)))
        let from = Array("sf-protection 1 complete\n".utf8), to = Array("sf-protection 1 none\n".utf8)
        if let range = bytes.firstRange(of: from) { bytes.replaceSubrange(range, with: to) }
        let relabelled = setup.root + "/relabelled.age"
        try Data(bytes).write(to: URL(fileURLWithPath: relabelled))
        result = try setup.age(["-d", "-j", "securefoundation", relabelled])
        #expect(result.status == 1 && result.stdout.isEmpty, "\(result.stderr)")

        // The plugin only decrypts; run by hand without the protocol flag it explains itself (64).
        result = try setup.age(["-e", "-j", "securefoundation", "-o", setup.root + "/x.age", plain])
        #expect(result.status == 1 && result.stderr.contains("only decrypts"), "\(result.stderr)")
        let direct = CLIRunner.Result(try ChildProcess.run(setup.bin + "/age-plugin-securefoundation", [], environment: setup.environment))
        #expect(direct.status == 64 && direct.stderr.contains("--age-plugin=identity-v1"))

        // After the agent stops: refused, saying how to start it.
        #expect(try setup.run(["agent", "stop", "--socket", setup.socket]).status == 0)
        result = try setup.age(["-d", "-j", "securefoundation", afterFirst])
        #expect(result.status == 1 && result.stderr.contains("agent start"), "\(result.stderr)")
    }
}

/// A plugin is looked for in absolute `PATH` entries only: `decrypt -j NAME` in a directory an
/// attacker prepared (`node_modules/.bin/age-plugin-NAME`, with a relative `PATH` entry) never
/// runs it, as age refuses it.
@Suite struct RelativePluginPathCLITests {
    @Test func aPluginInARelativePathEntryIsNotRun() throws {
        let dir = try TemporaryDirectory(prefix: "sf-relative-plugin")
        try FileManager.default.createDirectory(atPath: dir.path + "/work/node_modules/.bin", withIntermediateDirectories: true)
        let marker = dir.path + "/ran"
        let plugin = dir.path + "/work/node_modules/.bin/age-plugin-planted"
        try Data("#!/bin/sh\ntouch \(marker)\nexit 1\n".utf8).write(to: URL(fileURLWithPath: plugin))
        chmod(plugin, 0o755)
        #expect(try CLIRunner.run(["keygen", "-o", dir.path + "/key.txt"]).status == 0)
        let recipient = try #require(try String(contentsOfFile: dir.path + "/key.txt", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("# public key: ") }?.dropFirst("# public key: ".count))
        #expect(try CLIRunner.run(["encrypt", "-r", String(recipient), "-o", dir.path + "/work/in.age"], stdin: Array("x".utf8)).status == 0)
        let result = try CLIRunner.run(["decrypt", "-j", "planted", "in.age"], environment: ["PATH": "node_modules/.bin:/usr/bin:/bin"],
                                       directory: dir.path + "/work")
        #expect(result.status != 0)
        #expect(!FileManager.default.fileExists(atPath: marker), "the planted plugin ran")
        #expect(result.stderr.contains("relative PATH entry"), "\(result.stderr)")
    }
}
