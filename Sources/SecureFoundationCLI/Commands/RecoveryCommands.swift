import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

extension VaultCLI {
    /// Shows a new recovery key once: to `output` (0600, atomically) or standard output, with
    /// what it is for on standard error.
    static func showRecoveryKey(_ key: RecoveryKey, output: String?) throws {
        let text = key.text()
        defer { text.wipe() }
        if let output {
            let bytes = SecretBytes(count: text.count + 1) { target in
                text.withUnsafeBytes { target.copyMemory(from: $0) }
                target[text.count] = 0x0A
            }
            defer { bytes.wipe() }
            try bytes.withUnsafeBytes { _ = try SecureFile.writeOutput(Array($0), to: output) }
            CLI.warn("securefoundation: the recovery key is in \(output): keep it apart from this machine (printed, or in a password manager); it is shown only this once, and unlocks the vault without the passcode")
        } else {
            CLI.warn("securefoundation: the recovery key (shown only this once; keep it apart from this machine, it unlocks the vault without the passcode):")
            try text.withUnsafeBytes { try CLI.writeStdout(Array($0) + [0x0A]) }
        }
    }
}

struct VaultRecoveryKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery-key",
        abstract: "Make, replace or remove the vault's recovery key (unlocks it when the passcode and answers are lost).",
        discussion: """
        A recovery key is 160 random bits shown once as eight groups of five characters with a \
        checksum (a typo is caught before any attempt counts). It unlocks the vault (`vault \
        unlock --recovery-key-file`), sets a new passcode (`change-passcode \
        --recovery-key-file`), and binds the vault to a new device key (`vault \
        rebind-device-key`). Making a new one revokes the old one. See RECOVERY.md in the documentation.

        Examples:
          securefoundation vault recovery-key create --passcode-file pin.txt
          securefoundation vault recovery-key create --passcode-file pin.txt \\
              --output /media/usb/recovery.txt
          securefoundation vault recovery-key remove --passcode-file pin.txt
        """,
        subcommands: [VaultRecoveryKeyCreateCommand.self, VaultRecoveryKeyRemoveCommand.self]
    )
}

struct VaultRecoveryKeyCreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Make a new recovery key (replacing and revoking any earlier one) and print it once.",
        usage: "securefoundation vault recovery-key create [options] [-o FILE]",
        discussion: """
        Unlocks the vault with the passcode (from the terminal, or --passcode-file), the answers \
        or the current recovery key. Keep the new key offline: it unlocks the vault without the \
        passcode.

        Examples:
          securefoundation vault recovery-key create --passcode-file pin.txt
          securefoundation vault recovery-key create --passcode-file pin.txt \\
              -o /media/usb/recovery.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write the key to this file (0600) instead of standard output.", valueName: "file"))
    var output: String?

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            try VaultCLI.requireSetUp(manager)
            try credentials.unlock(manager, needsApplicationKey: true)
            defer { manager.lock() }
            let replaced = try manager.hasRecoveryKey
            let key = try manager.createRecoveryKey()
            defer { key.wipe() }
            try VaultCLI.showRecoveryKey(key, output: output)
            if replaced { CLI.warn("securefoundation: the earlier recovery key no longer opens this vault") }
        }
    }
}

struct VaultRecoveryKeyRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove the recovery key: it opens nothing afterwards.",
        usage: "securefoundation vault recovery-key remove [options]",
        discussion: """
        Example:
          securefoundation vault recovery-key remove --passcode-file pin.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            try VaultCLI.requireSetUp(manager)
            try credentials.unlock(manager, needsApplicationKey: true)
            defer { manager.lock() }
            try manager.removeRecoveryKey()
            try VaultCLI.say("recovery key removed")
        }
    }
}

struct VaultRebindDeviceKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebind-device-key",
        abstract: "The device key is lost (new disk, new server, replaced TPM): bind the vault to this machine's, with the passcode, answers or recovery key.",
        discussion: """
        For a data directory whose device key is gone: every read fails with "the device key is \
        not the one this vault was made with". With a credential, the vault accepts this \
        machine's device key (the key file, created when missing, or the provider given with \
        --device-key-provider), every keychain item and protected-file key pair of a class \
        without ThisDeviceOnly is re-keyed to it, and the ThisDeviceOnly ones (which only the \
        lost key opened) are removed and listed. vault.state records the re-binding (when, \
        from which key to which, with which credential); `vault status` shows it. Without a \
        credential nothing changes. Running it again after an interruption finishes it. \
        See RECOVERY.md in the documentation.

        Exit status: 0 success (also when the vault was bound to this key already), 3 wrong \
        credential, 4 wait, 5 no vault, 64 usage, 74 a file cannot be written.

        Examples:
          securefoundation vault rebind-device-key --passcode-file pin.txt
          securefoundation vault rebind-device-key --recovery-key-file recovery.txt \\
              --device-key-provider tpm2
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Option(name: .customLong("device-key-provider"), help: "Keep the new device key here: file (default), systemd-credential, keyring, tpm2 or pkcs11 (recorded beside the device key).", completion: CompletionValues.deviceKeyProviders)
    var deviceKeyProvider: String?

    @OptionGroup var providerOptions: DeviceKeyProviderOptions

    @Flag(name: .customLong("json"), help: "Print the report as JSON.")
    var json = false

    struct Report: Encodable {
        var version = JSONOutput.schemaVersion
        var directory: String
        var alreadyBound: Bool
        var deviceCheck: String
        var previousCheck: String?
        var deviceKey: String
        var rebound: Int
        var leftBehind: [String]
        var unverified: [String]
        var unreadable: [String]
        var redo: [String]
    }

    func validate() throws {
        if let deviceKeyProvider { _ = try DeviceKeyProviderOptions.kind(deviceKeyProvider, option: "--device-key-provider") }
    }

    func run() throws {
        try CLI.run {
            let manager = try home.manager(useAgent: false)
            try VaultCLI.requireSetUp(manager)
            let installation = try deviceKeyProvider.map { try providerOptions.installation(kind: DeviceKeyProviderOptions.kind($0, option: "--device-key-provider")) }
            let credential = try credentials.credential()
            defer { VaultCLI.wipe(credential) }
            defer { manager.lock() }
            let result = try DeviceKeyRebinding.rebind(manager: manager, credential: credential, filePath: home.deviceKey, installation: installation,
                                                       dependents: DeviceKeyRebinding.dependents(of: manager, restoring: false),
                                                       step: { try FaultInjection.stepHook()?($0) })
            let report = Report(directory: manager.directory, alreadyBound: result.alreadyBound, deviceCheck: Encoding.hex(Array(result.newCheck)),
                                previousCheck: result.previousCheck.map { Encoding.hex(Array($0)) }, deviceKey: result.keyLocation,
                                rebound: result.dependents.reduce(0) { $0 + $1.rebound }, leftBehind: result.leftBehind, unverified: result.unverified,
                                unreadable: result.dependents.flatMap(\.unreadable), redo: result.notes)
            if json { try JSONOutput.write(report); return }
            if result.alreadyBound {
                try VaultCLI.say("the vault is bound to this device key already (\(result.keyLocation)); nothing was changed")
                return
            }
            try VaultCLI.say("re-bound to the device key \(result.keyLocation) (check value \(report.deviceCheck)); \(report.rebound) item\(report.rebound == 1 ? "" : "s") and key pair\(report.rebound == 1 ? "" : "s") re-keyed")
            for item in report.leftBehind { try VaultCLI.say("left behind (ThisDeviceOnly: only the lost device key opened it): \(item)") }
            for item in report.unverified { try VaultCLI.say("re-bound without a check (class always: its key lies in the data directory): \(item)") }
            for item in report.unreadable { CLI.warn("securefoundation: \(item) opens with no key and was left as it was") }
            for note in report.redo { try VaultCLI.say("redo: \(note)") }
        }
    }
}
