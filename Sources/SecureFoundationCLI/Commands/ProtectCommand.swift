import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation protect …`: files of the four data-protection classes.
struct ProtectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protect",
        abstract: "Files of the four data-protection classes (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none).",
        discussion: """
        A protected file is an age v1 file for its class's X25519 recipient plus a class stanza. \
        Each class's identity is sealed under the vault's matching class key, so a class is \
        readable exactly when the keychain's matching accessibility is: complete and \
        completeUnlessOpen while unlocked, completeUntilFirstUserAuthentication after an unlock \
        in the same process, none always. completeUnlessOpen files can be written while locked. \
        Add ThisDeviceOnly to a class name to bind it to the device key.

        Each command runs locked unless given --passcode-file, --answers-file or --unlock.

        Exit status (CLI.md in the documentation): 0 success, 1 error, 2 damaged or tampered file, 3 wrong \
        passcode or answers, 4 too many attempts, 5 no vault (not set up, or erased), 36 the \
        class is locked (unlock and try again; 6 before this release), 64 usage error, 74 a \
        file cannot be read or written.

        Examples:
          echo data | securefoundation protect write --class completeUnlessOpen \\
              -o inbox/1.sf
          securefoundation protect upgrade --from completeUnlessOpen --to complete \\
              --passcode-file pin.txt inbox
          securefoundation protect read inbox/1.sf --passcode-file pin.txt
          securefoundation protect status inbox
        """,
        subcommands: [
            ProtectWriteCommand.self, ProtectReadCommand.self, ProtectStatusCommand.self, ProtectUpgradeCommand.self,
            ProtectExportIdentityCommand.self, ProtectRotateKeysCommand.self,
        ]
    )
}

/// The vault flags of the protect commands: the home, and how (if at all) to unlock.
struct ProtectVaultOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Flag(name: .customLong("unlock"), help: "Unlock with the passcode read from the terminal.")
    var unlock = false

    /// The protected files of the vault, unlocked when asked to.
    func files() throws -> ProtectedFiles {
        let manager = try home.manager()
        try VaultCLI.requireSetUp(manager)
        if unlock || credentials.given {
            try credentials.unlock(manager)
            // Unlocked: every class key is available, so every key pair exists afterwards
            // (completeUnlessOpen can then be written while locked).
            let files = ProtectedFiles(manager: manager)
            try files.prepareClasses()
            return files
        }
        return ProtectedFiles(manager: manager)
    }
}

enum ProtectCLI {
    static func parseClass(_ name: String) throws -> FileProtectionClass {
        guard let cls = FileProtectionClass(name: name) else {
            throw ValidationError("unknown class \(name); use one of \(FileProtectionClass.allValues.map(\.name).joined(separator: ", "))")
        }
        return cls
    }
}

struct ProtectWriteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write standard input or a file as a protected file of a class (atomic, 0600).",
        usage: "securefoundation protect write [options] --class CLASS [-o FILE] [INPUT]",
        discussion: """
        Example:
          securefoundation protect write --class completeUnlessOpen \\
              -o photo.sf photo.jpg
        """
    )

    @Option(name: .customLong("class"), help: "The protection class.", completion: CompletionValues.fileProtectionClasses)
    var className: String

    @Option(name: .shortAndLong, help: "The protected file to write (default: standard output).")
    var output: String?

    @Argument(help: "The plaintext file (default: standard input).")
    var input: String?

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let cls = try ProtectCLI.parseClass(className)
            let files = try vault.files()
            var fd: Int32 = 0
            if let input, input != "-" {
                fd = open(input, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw ProtectedFileError.io("cannot open \(input): \(String(cString: strerror(errno)))") }
            }
            defer { if fd != 0 { close(fd) } }
            let destination = output.map { $0 == "-" ? "/dev/stdout" : $0 } ?? "/dev/stdout"
            try ProgressLine.run("protect write", total: AgeCLI.regularFileSize(fd)) { report in
                try files.write(from: fd, to: destination, protection: cls, progress: report)
            }
        }
    }
}

struct ProtectReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Decrypt a protected file (streaming; -o is written atomically once authenticated).",
        usage: "securefoundation protect read [options] [-o OUTPUT] FILE",
        discussion: """
        Example:
          securefoundation protect read -o photo.jpg photo.sf --passcode-file pin.txt
        """
    )

    @Option(name: .shortAndLong, help: "Where to write the plaintext (default: standard output).")
    var output: String?

    @Argument(help: "The protected file.")
    var file: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let files = try vault.files()
            let size = (try? FileCalls.linkStatus(file)).flatMap { $0.isRegularFile ? $0.size : nil }
            try ProgressLine.run("protect read", total: size) { report in
                if let output, output != "-" {
                    try files.read(at: file, toFile: output, progress: report)
                } else {
                    try files.read(at: file, to: 1, progress: report)
                }
            }
        }
    }
}

struct ProtectStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "The class of each protected file, and whether it is readable now.",
        usage: "securefoundation protect status [options] [--json] PATH ...",
        discussion: """
        One line per file: `PATH: CLASS, readable` or `PATH: CLASS, locked (REASON)`, or \
        `PATH: not a protected file`. Directories are walked (symbolic links are not followed). \
        Exit status 1 when a path cannot be examined.

        Example:
          securefoundation protect status inbox photo.sf
        """
    )

    @Argument(help: "Files or directories.")
    var paths: [String]

    @OptionGroup var vault: ProtectVaultOptions

    @Flag(name: .customLong("json"), help: "Print the files' status as JSON (CLI.md in the documentation, \"JSON output\").")
    var json = false

    /// One file of the report.
    struct FileJSON: Encodable {
        var path: String
        /// readable, locked, otherDevice, unreadable, notProtected or error.
        var state: String
        var protectionClass: String?
        var reason: String?

        enum CodingKeys: String, CodingKey { case path, state, protectionClass = "class", reason }

        var line: String {
            switch state {
            case "readable": return "\(path): \(protectionClass ?? ""), readable"
            case "locked": return "\(path): \(protectionClass ?? ""), locked (\(reason ?? ""))"
            case "otherDevice": return "\(path): \(protectionClass ?? ""), bound to another device"
            case "unreadable": return "\(path): \(protectionClass ?? ""), unreadable (\(reason ?? ""))"
            case "notProtected": return "\(path): not a protected file"
            default: return "\(path): error: \(reason ?? "")"
            }
        }
    }

    struct ReportJSON: Encodable {
        var version = JSONOutput.schemaVersion
        var files: [FileJSON]
    }

    func run() throws {
        var failed = false
        try CLI.run {
            let files = try vault.files()
            var report: [FileJSON] = []
            for status in try files.status(of: paths) {
                var entry = FileJSON(path: status.path, state: "error", protectionClass: status.protection?.name)
                switch status.state {
                case .readable: entry.state = "readable"
                case .locked(let reason): entry.state = "locked"; entry.reason = reason
                case .otherDevice: entry.state = "otherDevice"
                case .unreadable(let reason): entry.state = "unreadable"; entry.reason = reason
                case .notProtected: entry.state = "notProtected"
                case .error(let why): entry.reason = why; failed = true
                }
                if json { report.append(entry) } else { try VaultCLI.say(entry.line) }
            }
            if json { try JSONOutput.write(ReportJSON(files: report)) }
        }
        if failed { throw ExitCode(1) }
    }
}

struct ProtectUpgradeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Change every protected file of one class under a directory to another class (header only, atomic).",
        usage: "securefoundation protect upgrade [options] --from CLASS --to CLASS DIR",
        discussion: """
        Prints `changed N, already in the class A, skipped M, failed K` and one line per \
        failure; exit status 1 when any file failed. Runs over the same tree at the same time \
        take turns on each file (a lock held while its header is rewritten): a file another \
        run changed counts as already in the class, so every file is counted once.

        Example:
          securefoundation protect upgrade --from completeUnlessOpen --to complete \\
              --passcode-file pin.txt inbox
        """
    )

    @Option(name: .customLong("from"), help: "The class of the files to change.", completion: CompletionValues.fileProtectionClasses)
    var from: String

    @Option(name: .customLong("to"), help: "The class to give them.", completion: CompletionValues.fileProtectionClasses)
    var to: String

    @Argument(help: "The directory.")
    var directory: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        var failed = false
        try CLI.run {
            let old = try ProtectCLI.parseClass(from)
            let new = try ProtectCLI.parseClass(to)
            let files = try vault.files()
            let report = try ProgressLine.run("protect upgrade \(directory)") { _ in
                try files.upgradeItems(inDirectory: directory, from: old, to: new)
            }
            try VaultCLI.say("changed \(report.changed.count), already in the class \(report.alreadyInClass), skipped \(report.skipped), failed \(report.failures.count)")
            for failure in report.failures { CLI.warn("securefoundation: \(failure.path): \(failure.error)") }
            failed = !report.failures.isEmpty
        }
        if failed { throw ExitCode(1) }
    }
}

struct ProtectExportIdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-identity",
        abstract: "Print a class's age identity (AGE-SECRET-KEY-1…), for `age -d -i` and recovery.",
        usage: "securefoundation protect export-identity [options] --class CLASS",
        discussion: """
        Whoever holds the identity reads every file of the class without the vault, on any \
        device: keep it as you would the passcode. The class recipient (age1…) goes to stderr \
        with the warning, so files encrypted by `age -r` to it read as that class.

        Example:
          securefoundation protect export-identity --class complete -o complete.key \\
              --passcode-file pin.txt
        """
    )

    @Option(name: .customLong("class"), help: "The protection class.", completion: CompletionValues.fileProtectionClasses)
    var className: String

    @Option(name: .shortAndLong, help: "Write the identity to this file (0600) instead of standard output.")
    var output: String?

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let cls = try ProtectCLI.parseClass(className)
            let files = try vault.files()
            let identity = try files.exportIdentity(for: cls)
            defer { identity.wipe() }
            let recipient = try files.recipient(for: cls)
            CLI.warn("securefoundation: warning: this identity opens every \(cls.name) file without the vault; keep it secret (recipient: \(recipient))")
            let line = identity.appending(SecretBytes(copying: [0x0A]))
            defer { line.wipe() }
            try line.withUnsafeBytes { bytes in
                if let output, output != "-" {
                    try CLI.writeOutput(to: output) { fd in try SecureFile.writeAll(fd, bytes, path: output) }
                } else {
                    try CLI.writeStdout(bytes)
                }
            }
        }
    }
}

struct ProtectRotateKeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-keys",
        abstract: "Give every class a new key pair, re-wrap the files under the directories, destroy the old pairs.",
        usage: "securefoundation protect rotate-keys [options] [--resume] DIR ...",
        discussion: """
        Every class that has a key pair gets a new X25519 key pair; the replaced pairs are kept \
        (retired) while every protected file under the directories is re-wrapped to the new \
        pair of its class (header only, atomically; files already re-wrapped are left alone), \
        then the retired pairs are destroyed (the key table that held them is crypto-erased). \
        Afterwards an old copy of the data directory, even with the passcode of its time, opens \
        none of the re-wrapped files. Run `vault rotate-class-keys` first to also replace the \
        class keys that seal the identities.

        Give every directory that holds protected files of this vault, and stop writers while \
        it runs: a file still wrapped to a retired pair when it is destroyed no longer opens. \
        When a file cannot be re-wrapped the retired pairs are kept; fix the cause and finish \
        with --resume (no new pairs).

        Prints `key pairs rotated: N`, then `re-wrapped N, current N, skipped N, damaged N, \
        failed N` (damaged: no key pair of this vault opens the file) and \
        `retired key pairs destroyed: N` or `retired key pairs kept: N`, with one line per \
        damaged or failed file on stderr. Exit status 1 when any file is damaged or failed.

        Example:
          securefoundation protect rotate-keys inbox photos --passcode-file pin.txt
        """
    )

    @Flag(name: .customLong("resume"), help: "Do not make new key pairs: finish an interrupted or failed run.")
    var resume = false

    @Argument(help: "The directories holding protected files.")
    var directories: [String]

    @OptionGroup var vault: ProtectVaultOptions

    func validate() throws {
        if directories.isEmpty { throw ValidationError("give at least one directory") }
    }

    func run() throws {
        var failed = false
        try CLI.run {
            let files = try vault.files()
            let report = try ProgressLine.run("protect rotate-keys") { _ in
                try files.rotateKeyPairs(rewrapping: directories, resume: resume)
            }
            let rewrap = report.rewrap
            try VaultCLI.say("key pairs rotated: \(report.rotated)")
            try VaultCLI.say("re-wrapped \(rewrap.rewrapped.count), current \(rewrap.current), skipped \(rewrap.skipped), damaged \(rewrap.damaged.count), failed \(rewrap.failed.count)")
            try VaultCLI.say(report.retiredKept > 0 ? "retired key pairs kept: \(report.retiredKept)" : "retired key pairs destroyed: \(report.retiredDestroyed)")
            for failure in rewrap.damaged { CLI.warn("securefoundation: damaged: \(failure.path): \(failure.error)") }
            for failure in rewrap.failed { CLI.warn("securefoundation: not re-wrapped: \(failure.path): \(failure.error)") }
            if report.retiredKept > 0 {
                CLI.warn("securefoundation: the retired key pairs are kept until every file is re-wrapped: fix the cause and run `protect rotate-keys --resume` with the same directories")
            }
            failed = !rewrap.damaged.isEmpty || !rewrap.failed.isEmpty
        }
        if failed { throw ExitCode(1) }
    }
}
