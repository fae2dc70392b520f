import ArgumentParser
import Foundation

/// What a plain `encrypt` or `decrypt` command line asks for, runnable without the argument
/// parser: ``EncryptRequest`` and ``DecryptRequest``.
protocol AgeRequest: Sendable {
    /// Refuses a combination of options, as the command's `validate()` (the same code).
    func validate() throws
    /// Does the work; failures are reported as the command's `run()` reports them.
    func run() throws
}

/// `encrypt` and `decrypt` started without the argument parser's work.
///
/// Building the argument parser's command tree costs a few milliseconds at every start (each
/// command's configuration, reflection over its properties, the protocol-conformance lookups
/// both bring), which decides the time of a small file. For a plain command line, one made only
/// of the options below each given as `NAME VALUE` or `NAME`, and at most one input, this fills
/// the ``EncryptRequest`` or ``DecryptRequest`` that `EncryptCommand` and `DecryptCommand` fill
/// from their parsed options, and runs its `validate()` and `run()`, the ones those commands run.
/// Anything else (`--help`, `--name=value`, `-pa`, `--`, an unknown or repeated single option,
/// a value that looks like an option, a command line `validate()` refuses) goes to the argument
/// parser, which then reports usage and errors exactly as it always does; errors of `run()` are
/// reported through the root command's `exit(withError:)`, as the parser's own `main` does.
enum AgeFastPath {
    /// One option of a command as the fast path reads it. The names are the argument parser's:
    /// tests check each one parses to the same request both ways, and that the tables below name
    /// exactly the options the parser defines, with the same value and repetition
    /// (`AgeFastPathTests.sameOptionsAsTheParser`, from `--experimental-dump-help`).
    struct Option<Request>: Sendable {
        let names: [String]
        /// Takes the next argument as its value; otherwise a flag.
        let takesValue: Bool
        /// May be given more than once (array options).
        let repeatable: Bool
        /// Sets the option on the request (`value` is empty for a flag).
        let apply: @Sendable (inout Request, String) -> Void

        init(_ names: [String], value takesValue: Bool = true, repeatable: Bool = false, _ apply: @escaping @Sendable (inout Request, String) -> Void) {
            self.names = names
            self.takesValue = takesValue
            self.repeatable = repeatable
            self.apply = apply
        }
    }

    static let encryptOptions: [Option<EncryptRequest>] = [
        // age's mode flag: accepted, changes nothing.
        Option(["-e", "--encrypt"], value: false) { _, _ in },
        Option(["-r", "--recipient"], repeatable: true) { $0.recipients.append($1) },
        Option(["-R", "--recipients-file"], repeatable: true) { $0.recipientsFiles.append($1) },
        Option(["-i", "--identity"], repeatable: true) { $0.identityFiles.append($1) },
        Option(["-j"], repeatable: true) { $0.plugins.append($1) },
        Option(["-p", "--passphrase"], value: false) { request, _ in request.passphrase = true },
        Option(["--passphrase-file"]) { $0.passphraseFile = $1 },
        Option(["-a", "--armor"], value: false) { request, _ in request.armor = true },
        Option(["-o", "--output"]) { $0.output = $1 },
    ]

    static let decryptOptions: [Option<DecryptRequest>] = [
        Option(["-d", "--decrypt"], value: false) { _, _ in },
        Option(["-i", "--identity"], repeatable: true) { $0.identityFiles.append($1) },
        Option(["-j"], repeatable: true) { $0.plugins.append($1) },
        Option(["--passphrase-file"]) { $0.passphraseFile = $1 },
        Option(["-o", "--output"]) { $0.output = $1 },
    ]

    /// The request `arguments` (without the program name) make, when they are a plain
    /// `encrypt` or `decrypt` command line that `validate()` accepts; nil for anything else.
    static func request(for arguments: [String]) -> (any AgeRequest)? {
        guard let name = arguments.first else { return nil }
        let rest = arguments.dropFirst()
        switch name {
        case "encrypt":
            var request = EncryptRequest()
            guard parse(rest, options: encryptOptions, into: &request, input: { $0.input = $1 }),
                  (try? request.validate()) != nil else { return nil }
            return request
        case "decrypt":
            var request = DecryptRequest()
            guard parse(rest, options: decryptOptions, into: &request, input: { $0.input = $1 }),
                  (try? request.validate()) != nil else { return nil }
            return request
        default:
            return nil
        }
    }

    /// Reads `arguments` into `request`; false when they are not plain (see the type's
    /// description), leaving the decision to the argument parser.
    static func parse<Request>(_ arguments: ArraySlice<String>, options: [Option<Request>], into request: inout Request,
                               input: (inout Request, String) -> Void) -> Bool {
        var seen = [Bool](repeating: false, count: options.count)
        var sawInput = false
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "-" || !argument.hasPrefix("-") {
                // The input file; "help" is left to the parser, which may read it as a request.
                guard !sawInput, !argument.isEmpty, argument != "help" else { return false }
                sawInput = true
                input(&request, argument)
                continue
            }
            guard let number = options.firstIndex(where: { $0.names.contains(argument) }) else { return false }
            let option = options[number]
            guard option.repeatable || !seen[number] else { return false }
            seen[number] = true
            if option.takesValue {
                guard index < arguments.endIndex else { return false }
                let value = arguments[index]
                index += 1
                // A value that is empty or starts with "-" (other than "-" itself) may be read
                // otherwise by the parser.
                guard !value.isEmpty, value == "-" || !value.hasPrefix("-") else { return false }
                option.apply(&request, value)
            } else {
                option.apply(&request, "")
            }
        }
        return true
    }

    /// Runs `request` and ends the process: status 0, or the error reported and its status as
    /// the argument parser's `main` would (``SecureFoundationCommand``'s `exit(withError:)`).
    static func run(_ request: any AgeRequest) -> Never {
        do {
            try request.run()
        } catch {
            SecureFoundationCommand.exit(withError: error)
        }
        Foundation.exit(0)
    }
}
