#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// Where a vault's data directory is, and the name it gives to what is kept for it outside it
/// (the agent's socket, the keyring entry of its device key). Vault's `VaultPaths` and the
/// agent's socket paths read these; they are here, below both, so that the front program's age
/// plugin (which links no Vault) finds the same agent as every other program.
package enum DataDirectory {
    /// 16 hex digits of SHA-256 of `directory` made absolute.
    /// - Parameter directory: A vault's data directory.
    /// - Returns: The digest, in hex.
    package static func digest(of directory: String) -> String {
        Encoding.hex(SHA256.hash(data: Array(absolute(directory).utf8)).prefix(8))
    }

    /// The vault's data directory: `$SECUREFOUNDATION_HOME`, else `$XDG_DATA_HOME/securefoundation`,
    /// else `~/.local/share/securefoundation`.
    /// - Parameter environment: The environment to read the variables and `$HOME` from.
    /// - Returns: The directory's path.
    package static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let home = environment["SECUREFOUNDATION_HOME"], !home.isEmpty { return home }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return data + "/securefoundation" }
        return homeDirectory(environment) + "/.local/share/securefoundation"
    }

    /// `path` made absolute against the current directory, without trailing slashes.
    /// - Parameter path: A relative or absolute path.
    /// - Returns: The absolute path.
    package static func absolute(_ path: String) -> String {
        var result = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        while result.count > 1 && result.hasSuffix("/") { result.removeLast() }
        return result
    }

    /// `$HOME`, else the user's home directory from the user database.
    /// - Parameter environment: The environment to read `$HOME` from.
    /// - Returns: The home directory.
    package static func homeDirectory(_ environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        return URL.homeDirectory.path
    }
}
