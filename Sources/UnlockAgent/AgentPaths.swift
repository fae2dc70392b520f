import Foundation
import Cipher
import Vault
import AgentWire

/// Where an agent's socket lives.
///
/// One agent per vault: the socket is `DIR/agent-<16 hex digits of SHA-256(data directory)>.sock`,
/// where DIR is `$XDG_RUNTIME_DIR/securefoundation` when `$XDG_RUNTIME_DIR` is an absolute path,
/// else `/tmp/securefoundation-<uid>`. DIR is created 0700; an existing DIR must be a real
/// directory (not a symlink) owned by this user and reachable by nobody else, or it is refused.
/// `$SECUREFOUNDATION_AGENT_SOCKET` (or `--socket`) names the socket outright.
public enum AgentPaths {
    /// The socket directory for this user.
    /// - Parameter environment: The environment to read `$XDG_RUNTIME_DIR` from.
    /// - Returns: The directory's absolute path (not created here).
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        AgentSocketPath.directory(environment: environment)
    }

    /// The socket of the agent serving the vault in `home` (nil: the default data directory).
    /// - Parameters:
    ///   - home: The vault's data directory (nil: the default one).
    ///   - environment: The environment to read `$SECUREFOUNDATION_AGENT_SOCKET`,
    ///     `$XDG_RUNTIME_DIR` and the default data directory from.
    /// - Returns: The socket's absolute path.
    public static func socket(home: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        AgentSocketPath.socket(home: home, environment: environment)
    }

    /// Creates `directory` (0700) if needed and checks it as ssh checks `~/.ssh`, with
    /// `SecureFile.checkPrivate(_:isDirectory:)` (Cipher): a symlink, another owner, or access for
    /// group or others is refused.
    /// - Parameter directory: The directory to create or check.
    /// - Throws: ``AgentError/insecureDirectory(path:reason:fix:)`` saying what to fix,
    ///   ``AgentError/io(_:)`` when it cannot be created or examined.
    public static func ensurePrivateDirectory(_ directory: String) throws(AgentError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw AgentError.system("mkdir", directory)
        }
        do { try SecureFile.checkPrivate(directory, isDirectory: true) } catch {
            switch error {
            case let .insecurePermissions(_, reason, fix):
                // Another user's directory is not to be adopted (chown): it may be a trap.
                let othersOwn = (try? FileCalls.linkStatus(directory)).map { $0.owner != geteuid() } ?? false
                throw AgentError.insecureDirectory(path: directory, reason: reason,
                                                   fix: othersOwn ? "someone else created it; remove it as root, or set XDG_RUNTIME_DIR to a private directory"
                                                                  : "\(fix), or set XDG_RUNTIME_DIR to a private directory")
            case let .system(operation, _, code):
                throw AgentError.system(operation, directory, code)
            }
        }
    }
}
