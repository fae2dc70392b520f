import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

struct HashCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash",
        abstract: "Print or check digests of files in sha256sum's format.",
        usage: """
        securefoundation hash [-a ALGORITHM] [--json] [FILE ...]
        securefoundation hash -c [options] [LIST ...]
        """,
        discussion: """
        Output lines are `HEX  NAME`, exactly as sha256sum prints them, so `sha256sum -c` accepts \
        them. A name containing a backslash or a newline is escaped as GNU sha256sum escapes it: \
        the line starts with `\\`, and the name has `\\\\` and `\\n` in their place. \
        `-` or no file reads standard input. md5 is offered only for checking legacy data.

        With --check, each FILE is a list of such lines (yours or sha256sum's); every file it \
        names is hashed and reported `NAME: OK` or `NAME: FAILED`. The exit status is 1 if any \
        digest differs, any file cannot be read, or a list has no properly formatted line.

        Examples:
          securefoundation hash -a sha512 report.pdf > report.sha512
          securefoundation hash -a sha512 --check report.sha512
        """
    )

    enum Algorithm: String, ExpressibleByArgument, CaseIterable {
        case sha256, sha384, sha512, md5

        /// Hex digits in a digest of this algorithm.
        var hexLength: Int {
            switch self {
            case .sha256: 64
            case .sha384: 96
            case .sha512: 128
            case .md5: 32
            }
        }
    }

    @Option(name: .shortAndLong, help: "The digest: sha256, sha384, sha512 or md5.")
    var algorithm: Algorithm = .sha256

    @Flag(name: .shortAndLong, help: "Read digests from the FILEs and check them.")
    var check = false

    @Flag(help: "With --check: do not print OK for each file that matches.")
    var quiet = false

    @Flag(help: "With --check: print nothing; the exit status alone tells.")
    var status = false

    @Flag(name: .customLong("json"), help: "Print the digests as JSON (CLI.md, \"JSON output\"): each file with its digest or its error.")
    var json = false

    @Argument(help: "Files to hash (with --check: lists to check); `-` or none for standard input.")
    var files: [String] = []

    func validate() throws {
        if !check && (quiet || status) {
            throw ValidationError("--quiet and --status apply only with --check.")
        }
        if check && json { throw ValidationError("--json applies to digests, not to --check (whose exit status tells).") }
    }

    func run() throws {
        if check { return try runCheck() }
        var failed = false
        var entries: [FileJSON] = []
        for name in files.isEmpty ? ["-"] : files {
            do {
                let digest = try compute(name)
                if json {
                    entries.append(FileJSON(path: name, digest: Encoding.hex(digest)))
                } else {
                    print(Self.sumLine(hex: Encoding.hex(digest), name: name))
                }
            } catch {
                CLI.warn("securefoundation: \(name): \(CLI.describe(error))")
                if json { entries.append(FileJSON(path: name, error: CLI.describe(error))) }
                failed = true
            }
        }
        if json { try CLI.run { try JSONOutput.write(ListJSON(algorithm: algorithm.rawValue, files: entries)) } }
        if failed { throw ExitCode(1) }
    }

    /// `hash --json`: `{"algorithm": A, "files": [{"path": P, "digest": HEX} or {"path": P, "error": E}], "version": 1}`.
    struct ListJSON: Encodable {
        var algorithm: String
        var files: [FileJSON]
        var version = JSONOutput.schemaVersion
    }

    struct FileJSON: Encodable {
        var path: String
        var digest: String?
        var error: String?
    }

    // MARK: - Lines in sha256sum's format

    /// `HEX  NAME`, or `\HEX  ESCAPED` when the name holds a backslash or a newline.
    static func sumLine(hex: String, name: String) -> String {
        guard name.contains("\\") || name.contains("\n") else { return "\(hex)  \(name)" }
        return "\\\(hex)  \(escape(name))"
    }

    static func escape(_ name: String) -> String {
        name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Undoes `escape`; `nil` for a backslash followed by anything but `\` or `n`.
    static func unescape(_ text: Substring) -> String? {
        var result = ""
        var iterator = text.makeIterator()
        while let character = iterator.next() {
            guard character == "\\" else { result.append(character); continue }
            switch iterator.next() {
            case "\\": result.append("\\")
            case "n": result.append("\n")
            default: return nil
            }
        }
        return result
    }

    /// One parsed line of a sums list: the expected hex digest and the file's name.
    struct SumLine: Equatable {
        let hex: String
        let name: String
    }

    /// Parses `HEX  NAME` or `HEX *NAME` (binary mode marker), optionally escaped with a
    /// leading backslash. Returns `nil` for a line that is not in this form.
    static func parse(line: Substring, hexLength: Int) -> SumLine? {
        var rest = line
        let escaped = rest.first == "\\"
        if escaped { rest = rest.dropFirst() }
        let hex = rest.prefix(hexLength)
        guard hex.count == hexLength, hex.allSatisfy(\.isHexDigit) else { return nil }
        rest = rest.dropFirst(hexLength)
        guard rest.first == " ", let marker = rest.dropFirst().first, marker == " " || marker == "*" else { return nil }
        let rawName = rest.dropFirst(2)
        guard !rawName.isEmpty else { return nil }
        let name: String
        if escaped {
            guard let unescaped = unescape(rawName) else { return nil }
            name = unescaped
        } else {
            name = String(rawName)
        }
        return SumLine(hex: hex.lowercased(), name: name)
    }

    // MARK: - --check

    private func runCheck() throws {
        var improper = 0, mismatched = 0, unreadable = 0
        var failed = false
        for list in files.isEmpty ? ["-"] : files {
            let bytes: Data
            do {
                bytes = list == "-" ? FileHandle.standardInput.readDataToEndOfFile()
                                    : try Data(contentsOf: URL(fileURLWithPath: list))
            } catch {
                CLI.warn("securefoundation: \(list): \(CLI.describe(error))")
                failed = true
                continue
            }
            var properLines = 0
            var lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            if lines.last == "" { lines.removeLast() }
            for raw in lines {
                let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
                guard let entry = Self.parse(line: line, hexLength: algorithm.hexLength) else {
                    improper += 1
                    continue
                }
                properLines += 1
                // As sha256sum: a name is shown escaped in check results only if it holds a newline.
                let shown = entry.name.contains("\n") ? "\\" + Self.escape(entry.name) : entry.name
                let actual: String
                do {
                    actual = Encoding.hex(try compute(entry.name))
                } catch {
                    unreadable += 1
                    if !status {
                        CLI.warn("securefoundation: \(entry.name): \(CLI.describe(error))")
                        print("\(shown): FAILED open or read")
                    }
                    continue
                }
                if actual == entry.hex {
                    if !status && !quiet { print("\(shown): OK") }
                } else {
                    mismatched += 1
                    if !status { print("\(shown): FAILED") }
                }
            }
            if properLines == 0 {
                CLI.warn("securefoundation: \(list): no properly formatted \(algorithm.rawValue) checksum lines found")
                failed = true
            }
        }
        if !status {
            if improper > 0 {
                CLI.warn("securefoundation: WARNING: \(improper) \(improper == 1 ? "line is" : "lines are") improperly formatted")
            }
            if unreadable > 0 {
                CLI.warn("securefoundation: WARNING: \(unreadable) listed \(unreadable == 1 ? "file" : "files") could not be read")
            }
            if mismatched > 0 {
                CLI.warn("securefoundation: WARNING: \(mismatched) computed \(mismatched == 1 ? "checksum" : "checksums") did NOT match")
            }
        }
        if failed || mismatched > 0 || unreadable > 0 { throw ExitCode(1) }
    }

    /// The digest of the file `name` (`-`: standard input), with the progress line of a long
    /// read (the amount known for a regular file).
    private func compute(_ name: String) throws -> [UInt8] {
        let fd = name == "-" ? 0 : open(name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CipherError.io("cannot open \(name): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        return try AgeCLI.withProgress("hash \(name)", input: fd) { progress in
            switch algorithm {
            case .md5:
                return try Hashing.Insecure.digest(.md5, ofFileDescriptor: fd, named: name == "-" ? "standard input" : name, progress: progress)
            case .sha256, .sha384, .sha512:
                return try Hashing.digest(HashAlgorithm(rawValue: algorithm.rawValue)!, ofFileDescriptor: fd,
                                          named: name == "-" ? "standard input" : name, progress: progress)
            }
        }
    }
}
