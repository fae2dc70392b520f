import Foundation
import Cipher
import AgentWire
import Vault
import Age
import ProtectedFiles
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `age-plugin-securefoundation`: the real `age` (and any age client with plugin support)
/// opens protected files through the running unlock agent, and the class identity never leaves
/// the agent.
///
/// `age -d -j securefoundation FILE` (or `-i` with an identity file holding
/// `AGE-PLUGIN-SECUREFOUNDATION-1…`) starts the plugin; the plugin sends the file's `X25519`
/// and class stanzas to the agent of the identity's data directory, which unwraps the file key
/// with the class identity under the class rules (``AgentServer``: complete and
/// completeUnlessOpen only while unlocked, completeUntilFirstUserAuthentication from the first
/// unlock) and returns it; `age` checks the header MAC and decrypts. The plugin only decrypts.
///
/// The identity's data (Bech32, docs/FORMATS.md) names the data directory and, optionally, one
/// class: `1 ‖ class name (1-byte length; 0: any class) ‖ data directory (UTF-8, the rest;
/// empty: the default one)`. No data (`-j securefoundation`) means the default data directory
/// and any class. It holds no secret: it says which agent to ask.
public enum AgentAgePlugin {
    /// The plugin name: the program is `age-plugin-securefoundation`.
    public static let name = AgentPlugin.name
    /// The program name `age` runs.
    package static let programName = AgentPlugin.programName

    /// What an identity names (AgentWire's `AgentPlugin.Identity`, with the class typed).
    package struct Identity: Sendable, Equatable {
        /// The data directory whose agent is asked (nil: the default one when the plugin runs).
        package var home: String?
        /// The only class served through this identity (nil: any class).
        package var protection: FileProtectionClass?

        package init(home: String?, protection: FileProtectionClass?) {
            self.home = home
            self.protection = protection
        }

        /// The `AGE-PLUGIN-SECUREFOUNDATION-1…` encoding (`home` made absolute).
        /// - Returns: The identity line.
        /// - Throws: `ProtectedFileError.invalidArgument` for a class name or path too long.
        package func encoded() throws(ProtectedFileError) -> String {
            do { return try AgentPlugin.Identity(home: home, protectionName: protection?.name).encoded() } catch {
                throw ProtectedFileError.invalidArgument(error.description)
            }
        }

        /// Parses an `AGE-PLUGIN-SECUREFOUNDATION-1…` identity.
        /// - Parameter identity: The identity line.
        /// - Throws: `ProtectedFileError.invalidArgument` saying what is wrong.
        package init(parsing identity: String) throws(ProtectedFileError) {
            let parsed: AgentPlugin.Identity
            do { parsed = try AgentPlugin.Identity(parsing: identity) } catch { throw ProtectedFileError.invalidArgument(error.description) }
            var protection: FileProtectionClass?
            if let name = parsed.protectionName {
                // Never "any class" for a name this build does not know (the two lists are kept equal by a test).
                guard let cls = FileProtectionClass(name: name) else {
                    throw ProtectedFileError.invalidArgument("the identity names an unknown protection class \(name.prefix(60).debugDescription)")
                }
                protection = cls
            }
            self.init(home: parsed.home, protection: protection)
        }
    }

    /// Makes `DIRECTORY/age-plugin-securefoundation` a symbolic link to `target` (the program
    /// that runs ``run(arguments:input:output:timeout:)`` when started under that name).
    /// - Parameters:
    ///   - directory: The directory to put the link in (typically one on `$PATH`).
    ///   - target: The path the link points to.
    ///   - replacing: A program whose link may be replaced: an existing link that resolves to
    ///     this very file (the full program, when `target` is the front program beside it) is
    ///     swapped for the new one in one rename.
    /// - Returns: The link's path.
    /// - Throws: ``AgentError/pathInUse(path:reason:)`` when something else is at that path,
    ///   ``AgentError/io(_:)`` when the link cannot be made.
    @discardableResult
    public static func installLink(in directory: String, target: String, replacing: String? = nil) throws(AgentError) -> String {
        try PluginLink.install(at: VaultPaths.absolute(directory) + "/" + programName, target: target, replacing: replacing)
    }

    /// Runs the plugin program (AgentWire's `AgentPlugin.run`, which the front program runs
    /// too): `--age-plugin=identity-v1` answers `age` on standard input and output;
    /// `--age-plugin=recipient-v1` is refused (the plugin only decrypts).
    /// - Parameters:
    ///   - arguments: The program's arguments, without the program name.
    ///   - input: Where `age` writes (the plugin's standard input).
    ///   - output: Where `age` reads (the plugin's standard output).
    ///   - timeout: Seconds to wait for the agent.
    /// - Returns: The exit status (0 when the protocol ran to its end, 1 when it broke off, 64
    ///   for a usage error).
    public static func run(arguments: [String], input: Int32 = 0, output: Int32 = 1, timeout: Double = 10) -> Int32 {
        AgentPlugin.run(arguments: arguments, input: input, output: output, timeout: timeout)
    }
}
