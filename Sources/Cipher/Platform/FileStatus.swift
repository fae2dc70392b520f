#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `stat` says about a file, in values of this package's own: the same fields on every
/// system, and the same type in every module. Only this file reads the structure's fields
/// (`st_mtim` on Linux, `st_mtimespec` on Darwin, ...); the ``FileCalls`` wrappers return this
/// value.
///
/// The C structure itself is not handed to other modules: several C modules declare it (NIO's
/// CNIOLinux includes `<sys/stat.h>` into its own module), and which declaration the compiler
/// takes in a module depends on what else it looked up first in the same job, so an extension
/// of `stat` made here could be invisible there (in a clean build, where all of a module's files
/// are compiled together, but not in an incremental one).
package struct FileStatus: Equatable, Sendable {
    /// The type of a file (`st_mode & S_IFMT`).
    package enum Kind: Equatable, Sendable {
        case regular, directory, symbolicLink, characterDevice, blockDevice, fifo, socket
        /// A type this system has that none of the others names.
        case other
    }

    /// A time stamp as the file system keeps it: seconds since the epoch and nanoseconds.
    package struct Time: Equatable, Sendable {
        package var seconds: Int64
        package var nanoseconds: Int64

        package init(seconds: Int64, nanoseconds: Int64) {
            self.seconds = seconds
            self.nanoseconds = nanoseconds
        }
    }

    /// The file type.
    package var kind: Kind
    /// The permission bits, set-id and sticky bits included (`st_mode & 07777`).
    package var permissions: UInt32
    /// The length in bytes (`st_size`).
    package var size: Int64
    /// The device holding the file (`st_dev`).
    package var device: UInt64
    /// The inode number (`st_ino`).
    package var inode: UInt64
    /// The number of names (hard links) the file has (`st_nlink`).
    package var links: UInt64
    /// The owner's user ID (`st_uid`).
    package var owner: UInt32
    /// The last modification of the contents (mtime).
    package var modified: Time
    /// The last change of the contents or the metadata (ctime).
    package var changed: Time

    package init(kind: Kind, permissions: UInt32, size: Int64, device: UInt64, inode: UInt64, links: UInt64, owner: UInt32,
                 modified: Time, changed: Time) {
        self.kind = kind
        self.permissions = permissions
        self.size = size
        self.device = device
        self.inode = inode
        self.links = links
        self.owner = owner
        self.modified = modified
        self.changed = changed
    }

    /// Whether it is a regular file.
    package var isRegularFile: Bool { kind == .regular }

    /// Whether `other` is the same file (the same device and inode), under whatever name.
    package func isSameFile(as other: FileStatus) -> Bool {
        device == other.device && inode == other.inode
    }

    /// The values of the system's structure.
    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        default: kind = .other
        }
        permissions = UInt32(info.st_mode & 0o7777)
        size = Int64(info.st_size)
        device = UInt64(truncatingIfNeeded: info.st_dev)
        inode = UInt64(info.st_ino)
        links = UInt64(info.st_nlink)
        owner = UInt32(info.st_uid)
        #if canImport(Darwin)
        modified = Time(seconds: Int64(info.st_mtimespec.tv_sec), nanoseconds: Int64(info.st_mtimespec.tv_nsec))
        changed = Time(seconds: Int64(info.st_ctimespec.tv_sec), nanoseconds: Int64(info.st_ctimespec.tv_nsec))
        #else
        modified = Time(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec))
        changed = Time(seconds: Int64(info.st_ctim.tv_sec), nanoseconds: Int64(info.st_ctim.tv_nsec))
        #endif
    }
}
