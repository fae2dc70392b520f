import Foundation
import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The database file's creation and mode checks. SQLite gives the -wal and -shm files the mode
/// of the database file, so creating that one 0600 makes all three private.
enum KeychainFiles {
    /// Creates the database file 0600 if missing; refuses one that others can reach.
    static func prepareDatabaseFile(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
            return
        }
        let code = errno
        guard code == EEXIST else {
            throw KeychainError.fromFile(SecureFile.Failure.system(operation: "create", path: path, errno: code), path: path)
        }
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
        } catch {
            throw KeychainError.fromFile(error, path: path)
        }
        guard access(path, R_OK | W_OK) == 0 else {
            throw KeychainError.permissionDenied(path: path, detail: "the database is not readable and writable by this user")
        }
    }

    /// Checks the -wal and -shm files when present.
    static func checkSidecars(_ path: String) throws {
        for suffix in ["-wal", "-shm"] {
            let sidecar = path + suffix
            guard FileManager.default.fileExists(atPath: sidecar) else { continue }
            do {
                try SecureFile.checkPrivate(sidecar, isDirectory: false)
            } catch {
                throw KeychainError.fromFile(error, path: sidecar)
            }
        }
    }
}
