#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher

/// Where an agent's socket lives (UnlockAgent's `AgentPaths` documents and forwards to it):
/// `DIR/agent-<16 hex digits of SHA-256(data directory)>.sock`, DIR being
/// `$XDG_RUNTIME_DIR/securefoundation` when `$XDG_RUNTIME_DIR` is an absolute path, else
/// `/tmp/securefoundation-<uid>`; `$SECUREFOUNDATION_AGENT_SOCKET` names the socket outright.
package enum AgentSocketPath {
    /// The socket directory for this user (not created here).
    /// - Parameter environment: The environment to read `$XDG_RUNTIME_DIR` from.
    /// - Returns: The directory's absolute path.
    package static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return DataDirectory.absolute(runtime) + "/securefoundation"
        }
        return "/tmp/securefoundation-\(geteuid())"
    }

    /// The socket of the agent serving the vault in `home` (nil: the default data directory).
    /// - Parameters:
    ///   - home: The vault's data directory (nil: the default one).
    ///   - environment: The environment to read the variables from.
    /// - Returns: The socket's absolute path.
    package static func socket(home: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["SECUREFOUNDATION_AGENT_SOCKET"], !explicit.isEmpty {
            return DataDirectory.absolute(explicit)
        }
        let name = DataDirectory.digest(of: home ?? DataDirectory.defaultDirectory(environment: environment))
        return directory(environment: environment) + "/agent-\(name).sock"
    }
}
