import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation vault …`: the crypto manager from the command line.
struct VaultCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "One application key behind a passcode and security questions: create, check, change, rotate, erase.",
        discussion: """
        The vault lives in one private directory (0700, files 0600). Its application key is \
        wrapped under a key derived from the passcode and under keys derived from the answers \
        to security questions (any K of N with --threshold). Failed unlock attempts are counted \
        across processes with escalating delays (none for 1-4, then 1 min, 5 min, 15 min, 15 min, 1 h).

        Passcodes are read from the terminal without echo, or from --passcode-file. Answers are \
        read from --answers-file, one per line in question order (an empty line = not answered); \
        they are compared after Unicode NFKC, case folding and whitespace collapsing.

        Exit status (one table for every command, CLI.md in the documentation): 0 success, 1 error, 2 damaged \
        state, 3 wrong passcode or answers, 4 too many attempts (wait), 5 no vault (not set up, \
        or erased), 45 a vault exists already (init), 64 usage error, 74 a file cannot be read \
        or written.

        Examples:
          securefoundation vault init --passcode-file pin.txt \\
              --question "First pet?" --question "Birth town?" \\
              --question "First teacher?" --answers-file answers.txt --threshold 2
          securefoundation vault unlock --passcode-file pin.txt
          securefoundation vault status
        """,
        subcommands: [
            VaultInitCommand.self, VaultStatusCommand.self, VaultUnlockCommand.self, VaultChangePasscodeCommand.self,
            VaultChangeQuestionsCommand.self, VaultRotateKeyCommand.self, VaultRotateClassKeysCommand.self, VaultEraseCommand.self,
            VaultMigrateDeviceKeyCommand.self, VaultRotateDeviceKeyCommand.self, VaultRecoveryKeyCommand.self,
            VaultRebindDeviceKeyCommand.self,
        ]
    )
}

struct VaultInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create the vault: a new application key behind a passcode and/or security questions.",
        discussion: """
        Give a passcode (from the terminal, or --passcode-file), security questions (repeated \
        --question with --answers-file, one answer per line), or both. --threshold K lets any K \
        of the N answers unlock (default: all N). Everything is written in one atomic step.

        Example:
          securefoundation vault init --home ~/.app --passcode-file pin.txt \\
              --question "First pet?" --question "Birth town?" \\
              --question "First teacher?" --answers-file answers.txt --threshold 2
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var policy: VaultPolicyOptions

    @Option(name: .customLong("passcode-file"), help: "Read the passcode from this file (`-` for stdin; one trailing newline is dropped).")
    var passcodeFile: String?

    @Flag(name: .customLong("no-passcode"), help: "Create the vault with security questions only.")
    var noPasscode = false

    @Option(name: .customLong("question"), help: "A security question (repeat for several).")
    var questions: [String] = []

    @Option(name: .customLong("answers-file"), help: "The answers, one per line, in question order.")
    var answersFile: String?

    @Option(name: .customLong("threshold"), help: "How many answers unlock (K of N; default N).")
    var threshold: Int?

    @Option(name: .customLong("device-key-provider"), help: "Where the device key lives: file (default), systemd-credential, keyring, tpm2 or pkcs11 (recorded beside the device key).", completion: CompletionValues.deviceKeyProviders)
    var deviceKeyProvider: String?

    @OptionGroup var providerOptions: DeviceKeyProviderOptions

    @Flag(name: .customLong("recovery-key"), help: "Also make a recovery key and print it once (RECOVERY.md in the documentation): it unlocks the vault, and binds it to a new device key, when the passcode and answers are lost.")
    var recoveryKey = false

    @Option(name: .customLong("recovery-key-output"), help: ArgumentHelp("Write the recovery key to this file (0600) instead of standard output (implies --recovery-key).", valueName: "file"))
    var recoveryKeyOutput: String?

    func validate() throws {
        if let deviceKeyProvider { _ = try DeviceKeyProviderOptions.kind(deviceKeyProvider, option: "--device-key-provider") }
        guard questions.isEmpty == (answersFile == nil) else { throw ValidationError("--question and --answers-file go together") }
        guard !noPasscode || !questions.isEmpty else { throw ValidationError("--no-passcode needs security questions") }
        guard threshold == nil || !questions.isEmpty else { throw ValidationError("--threshold needs security questions") }
        guard !(noPasscode && passcodeFile != nil) else { throw ValidationError("--no-passcode and --passcode-file exclude each other") }
    }

    func run() throws {
        try CLI.run {
            // The secrets first: without them (no terminal, an empty file) nothing is created.
            guard access(home.directory + "/vault.state", F_OK) != 0 else { throw VaultError.alreadySetUp }
            let passcode = noPasscode ? nil : try VaultCLI.passcode(file: passcodeFile, prompt: "New passcode: ", confirm: true)
            defer { passcode?.wipe() }
            let answers = try answersFile.map { try VaultCLI.readAnswers($0) } ?? []
            defer { answers.forEach { $0.wipe() } }
            var manager = try home.manager(policy: policy)
            guard try !manager.isSetUp else { throw VaultError.alreadySetUp }
            var record: DeviceKeyRecord?
            if let deviceKeyProvider {
                // A chosen provider: a new device key stored there before the vault exists; the
                // record (beside the device key, named by the vault's id) once it exists.
                let kind = try DeviceKeyProviderOptions.kind(deviceKeyProvider, option: "--device-key-provider")
                let usesFile = kind == .file || (kind == .keyring && providerOptions.keyringBacking == "file")
                let key = usesFile ? try FileDeviceKeyProvider(path: home.deviceKey).deviceKey() : try SecretBytes.random(count: 32)
                defer { key.wipe() }
                let installed = try providerOptions.installation(kind: kind).install(key, home: manager.directory, filePath: home.deviceKey)
                record = installed
                manager = try home.manager(policy: policy, provider: installed.provider(filePath: home.deviceKey))
            }
            if let passcode { try manager.storeTemporaryPasscode(passcode) }
            if !questions.isEmpty { try manager.storeTemporarySecurityQuestions(questions, answers: answers, threshold: threshold) }
            try manager.finalize()
            try record?.save(directory: manager.directory, filePath: home.deviceKey)
            if recoveryKey || recoveryKeyOutput != nil {
                let key = try manager.createRecoveryKey()
                defer { key.wipe() }
                try VaultCLI.showRecoveryKey(key, output: recoveryKeyOutput)
            }
            // Every class's key pair, while the class keys are at hand: a completeUnlessOpen file
            // can then be written before the first unlock. A table left by an erased vault of
            // this directory goes first. A failure here leaves a working vault (the pairs are
            // made at the next unlocked command).
            do {
                let files = ProtectedFiles(manager: manager)
                try files.eraseKeyTable()
                _ = try files.prepareClasses()
            } catch {
                CLI.warn("securefoundation: warning: the protected-file key pairs were not made (\(error)); the first unlocked `protect` command makes them")
            }
            manager.lock()
            try VaultCLI.say("created vault in \(manager.directory) (key id \(VaultCLI.keyID(manager)))")
        }
    }
}

struct VaultStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether a vault is set up, its questions, key id and failed attempts (no secret needed).",
        usage: "securefoundation vault status [options] [--json]",
        discussion: """
        Example:
          securefoundation vault status --home ~/.app
        """
    )

    @OptionGroup var home: HomeOptions

    @Flag(name: .customLong("json"), help: "Print the status as JSON (CLI.md in the documentation, \"JSON output\").")
    var json = false

    /// One re-binding to a new device key, from the vault's record.
    struct Rebinding: Encodable {
        /// Seconds since 1970.
        var at: Int
        var from: String?
        var to: String
        var credential: String
    }

    /// What `status` reports, as text or (`--json`) as JSON.
    struct Report: Encodable {
        var version = JSONOutput.schemaVersion
        var directory: String
        var directoryExists: Bool
        /// setUp, notSetUp or erased.
        var state: String
        var passcode: Bool?
        var questions: [String]?
        var answerThreshold: Int?
        var keyID: String?
        var eraseAfter: Int?
        var recoveryKey: Bool?
        var rebindings: [Rebinding]?
        var deviceKey: String
        var failedAttempts: Int
        var nextAttemptSeconds: Int
    }

    func run() throws {
        try CLI.run {
            let report = try Self.report(home)
            if json { try JSONOutput.write(report); return }
            var lines = ["directory: \(report.directory)\(report.directoryExists ? "" : " (does not exist)")"]
            lines.append("state: \(["setUp": "set up", "notSetUp": "not set up"][report.state] ?? report.state)")
            if report.state == "setUp" {
                lines.append("passcode: \(report.passcode == true ? "yes" : "no")")
                let questions = report.questions ?? []
                if questions.isEmpty {
                    lines.append("security questions: none")
                } else {
                    lines.append("security questions: \(questions.count), any \(report.answerThreshold ?? questions.count) unlock")
                    for (index, question) in questions.enumerated() { lines.append("  \(index + 1). \(question)") }
                }
                lines.append("key id: \(report.keyID ?? "")")
                lines.append("erase after: \(report.eraseAfter.map { "\($0) failed attempts in a row" } ?? "never (unless --erase-after is given)")")
                lines.append("recovery key: \(report.recoveryKey == true ? "yes" : "no")")
                for entry in report.rebindings ?? [] {
                    let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(entry.at)))
                    lines.append("re-bound to a new device key: \(when), \(entry.from ?? "none") -> \(entry.to), with the \(entry.credential)")
                }
            }
            lines.append("device key: \(report.deviceKey)")
            if report.directoryExists {
                lines.append("failed attempts: \(report.failedAttempts)")
                if report.nextAttemptSeconds > 0 { lines.append("next attempt in: \(report.nextAttemptSeconds) s") }
            }
            try VaultCLI.say(lines.joined(separator: "\n"))
        }
    }

    static func report(_ home: HomeOptions) throws -> Report {
        guard home.directoryExists else {
            // Read-only: a mistyped --home must not create a directory.
            let devicePath = FileDeviceKeyProvider(path: home.deviceKey).path
            return Report(directory: home.directory, directoryExists: false, state: "notSetUp",
                          deviceKey: "\(devicePath)\(access(devicePath, F_OK) == 0 ? "" : " (not created yet)")",
                          failedAttempts: 0, nextAttemptSeconds: 0)
        }
        let manager = try home.manager()
        var report = Report(directory: manager.directory, directoryExists: true, state: "notSetUp", deviceKey: "",
                            failedAttempts: try manager.failedAttempts, nextAttemptSeconds: 0)
        if try manager.isSetUp {
            report.state = "setUp"
            report.passcode = try manager.hasPasscode
            let questions = try manager.questions
            report.questions = questions
            if !questions.isEmpty { report.answerThreshold = try manager.answerThreshold ?? questions.count }
            report.keyID = VaultCLI.keyID(manager)
            report.eraseAfter = try manager.storedEraseAfter
            report.recoveryKey = try manager.hasRecoveryKey
            report.rebindings = try manager.rebindingRecord.map {
                Rebinding(at: Int($0.at.timeIntervalSince1970), from: $0.from.map { Encoding.hex(Array($0)) }, to: Encoding.hex(Array($0.to)), credential: $0.credential)
            }
        } else if manager.isErased {
            report.state = "erased"
        }
        if let legacy = try? DeviceKeyRecord.loadLegacy(directory: manager.directory),
           (try? DeviceKeyRecord.load(directory: manager.directory, filePath: home.deviceKey)) == nil {
            report.deviceKey = "not used: \(manager.directory)/\(DeviceKeyRecord.fileName) names \(legacy.summary) but lies in the data directory; if it is yours, move it with `vault migrate-device-key --adopt`"
        } else if let record = try DeviceKeyRecord.load(directory: manager.directory, filePath: home.deviceKey) {
            report.deviceKey = record.summary
        } else {
            let devicePath = FileDeviceKeyProvider(path: home.deviceKey).path
            report.deviceKey = "\(devicePath)\(access(devicePath, F_OK) == 0 ? "" : " (not created yet)")"
        }
        let delay = try manager.nextAttemptDelay
        if delay > .zero { report.nextAttemptSeconds = Int(delay.components.seconds) }
        return report
    }
}

struct VaultUnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Check the passcode (or the answers) and report success, the wait time, or erasure.",
        usage: "securefoundation vault unlock [options] [--passcode-file FILE]",
        discussion: """
        The check counts as an unlock attempt. Nothing stays unlocked after the command ends: \
        no background process is started.

        The device key is read and checked as well (its token PIN, the token, the TPM): a right \
        passcode with a device key that cannot be read exits with the device key's status and \
        says the passcode was right.

        Exit status: 0 unlocked, 3 wrong passcode, answers or token PIN, 4 too many attempts (the \
        message says how long to wait), 5 no vault (not set up, or erased), 64 the token's PIN \
        was not given, 1 other errors (CLI.md in the documentation).

        Examples:
          securefoundation vault unlock --passcode-file pin.txt
          securefoundation vault unlock --answers-file answers.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var erase: EraseAfterOptions

    @OptionGroup var credentials: VaultCredentialOptions

    func run() throws {
        try CLI.run {
            let manager = try home.manager(eraseAfter: erase.eraseAfter)
            // The passcode itself is checked: a running agent does not stand in for it.
            try credentials.unlock(manager, needsApplicationKey: true)
            // The device key too: every device-bound class and the keychain need it, so a right
            // passcode with a wrong token PIN (or no token) is not "unlocked".
            do {
                try manager.checkDeviceKey()
            } catch {
                manager.lock()
                CLI.warn("securefoundation: the \(credentials.name) is right, but the device key cannot be read, so data bound to this device and the keychain stay closed")
                throw error
            }
            manager.lock()
            try VaultCLI.say("unlocked (key id \(VaultCLI.keyID(manager)))")
        }
    }
}

struct VaultChangePasscodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change-passcode",
        abstract: "Replace the passcode, proving the current one (or the answers, if it is forgotten).",
        usage: "securefoundation vault change-passcode [options]",
        discussion: """
        The application key does not change, so data stays readable; the state file holding the \
        old wrapping is destroyed.

        Examples:
          securefoundation vault change-passcode --passcode-file old.txt \\
              --new-passcode-file new.txt
          securefoundation vault change-passcode --answers-file answers.txt \\
              --new-passcode-file new.txt
          securefoundation vault change-passcode --recovery-key-file recovery.txt \\
              --new-passcode-file new.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var policy: VaultPolicyOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: .customLong("new-passcode-file"), help: "The new passcode (default: asked on the terminal twice).")
    var newPasscodeFile: String?

    func run() throws {
        try CLI.run {
            let manager = try home.manager(policy: policy)
            try VaultCLI.requireSetUp(manager)
            if let recoveryKeyFile = credentials.recoveryKeyFile {
                let key = try VaultCLI.recoveryKey(file: recoveryKeyFile)
                defer { key.wipe() }
                let new = try VaultCLI.passcode(file: newPasscodeFile, prompt: "New passcode: ", confirm: true)
                defer { new.wipe() }
                try manager.resetPasscode(recoveryKey: key, new: new)
            } else if let answersFile = credentials.answersFile {
                let answers = try VaultCLI.readAnswers(answersFile)
                defer { answers.forEach { $0.wipe() } }
                let new = try VaultCLI.passcode(file: newPasscodeFile, prompt: "New passcode: ", confirm: true)
                defer { new.wipe() }
                try manager.resetPasscode(answers: answers, new: new)
            } else {
                guard try manager.hasPasscode else { throw ValidationError("this vault has no passcode yet; prove with --answers-file") }
                let current = try VaultCLI.passcode(file: credentials.passcodeFile, prompt: "Current passcode: ")
                defer { current.wipe() }
                let new = try VaultCLI.passcode(file: newPasscodeFile, prompt: "New passcode: ", confirm: true)
                defer { new.wipe() }
                try manager.updatePasscode(current: current, new: new)
            }
            manager.lock()
            try VaultCLI.say("passcode changed (key id \(VaultCLI.keyID(manager)))")
        }
    }
}

struct VaultChangeQuestionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change-questions",
        abstract: "Replace the security questions and answers (unlocking with the passcode first).",
        usage: """
        securefoundation vault change-questions [options]
            --question TEXT ... --new-answers-file FILE
        """,
        discussion: """
        Example:
          securefoundation vault change-questions --passcode-file pin.txt \\
              --question "First pet?" --question "Birth town?" \\
              --new-answers-file answers.txt --threshold 1
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var policy: VaultPolicyOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: .customLong("question"), help: "A new security question (repeat for several).")
    var questions: [String] = []

    @Option(name: .customLong("new-answers-file"), help: "The new answers, one per line, in question order.")
    var newAnswersFile: String

    @Option(name: .customLong("threshold"), help: "How many answers unlock (K of N; default N).")
    var threshold: Int?

    func validate() throws {
        guard !questions.isEmpty else { throw ValidationError("give at least one --question") }
    }

    func run() throws {
        try CLI.run {
            let manager = try home.manager(policy: policy)
            try VaultCLI.unlock(manager, passcodeFile: credentials.passcodeFile, answersFile: credentials.answersFile)
            let answers = try VaultCLI.readAnswers(newAnswersFile)
            defer { answers.forEach { $0.wipe() } }
            try manager.updateSecurityQuestions(questions, answers: answers, threshold: threshold)
            manager.lock()
            try VaultCLI.say("security questions changed: \(questions.count), any \(threshold ?? questions.count) unlock")
        }
    }
}

struct VaultRotateKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-key",
        abstract: "Replace the application key; data sealed under the old one stays readable by its key id.",
        usage: "securefoundation vault rotate-key [options] [--passcode-file FILE]",
        discussion: """
        The new key is wrapped under the passcode and under every K-subset of the answers, so \
        both are needed when the vault has both; every answer is checked first, and an answer \
        that does not verify is refused by its question number (exit 3). Class keys (keychain, \
        protected files) do not change.

        Example:
          securefoundation vault rotate-key --passcode-file pin.txt \\
              --answers-file answers.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var policy: VaultPolicyOptions

    @Option(name: .customLong("passcode-file"), help: "The passcode (`-` for stdin).")
    var passcodeFile: String?

    @Option(name: .customLong("answers-file"), help: "All answers, one per line (needed when the vault has questions).")
    var answersFile: String?

    func run() throws {
        try CLI.run {
            let manager = try home.manager(policy: policy)
            try VaultCLI.requireSetUp(manager)
            let answers = try answersFile.map { try VaultCLI.readAnswers($0) }
            defer { answers?.forEach { $0.wipe() } }
            let passcode = try manager.hasPasscode ? try VaultCLI.passcode(file: passcodeFile, prompt: "Passcode: ") : nil
            defer { passcode?.wipe() }
            let old = VaultCLI.keyID(manager)
            let new = try manager.rotateKey(passcode: passcode, answers: answers)
            manager.lock()
            try VaultCLI.say("key rotated: \(old) -> \(Encoding.hex(new))")
        }
    }
}

struct VaultRotateClassKeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-class-keys",
        abstract: "Replace the class keys and re-seal every keychain item under the new ones.",
        usage: "securefoundation vault rotate-class-keys [options]",
        discussion: """
        Replaces the class master (whenUnlocked and afterFirstUnlock keys) and the always key, \
        then re-seals every item of the keychain (HOME/keychain.sqlite) under the new keys. \
        Afterwards an old copy of vault.state and always.key, even with the passcode of the time, \
        opens no keychain item. rotate-key and change-passcode do not do this: run this after a \
        copy of the vault may have leaked. Protected-file class identities are re-sealed under \
        the new keys too; their key pairs stay the same unless --protected-dir is given \
        (then, as `protect rotate-keys`, every class gets a new key pair, the files under each \
        DIR are re-wrapped to it and the old pairs destroyed), and an old copy of the data \
        directory needs that to be cut off from protected files (PROTECTED-FILES.md in the documentation). \
        Items and files that cannot be opened are left as they are and reported (exit 1 after \
        the rest is done).

        The replaced keys are kept (sealed in the state) until nothing needs them, so an \
        interruption at any moment leaves every item readable; run the command again, or with \
        --reseal-only, to finish re-sealing without another rotation.

        Exit status: 0 success, 1 error, 3 wrong passcode or answers, 4 wait, 5 no vault, 64 usage, \
        74 a file cannot be written (a full disk: the message names the command that finishes) \
        (CLI.md in the documentation).

        Example:
          securefoundation vault rotate-class-keys --passcode-file pin.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Flag(name: .customLong("reseal-only"), help: "Only re-seal items still under earlier keys (finish an interrupted run).")
    var resealOnly = false

    @Option(name: .customLong("protected-dir"), help: ArgumentHelp("Also give the protected-file classes new key pairs and re-wrap the files under DIR (repeatable; with --reseal-only: only finish the re-wrap).", valueName: "dir"))
    var protectedDirectories: [String] = []

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            try credentials.unlock(manager, needsApplicationKey: true)
            defer { manager.lock() }
            // The number of replaced class-key generations: more after a failure means the
            // rotation itself happened, and only the re-seal is left (--reseal-only).
            func generations() -> Int {
                guard let keys = try? manager.retiredClassKeys(for: .whenUnlocked) else { return 0 }
                defer { keys.forEach { $0.wipe() } }
                return keys.count
            }
            let before = generations()
            try CLI.withNextStep({ error in
                // The replaced keys stay until nothing needs them: a second run finishes.
                guard CLI.isDiskFull(error) else { return nil }
                let finish = resealOnly || generations() > before
                let directories = protectedDirectories.map { " --protected-dir " + CLI.shellQuoted($0) }.joined()
                return "every item still opens (replaced keys are kept until nothing needs them); free some space, then run `securefoundation vault rotate-class-keys\(finish ? " --reseal-only" : "")\(directories)` with the passcode"
            }) {
            try ProgressLine.run("vault rotate-class-keys") { _ in
                var report = Keychain.ResealReport(resealed: 0, unreadable: [])
                if access(manager.directory + "/keychain.sqlite", F_OK) == 0 {
                    let keychain = try Keychain(manager: manager)
                    report = try resealOnly ? keychain.resealUnderCurrentClassKeys() : keychain.rotateClassKeys()
                    try keychain.close()
                } else if !resealOnly {
                    try manager.rotateClassKeys()
                }
                try VaultCLI.say("\(resealOnly ? "class keys unchanged" : "class keys rotated"); keychain items re-sealed: \(report.resealed)")
                if access(manager.directory + "/protected-files.keys", F_OK) == 0 {
                    let identities = try ProtectedFiles(manager: manager).resealUnderCurrentClassKeys()
                    try VaultCLI.say("protected-file class identities re-sealed: \(identities)")
                }
                if !protectedDirectories.isEmpty {
                    let rotation = try ProtectedFiles(manager: manager).rotateKeyPairs(rewrapping: protectedDirectories, resume: resealOnly)
                    let rewrap = rotation.rewrap
                    try VaultCLI.say("protected-file key pairs rotated: \(rotation.rotated); files re-wrapped \(rewrap.rewrapped.count), current \(rewrap.current), skipped \(rewrap.skipped), damaged \(rewrap.damaged.count), failed \(rewrap.failed.count); retired key pairs \(rotation.retiredKept > 0 ? "kept: \(rotation.retiredKept)" : "destroyed: \(rotation.retiredDestroyed)")")
                    for failure in rewrap.damaged + rewrap.failed { CLI.warn("securefoundation: \(failure.path): \(failure.error)") }
                    if !rewrap.damaged.isEmpty || !rewrap.failed.isEmpty {
                        throw CLIFailure("\(rewrap.damaged.count + rewrap.failed.count) protected file(s) were not re-wrapped (listed above); fix them and run again with --reseal-only --protected-dir")
                    }
                }
                if !report.unreadable.isEmpty {
                    throw KeychainError.corrupted("\(report.unreadable.count) keychain item(s) could not be opened and were left as they are (item ids \(report.unreadable.joined(separator: ", "))): delete them (delete-generic-password, or dump-keychain to see which) or restore the keychain from a backup")
                }
            }
            }
        }
    }
}

struct VaultEraseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "erase",
        abstract: "Destroy the vault's keys (crypto-erase). Everything sealed under them becomes unreadable.",
        usage: "securefoundation vault erase [options] --yes",
        discussion: """
        The state file (all wrapped keys), every leftover copy of it in the data directory \
        (temporary files of interrupted writes, superseded state files, files of an interrupted \
        erase), the attempt record, the always-class key and the protected-file key table are \
        overwritten and removed. If it \
        is interrupted, run it again. Copies outside the data directory (backups, snapshots) and \
        old blocks kept by SSDs or journals are out of its reach. The device key, kept outside \
        the data directory, is left alone; a copy cached in the kernel keyring (keyring \
        provider) is evicted. A running unlock agent notices the erase and forgets every key \
        of the vault.

        Example:
          securefoundation vault erase --home ~/.app --yes
        """
    )

    @OptionGroup var home: HomeOptions

    @Flag(name: .customLong("yes"), help: "Confirm: there is no undo.")
    var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("erasing cannot be undone; add --yes to confirm") }
    }

    func run() throws {
        try CLI.run {
            guard home.directoryExists else {
                throw CLIFailure("nothing to erase: \(home.directory) does not exist (check --home)")
            }
            let manager = try home.manager()
            try manager.erase()
            // The protected-file key pairs, sealed under the keys just destroyed, go too.
            try ProtectedFiles(manager: manager).eraseKeyTable()
            try VaultCLI.say("erased the vault in \(manager.directory)")
        }
    }
}
