import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ProtectedFiles {
    /// What identifies a file's contents without reading them: a replacement changes the
    /// device or inode, a write in place the size or times.
    struct FileStamp: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var modified: Int64, modifiedNanoseconds: Int64, changed: Int64, changedNanoseconds: Int64
        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            (modified, modifiedNanoseconds) = info.modificationTime
            (changed, changedNanoseconds) = info.statusChangeTime
        }
    }
}
