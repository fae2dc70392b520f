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

/// The one rule by which the project finds a program on the `PATH` (age plugins, `ssh-keygen`):
/// only absolute entries count, as age does. A relative entry (`.`, `node_modules/.bin`, an
/// empty one) names a directory of the working directory, where whoever prepared that directory
/// could have put a program of the same name.
package enum ProgramSearch {
    /// The first regular, executable `program` in an absolute directory of `searchPath` (nil: `$PATH`).
    /// - Parameters:
    ///   - program: The file name.
    ///   - searchPath: Directories separated by `:` (nil: `$PATH`, else `fallback`).
    ///   - fallback: The search path when `$PATH` is not set.
    /// - Returns: Its path, or nil.
    package static func locate(_ program: String, searchPath: String? = nil, fallback: String = "") -> String? {
        for directory in entries(searchPath, fallback: fallback) where directory.hasPrefix("/") {
            let candidate = directory + "/" + program
            if access(candidate, X_OK) == 0, (try? FileCalls.status(atPath: candidate))?.kind == .regular { return candidate }
        }
        return nil
    }

    /// The relative entry of `searchPath` in which `program` would have been found, for the
    /// message that says why it was not used; nil when there is none.
    package static func refusedEntry(_ program: String, searchPath: String? = nil, fallback: String = "") -> String? {
        for directory in entries(searchPath, fallback: fallback) where !directory.hasPrefix("/") {
            let candidate = (directory.isEmpty ? "." : directory) + "/" + program
            if access(candidate, X_OK) == 0 { return directory.isEmpty ? "(empty: the working directory)" : directory }
        }
        return nil
    }

    static func entries(_ searchPath: String?, fallback: String) -> [String] {
        let path = searchPath ?? ProcessInfo.processInfo.environment["PATH"] ?? fallback
        return path.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
    }
}
