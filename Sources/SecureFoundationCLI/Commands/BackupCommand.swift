import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation backup …`: a vault's home in one age file, restored on another machine.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up a vault's home to one age file, and restore it on this or another machine.",
        discussion: """
        `backup create` writes everything needed to open again every keychain item, protected \
        file and database of the classes without ThisDeviceOnly (the vault state, the always \
        key, the protected-file key table, a consistent copy of each keychain) into one age \
        file, encrypted to age recipients (-r, -R, -i, -j: X25519, post-quantum, SSH, plugins \
        such as a hardware token), a passphrase (-p), or the vault's own passcode \
        (--to-passcode). The real `age -d` opens it. Its contents are also authenticated under \
        the vault's keys. ThisDeviceOnly items and the device key stay on the machine and are \
        listed. Applications may keep running.

        `backup restore` puts it into an empty home (or, with --replace, replaces the same \
        vault atomically), then binds the vault to this machine's device key. See RECOVERY.md in the documentation.

        Exit status: 0 success, 2 damaged or altered backup, 3 no identity opens it, or a wrong \
        credential, 45 the home (or a path) exists, 46 the backup is of another vault than the \
        home, 64 usage, 74 a file cannot be read or written.
        """,
        subcommands: [BackupCreateCommand.self, BackupRestoreCommand.self]
    )
}

struct BackupCreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Write a backup of the vault's home as one age file.",
        discussion: """
        Needs the vault unlocked: a running unlock agent, or --passcode-file (--answers-file, \
        --recovery-key-file). --include adds files at their own paths (protected files and \
        databases; a database's -key record comes along, and a database still open is refused).

        Examples:
          securefoundation backup create -R recipients.txt -o /backups/app.age \\
              --passcode-file pin.txt
          securefoundation backup create -j yubikey --include /srv/app/data.db \\
              -o app.age
          securefoundation backup create --to-passcode --passcode-file pin.txt \\
              -o app.age
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: [.customShort("r"), .customLong("recipient")], help: "Encrypt to this age recipient (age1…, age1pq1…, ssh-ed25519/ssh-rsa, age1NAME1… of a plugin). Repeatable.")
    var recipients: [String] = []

    @Option(name: [.customShort("R"), .customLong("recipients-file")], help: "Encrypt to the recipients in this file. Repeatable.")
    var recipientsFiles: [String] = []

    @Option(name: [.customShort("i"), .customLong("identity")], help: "Encrypt to the recipients of the identities in this file. Repeatable.")
    var identityFiles: [String] = []

    @Option(name: [.customShort("j")], help: ArgumentHelp("Encrypt to the default identity of the plugin age-plugin-NAME. Repeatable.", valueName: "plugin-name"))
    var plugins: [String] = []

    @Flag(name: [.customShort("p"), .customLong("passphrase")], help: "Encrypt with a passphrase read from the terminal.")
    var passphrase = false

    @Option(name: .customLong("passphrase-file"), help: "Encrypt with the passphrase in this file.")
    var passphraseFile: String?

    @Flag(name: .customLong("to-passcode"), help: "Encrypt with the vault's passcode as the age passphrase (checked against the vault first): `age -d` asks for it.")
    var toPasscode = false

    @Option(name: .customLong("include"), help: ArgumentHelp("Also back up this file (a protected file or database). Repeatable.", valueName: "path"))
    var include: [String] = []

    @Flag(name: [.customShort("a"), .customLong("armor")], help: "Write PEM-armored text.")
    var armor = false

    @Option(name: [.customShort("o"), .customLong("output")], help: "The backup file (written atomically, 0600).")
    var output: String

    @Flag(name: .customLong("json"), help: "Print the report as JSON.")
    var json = false

    var request: EncryptRequest {
        EncryptRequest(recipients: recipients, recipientsFiles: recipientsFiles, identityFiles: identityFiles, plugins: plugins,
                       passphrase: passphrase, passphraseFile: passphraseFile, output: output, input: "/dev/null")
    }

    func validate() throws {
        if toPasscode {
            guard recipients.isEmpty && recipientsFiles.isEmpty && identityFiles.isEmpty && plugins.isEmpty && !passphrase && passphraseFile == nil else {
                throw ValidationError("--to-passcode is the backup's only recipient: give no -r, -R, -i, -j or passphrase with it")
            }
            guard credentials.answersFile == nil && credentials.recoveryKeyFile == nil else {
                throw ValidationError("--to-passcode needs the passcode (--passcode-file or the terminal), not answers or the recovery key")
            }
        } else {
            do { try request.validate() } catch { throw ValidationError(error.description) }
        }
    }

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            try VaultCLI.requireSetUp(manager)
            var list: [any AgeRecipient] = []
            var secret: SecretBytes?
            defer { secret?.wipe() }
            if toPasscode {
                // The passcode is checked against the vault (a counted attempt), then used as the
                // age passphrase: `age -d` asks for it.
                let passcode = try VaultCLI.passcode(file: credentials.passcodeFile, prompt: "Passcode: ")
                secret = passcode
                try manager.unlock(passcode: passcode)
                list = [try ScryptRecipient(passphrase: passcode, policy: .sensitive)]
            } else {
                try credentials.unlock(manager)
                let resolved = try request.recipientList()
                list = resolved.recipients
                secret = resolved.passphrase
            }
            defer { manager.lock() }
            let step = FaultInjection.stepHook()
            let report = try ProgressLine.run("backup") { progress in
                try Backup.write(manager: manager, recipients: list, toFile: output, armor: armor, includePaths: include) { done, _ in
                    progress(Int64(clamping: done))
                    try? step?("backup progress")
                }
            }
            if json { try JSONOutput.write(report); return }
            try VaultCLI.say("backed up vault \(report.vaultID) to \(output): \(report.entries.count) file\(report.entries.count == 1 ? "" : "s"), \(report.bytes) bytes")
            for entry in report.entries { try VaultCLI.say("  \(entry.kind) \(entry.name) (\(entry.size) bytes)") }
            for item in report.leftBehind { try VaultCLI.say("stays on this device: \(item.name) (\(item.class))") }
            for item in report.stayOnDevice { try VaultCLI.say("stays on this device: \(item)") }
            for item in report.damaged { CLI.warn("securefoundation: warning: left out, its class binding does not verify: \(item)") }
        }
    }
}

struct BackupRestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup into a home and bind it to this machine's device key.",
        discussion: """
        The backup is opened with -i/-j/--passphrase-file as `age -d` does; the vault with \
        --passcode-file, --answers-file or --recovery-key-file (as they were when the backup \
        was made; with --to-passcode backups the passcode opens both). Nothing reaches the home \
        before the whole backup is read and authenticated; it then appears in one step. \
        --replace replaces a home of the same vault (its other files are kept); a home of \
        another vault is refused (exit 46). Included files go back to their paths (never over \
        an existing file without --replace), or under --paths-to DIR.

        Examples:
          securefoundation backup restore app.age -i backup-key.txt \\
              --home /var/lib/app --passcode-file pin.txt
          securefoundation backup restore app.age --passphrase-file pin.txt \\
              --passcode-file pin.txt --home ~/.local/share/app
          securefoundation backup restore app.age -j yubikey \\
              --recovery-key-file recovery.txt --device-key-provider tpm2
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: [.customShort("i"), .customLong("identity")], help: "An identity file that opens the backup. Repeatable.")
    var identityFiles: [String] = []

    @Option(name: [.customShort("j")], help: ArgumentHelp("Open the backup with the plugin age-plugin-NAME. Repeatable.", valueName: "plugin-name"))
    var plugins: [String] = []

    @Option(name: .customLong("passphrase-file"), help: "The backup's passphrase (a -p or --to-passcode backup).")
    var passphraseFile: String?

    @Flag(name: .customLong("replace"), help: "Replace a home of the same vault (and included files that exist), atomically.")
    var replace = false

    @Option(name: .customLong("paths-to"), help: ArgumentHelp("Restore the included files under this directory (their paths appended).", valueName: "dir"))
    var pathsTo: String?

    @Flag(name: .customLong("skip-paths"), help: "Do not restore the included files.")
    var skipPaths = false

    @Flag(name: .customLong("take-over"), help: "This machine holds the vault in another home that is gone: restore it here all the same (its rollback anchor moves here).")
    var takeOver = false

    @Option(name: .customLong("device-key-provider"), help: "Keep this machine's device key here: file (default), systemd-credential, keyring, tpm2 or pkcs11.", completion: CompletionValues.deviceKeyProviders)
    var deviceKeyProvider: String?

    @OptionGroup var providerOptions: DeviceKeyProviderOptions

    @Flag(name: .customLong("json"), help: "Print the report as JSON.")
    var json = false

    @Argument(help: "The backup file (`-` for standard input).")
    var input: String

    func validate() throws {
        if let deviceKeyProvider { _ = try DeviceKeyProviderOptions.kind(deviceKeyProvider, option: "--device-key-provider") }
        if pathsTo != nil && skipPaths { throw ValidationError("--paths-to and --skip-paths exclude each other") }
        if input == "-" && [credentials.passcodeFile, credentials.answersFile, credentials.recoveryKeyFile, passphraseFile].contains("-") {
            throw ValidationError("standard input cannot hold both the backup and a secret")
        }
    }

    func run() throws {
        try CLI.run {
            var options = Backup.RestoreOptions()
            options.replace = replace
            options.pathsRoot = pathsTo
            options.skipPaths = skipPaths
            options.takeOver = takeOver
            options.deviceKeyFile = home.deviceKey
            options.installation = try deviceKeyProvider.map { try providerOptions.installation(kind: DeviceKeyProviderOptions.kind($0, option: "--device-key-provider")) }
            options.step = FaultInjection.stepHook()
            let (identities, passphrase) = try DecryptRequest(identityFiles: identityFiles, plugins: plugins, passphraseFile: passphraseFile, input: input).identityList()
            defer { passphrase?.wipe() }
            let credential = try credentials.credential()
            defer { VaultCLI.wipe(credential) }
            let fd = input == "-" ? 0 : open(input, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw BackupError.io("cannot open \(input): \(String(cString: strerror(errno)))") }
            defer { if fd != 0 { close(fd) } }
            let report = try Backup.restore(from: fd, identities: identities, home: home.directory, credential: credential, options: options)
            if json { try JSONOutput.write(report); return }
            try VaultCLI.say("restored vault \(report.vaultID) into \(report.home)\(report.replaced ? " (replacing it)" : ""), bound to this machine's device key (check value \(report.deviceCheck)); \(report.rebound) item\(report.rebound == 1 ? "" : "s") and key pair\(report.rebound == 1 ? "" : "s") re-keyed")
            for path in report.paths { try VaultCLI.say("restored \(path)") }
            for item in report.leftBehind { try VaultCLI.say("left behind on the machine the backup was made on: \(item.name) (\(item.class))") }
            for item in report.stayOnDevice { try VaultCLI.say("stayed on that machine: \(item)") }
            for item in report.unverified { try VaultCLI.say("re-bound without a class binding check (class always): \(item)") }
        }
    }
}
