import Cipher

/// What identifies one version of a file cheaply: device, inode, size, change time. An atomic
/// replacement always changes the inode while the old one is still linked (`.superseded-`).
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var changeSeconds: Int
    var changeNanoseconds: Int

    init?(path: String) {
        guard let info = try? FileCalls.status(atPath: path) else { return nil }
        device = info.device
        inode = info.inode
        size = info.size
        changeSeconds = Int(info.changed.seconds)
        changeNanoseconds = Int(info.changed.nanoseconds)
    }
}
