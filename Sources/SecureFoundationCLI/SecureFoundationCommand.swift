import AgeCommandLine
import ArgumentParser
import CBuildInfo
import Foundation
import HardwareDeviceKeys
import SecureFoundation

@main
struct SecureFoundationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "securefoundation",
        abstract: "Application-level data security: sealing, hashing, file encryption (age), shredding, a vault and a keychain.",
        discussion: """
        Every command is a thin layer over the SecureFoundation library. Run \
        `securefoundation COMMAND --help` for a command's options and an example.

        The documents this help names (CLI.md, VAULT.md, PROTECTED-FILES.md and the others) are \
        installed in PREFIX/share/doc/securefoundation, beside the manual page (for example \
        /usr/local/share/doc/securefoundation); in the source tree they are in the directory \
        `docs`.

        """ + "\n" + ExitStatus.helpTable,
        version: SecureFoundationCommand.version,
        subcommands: [
            // The whole system, end to end
            TourCommand.self,
            // Cipher utilities
            HashCommand.self,
            RandomCommand.self,
            SealCommand.self,
            OpenCommand.self,
            // Shredding
            ShredCommand.self,
            // age file encryption
            EncryptCommand.self,
            DecryptCommand.self,
            KeygenCommand.self,
            InspectCommand.self,
            // Crypto manager
            VaultCommand.self,
            // Backup, restore on another machine
            BackupCommand.self,
            // Keychain
            KeychainCommand.self,
            // Protected files
            ProtectCommand.self,
            DatabaseCommand.self,
            SecretsCommand.self,
            MigrateCommand.self,
            // TLS: pins, policy, mutual TLS, identities and the certificate authority
            TLSCommand.self,
            // Unlock agent
            AgentCommand.self,
            ShareCommand.self,
        ]
    )

    /// One prefix for every error, the parser's own included (which would say "Error: ").
    static var _errorPrefix: String { "securefoundation: error: " }

    /// This build's version (docs/CLI.md, "Version"): set by the build through
    /// `SECUREFOUNDATION_VERSION` (scripts/build-release: `git describe`), else 0.0.0-dev.
    static var version: String { String(cString: securefoundation_build_version()) }

    static func main() async {
        // Started by the front program (Sources/SecureFoundationFront): its mark is for this start only.
        CLI.takeFrontHandOff()
        // Vaults whose device key is in a TPM or a PKCS #11 token (two dictionary entries).
        HardwareDeviceKeys.register()
        // The TPM Software Stack prints its own diagnostics when the TPM refuses a command (a
        // key flushed by another process, then loaded again; a PCR policy refused): the
        // command's typed error says what matters. A TSS2_LOG the user set is kept.
        setenv("TSS2_LOG", "all+NONE", 0)
        // Started as age-plugin-securefoundation (the link `agent install-plugin` makes), this
        // program is the age plugin that opens protected files through the unlock agent.
        if let name = CommandLine.arguments.first, name.split(separator: "/").last.map(String.init) == AgentAgePlugin.programName {
            Foundation.exit(AgentAgePlugin.run(arguments: Array(CommandLine.arguments.dropFirst())))
        }
        let arguments = KeychainCommand.droppingTrailingPasswordFlag(Array(CommandLine.arguments.dropFirst()))
        // A plain `encrypt` or `decrypt` starts without building the parser's command tree.
        if let request = AgeFastPath.request(for: arguments) { AgeFastPath.run(request) { CLI.fail($0).rawValue } }
        await main(arguments)
    }
}
