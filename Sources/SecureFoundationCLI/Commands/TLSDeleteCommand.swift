import AgeCommandLine
import ArgumentParser
import Foundation
import HardwareKeys
import PinnedTLS
import SecureFoundation
import X509

struct TLSDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete the key, certificate and identity items stored under a label.",
        usage: "securefoundation tls delete [options] [--kind KIND] LABEL",
        discussion: """
        Deletes every kind stored under the label, or only --kind key, certificate or identity. \
        No class key is needed. Exit 44 when there is nothing to delete.

        Example:
          securefoundation tls delete device-42
        """
    )

    @Argument(help: "The label.")
    var label: String

    @Option(name: .customLong("kind"), help: "key, certificate or identity (default: all three).", completion: CompletionValues.identityItemKinds)
    var kind: String?

    @OptionGroup var store: KeychainStoreOptions

    func run() throws {
        try CLI.run {
            let kind = try self.kind.map { name in
                guard let kind = IdentityItemKind(rawValue: name) else { throw ValidationError("--kind must be key, certificate or identity") }
                return kind
            }
            let identities = IdentityStore(keychain: try store.open())
            let count = try identities.delete(label: label, kind: kind)
            try identities.flush()
            CLI.warn("deleted \(count) item(s) stored under \"\(label)\".")
        }
    }
}

// MARK: shared options

/// The keychain a command adds items to and the class that seals them: `--accessibility`
/// with the keychain's `--home` and `--passcode-file`. Each command gives its own default class.
struct ItemStoreOptions: ParsableArguments {
    @Option(name: .customLong("accessibility"), help: "The class that seals what is stored: whenUnlocked, afterFirstUnlock or always, optionally with ThisDeviceOnly (the default depends on the command; classes other than always need --passcode-file).", completion: CompletionValues.accessibilities)
    var accessibilityName: String?

    @OptionGroup var store: KeychainStoreOptions

    /// The class named by `--accessibility`, or `value`.
    func accessibility(default value: Accessibility) throws -> Accessibility {
        guard let accessibilityName else { return value }
        return try KeychainCommand.accessibility(accessibilityName)
    }

    /// The keychain (see ``KeychainStoreOptions/open()``).
    func open() throws -> Keychain { try store.open() }
}
