import Cipher

extension ProtectedFiles {
    /// What identifies a file's contents without reading them: a replacement changes the
    /// device or inode, a write in place the size or times.
    struct FileStamp: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var modified: Int64, modifiedNanoseconds: Int64, changed: Int64, changedNanoseconds: Int64
        init(_ info: FileStatus) {
            device = info.device
            inode = info.inode
            size = info.size
            (modified, modifiedNanoseconds) = (info.modified.seconds, info.modified.nanoseconds)
            (changed, changedNanoseconds) = (info.changed.seconds, info.changed.nanoseconds)
        }
    }
}
