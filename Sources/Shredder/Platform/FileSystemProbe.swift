import CPlatform
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

/// Finds what kind of storage holds a file, and the reasons an overwrite there cannot be
/// trusted: statfs `f_type`, `/proc/self/mountinfo` options, the inode flags and the
/// `rotational` flag of the block device in sysfs.
enum FileSystemProbe {
    struct Result {
        var filesystem: String
        var warnings: [ShredWarning]
    }

    /// How a filesystem type affects an overwrite.
    enum Kind {
        case plain, copyOnWrite, overlay, network, memory, fuse
    }

    /// statfs magic numbers (linux/magic.h) and what they mean for shredding.
    static let magic: [Int64: (String, Kind)] = [
        0xEF53: ("ext4", .plain),
        0x5846_5342: ("xfs", .plain),
        0x4D44: ("vfat", .plain),
        0x2011_BAB0: ("exfat", .plain),
        0x5346_544E: ("ntfs", .plain),
        0x9123_683E: ("btrfs", .copyOnWrite),
        0x2FC1_2FC1: ("zfs", .copyOnWrite),
        0xCA45_1A4E: ("bcachefs", .copyOnWrite),
        0xF2F5_2010: ("f2fs", .copyOnWrite),
        0x3434: ("nilfs2", .copyOnWrite),
        0x794C_7630: ("overlay", .overlay),
        0x6969: ("nfs", .network),
        0x517B: ("smb", .network),
        0xFF53_4D42: ("cifs", .network),
        0xFE53_4D42: ("smb2", .network),
        0x00C3_6400: ("ceph", .network),
        0x0102_1997: ("9p", .network),
        0x5346_414F: ("afs", .network),
        0x0102_1994: ("tmpfs", .memory),
        0x8584_58F6: ("ramfs", .memory),
        0x6573_5546: ("fuse", .fuse),
    ]

    static let networkTypes: Set<String> = ["nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "9p", "afs", "glusterfs",
                                            "fuse.sshfs", "fuse.glusterfs", "fuse.s3fs", "fuse.rclone", "davfs", "fuse.davfs2"]
    static let copyOnWriteTypes: Set<String> = ["btrfs", "zfs", "bcachefs", "f2fs", "nilfs2", "apfs"]

    /// Inspects the storage of the open file `fd` whose `fstat` gave `device`
    /// (``FileStatus/device``).
    static func inspect(fd: Int32, device: UInt64) -> Result {
        #if os(Linux)
        let device = dev_t(truncatingIfNeeded: device)
        var name = "unknown"
        var kind = Kind.plain
        var type: Int64 = 0
        var scratch = [CChar](repeating: 0, count: 32)
        if sf_fstatfs_type(fd, &type, &scratch, scratch.count) == 0 {
            if let known = magic[type] {
                (name, kind) = known
            } else {
                name = "0x" + String(type, radix: 16)
            }
        }
        let mount = MountInfo.find(device: device) ?? MountInfo.find(containing: MountInfo.realPath(of: fd))
        if let mount {
            // mountinfo names ext3 vs ext4, nfs4, fuse.sshfs...
            if kind == .plain || kind == .fuse || kind == .network { name = mount.fstype }
            if networkTypes.contains(mount.fstype) { kind = .network }
            if copyOnWriteTypes.contains(mount.fstype) { kind = .copyOnWrite }
        }

        var warnings: [ShredWarning] = []
        let flags = sf_inode_flags(fd)
        let inodeFlags = flags >= 0 ? flags : 0
        switch kind {
        case .copyOnWrite:
            // btrfs honours the No_COW attribute (chattr +C): such files are overwritten in place.
            if !(name == "btrfs" && inodeFlags & sf_inode_flag_nocow() != 0) {
                warnings.append(.copyOnWrite(filesystem: name))
            }
        case .overlay: warnings.append(.overlay)
        case .network: warnings.append(.networkFilesystem(filesystem: name))
        case .memory: warnings.append(.memoryFilesystem(filesystem: name))
        case .fuse: warnings.append(.placementUnknown(reason: "\(name) is a FUSE filesystem; its storage is not known"))
        case .plain: break
        }
        if name.hasPrefix("ext") {
            if let mount, mount.superOptions.contains("data=journal") || mount.mountOptions.contains("data=journal") {
                warnings.append(.dataJournaling(reason: "data=journal mount option"))
            } else if inodeFlags & sf_inode_flag_journal_data() != 0 {
                warnings.append(.dataJournaling(reason: "per-file data journalling attribute, chattr +j"))
            }
        }
        if inodeFlags & sf_inode_flag_compressed() != 0 {
            warnings.append(.encodedExtents)
        }
        if kind != .memory && kind != .network && kind != .fuse {
            switch BlockDevice.rotational(device: device, mountSource: mount?.source) {
            case .rotational: break
            case .nonRotational(let device): warnings.append(.solidStateDevice(device: device))
            case .unknown(let reason): warnings.append(.unknownDevice(reason: reason))
            }
        }
        return Result(filesystem: name, warnings: warnings)
        #elseif canImport(Darwin)
        var name = "unknown"
        var type: Int64 = 0
        var scratch = [CChar](repeating: 0, count: 32)
        if sf_fstatfs_type(fd, &type, &scratch, scratch.count) == 0 {
            name = String(decoding: scratch.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        var warnings: [ShredWarning] = []
        if copyOnWriteTypes.contains(name) { warnings.append(.copyOnWrite(filesystem: name)) }
        if ["nfs", "smbfs", "afpfs", "webdav"].contains(name) { warnings.append(.networkFilesystem(filesystem: name)) }
        warnings.append(.unknownDevice(reason: "device type detection is implemented on Linux only"))
        return Result(filesystem: name, warnings: warnings)
        #else
        return Result(filesystem: "unknown", warnings: [.unknownDevice(reason: "unsupported platform")])
        #endif
    }
}

#if os(Linux)
/// One line of /proc/self/mountinfo.
struct MountInfo {
    var device: String       // "MAJ:MIN"
    var mountPoint: String
    var mountOptions: [String]
    var fstype: String
    var source: String
    var superOptions: [String]

    /// The last (topmost) mount of device `device`.
    static func find(device: dev_t) -> MountInfo? {
        let key = "\(sf_dev_major(device)):\(sf_dev_minor(device))"
        guard let text = readProcFile("/proc/self/mountinfo") else { return nil }
        var found: MountInfo?
        for line in text.split(separator: "\n") {
            if let entry = parse(String(line)), entry.device == key { found = entry }
        }
        return found
    }

    /// The mount whose mount point is the longest prefix of `path` (the topmost when several
    /// mounts share it). Used when `st_dev` is anonymous (btrfs subvolumes).
    static func find(containing path: String?) -> MountInfo? {
        guard let path, let text = readProcFile("/proc/self/mountinfo") else { return nil }
        var found: MountInfo?
        for line in text.split(separator: "\n") {
            guard let entry = parse(String(line)) else { continue }
            let point = entry.mountPoint
            let matches = point == "/" || path == point || path.hasPrefix(point.hasSuffix("/") ? point : point + "/")
            if matches, point.count >= (found?.mountPoint.count ?? 0) { found = entry }
        }
        return found
    }

    /// The whole text of a /proc file, read until end of file. /proc files report a size of 0 and
    /// `String(contentsOfFile:)` returns only its first read (about 4 KiB), which cut mountinfo
    /// short on machines with many mounts.
    static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The path the kernel gives for an open descriptor (/proc/self/fd/N), or nil.
    static func realPath(of fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let path = String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.hasPrefix("/") ? path : nil
    }

    /// Decodes mountinfo's octal escapes (`\040` for a space).
    static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == 0x5C, index + 3 < utf8.count,
               let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`.
    static func parse(_ line: String) -> MountInfo? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard fields.count >= 6, let dash = fields.firstIndex(of: "-"), dash + 2 < fields.count else { return nil }
        return MountInfo(device: fields[2], mountPoint: unescape(fields[4]),
                         mountOptions: fields[5].split(separator: ",").map(String.init),
                         fstype: fields[dash + 1], source: unescape(fields[dash + 2]),
                         superOptions: dash + 3 < fields.count ? fields[dash + 3].split(separator: ",").map(String.init) : [])
    }
}

/// The block device under a filesystem, found in /sys/dev/block.
enum BlockDevice {
    enum Rotation: Equatable {
        case rotational
        case nonRotational(String)
        case unknown(String)
    }

    static func rotational(device: dev_t, mountSource: String?) -> Rotation {
        if let found = lookup(major: sf_dev_major(device), minor: sf_dev_minor(device)) { return found }
        // btrfs and others report an anonymous st_dev; use the device named by the mount.
        if let source = mountSource, source.hasPrefix("/dev/") {
            var info = stat()
            if stat(source, &info) == 0, info.st_mode & S_IFMT == S_IFBLK,
               let found = lookup(major: sf_dev_major(info.st_rdev), minor: sf_dev_minor(info.st_rdev)) {
                return found
            }
        }
        return .unknown("no block device for \(sf_dev_major(device)):\(sf_dev_minor(device))")
    }

    /// Reads queue/rotational of /sys/dev/block/MAJ:MIN, or of its parent for a partition.
    static func lookup(major: UInt32, minor: UInt32, sysfs: String = "/sys") -> Rotation? {
        let link = "\(sysfs)/dev/block/\(major):\(minor)"
        guard let resolved = realpath(link, nil) else { return nil }
        var directory = String(cString: resolved)
        free(resolved)
        if access(directory + "/partition", F_OK) == 0 {
            directory = String(directory[..<(directory.lastIndex(of: "/") ?? directory.endIndex)])
        }
        let name = String(directory.split(separator: "/").last ?? "")
        guard let flag = try? String(contentsOfFile: directory + "/queue/rotational", encoding: .utf8) else {
            return .unknown("\(name) has no rotational flag")
        }
        switch flag.trimmingWhitespace() {
        case "1": return .rotational
        case "0": return .nonRotational(name)
        default: return .unknown("\(name) reports rotational=\(flag)")
        }
    }
}
#endif
