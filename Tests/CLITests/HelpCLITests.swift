import Foundation
import Testing

/// The help of every command, walked from the command tree (`--experimental-dump-help`):
/// value placeholders that say what they are, `-o` always with `--output`, the vault's policy
/// options only where they act, and text that wraps to the terminal.
@Suite("help text")
struct HelpCLITests {
    /// One command of the tree: its path of names and its options (name lists).
    struct Command {
        var path: [String]
        var options: [[String]]
        var valueNames: [String]
    }

    /// Every command, from the root, as the parser describes it.
    static func commands() throws -> [Command] {
        let result = try CLIRunner.run(["--experimental-dump-help"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any]
        let root = try #require(json?["command"] as? [String: Any])
        var found: [Command] = []
        func walk(_ node: [String: Any], _ path: [String]) {
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
            found.append(Command(path: path, options: options, valueNames: valueNames))
            for sub in node["subcommands"] as? [[String: Any]] ?? [] {
                guard let name = sub["commandName"] as? String, name != "help" else { continue }
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
