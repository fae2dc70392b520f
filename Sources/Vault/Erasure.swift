import Foundation
import Cipher

/// Destruction of superseded and erased key material.
///
/// Files holding wrapped keys are destroyed with crypto-erase semantics: the bytes are
/// overwritten in place, synced and the file removed. On copy-on-write or flash storage an
/// overwrite in place is best effort; what makes the data unrecoverable is that the keys it was
/// wrapped under (passcode and answer keys) are gone with the wrapping.
enum Erasure {
    /// Overwrites and removes each file; missing files are skipped.
    static func destroy(_ paths: [String]) throws {
        for path in paths where access(path, F_OK) == 0 {
            let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd >= 0 {
                var info = stat()
                if fstat(fd, &info) == 0, info.st_size > 0 {
                    let size = Int(info.st_size)
                    var noise = (try? SecureRandom.bytes(size)) ?? [UInt8](repeating: 0, count: size)
                    _ = noise.withUnsafeBytes { pwrite(fd, $0.baseAddress!, size, 0) }
                    _ = fsync(fd)
                    noise.removeAll()
                }
                close(fd)
            }
            guard unlink(path) == 0 || errno == ENOENT else {
                throw SecureFile.Failure.system(operation: "unlink", path: path, errno: errno)
            }
        }
        if let first = paths.first { try? SecureFile.syncDirectory(SecureFile.directoryOf(first)) }
    }
}
