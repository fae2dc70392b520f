import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// Options shared by every command that touches the vault's state: where it lives and where the
/// device key is. Reusable by later commands (`@OptionGroup var home: HomeOptions`).
struct HomeOptions: ParsableArguments {
    @Option(name: .customLong("home"), help: ArgumentHelp(
        "The data directory (default: $SECUREFOUNDATION_HOME, else $XDG_DATA_HOME/securefoundation, else ~/.local/share/securefoundation).",
        valueName: "dir"))
    var home: String?

    @Option(name: .customLong("device-key"), help: ArgumentHelp(
        "The device-key file (default: $XDG_CONFIG_HOME/securefoundation/device.key, else ~/.config/securefoundation/device.key).",
        valueName: "file"))
    var deviceKey: String?

    @Flag(name: .customLong("legacy-kdf-ceiling"), help: "Accept stored KDF settings up to the earlier, looser ceiling (scrypt up to 16 GiB, PBKDF2 up to 100,000,000 rounds), for a vault created with such custom settings by an earlier version.")
    var legacyKDFCeiling = false

    /// The data directory these options name, resolved as the crypto manager resolves it.
    var directory: String { VaultPaths.absolute(home ?? VaultPaths.defaultDirectory()) }

    /// Whether the data directory exists (read-only commands create nothing when it does not).
    var directoryExists: Bool {
        (try? FileCalls.linkStatus(directory)) != nil
    }

    /// The crypto manager for these options. With `useAgent` (and unless
    /// `$SECUREFOUNDATION_AGENT` is `off`), a running unlock agent of this vault supplies the
    /// whenUnlocked and afterFirstUnlock keys while the manager is locked. `policy` (the
    /// commands that write wrappings) brings `--kdf` and `--erase-after`, `eraseAfter` the
    /// count of `vault unlock`; without them new wrappings use the interactive KDF and the
    /// stored erase-after count applies. `provider`: the device-key provider (nil: the home's,
    /// ``deviceKeyProvider()``).
    func manager(useAgent: Bool = true, policy given: VaultPolicyOptions? = nil, eraseAfter: Int? = nil,
                 provider: (any DeviceKeyProvider)? = nil) throws -> CryptoManager {
        var attempts = AttemptPolicy.iOS
        if let eraseAfter = given?.eraseAfter ?? eraseAfter { attempts = attempts.erasing(after: eraseAfter) }
        let agent = useAgent && ProcessInfo.processInfo.environment["SECUREFOUNDATION_AGENT"] != "off" ? AgentClient(home: home, timeout: 10) : nil
        if let agent { AgentInUse.register(agent) }
        return try CryptoManager(directory: home, deviceKeyProvider: try provider ?? deviceKeyProvider(),
                                 policy: try given?.policy() ?? .interactive, attemptPolicy: attempts, kdfCeiling: legacyKDFCeiling ? .legacy : .standard,
                                 unlockedKeySource: agent)
    }
}

/// The vault's policy options, offered only where they act: `--erase-after` and `--kdf` on the
/// commands that write new wrappings (`init`, `change-passcode`, `change-questions`,
/// `rotate-key`), `--erase-after` alone on `unlock` (``EraseAfterOptions``).
struct VaultPolicyOptions: ParsableArguments {
    @OptionGroup var erase: EraseAfterOptions

    @Option(name: .customLong("kdf"), help: ArgumentHelp(
        "KDF work for the new wrappings: interactive (scrypt 2^16, default), sensitive (scrypt 2^18), minimum (scrypt 2^15, the floor), fips-interactive, fips-sensitive (PBKDF2). $SECUREFOUNDATION_KDF changes the default.",
        valueName: "work"), completion: CompletionValues.kdfWork)
    var kdf: String?

    /// The names `--kdf` takes and the work each names (also the shell completions' list).
    static let kdfWork: [(name: String, policy: KDFPolicy)] = [
        ("interactive", .interactive), ("sensitive", .sensitive), ("minimum", .minimum),
        ("fips-interactive", .fipsInteractive), ("fips-sensitive", .fipsSensitive),
    ]

    /// The work named by `--kdf`, else by `$SECUREFOUNDATION_KDF`, else `interactive`.
    var kdfName: String { kdf ?? ProcessInfo.processInfo.environment["SECUREFOUNDATION_KDF"].flatMap { $0.isEmpty ? nil : $0 } ?? "interactive" }

    var eraseAfter: Int? { erase.eraseAfter }

    func validate() throws { _ = try policy() }

    func policy() throws -> KDFPolicy {
        if let work = Self.kdfWork.first(where: { $0.name == kdfName }) { return work.policy }
        let source = kdf == nil ? "$SECUREFOUNDATION_KDF" : "--kdf"
        throw ValidationError("\(source) must be interactive, sensitive, minimum, fips-interactive or fips-sensitive")
    }
}

/// `--erase-after N`: stored with the vault by `init` (and by the first change that upgrades a
/// version-1 vault); given to a command that checks a secret, the stricter of it and the stored
/// count applies.
struct EraseAfterOptions: ParsableArguments {
    @Option(name: .customLong("erase-after"), help: ArgumentHelp(
        "Destroy the vault's keys after this many consecutive failed unlock attempts (default: never). Stored with the vault by init; on a later command the stricter of the stored and the given count applies.",
        valueName: "count"))
    var eraseAfter: Int?

    func validate() throws {
        if let eraseAfter, eraseAfter < 1 { throw ValidationError("--erase-after must be at least 1") }
    }
}

/// How a command unlocks the vault: `--passcode-file` or `--answers-file` (else the terminal).
struct VaultCredentialOptions: ParsableArguments {
    @Option(name: .customLong("passcode-file"), help: "Unlock with the passcode in this file (`-` for stdin).")
    var passcodeFile: String?

    @Option(name: .customLong("answers-file"), help: "Unlock with the answers in this file instead, one per line.")
    var answersFile: String?

    @Option(name: .customLong("recovery-key-file"), help: "Unlock with the recovery key in this file instead (`-` for stdin; dashes, spaces and case are ignored).")
    var recoveryKeyFile: String?

    func validate() throws {
        if [passcodeFile, answersFile, recoveryKeyFile].compactMap({ $0 }).count > 1 {
            throw ValidationError("give one of --passcode-file, --answers-file and --recovery-key-file")
        }
    }

    /// Whether a file was given.
    var given: Bool { passcodeFile != nil || answersFile != nil || recoveryKeyFile != nil }

    /// What the user gave, for messages: "passcode", "answers" or "recovery key".
    var name: String { answersFile != nil ? "answers" : (recoveryKeyFile != nil ? "recovery key" : "passcode") }

    /// Unlocks `manager` with the given file, or the passcode from the terminal; without a
    /// file, a running unlock agent holding this vault unlocked is used instead of asking
    /// (unless `needsApplicationKey`: the agent serves class keys only).
    func unlock(_ manager: CryptoManager, needsApplicationKey: Bool = false) throws {
        if let recoveryKeyFile {
            try VaultCLI.requireSetUp(manager)
            let key = try VaultCLI.recoveryKey(file: recoveryKeyFile)
            defer { key.wipe() }
            try manager.unlock(recoveryKey: key)
            return
        }
        try VaultCLI.unlock(manager, passcodeFile: passcodeFile, answersFile: answersFile, agentMayServe: !needsApplicationKey)
    }

    /// The credential these options name: the recovery key, the answers, or the passcode (from
    /// its file, else the terminal). The caller wipes it (``VaultCLI/wipe(_:)``).
    func credential(prompt: String = "Passcode: ") throws -> VaultCredential {
        if let recoveryKeyFile { return .recoveryKey(try VaultCLI.recoveryKey(file: recoveryKeyFile)) }
        if let answersFile { return .answers(try VaultCLI.readAnswers(answersFile)) }
        return .passcode(try VaultCLI.passcode(file: passcodeFile, prompt: prompt))
    }
}

/// Shared helpers of the vault commands.
enum VaultCLI {
    /// Throws unless the vault is set up (``VaultError/erased`` when it was erased).
    static func requireSetUp(_ manager: CryptoManager) throws {
        guard try manager.isSetUp else { throw manager.isErased ? VaultError.erased : VaultError.notSetUp }
    }

    /// What a command does when no secret file is given.
    enum WithoutFile {
        /// Ask for the passcode on the terminal.
        case askTerminal
        /// Stay locked (items of the always class, or keys a running agent serves, still open).
        case stayLocked
    }

    /// The one way every command unlocks the vault. With no file given, a running unlock agent
    /// that holds this vault unlocked stands in for the secret when `agentMayServe` (the agent
    /// serves class keys, never the application key), else `withoutFile` decides. With a file,
    /// the answers in `answersFile`, else the passcode in `passcodeFile` (`-` is standard input).
    /// Every secret read is wiped before returning.
    /// - Throws: ``VaultError/notSetUp`` or ``VaultError/erased`` when there is no vault, the
    ///   vault's unlock errors (wrong passcode, wait, erased), or a failure to read the secret.
    static func unlock(_ manager: CryptoManager, passcodeFile: String?, answersFile: String? = nil,
                       withoutFile: WithoutFile = .askTerminal, agentMayServe: Bool = false,
                       prompt: String = "Passcode: ") throws {
        if passcodeFile == nil && answersFile == nil {
            if withoutFile == .stayLocked { return }
            if agentMayServe, agentHoldsUnlocked(manager) { return }
        }
        try requireSetUp(manager)
        if let answersFile {
            let answers = try readAnswers(answersFile)
            defer { answers.forEach { $0.wipe() } }
            try manager.unlock(answers: answers)
        } else {
            let passcode = try self.passcode(file: passcodeFile, prompt: prompt)
            defer { passcode.wipe() }
            try manager.unlock(passcode: passcode)
        }
    }

    /// Whether an unlock agent serves `manager`'s vault unlocked (its whenUnlocked keys come
    /// from the agent, so no passcode is needed for class keys).
    static func agentHoldsUnlocked(_ manager: CryptoManager) -> Bool {
        guard let agent = manager.unlockedKeySource as? AgentClient, let status = try? agent.status() else { return false }
        return status.state == .unlocked && status.home == manager.directory
    }

    /// Reads answers from a file, one per line, straight into locked memory (the format is the
    /// vault's: ``VaultCredential/answers(fromFile:)``).
    static func readAnswers(_ path: String) throws -> [SecretBytes] {
        do { return try VaultCredential.answers(fromFile: path) } catch {
            // As before: a file that cannot be read is the CLI's I/O error on that path.
            if case .io(let why) = error { throw CipherError.io(why) }
            throw error
        }
    }

    /// A passcode from a file or the terminal.
    static func passcode(file: String?, prompt: String, confirm: Bool = false) throws -> SecretBytes {
        try CLI.passphrase(file: file, prompt: prompt, confirm: confirm, what: "passcode", option: "--passcode-file")
    }

    /// A recovery key from a file (`-`: standard input) or the terminal, its checksum checked.
    static func recoveryKey(file: String?) throws -> RecoveryKey {
        let text = try CLI.passphrase(file: file, prompt: "Recovery key: ", confirm: false, what: "recovery key", option: "--recovery-key-file")
        defer { text.wipe() }
        return try RecoveryKey(text: text)
    }

    /// Wipes the secrets of a credential.
    static func wipe(_ credential: VaultCredential) {
        switch credential {
        case .passcode(let passcode): passcode.wipe()
        case .answers(let answers): answers.forEach { $0.wipe() }
        case .recoveryKey(let key): key.wipe()
        }
    }

    static func keyID(_ manager: CryptoManager) -> String {
        ((try? manager.keyID) ?? nil).map { Encoding.hex($0) } ?? "-"
    }

    static func say(_ line: String) throws {
        // A progress line on the same terminal is cleared first (it is drawn again below).
        if isatty(1) == 1 { ProgressLine.clearForMessage() }
        try CLI.writeStdout(Array((line + "\n").utf8))
    }
}
