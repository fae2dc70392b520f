import ArgumentParser
import Foundation

/// `encrypt` and `decrypt` started without the argument parser's work.
///
/// Building the argument parser's command tree costs a few milliseconds at every start (each
/// command's configuration, reflection over its properties, the protocol-conformance lookups
/// both bring), which decides the time of a small file. For a plain command line, one made only
/// of the options below each given as `NAME VALUE` or `NAME`, and at most one input, this fills
/// the very same `EncryptCommand` or `DecryptCommand` and runs its own `validate()` and `run()`.
/// Anything else (`--help`, `--name=value`, `-pa`, `--`, an unknown or repeated single option,
/// a value that looks like an option, a command line `validate()` refuses) goes to the argument
/// parser, which then reports usage and errors exactly as it always does; errors of `run()` are
/// reported through the root command's `exit(withError:)`, as the parser's own `main` does.
enum AgeFastPath {
    /// One option of a command as the fast path reads it. The names are the argument parser's
    /// (tests check each one parses to the same command both ways).
    struct Option<Command> {
        let names: [String]
        /// Takes the next argument as its value; otherwise a flag.
        let takesValue: Bool
        /// May be given more than once (array options).
        let repeatable: Bool
        /// Sets the option on the command (`value` is empty for a flag).
        let apply: @Sendable (inout Command, String) -> Void

        init(_ names: [String], value takesValue: Bool = true, repeatable: Bool = false, _ apply: @escaping @Sendable (inout Command, String) -> Void) {
            self.names = names
            self.takesValue = takesValue
            self.repeatable = repeatable
            self.apply = apply
        }
    }

    static let encryptOptions: [Option<EncryptCommand>] = [
        Option(["-r", "--recipient"], repeatable: true) { $0.recipients.append($1) },
        Option(["-R", "--recipients-file"], repeatable: true) { $0.recipientsFiles.append($1) },
        Option(["-p", "--passphrase"], value: false) { command, _ in command.passphrase = true },
        Option(["--passphrase-file"]) { $0.passphraseFile = $1 },
        Option(["-a", "--armor"], value: false) { command, _ in command.armor = true },
        Option(["-o", "--output"]) { $0.output = $1 },
    ]

    static let decryptOptions: [Option<DecryptCommand>] = [
        Option(["-i", "--identity"], repeatable: true) { $0.identityFiles.append($1) },
        Option(["--passphrase-file"]) { $0.passphraseFile = $1 },
        Option(["-o", "--output"]) { $0.output = $1 },
    ]

    /// The command `arguments` (without the program name) describe, when they are a plain
    /// `encrypt` or `decrypt` command line that `validate()` accepts; nil for anything else.
    static func command(for arguments: [String]) -> (any ParsableCommand)? {
        guard let name = arguments.first else { return nil }
        let rest = arguments.dropFirst()
        switch name {
        case "encrypt":
            // Every property set here: the argument parser's defaults, then the options.
            var command = EncryptCommand()
            command.recipients = []
            command.recipientsFiles = []
            command.passphrase = false
            command.passphraseFile = nil
            command.armor = false
            command.output = nil
            command.input = nil
            guard parse(rest, options: encryptOptions, into: &command, input: { $0.input = $1 }),
                  (try? command.validate()) != nil else { return nil }
            return command
        case "decrypt":
            var command = DecryptCommand()
            command.identityFiles = []
            command.passphraseFile = nil
            command.output = nil
            command.input = nil
            guard parse(rest, options: decryptOptions, into: &command, input: { $0.input = $1 }),
                  (try? command.validate()) != nil else { return nil }
            return command
        default:
            return nil
        }
    }

    /// Reads `arguments` into `command`; false when they are not plain (see the type's
    /// description), leaving the decision to the argument parser.
    static func parse<Command>(_ arguments: ArraySlice<String>, options: [Option<Command>], into command: inout Command,
                               input: (inout Command, String) -> Void) -> Bool {
        var seen = Set<Int>()
        var sawInput = false
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "-" || !argument.hasPrefix("-") {
                // The input file; "help" is left to the parser, which may read it as a request.
                guard !sawInput, !argument.isEmpty, argument != "help" else { return false }
                sawInput = true
                input(&command, argument)
                continue
            }
            guard let number = options.firstIndex(where: { $0.names.contains(argument) }) else { return false }
            let option = options[number]
            guard option.repeatable || seen.insert(number).inserted else { return false }
            if option.takesValue {
                guard index < arguments.endIndex else { return false }
                let value = arguments[index]
                index += 1
                // A value that is empty or starts with "-" (other than "-" itself) may be read
                // otherwise by the parser.
                guard !value.isEmpty, value == "-" || !value.hasPrefix("-") else { return false }
                option.apply(&command, value)
            } else {
                option.apply(&command, "")
            }
        }
        return true
    }

    /// Runs `command` and ends the process: status 0, or the error reported and its status as
    /// the argument parser's `main` would (``SecureFoundationCommand``'s `exit(withError:)`).
    static func run(_ command: any ParsableCommand) -> Never {
        var command = command
        do {
            try command.run()
        } catch {
            SecureFoundationCommand.exit(withError: error)
        }
        Foundation.exit(0)
    }
}
