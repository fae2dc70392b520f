import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// Where the device key comes from: `vault init --device-key-provider` and `vault migrate-device-key --to`.
struct DeviceKeyProviderOptions: ParsableArguments {
    @Option(name: .customLong("credential-name"), help: "systemd-credential: the credential's name (default securefoundation-device-key).")
    var credentialName = DeviceKeyRecord.defaultCredentialName

    @Option(name: .customLong("credential-file"), help: ArgumentHelp("systemd-credential: where the encrypted credential is written (default HOME/device-key.cred); give it to the unit as LoadCredentialEncrypted=NAME:PATH.", valueName: "path"))
    var credentialFile: String?

    @Option(name: .customLong("with-key"), help: "systemd-credential: systemd-creds --with-key (host, tpm2, host+tpm2, auto; default host).")
    var withKey = "host"

    @Option(name: .customLong("tpm-sealed"), help: ArgumentHelp("tpm2: the sealed key's files PREFIX.pub and PREFIX.priv (default HOME/device-key.tpm). The TPM is $TPM2TOOLS_TCTI's.", valueName: "prefix"))
    var tpmSealed: String?

    @Option(name: .customLong("pcrs"), help: "tpm2: bind the key to these SHA-256 PCRs, for example 7 or 0,2,7 (default: none).")
    var pcrs: String?

    @Option(name: .customLong("keyring-timeout"), help: "keyring: seconds the key stays cached in the kernel keyring (default 600).")
    var keyringTimeout = 600

    @Option(name: .customLong("keyring-backing"), help: "keyring: the provider behind the cache: file, systemd-credential, tpm2 or pkcs11 (default file).", completion: CompletionValues.keyringBackings)
    var keyringBacking = "file"

    @Option(name: [.customLong("pkcs11-uri"), .customLong("uri")], help: "pkcs11: the token's secret key (pkcs11:token=…;object=…, a sensitive, non-extractable generic secret); the PIN from pin-source=file:/PATH in the URI or $SECUREFOUNDATION_TOKEN_PIN.")
    var pkcs11URI: String?

    @Option(name: .customLong("pkcs11-module"), help: ArgumentHelp("pkcs11: the token's PKCS #11 module (absolute path, outside the data directory).", valueName: "path"))
    var pkcs11Module: String?

    @Option(name: .customLong("pkcs11-wrapped"), help: ArgumentHelp("pkcs11: where the device key wrapped by the token is written (default HOME/device-key.pkcs11).", valueName: "path"))
    var pkcs11Wrapped: String?

    static func kind(_ name: String, option: String) throws -> DeviceKeyRecord.Kind {
        guard let kind = DeviceKeyRecord.Kind(rawValue: name) else {
            throw ValidationError("\(option) must be file, systemd-credential, keyring, tpm2 or pkcs11")
        }
        return kind
    }

    func pcrList() throws -> [Int] {
        guard let pcrs, !pcrs.isEmpty else { return [] }
        let values = pcrs.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard values.allSatisfy({ $0 != nil && (0...23).contains($0!) }) else { throw ValidationError("--pcrs takes PCR numbers 0-23 separated by commas") }
        return values.compactMap { $0 }
    }

    /// The library's installation request these options make for `kind`.
    func installation(kind: DeviceKeyRecord.Kind) throws -> DeviceKeyInstallation {
        var installation = DeviceKeyInstallation(kind: kind)
        installation.credentialName = credentialName
        installation.credentialFile = credentialFile
        installation.withKey = withKey
        installation.tpmSealed = tpmSealed
        installation.pcrs = try pcrList()
        installation.keyringTimeout = keyringTimeout
        installation.keyringBacking = try Self.kind(keyringBacking, option: "--keyring-backing")
        installation.pkcs11URI = pkcs11URI
        installation.pkcs11Module = pkcs11Module
        installation.pkcs11Wrapped = pkcs11Wrapped
        try installation.validate()
        return installation
    }
}

struct VaultMigrateDeviceKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate-device-key",
        abstract: "Move the device key to another provider (file, systemd-credential, keyring, tpm2, pkcs11) without changing it.",
        discussion: """
        The device key is read from the vault's current provider, stored by the new one (a file, \
        a systemd credential encrypted with systemd-creds, the kernel keyring in front of one of \
        those, sealed to the TPM, or wrapped under a key that stays in a PKCS #11 token), read \
        back and checked, and only then recorded in \
        HOME/device-key.provider. The key itself stays the same, so nothing is re-encrypted and \
        every thisDeviceOnly item and the keychain's indexes stay readable. The old copy is left \
        where it was: remove it once the new provider works (a key file with `securefoundation \
        shred`).

        --adopt moves a record that an earlier version kept in the data directory \
        (HOME/device-key.provider) beside the device key. Such a record is not used until then: \
        anyone who can write the data directory could have written it, so check that the \
        provider it names (printed) is the one you set up.

        Examples:
          securefoundation vault migrate-device-key --to tpm2 --pcrs 7
          securefoundation vault migrate-device-key --to systemd-credential \\
              --with-key host+tpm2
          SECUREFOUNDATION_TOKEN_PIN=… securefoundation vault migrate-device-key \\
              --to pkcs11 --pkcs11-module /usr/lib/softhsm/libsofthsm2.so \\
              --pkcs11-uri 'pkcs11:token=fleet;object=device-key'
          securefoundation vault migrate-device-key --adopt
        """
    )

    @OptionGroup var home: HomeOptions

    @Option(name: [.customLong("to"), .customLong("provider")], help: "The new provider: file, systemd-credential, keyring, tpm2 or pkcs11.", completion: CompletionValues.deviceKeyProviders)
    var to: String?

    @Flag(name: .customLong("adopt"), help: "Move the record an earlier version kept in the data directory beside the device key.")
    var adopt = false

    @OptionGroup var provider: DeviceKeyProviderOptions

    func validate() throws {
        guard (to == nil) == adopt else { throw ValidationError("give either --to PROVIDER or --adopt") }
        if let to { _ = try DeviceKeyProviderOptions.kind(to, option: "--to") }
        _ = try provider.pcrList()
    }

    func run() throws {
        try CLI.run {
            if adopt {
                let directory = home.directory
                guard let record = try DeviceKeyRecord.adoptLegacy(directory: directory, filePath: home.deviceKey) else {
                    throw VaultError.invalidArgument("\(directory)/\(DeviceKeyRecord.fileName) does not exist: nothing to adopt")
                }
                try VaultCLI.say("device-key record moved out of the data directory: \(record.summary)")
                return
            }
            guard let to else { return }
            let manager = try home.manager(useAgent: false)
            try VaultCLI.requireSetUp(manager)
            let installation = try provider.installation(kind: try DeviceKeyProviderOptions.kind(to, option: "--to"))
            let current = try home.deviceKeyProvider()
            let record = try VaultError.callWrapping { try installation.migrate(manager: manager, current: current, filePath: home.deviceKey) }
            try VaultCLI.say("device key moved to \(record.summary) (same key; nothing re-encrypted)")
        }
    }
}

struct VaultRotateDeviceKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-device-key",
        abstract: "Replace the device key with a new one under the same provider and re-key everything that depends on it.",
        usage: "securefoundation vault rotate-device-key [options] [--resume]",
        discussion: """
        A new random device key is stored by the vault's provider (file, systemd-credential, \
        keyring, tpm2) beside the old one, every keychain of the home (HOME/keychain.sqlite, \
        HOME/*/keychain.sqlite: blind indexes, row MACs, thisDeviceOnly items) and the \
        protected-file key table (MACs, thisDeviceOnly identities) are re-keyed to it, then it \
        replaces the old key, which is crypto-erased. Afterwards the old device key opens \
        nothing in the home. Values derived from the device key outside the home (`secrets \
        device-share`) change: the command lists what to redo.

        Needs the passcode (or answers): the new key's check value is recorded in vault.state, \
        which a running unlock agent cannot re-seal. Stop other processes using the home first. A journal kept beside the device key \
        makes it resumable: after an interruption every part is under the old or the new key, \
        commands needing the device key say so, and --resume finishes.

        Exit status: 0 success, 1 error (or items left unreadable), 2 damaged data (a keychain \
        or key table under neither key), 3 wrong passcode or answers, 4 wait, 5 erased, \
        64 usage, 74 a file cannot be written (a full disk: the message names the command that \
        finishes, `--resume` once the rotation's journal exists).

        Examples:
          securefoundation vault rotate-device-key --passcode-file pin.txt
          securefoundation vault rotate-device-key --resume --passcode-file pin.txt
        """
    )

    @OptionGroup var home: HomeOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Flag(name: .customLong("resume"), help: "Finish an interrupted rotation (its journal is beside the device key).")
    var resume = false

    @Option(name: .customLong("with-key"), help: "systemd-credential: systemd-creds --with-key for the new credential (host, tpm2, host+tpm2, auto; default host).")
    var withKey = "host"

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            try VaultCLI.requireSetUp(manager)
            // The application key is needed (the new key is recorded in vault.state): an unlock
            // agent does not stand in for the passcode here.
            try credentials.unlock(manager, needsApplicationKey: true)
            defer { manager.lock() }
            var options = DeviceKeyRotation.Options(credentialWithKey: withKey)
            options.step = FaultInjection.stepHook()
            let dependents = DeviceKeyRotation.dependents(of: manager)
            let report = try CLI.withNextStep({ error in
                // A failure after the journal was written leaves the rotation unfinished: only
                // `--resume` goes on (a plain retry is refused). Before it, nothing changed.
                let full = CLI.isDiskFull(error)
                if (try? DeviceKeyRotation.pending(directory: manager.directory, filePath: home.deviceKey)) != nil {
                    return "the device-key rotation is unfinished (every item and file opens with the old or the new key); \(full ? "free some space" : "once the cause is fixed"), then finish it with `securefoundation vault rotate-device-key --resume` and the passcode"
                }
                return full && !resume
                    ? "nothing was changed (the new key was not kept); free some space and run `securefoundation vault rotate-device-key` again"
                    : nil
            }) {
                try ProgressLine.run("vault rotate-device-key") { _ in
                    try resume
                        ? DeviceKeyRotation.resume(manager: manager, filePath: home.deviceKey, dependents: dependents, options: options)
                        : DeviceKeyRotation.rotate(manager: manager, filePath: home.deviceKey, dependents: dependents, options: options)
                }
            }
            let summary = (try? DeviceKeyRecord.load(directory: manager.directory, filePath: home.deviceKey))?.summary ?? "file"
            try VaultCLI.say("device key \(resume ? "rotation finished" : "rotated") (\(summary)); new check value \(Encoding.hex(Array(report.newCheck)))")
            var unreadable = 0
            for result in report.dependents {
                try VaultCLI.say("\(result.description): re-keyed \(result.rekeyed)\(result.alreadyNew > 0 ? ", already re-keyed \(result.alreadyNew)" : "")\(result.unreadable.isEmpty ? "" : ", unreadable \(result.unreadable.count)")")
                for item in result.unreadable { CLI.warn("securefoundation: \(result.description): \(item) could not be opened and was left as it was (it opens with neither key)") }
                unreadable += result.unreadable.count
            }
            for note in report.notes { try VaultCLI.say("redo: \(note)") }
            if unreadable > 0 { throw ExitCode(1) }
        }
    }
}

/// Fault injection for the crash tests: `SECUREFOUNDATION_TEST_KILL_AT=STEP[:N]` makes the
/// process kill itself (SIGKILL, as `kill -9`) at the Nth (default first) step of that name.
/// Debug builds only (`swift build`, `swift test`): a release build (`-c release`, which does
/// not define DEBUG) has no hook and ignores the variable.
enum FaultInjection {
    static func stepHook() -> (@Sendable (String) throws -> Void)? {
        #if DEBUG
        return debugStepHook()
        #else
        return nil
        #endif
    }

    #if DEBUG
    private static func debugStepHook() -> (@Sendable (String) throws -> Void)? {
        guard let spec = ProcessInfo.processInfo.environment["SECUREFOUNDATION_TEST_KILL_AT"], !spec.isEmpty else { return nil }
        let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
        let name = parts[0]
        let wanted = parts.count > 1 ? max(1, Int(parts[1]) ?? 1) : 1
        let seen = Counter()
        return { step in
            guard step == name, seen.next() == wanted else { return }
            kill(getpid(), SIGKILL)
        }
    }
    #endif

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.withLock { value += 1; return value } }
    }
}

extension VaultError {
    /// Runs `body`, passing vault errors through and naming others as device-key errors.
    static func callWrapping<Result>(_ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as VaultError { throw error } catch { throw VaultError.deviceKey("\(error)") }
    }
}

extension HomeOptions {
    /// The vault's device-key provider: the one recorded in HOME/device-key.provider, else the
    /// key file (`--device-key` or the default); while a device-key rotation is unfinished, one
    /// that refuses with the way to finish it.
    func deviceKeyProvider() throws -> any DeviceKeyProvider {
        guard directoryExists else { return FileDeviceKeyProvider(path: deviceKey) }
        return try DeviceKeyRotation.provider(directory: directory, filePath: deviceKey)
    }
}
