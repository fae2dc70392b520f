import ArgumentParser
import Foundation
import AgeCommandLine
@testable import SecureFoundationCLI
import TestSupport
import Testing

/// `encrypt` and `decrypt` start without the argument parser for a plain command line: the
/// requests it builds equal the parser's, and everything else is left to the parser.
@Suite("age commands: the start-up path without the argument parser")
struct AgeFastPathTests {
    static let recipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"

    /// Command lines (after `encrypt`) of every option name, alone or combined.
    static var encryptLines: [[String]] {
        var lines = [[String]]()
        for option in AgeFastPath.encryptOptions {
            let passphrase = option.names.contains { $0.hasPrefix("--passphrase") }
            for name in option.names {
                let value = option.takesValue ? [passphrase ? "pass.txt" : name.contains("recipients") ? "team.txt" : name.contains("output") ? "out.age" : recipient] : []
                let base = passphrase ? [] : ["-r", recipient]
                lines.append(base + [name] + value + ["plain"])
                lines.append(base + [name] + value)
            }
        }
        lines.append(["-r", recipient, "-r", "age1other", "-R", "a.txt", "--recipients-file", "b.txt", "-a", "-o", "-", "-"])
        lines.append(["plain", "--armor", "--recipient", recipient, "--output", "x.age"])
        lines.append(["-R", "-", "in"])
        lines.append(["-e", "-r", recipient, "-a", "in"])
        lines.append(["-p", "--passphrase-file", "pass.txt", "plain"])
        return lines
    }

    static var decryptLines: [[String]] {
        var lines = [[String]]()
        for option in AgeFastPath.decryptOptions {
            for name in option.names {
                lines.append(option.takesValue ? [name, name.contains("output") ? "out" : name == "-j" ? "yubikey" : "key.txt", "file.age"] : [name, "file.age"])
            }
        }
        lines.append(["-i", "a.txt", "--identity", "b.txt", "-i", "-", "-o", "-", "file.age"])
        lines.append([])
        lines.append(["-"])
        lines.append(["--passphrase-file", "-", "file.age"])
        lines.append(["-d", "-j", "a", "-i", "k.txt", "-j", "b", "file.age"])
        return lines
    }

    /// The options of `command` as the argument parser itself describes them
    /// (`--experimental-dump-help`): name → (takes a value, repeatable). Help and version,
    /// which the start-up path leaves to the parser, are left out.
    static func parserOptions(_ command: String) throws -> [String: (value: Bool, repeating: Bool)] {
        let result = try CLIRunner.run(["--experimental-dump-help"])
        try #require(result.status == 0, "\(result.stderr)")
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(result.text.utf8)) as? [String: Any])
        let root = try #require(tool["command"] as? [String: Any])
        let subcommands = try #require(root["subcommands"] as? [[String: Any]])
        let entry = try #require(subcommands.first { $0["commandName"] as? String == command }, "no \(command) command")
        var options: [String: (value: Bool, repeating: Bool)] = [:]
        for argument in try #require(entry["arguments"] as? [[String: Any]]) {
            let kind = argument["kind"] as? String
            guard kind == "option" || kind == "flag" else { continue }
            for name in argument["names"] as? [[String: Any]] ?? [] {
                guard let text = name["name"] as? String, !["help", "h", "version"].contains(text) else { continue }
                let dashed = (name["kind"] as? String == "long" ? "--" : "-") + text
                options[dashed] = (kind == "option", argument["isRepeating"] as? Bool ?? false)
            }
        }
        return options
    }

    /// The start-up path's table against the parser's own description of the two commands: an
    /// option added to `EncryptCommand` or `DecryptCommand` and not to ``AgeFastPath`` (or the
    /// reverse, or one whose value or repetition differs) fails here, so the two cannot drift.
    @Test("the start-up path knows exactly the options the argument parser defines, with the same value and repetition")
    func sameOptionsAsTheParser() throws {
        func table<Request>(_ options: [AgeFastPath.Option<Request>]) -> [String: (value: Bool, repeating: Bool)] {
            var names: [String: (value: Bool, repeating: Bool)] = [:]
            for option in options { for name in option.names { names[name] = (option.takesValue, option.repeatable) } }
            return names
        }
        for (command, fast) in [("encrypt", table(AgeFastPath.encryptOptions)), ("decrypt", table(AgeFastPath.decryptOptions))] {
            let parser = try Self.parserOptions(command)
            #expect(Set(parser.keys) == Set(fast.keys),
                    "\(command): the parser defines \(parser.keys.sorted()), the start-up path (AgeFastPath) \(fast.keys.sorted())")
            for (name, parsed) in parser {
                guard let known = fast[name] else { continue }
                #expect(known.value == parsed.value && known.repeating == parsed.repeating,
                        "\(command) \(name): parser value \(parsed.value) repeating \(parsed.repeating), start-up path \(known.value) \(known.repeating)")
            }
        }
    }

    @Test("every option name of the start-up path builds the request the argument parser builds")
    func sameRequestAsTheParser() throws {
        for line in Self.encryptLines {
            let parsed = try #require(try SecureFoundationCommand.parseAsRoot(["encrypt"] + line) as? EncryptCommand, "\(line)")
            let fast = try #require(AgeFastPath.request(for: ["encrypt"] + line) as? EncryptRequest, "\(line)")
            #expect(fast == parsed.request, "\(line)")
        }
        for line in Self.decryptLines {
            let parsed = try #require(try SecureFoundationCommand.parseAsRoot(["decrypt"] + line) as? DecryptCommand, "\(line)")
            let fast = try #require(AgeFastPath.request(for: ["decrypt"] + line) as? DecryptRequest, "\(line)")
            #expect(fast == parsed.request, "\(line)")
        }
    }

    @Test("help, attached values, combined flags, repeats, unknown options and refused lines go to the argument parser")
    func everythingElseGoesToTheParser() {
        let r = Self.recipient
        let lines: [[String]] = [
            ["encrypt"], ["encrypt", "--help"], ["encrypt", "-h"], ["encrypt", "help"], ["help", "encrypt"],
            ["encrypt", "--recipient=\(r)", "plain"], ["encrypt", "-pa", "plain"], ["encrypt", "-r", r, "--", "plain"],
            ["encrypt", "-r", r, "-o", "a", "-o", "b", "plain"], ["encrypt", "-r", r, "-a", "-a", "plain"],
            ["encrypt", "-r", r, "plain", "other"], ["encrypt", "-r", r, "--no-such-flag", "plain"], ["encrypt", "-r"],
            ["encrypt", "-r", r, "-o", "-x", "plain"], ["encrypt", "-r", "", "plain"], ["encrypt", "-r", r, "-i"], ["encrypt", "-i", "-", "-R", "-", "plain"], ["encrypt", "-i", "-"],
            // What validate() refuses: reported with the usage by the parser.
            ["encrypt", "-p", "-r", r, "plain"],
            ["encrypt", "--passphrase-file", "-"], ["encrypt", "-R", "-"], ["encrypt", "-R", "-", "-R", "-", "plain"],
            ["decrypt", "--passphrase-file", "-"], ["decrypt", "-i", "-", "--passphrase-file", "-", "f.age"],
            ["decrypt", "-r", r, "f.age"], ["decrypt", "--version"], ["--version"], ["keygen"], [],
            // age's mode flags belong to their own command; repeated, they go to the parser.
            ["encrypt", "-d", "-r", r, "plain"], ["decrypt", "-e", "f.age"], ["decrypt", "-d", "-d", "f.age"], ["decrypt", "-dj", "x", "f.age"],
        ]
        for line in lines {
            #expect(AgeFastPath.request(for: line) == nil, "\(line)")
        }
    }

    /// Runs the built binary.
    static func run(_ arguments: [String], in dir: String, stdin: [UInt8] = []) throws -> CLIRunner.Result {
        try CLIRunner.run(arguments, stdin: stdin, directory: dir)
    }

    @Test("the start-up path and the argument parser give the same bytes, messages and exit codes")
    func sameBehaviourAsTheParser() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-fast")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let keygen = try Self.run(["keygen", "-o", "key.txt"], in: dir)
        #expect(keygen.status == 0, "\(keygen.stderr)")
        let recipient = String(keygen.stderr.dropFirst("Public key: ".count).prefix(while: { $0 != "\n" }))
        #expect(try Self.run(["keygen", "-o", "other.txt"], in: dir).status == 0)
        let plaintext = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/plain"))

        // Each pair: a plain line (the start-up path) and the same command spelled for the
        // parser only (`--name=value`).
        let pairs: [([String], [String])] = [
            (["encrypt", "-r", recipient, "-o", "fast.age", "plain"], ["encrypt", "--recipient=\(recipient)", "--output=parsed.age", "plain"]),
            (["encrypt", "-r", "age1bogus", "plain"], ["encrypt", "--recipient=age1bogus", "plain"]),
            (["encrypt", "-r", "bogus", "plain"], ["encrypt", "--recipient=bogus", "plain"]),
            (["encrypt", "-r", recipient, "-o", "x.age", "missing"], ["encrypt", "--recipient=\(recipient)", "--output=x.age", "missing"]),
            (["encrypt", "-r", recipient, "-o", "no/such/dir/x.age", "plain"], ["encrypt", "--recipient=\(recipient)", "--output=no/such/dir/x.age", "plain"]),
            (["encrypt", "-R", "missing.txt", "plain"], ["encrypt", "--recipients-file=missing.txt", "plain"]),
            (["encrypt", "-o", "x.age", "plain"], ["encrypt", "--output=x.age", "plain"]),
            (["encrypt", "-p", "-r", recipient, "plain"], ["encrypt", "-p", "--recipient=\(recipient)", "plain"]),
            (["decrypt", "-i", "other.txt", "fast.age"], ["decrypt", "--identity=other.txt", "fast.age"]),
            (["decrypt", "-i", "missing.txt", "fast.age"], ["decrypt", "--identity=missing.txt", "fast.age"]),
            (["decrypt", "-i", "key.txt", "plain"], ["decrypt", "--identity=key.txt", "plain"]),
            (["decrypt", "-i", "key.txt", "-o", "fast.out", "fast.age"], ["decrypt", "--identity=key.txt", "--output=parsed.out", "parsed.age"]),
        ]
        for (fast, parsed) in pairs {
            let a = try Self.run(fast, in: dir), b = try Self.run(parsed, in: dir)
            #expect(a.status == b.status, "\(fast): \(a.status) \(a.stderr) / \(b.status) \(b.stderr)")
            #expect(a.stderr == b.stderr, "\(fast)")
            #expect(a.stdout == b.stdout, "\(fast)")
        }
        #expect(try Self.run(["encrypt", "-r", "bogus", "plain"], in: dir).status == 1)
        #expect(try Self.run(["encrypt", "-r", recipient, "-o", "x.age", "missing"], in: dir).status == 74)
        #expect(try Self.run(["encrypt", "-o", "x.age", "plain"], in: dir).status == 64)
        #expect(try Self.run(["decrypt", "-i", "other.txt", "fast.age"], in: dir).status == 3)
        #expect(try Self.run(["decrypt", "-i", "key.txt", "plain"], in: dir).status == 2)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/fast.out")) == Data(plaintext))
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/parsed.out")) == Data(plaintext))
        // To standard output, from standard input.
        let piped = try Self.run(["encrypt", "-r", recipient], in: dir, stdin: plaintext)
        #expect(piped.status == 0)
        let back = try Self.run(["decrypt", "-i", "key.txt"], in: dir, stdin: piped.stdout)
        #expect(back.status == 0 && back.stdout == plaintext)
    }
}
