import ArgumentParser
import PinnedTLS
import SecureFoundation

/// The words an option takes, offered by the shell completions (`completion:` of the option).
/// Each list comes from the names the library itself parses, where it has such a list, so the
/// completions cannot drift from what the option accepts.
enum CompletionValues {
    /// A protected file's or database's class (`--class`, `--from`, `--to`, `--expect`,
    /// `--protection`): complete, completeUnlessOpen, …, noneThisDeviceOnly.
    static var fileProtectionClasses: CompletionKind { .list(FileProtectionClass.allValues.map(\.name)) }

    /// A keychain accessibility (`--accessibility`, `--minimum-accessibility`): whenUnlocked, …,
    /// alwaysThisDeviceOnly.
    static var accessibilities: CompletionKind { .list(Accessibility.allValues.map(\.name)) }

    /// Where the device key lives (`--device-key-provider`, `migrate-device-key --to`): file,
    /// systemd-credential, keyring, tpm2, pkcs11.
    static var deviceKeyProviders: CompletionKind { .list(DeviceKeyRecord.Kind.allCases.map(\.rawValue)) }

    /// The provider behind the keyring's cache (`--keyring-backing`): every provider but the
    /// keyring itself.
    static var keyringBackings: CompletionKind {
        .list(DeviceKeyRecord.Kind.allCases.filter { $0 != .keyring }.map(\.rawValue))
    }

    /// The vault's KDF work (`--kdf`, `$SECUREFOUNDATION_KDF`).
    static var kdfWork: CompletionKind { .list(VaultPolicyOptions.kdfWork.map(\.name)) }

    /// A kind of TLS item (`tls delete --kind`): key, certificate, identity.
    static var identityItemKinds: CompletionKind { .list(IdentityItemKind.allCases.map(\.rawValue)) }
}
