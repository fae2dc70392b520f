#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a plain `encrypt` or `decrypt` command line asks for, runnable without the argument
/// parser: ``EncryptRequest`` and ``DecryptRequest``.
package protocol AgeRequest: Sendable {
    /// Refuses a combination of options, as the command's `validate()` (the same code).
    func validate() throws(UsageError)
    /// Does the work; the caller reports a failure (the command's `run()` as every command's,
    /// ``AgeFastPath/run(_:report:)`` through the function it is given).
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
/// parser, which then reports usage and errors exactly as it always does. The full program
/// (`securefoundation`) takes this path before it builds its parser; the front program
/// (`securefoundation-front`, installed as `securefoundation`) takes it and hands every other
/// command line to the full program, so it never links the argument parser at all.
package enum AgeFastPath {
    /// One option of a command as the fast path reads it. The names are the argument parser's:
    /// tests check each one parses to the same request both ways, and that the tables below name
    /// exactly the options the parser defines, with the same value and repetition
    /// (`AgeFastPathTests.sameOptionsAsTheParser`, from `--experimental-dump-help`).
    package struct Option<Request>: Sendable {
        package let names: [String]
        /// Takes the next argument as its value; otherwise a flag.
        package let takesValue: Bool
        /// May be given more than once (array options).
        package let repeatable: Bool
        /// Sets the option on the request (`value` is empty for a flag).
        package let apply: @Sendable (inout Request, String) -> Void

        init(_ names: [String], value takesValue: Bool = true, repeatable: Bool = false, _ apply: @escaping @Sendable (inout Request, String) -> Void) {
            self.names = names
            self.takesValue = takesValue
            self.repeatable = repeatable
            self.apply = apply
        }
    }

    package static let encryptOptions: [Option<EncryptRequest>] = [
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

    package static let decryptOptions: [Option<DecryptRequest>] = [
        Option(["-d", "--decrypt"], value: false) { _, _ in },
        Option(["-i", "--identity"], repeatable: true) { $0.identityFiles.append($1) },
        Option(["-j"], repeatable: true) { $0.plugins.append($1) },
        Option(["--passphrase-file"]) { $0.passphraseFile = $1 },
        Option(["-o", "--output"]) { $0.output = $1 },
    ]

    /// The request `arguments` (without the program name) make, when they are a plain
    /// `encrypt` or `decrypt` command line that `validate()` accepts; nil for anything else.
    package static func request(for arguments: [String]) -> (any AgeRequest)? {
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
    package static func parse<Request>(_ arguments: ArraySlice<String>, options: [Option<Request>], into request: inout Request,
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

    /// Runs `request` and ends the process: status 0, or the status `report` gives for the
    /// error after reporting it (the full program: as every command reports its errors; the
    /// front program: ``report(_:)``).
    package static func run(_ request: any AgeRequest, report: (any Error) -> Int32) -> Never {
        do {
            try request.run()
        } catch {
            exit(report(error))
        }
        exit(0)
    }

    /// Reports `error` on standard error as the full program reports an error of the age
    /// commands (`securefoundation: error: MESSAGE`) and returns its exit status (``ExitStatus``).
    package static func report(_ error: any Error) -> Int32 {
        CLI.warn("securefoundation: error: \(CLI.describe(error))")
        return ExitStatus.exitCode(of: error)
    }
}
