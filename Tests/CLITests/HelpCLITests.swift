import Foundation
import Testing

/// The help of every command, walked from the command tree (`--experimental-dump-help`):
/// value placeholders that say what they are, `-o` always with `--output`, the vault's policy
/// options only where they act, text that wraps to the terminal, and help a person can copy
/// from: examples whose lines stay whole at 80 columns, usage lines that fit, an example for
/// every command, documents named without a path of the source tree.
@Suite("help text")
struct HelpCLITests {
    /// One command of the tree: its path of names and its options (name lists).
    struct Command {
        var path: [String]
        var options: [[String]]
        var valueNames: [String]
        /// Whether it has no subcommands (`help` aside).
        var isLeaf: Bool
    }

    /// A command's `--help` as a terminal of some width shows it.
    struct RenderedHelp {
        var command: Command
        var status: Int32
        var stderr: String
        var text: String

        var name: String { command.path.joined(separator: " ") }
        var lines: [Substring] { text.split(separator: "\n", omittingEmptySubsequences: false) }
    }

    /// Every command's help with `COLUMNS=width`.
    static func rendered(width: Int) throws -> [RenderedHelp] {
        try commands().map { command in
            let result = try CLIRunner.run(command.path + ["--help"], environment: ["COLUMNS": String(width)])
            return RenderedHelp(command: command, status: result.status, stderr: result.stderr, text: result.text)
        }
    }

    /// Every command's help at 80 columns, rendered once for the tests that read it.
    static let atEightyColumns = Result { try rendered(width: 80) }

    /// Every command, from the root, as the parser describes it.
    static func commands() throws -> [Command] {
        let result = try CLIRunner.run(["--experimental-dump-help"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any]
        let root = try #require(json?["command"] as? [String: Any])
        var found: [Command] = []
        func walk(_ node: [String: Any], _ path: [String]) {
            let subcommands = (node["subcommands"] as? [[String: Any]] ?? []).filter { $0["commandName"] as? String != "help" }
            var options: [[String]] = []
            var valueNames: [String] = []
            for argument in node["arguments"] as? [[String: Any]] ?? [] {
                let names = (argument["names"] as? [[String: Any]] ?? []).compactMap { name -> String? in
                    guard let kind = name["kind"] as? String, let text = name["name"] as? String else { return nil }
                    return kind == "short" ? "-" + text : "--" + text
                }
                options.append(names)
                if argument["kind"] as? String != "flag", let valueName = argument["valueName"] as? String {
                    valueNames.append(valueName)
                }
            }
            found.append(Command(path: path, options: options, valueNames: valueNames, isLeaf: subcommands.isEmpty))
            for sub in subcommands {
                guard let name = sub["commandName"] as? String else { continue }
                walk(sub, path + [name])
            }
        }
        walk(root, [])
        return found
    }

    @Test func theTreeHasEveryCommand() throws {
        let paths = Set(try Self.commands().map { $0.path.joined(separator: " ") })
        for expected in ["vault init", "vault status", "keychain find-generic-password", "protect write", "share list", "tls pin", "agent status"] {
            #expect(paths.contains(expected), "\(expected)")
        }
        #expect(paths.count > 40)
    }

    @Test func valuePlaceholdersAreWords() throws {
        for command in try Self.commands() {
            for valueName in command.valueNames {
                #expect(valueName.count > 1, "`\(command.path.joined(separator: " "))` has the placeholder <\(valueName)>")
            }
        }
    }

    @Test func everyDashOHasDashDashOutput() throws {
        var seen = 0
        for command in try Self.commands() {
            for names in command.options where names.contains("-o") {
                seen += 1
                #expect(names.contains("--output"), "`\(command.path.joined(separator: " "))`: -o without --output")
            }
        }
        #expect(seen >= 10)
    }

    @Test func vaultPolicyOptionsOnlyWhereTheyAct() throws {
        let writers: Set = ["vault init", "vault change-passcode", "vault change-questions", "vault rotate-key"]
        var kdf: Set<String> = []
        var eraseAfter: Set<String> = []
        for command in try Self.commands() {
            let path = command.path.joined(separator: " ")
            if command.options.contains(where: { $0.contains("--kdf") }) { kdf.insert(path) }
            if command.options.contains(where: { $0.contains("--erase-after") }) { eraseAfter.insert(path) }
        }
        #expect(kdf == writers)
        #expect(eraseAfter == writers.union(["vault unlock"]))
    }

    /// Each command's rendered help at 60 columns: no one-letter placeholder, and every line
    /// that is longer than 60 (but the usage line) is one word that cannot be broken.
    @Test func renderedHelpWrapsAndNamesValues() throws {
        let width = 60
        for command in try Self.commands() {
            let result = try CLIRunner.run(command.path + ["--help"], environment: ["COLUMNS": String(width)])
            let name = command.path.joined(separator: " ")
            #expect(result.status == 0, "\(name): \(result.stderr)")
            let text = result.text
            #expect(text.range(of: #"<[A-Za-z]>"#, options: .regularExpression) == nil, "`\(name) --help` has a one-letter placeholder")
            // ArgumentParser keeps the usage line whole, and its own "See 'securefoundation help …'" line.
            for line in text.split(separator: "\n", omittingEmptySubsequences: false)
            where line.count > width && !line.hasPrefix("USAGE: ") && !line.hasPrefix("  See '") {
                let words = line.split(separator: " ")
                #expect(words.count <= 1, "`\(name) --help` has a line of \(line.count) columns: \(line)")
            }
        }
    }

    @Test func rootHelpListsTheExitStatusTable() throws {
        let result = try CLIRunner.run(["--help"], environment: ["COLUMNS": "60"])
        #expect(result.status == 0)
        #expect(result.text.contains("Exit status, the same for every command"))
    }

    /// At 80 columns the parser wraps a discussion line of 80 columns or more, which would cut
    /// a command in two: every line of an example block is a line of the example as written
    /// (indented by two), and a line continued with ` \` goes on indented further.
    @Test func examplesCanBePasted() throws {
        var blocks = 0
        for help in try Self.atEightyColumns.get() {
            #expect(help.status == 0, "\(help.name): \(help.stderr)")
            var inExample = false
            var previous: Substring = ""
            for line in help.lines {
                if line == "Example:" || line == "Examples:" {
                    inExample = true
                    previous = ""
                    blocks += 1
                    continue
                }
                guard inExample else { continue }
                if line.isEmpty {
                    inExample = false
                    continue
                }
                #expect(line.hasPrefix("  "), "`\(help.name) --help`: an example line is broken at 80 columns: \(line)")
                if previous.hasSuffix(" \\") {
                    #expect(line.hasPrefix("    "), "`\(help.name) --help`: the line after `\(previous)` does not continue it: \(line)")
                }
                previous = line
            }
        }
        #expect(blocks > 70)
    }

    /// The parser prints a usage line whole, however long: each one (and each line of a usage
    /// of several) fits in 80 columns.
    @Test func usageLinesFitEightyColumns() throws {
        for help in try Self.atEightyColumns.get() {
            let lines = help.lines
            guard let start = lines.firstIndex(where: { $0.hasPrefix("USAGE: ") }) else {
                Issue.record("`\(help.name) --help` has no USAGE line")
                continue
            }
            for line in lines[start...].prefix(while: { !$0.isEmpty }) {
                #expect(line.count <= 80, "`\(help.name) --help` has a usage line of \(line.count) columns: \(line)")
            }
        }
    }

    @Test func everyLeafCommandHasAnExample() throws {
        var leaves = 0
        for help in try Self.atEightyColumns.get() where help.command.isLeaf {
            leaves += 1
            #expect(help.lines.contains { $0 == "Example:" || $0 == "Examples:" }, "`\(help.name) --help` has no example")
        }
        #expect(leaves > 60)
    }

    /// An installed program comes without the source tree: the help names a document by its
    /// file name ("CLI.md in the documentation"), never by its path there.
    @Test func helpNamesNoSourcePaths() throws {
        for help in try Self.atEightyColumns.get() {
            #expect(!help.text.contains("docs/"), "`\(help.name) --help` names a path of the source tree")
        }
    }
}

/// `--generate-completion-script`: each shell's script names the commands and subcommands, and
/// the shells that are installed accept its syntax.
@Suite("shell completions")
struct CompletionCLITests {
    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScript(shell: String) throws {
        let result = try CLIRunner.run(["--generate-completion-script", shell])
        #expect(result.status == 0, "\(result.stderr)")
        for name in ["vault", "keychain", "protect", "share", "tls", "agent", "encrypt", "find-generic-password", "rotate-class-keys"] {
            #expect(result.text.contains(name), "the \(shell) completion does not name \(name)")
        }
        // The words of the options that take one of a fixed set: a protection class, the KDF
        // work, a device-key provider, an accessibility.
        for word in ["completeUnlessOpen", "fips-interactive", "systemd-credential", "afterFirstUnlockThisDeviceOnly"] {
            #expect(result.text.contains(word), "the \(shell) completion does not offer \(word)")
        }
        let checker: [String]? = switch shell {
        case "bash": ["-n"]
        case "zsh": ["-n"]
        default: ["--no-execute"]
        }
        if let path = CLIRunner.which(shell), let checker {
            let scratch = try ScratchDirectory()
            let script = try scratch.file("completion." + shell, result.stdout)
            let checked = try CLIRunner.runTool(path, checker + [script])
            #expect(checked.status == 0, "\(shell) refuses the script: \(checked.stderr)")
        }
    }
}

/// `--version` comes from the build (docs/CLI.md, "Version"): `SECUREFOUNDATION_VERSION` in the
/// build's environment, else 0.0.0-dev.
@Suite("version")
struct VersionCLITests {
    @Test func versionIsTheBuildsVersion() throws {
        let result = try CLIRunner.run(["--version"])
        #expect(result.status == 0)
        let given = ProcessInfo.processInfo.environment["SECUREFOUNDATION_VERSION"] ?? ""
        let valid = !given.isEmpty && given.count <= 64
            && given.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._+-".contains($0)) }
        #expect(result.text == (valid ? given : "0.0.0-dev") + "\n")
        #expect(result.text.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+_-]*\n$"#, options: .regularExpression) != nil)
    }
}
