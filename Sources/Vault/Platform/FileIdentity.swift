import Cipher
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What identifies one version of a file cheaply: device, inode, size, change time. An atomic
/// replacement always changes the inode while the old one is still linked (`.superseded-`).
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var changeSeconds: Int
    var changeNanoseconds: Int

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        let changed = info.statusChangeTime
        changeSeconds = Int(changed.seconds)
        changeNanoseconds = Int(changed.nanoseconds)
    }
}
