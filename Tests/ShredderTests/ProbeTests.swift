import Foundation
import Testing
import TestSupport
@testable import Shredder

@Suite("Storage probes")
struct ProbeTests {
    #if os(Linux)
    @Test("a partition is followed to its parent device's rotational flag (fake sysfs tree)")
    func partitionToParent() throws {
        let dir = try TempDir()
        let fm = FileManager.default
        let disk = dir.path + "/devices/pci0/block/sdz"
        try fm.createDirectory(atPath: disk + "/sdz1", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: disk + "/queue", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: dir.path + "/dev/block", withIntermediateDirectories: true)
        try "0\n".write(toFile: disk + "/queue/rotational", atomically: true, encoding: .utf8)
        try "1\n".write(toFile: disk + "/sdz1/partition", atomically: true, encoding: .utf8)
        try fm.createSymbolicLink(atPath: dir.path + "/dev/block/8:1", withDestinationPath: "../../devices/pci0/block/sdz/sdz1")
        try fm.createSymbolicLink(atPath: dir.path + "/dev/block/8:0", withDestinationPath: "../../devices/pci0/block/sdz")
        #expect(BlockDevice.lookup(major: 8, minor: 1, sysfs: dir.path) == .nonRotational("sdz"))
        #expect(BlockDevice.lookup(major: 8, minor: 0, sysfs: dir.path) == .nonRotational("sdz"))
        try "1\n".write(toFile: disk + "/queue/rotational", atomically: true, encoding: .utf8)
        #expect(BlockDevice.lookup(major: 8, minor: 1, sysfs: dir.path) == .rotational)
        #expect(BlockDevice.lookup(major: 9, minor: 9, sysfs: dir.path) == nil)
    }

    @Test("mountinfo escapes are decoded")
    func mountInfoEscapes() throws {
        let entry = try #require(MountInfo.parse(#"50 27 0:45 / /mnt/my\040disk rw - btrfs /dev/sdb1 rw,subvol=/"#))
        #expect(entry.mountPoint == "/mnt/my disk")
        #expect(entry.fstype == "btrfs")
        #expect(MountInfo.parse("garbage") == nil)
    }

    @Test("/proc files are read to the end, not cut at the first read")
    func procFilesAreReadWhole() throws {
        // This process's memory map is well over 4 KiB; String(contentsOfFile:) returns ~4 KiB of it.
        let text = try #require(MountInfo.readProcFile("/proc/self/maps"))
        #expect(text.utf8.count > 8 * 1024, "\(text.utf8.count) bytes")
        #expect(text.hasSuffix("\n"))
        #expect(text.contains("[stack]"))
        #expect(MountInfo.readProcFile("/proc/self/no-such-file") == nil)
    }

    @Test("a file on tmpfs is reported as RAM-only with unknown placement")
    func tmpfs() throws {
        var fs = [UInt8]()
        guard let memory = try TemporaryDirectory.inMemory(prefix: "sf-shred-test") else {
            print("skipping: /dev/shm is not a writable tmpfs here")
            return
        }
        fs = Array("tmpfs secret".utf8)
        let path = try memory.file("secret", fs)
        let report = try #require(FileShredder.shred(path).first)
        #expect(report.filesystem == "tmpfs")
        #expect(report.warnings.contains(.memoryFilesystem(filesystem: "tmpfs")))
        #expect(report.inPlace == .unknown)
        #expect(!report.isTrusted)
        #expect(report.removed)
    }

    @Test("the device under the temporary directory is identified, and an SSD is warned about")
    func temporaryDirectoryDevice() throws {
        let dir = try TempDir()
        let path = try dir.file("d", pattern(8192))
        var info = stat()
        #expect(stat(path, &info) == 0)
        let report = try #require(FileShredder.shred(path).first)
        switch BlockDevice.rotational(device: info.st_dev, mountSource: MountInfo.find(containing: path)?.source) {
        case .nonRotational(let device): #expect(report.warnings.contains(.solidStateDevice(device: device)))
        case .rotational: #expect(!report.warnings.contains { if case .solidStateDevice = $0 { true } else { false } })
        case .unknown: #expect(report.warnings.contains { if case .unknownDevice = $0 { true } else { false } }
                                   || report.warnings.contains { if case .memoryFilesystem = $0 { true } else { false } })
        }
    }

    /// Mounts real filesystems on loop devices (root only, opt-in with SF_SHRED_MOUNT_TESTS=1).
    @Test("data=journal ext4, btrfs and overlayfs are detected on real mounts (opt-in)")
    func realMounts() throws {
        guard ProcessInfo.processInfo.environment["SF_SHRED_MOUNT_TESTS"] == "1", geteuid() == 0 else {
            print("skipping: set SF_SHRED_MOUNT_TESTS=1 and run as root to mount test filesystems")
            return
        }
        let dir = try TempDir()
        func sh(_ command: String) -> Bool {
            (try? ChildProcess.run("/bin/sh", ["-c", command], timeout: .seconds(120)))?.status == 0
        }
        let d = dir.path
        // ext4 with data=journal
        if sh("truncate -s 64M \(d)/e.img && mkfs.ext4 -q \(d)/e.img && mkdir \(d)/e && mount -o loop,data=journal \(d)/e.img \(d)/e") {
            defer { _ = sh("umount \(d)/e") }
            let file = try dir.file("e/f", pattern(50_000))
            let report = try #require(FileShredder.shred(file).first)
            #expect(report.warnings.contains(.dataJournaling(reason: "data=journal mount option")))
        } else {
            print("skipping ext4 data=journal: cannot mount a loop device")
        }
        // btrfs: copy-on-write, relocation seen by FIEMAP
        if sh("command -v mkfs.btrfs && truncate -s 300M \(d)/b.img && mkfs.btrfs -q \(d)/b.img && mkdir \(d)/b && mount -o loop \(d)/b.img \(d)/b") {
            defer { _ = sh("umount \(d)/b") }
            let file = try dir.file("b/f", pattern(100_000))
            _ = sh("sync")
            let report = try #require(FileShredder.shred(file).first)
            #expect(report.filesystem == "btrfs")
            #expect(report.warnings.contains(.copyOnWrite(filesystem: "btrfs")))
            #expect(report.inPlace == .relocated)
        } else {
            print("skipping btrfs: mkfs.btrfs absent or mount refused")
        }
        // overlayfs
        if sh("mkdir -p \(d)/o/lower \(d)/o/upper \(d)/o/work \(d)/o/merged && mount -t overlay overlay -o lowerdir=\(d)/o/lower,upperdir=\(d)/o/upper,workdir=\(d)/o/work \(d)/o/merged") {
            defer { _ = sh("umount \(d)/o/merged") }
            let file = try dir.file("o/merged/f", pattern(5000))
            let report = try #require(FileShredder.shred(file).first)
            #expect(report.warnings.contains(.overlay))
        } else {
            print("skipping overlayfs: mount refused")
        }
    }
    #endif
}
