import Foundation
import Testing
@testable import Shredder
import Cipher
import TestSupport

/// The shared temporary directory (TestSupport), under the name these tests use.
typealias TempDir = TemporaryDirectory

extension TemporaryDirectory {
    func entries(_ sub: String = "") throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: sub.isEmpty ? path : path + "/" + sub)
    }
}

/// Deterministic, recognisable content: 4 KiB chunks each starting with its index.
func pattern(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 12)) | 0x01 }
}

func readAll(fd: Int32, count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, 0) }
    return Array(bytes.prefix(max(0, n)))
}

func exists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}

@Suite("FileShredder")
struct FileShredderTests {
    @Test("progress counts every byte written, across passes and the files of a tree, and only grows")
    func progressCountsEveryByte() throws {
        let dir = try TempDir()
        try FileManager.default.createDirectory(atPath: dir.path + "/tree/sub", withIntermediateDirectories: true)
        _ = try dir.file("tree/a", pattern(5000))
        _ = try dir.file("tree/sub/b", pattern(70_000))
        var seen: [Int64] = []
        let options = ShredOptions(passes: 2, zeroPass: true, recursive: true)
        let reports = try FileShredder.shred(dir.path + "/tree", options: options, onReport: { _ in },
                                             onProgress: { seen.append($0) })
        let written = reports.reduce(Int64(0)) { $0 + Int64($1.bytesWritten) }
        #expect(written > 0)
        #expect(seen.last == written)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test("content is overwritten: the old inode, read through a second descriptor, holds none of the original")
    func contentOverwritten() throws {
        let dir = try TempDir()
        let size = 3 * 4096 + 123
        let original = pattern(size)
        let path = try dir.file("secret.txt", original)
        let second = open(path, O_RDONLY)
        try #require(second >= 0)
        defer { close(second) }

        let reports = try FileShredder.shred(path)
        #expect(reports.count == 1)
        let report = try #require(reports.first)
        #expect(report.removed)
        #expect(report.truncated)
        #expect(report.passes == 1)
        #expect(report.passKinds == [.random])
        #expect(report.bytesOverwritten == UInt64(size))
        #expect(report.renames >= 1)
        #expect(!exists(path))
        #expect(try dir.entries().isEmpty)
        // Truncated before unlink: the inode is empty now.
        var info = stat()
        #expect(fstat(second, &info) == 0)
        #expect(info.st_size == 0)
        #expect(info.st_nlink == 0)
    }

    @Test("remove:false keeps the file; every 4 KiB chunk and the tail (size % 4096) differ from the original")
    func keptFileOverwrittenIncludingTail() throws {
        let dir = try TempDir()
        let size = 5 * 4096 + 1001
        let original = pattern(size)
        let path = try dir.file("keep.bin", original)
        let second = open(path, O_RDONLY)
        try #require(second >= 0)
        defer { close(second) }

        let report = try #require(FileShredder.shred(path, options: ShredOptions(remove: false)).first)
        #expect(!report.removed)
        #expect(report.bytesOverwritten == UInt64(size))
        let after = readAll(fd: second, count: size + 10)
        #expect(after.count == size)
        let chunks = stride(from: 0, to: size, by: 4096).map { Array(original[$0..<min($0 + 4096, size)]) }
        for (index, start) in stride(from: 0, to: size, by: 4096).enumerated() {
            let chunk = Array(after[start..<min(start + 4096, size)])
            #expect(!chunks.contains(chunk), "chunk \(index) matches an original chunk")
        }
        // The last size % 4096 bytes: no more than a few bytes may coincide by chance.
        let tailStart = size - size % 4096
        let same = zip(after[tailStart...], original[tailStart...]).filter { $0 == $1 }.count
        #expect(same < 40)
        #expect(after != original)
    }

    @Test("a zero pass leaves zeros; verify passes")
    func zeroPassAndVerify() throws {
        let dir = try TempDir()
        let size = 70_000
        let path = try dir.file("z.bin", pattern(size))
        let report = try #require(FileShredder.shred(path, options: ShredOptions(passes: 2, zeroPass: true, remove: false, verify: true)).first)
        #expect(report.passes == 3)
        #expect(report.passKinds == [.random, .random, .zero])
        #expect(report.bytesWritten == UInt64(3 * size))
        #expect(report.verified == true)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count == size)
        #expect(bytes.allSatisfy { $0 == 0 })
    }

    @Test("verify after a random pass regenerates the keystream and matches")
    func verifyRandom() throws {
        let dir = try TempDir()
        let path = try dir.file("r.bin", pattern(3 << 20 + 17))
        let report = try #require(FileShredder.shred(path, options: ShredOptions(passes: 1, remove: true, verify: true,
                                                                                  bufferSize: 1 << 20)).first)
        #expect(report.verified == true)
        #expect(report.removed)
    }

    @Test("holes of a sparse file stay holes")
    func sparseHoles() throws {
        let dir = try TempDir()
        let path = dir.path + "/sparse.bin"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let block = pattern(65536)
        let hole: off_t = 8 << 20
        _ = block.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
        _ = block.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, hole) }
        #expect(fsync(fd) == 0)
        var before = stat()
        #expect(fstat(fd, &before) == 0)
        let size = UInt64(before.st_size)

        let report = try #require(FileShredder.shred(path, options: ShredOptions(remove: false)).first)
        #expect(report.size == size)
        guard report.extents == 2 else {
            // The filesystem does not report holes (SEEK_HOLE unsupported): the whole file was written.
            #expect(report.bytesOverwritten == size)
            return
        }
        #expect(report.bytesOverwritten == 2 * 65536)
        var after = stat()
        #expect(fstat(fd, &after) == 0)
        #expect(after.st_blocks <= before.st_blocks)
        #expect(lseek(fd, 0, 4 /* SEEK_HOLE */) == 65536)
        #expect(lseek(fd, 65536, 3 /* SEEK_DATA */) == hole)
        let head = readAll(fd: fd, count: 65536)
        #expect(head != block)
    }

    @Test("a symlink is refused and its target left intact")
    func symlinkRefused() throws {
        let dir = try TempDir()
        let target = try dir.file("target.txt", Array("keep me".utf8))
        let link = dir.path + "/link"
        try #require(symlink(target, link) == 0)
        #expect(throws: ShredError.symlink(link)) { try FileShredder.shred(link) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("keep me".utf8))
        #expect(exists(link))
    }

    @Test("a hard-linked file is refused, and accepted with allowHardLinks")
    func hardLinks() throws {
        let dir = try TempDir()
        let original = Array("linked content".utf8)
        let path = try dir.file("a", original)
        let other = dir.path + "/b"
        try #require(link(path, other) == 0)
        #expect(throws: ShredError.hardLinked(path: path, count: 2)) { try FileShredder.shred(path) }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == original)

        let report = try #require(FileShredder.shred(path, options: ShredOptions(allowHardLinks: true)).first)
        #expect(report.removed)
        #expect(report.warnings.contains(.otherHardLinks(count: 2)))
        #expect(!exists(path))
        // The other name now sees the truncated inode.
        #expect(try Data(contentsOf: URL(fileURLWithPath: other)).isEmpty)
    }

    @Test("non-regular files and directories without recursive are refused")
    func refusals() throws {
        let dir = try TempDir()
        let fifo = dir.path + "/fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ShredError.notRegularFile(fifo)) { try FileShredder.shred(fifo) }
        let sub = dir.path + "/sub"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: false)
        #expect(throws: ShredError.isDirectory(sub)) { try FileShredder.shred(sub) }
        #expect(throws: ShredError.self) { try FileShredder.shred(dir.path + "/missing") }
        #expect(throws: ShredError.self) { try FileShredder.shred(fifo, options: ShredOptions(passes: 0)) }
    }

    @Test("directories are shredded recursively, depth-first, and no names remain")
    func recursive() throws {
        let dir = try TempDir()
        let root = dir.path + "/tree"
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        _ = try dir.file("tree/one.txt", pattern(100))
        _ = try dir.file("tree/a/two.txt", pattern(5000))
        _ = try dir.file("tree/a/b/three.txt", pattern(9000))
        _ = try dir.file("tree/a/b/empty", [])
        var seen: [String] = []
        let reports = try FileShredder.shred(root, options: ShredOptions(recursive: true), onReport: { seen.append($0.path) })
        #expect(reports.count == 7)
        #expect(reports.map(\.path) == seen)
        #expect(reports.filter(\.isDirectory).count == 3)
        #expect(reports.allSatisfy { $0.removed })
        // Depth-first: the deepest directory is reported before its parents.
        #expect(reports.last?.path == root)
        #expect(seen.firstIndex(of: root + "/a/b")! < seen.firstIndex(of: root + "/a")!)
        #expect(try dir.entries().isEmpty)
    }

    @Test("a recursive shred with remove:false overwrites and keeps everything")
    func recursiveKeep() throws {
        let dir = try TempDir()
        let root = dir.path + "/keep"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let original = pattern(4096)
        _ = try dir.file("keep/x", original)
        let reports = try FileShredder.shred(root, options: ShredOptions(remove: false, recursive: true))
        #expect(reports.count == 2)
        #expect(try dir.entries("keep") == ["x"])
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: root + "/x"))) != original)
    }

    @Test("a symlink inside a directory is refused, not followed; the rest is shredded")
    func recursiveSymlink() throws {
        let dir = try TempDir()
        let outside = try dir.file("outside.txt", Array("outside".utf8))
        let root = dir.path + "/tree"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        _ = try dir.file("tree/inside.txt", pattern(10))
        try #require(symlink(outside, root + "/link") == 0)
        do {
            _ = try FileShredder.shred(root, options: ShredOptions(recursive: true))
            Issue.record("expected an incomplete error")
        } catch {
            guard case .incomplete(let failures, let reports) = error else { throw error }
            #expect(failures.count == 1)
            #expect(failures.first?.contains("symbolic link") == true)
            #expect(reports.contains { $0.path == root + "/inside.txt" && $0.removed })
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data("outside".utf8))
        #expect(try dir.entries("tree") == ["link"])
    }

    @Test("the report states placement and filesystem; on this machine's /tmp FIEMAP is consulted")
    func honestReport() throws {
        let dir = try TempDir()
        let path = try dir.file("r", pattern(1 << 20))
        let report = try #require(FileShredder.shred(path).first)
        #expect(report.filesystem != "unknown")
        if report.inPlace == .unknown {
            #expect(report.warnings.contains { if case .placementUnknown = $0 { true } else { false } })
        }
        if report.inPlace == .relocated { #expect(report.warnings.contains(.relocated)) }
        #expect(report.isTrusted == (report.warnings.isEmpty && report.inPlace == .verified))
    }

    @Test("overwrite(fileDescriptor:) overwrites an open unlinked inode without removing anything")
    func overwriteDescriptor() throws {
        let dir = try TempDir()
        let size = 10_000
        let original = pattern(size)
        let path = try dir.file("old", original)
        let fd = open(path, O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(unlink(path) == 0)  // as after an atomic replace
        let report = try FileShredder.overwrite(fileDescriptor: fd, path: path, options: ShredOptions(zeroPass: true, verify: true))
        #expect(!report.removed)
        #expect(report.passes == 2)
        #expect(report.verified == true)
        #expect(readAll(fd: fd, count: size) == [UInt8](repeating: 0, count: size))
    }

    @Test("overwrite(fileDescriptor:) refuses read-only and append-mode descriptors, leaving the bytes")
    func overwriteDescriptorModes() throws {
        let dir = try TempDir()
        let original = pattern(5000)
        let path = try dir.file("m", original)
        for flags in [O_RDONLY, O_WRONLY | O_APPEND] {
            let fd = open(path, flags)
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(throws: ShredError.self) { try FileShredder.overwrite(fileDescriptor: fd, path: path) }
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == original)
        let fd = open(path, O_WRONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        let report = try FileShredder.overwrite(fileDescriptor: fd, path: path, options: ShredOptions(verify: true))
        #expect(report.verified == nil)
        #expect(report.warnings.contains { if case .verifyUnavailable = $0 { true } else { false } })
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) != original)
    }

    @Test("verification detects content that differs from the last pass")
    func verifyDetectsMismatch() throws {
        let dir = try TempDir()
        var bytes = [UInt8](repeating: 0, count: 10_000)
        bytes[7777] = 1
        let path = try dir.file("v", bytes)
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 4096)
        defer { buffer.deallocate() }
        var warnings: [ShredWarning] = []
        #expect(throws: ShredError.verificationFailed(path: path, offset: 7777)) {
            try FileShredder.verify(fd, ranges: [0..<10_000], stream: nil, buffer: buffer, path: path, warnings: &warnings)
        }
        try FileShredder.verify(fd, ranges: [0..<7777], stream: nil, buffer: buffer, path: path, warnings: &warnings)
        // Zeros are not the keystream (the first differing byte is almost always offset 0).
        do {
            try FileShredder.verify(fd, ranges: [0..<10_000], stream: try KeyStream(chunkSize: 4096), buffer: buffer,
                                    path: path, warnings: &warnings)
            Issue.record("zeros passed as keystream")
        } catch {
            guard case .verificationFailed(let failedPath, let offset) = error else { throw error }
            #expect(failedPath == path)
            #expect(offset < 16)
        }
    }

    @Test("rename lengths decrease to one character")
    func renameLengths() {
        #expect(FileShredder.renameLengths(10) == [10, 5, 2, 1])
        #expect(FileShredder.renameLengths(1) == [1])
        #expect(FileShredder.renameLengths(400).first == 255)
    }

    @Test("mountinfo lines are parsed")
    func mountInfoParsing() throws {
        #if os(Linux)
        let line = "36 35 98:0 / /mnt rw,noatime master:1 - ext4 /dev/sda1 rw,errors=continue,data=journal"
        let entry = try #require(MountInfo.parse(line))
        #expect(entry.device == "98:0")
        #expect(entry.fstype == "ext4")
        #expect(entry.source == "/dev/sda1")
        #expect(entry.superOptions.contains("data=journal"))
        #endif
    }

    @Test("the keystream is reproducible by offset, independent of chunking")
    func keyStreamOffsets() throws {
        let stream = try KeyStream(chunkSize: 4096)
        var whole = [UInt8](repeating: 0, count: 4096)
        try whole.withUnsafeMutableBytes { try stream.fill(offset: 100, into: $0) }
        var part = [UInt8](repeating: 0, count: 1000)
        try part.withUnsafeMutableBytes { try stream.fill(offset: 1133, into: $0) }
        #expect(Array(whole[1033..<2033]) == part)
        try stream.rekey()
        var other = [UInt8](repeating: 0, count: 4096)
        try other.withUnsafeMutableBytes { try stream.fill(offset: 100, into: $0) }
        #expect(other != whole)
    }
}

@Suite("CryptoErase")
struct CryptoEraseTests {
    @Test("key files are overwritten (bytes differ before unlink) and gone afterwards")
    func destroyKeys() throws {
        let dir = try TempDir()
        let keyA = try SecureRandom.bytes(32)
        let keyB = try SecureRandom.bytes(80)
        let a = try dir.file("a.key", keyA)
        let b = try dir.file("b.key", keyB)
        let fdA = open(a, O_RDONLY)
        try #require(fdA >= 0)
        defer { close(fdA) }
        let reports = try CryptoErase.destroy(keyFiles: [a, b])
        #expect(reports.count == 2)
        #expect(reports.allSatisfy { $0.removed && $0.passes == 2 })
        #expect(!exists(a) && !exists(b))
        #expect(try dir.entries().isEmpty)
        var info = stat()
        #expect(fstat(fdA, &info) == 0)
        #expect(info.st_size == 0)
    }

    @Test("the key bytes differ before unlink")
    func bytesDifferBeforeUnlink() throws {
        let dir = try TempDir()
        let key = try SecureRandom.bytes(64)
        let path = try dir.file("k.key", key)
        var seen: [UInt8] = []
        let report = try CryptoErase.destroy(path, beforeRemoval: { fd in seen = readAll(fd: fd, count: 100) })
        #expect(seen.count == 64)
        #expect(seen != key)
        #expect(report.removed)
        #expect(!exists(path))
    }

    @Test("a missing key file or a symlink fails with a typed error; the others are still destroyed")
    func partialFailure() throws {
        let dir = try TempDir()
        let good = try dir.file("good.key", try SecureRandom.bytes(32))
        let link = dir.path + "/link.key"
        try #require(symlink(good, link) == 0)
        #expect(throws: ShredError.symlink(link)) { try CryptoErase.destroy(keyFiles: [link]) }
        do {
            _ = try CryptoErase.destroy(keyFiles: [dir.path + "/missing.key", good])
            Issue.record("expected an error")
        } catch {
            guard case .incomplete(let failures, let reports) = error else { throw error }
            #expect(failures.count == 1)
            #expect(reports.count == 1)
        }
        #expect(!exists(good))
    }
}

@Suite("VolatileLibrary")
struct VolatileLibraryTests {
    static let source = """
    int sf_test_answer(int x) { return x * 2 + 42; }
    """

    /// Builds a tiny shared library with cc, or returns nil (with a message) when cc is absent.
    static func buildLibrary(in dir: TempDir) throws -> String? {
        let candidates: [String] = ["/usr/bin/cc", "/usr/local/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"]
        let cc = candidates.first { (candidate: String) -> Bool in access(candidate, X_OK) == 0 }
        guard let cc else {
            print("skipping: no C compiler (cc) to build a test library")
            return nil
        }
        let sourcePath = dir.path + "/lib.c"
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let output = dir.path + "/libvolatile.so"
        let compiled = try ChildProcess.run(cc, ["-shared", "-fPIC", "-o", output, sourcePath])
        guard compiled.status == 0 else {
            Issue.record("cc failed with status \(compiled.status): \(compiled.errorText)")
            return nil
        }
        try FileManager.default.removeItem(atPath: sourcePath)
        return output
    }

    typealias Answer = @convention(c) (Int32) -> Int32

    @Test("a library loads from a file, runs, and close() leaves no file behind; a double close is an error")
    func fromFile() throws {
        let dir = try TempDir()
        guard let path = try Self.buildLibrary(in: dir) else { return }
        let library = try VolatileLibrary.open(path)
        let function = unsafeBitCast(try library.symbol(named: "sf_test_answer"), to: Answer.self)
        #expect(function(4) == 50)
        #expect(throws: VolatileLibraryError.self) { try library.symbol(named: "no_such_symbol") }
        let reports = try library.close()
        #expect(reports.count == 1)
        #expect(reports.first?.removed == true)
        #expect(!exists(path))
        #expect(try dir.entries().isEmpty)
        #expect(throws: VolatileLibraryError.alreadyClosed(path)) { try library.close() }
        #expect(throws: VolatileLibraryError.alreadyClosed(path)) { try library.symbol(named: "sf_test_answer") }
    }

    @Test("a library loads from bytes in memory (memfd) after its file was deleted")
    func fromMemory() throws {
        let dir = try TempDir()
        guard let path = try Self.buildLibrary(in: dir) else { return }
        let bytes = SecretBytes(copying: try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
        let bytes2 = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        try FileManager.default.removeItem(atPath: path)
        #if os(Linux)
        let library = try VolatileLibrary.load(bytes: bytes, name: "test-module")
        bytes.wipe()
        let function = unsafeBitCast(try library.symbol(named: "sf_test_answer"), to: Answer.self)
        #expect(function(-1) == 40)
        // The loader knows a library by its path's text: the next memory file, likely given the
        // descriptor number this one was loaded from, must not get this library back.
        #expect(throws: VolatileLibraryError.self) { try VolatileLibrary.load(bytes: [0x7F, 0x45, 0x4C, 0x46, 1, 2, 3]) }
        let again = try VolatileLibrary.load(bytes: bytes2, name: "test-module-2")
        #expect(unsafeBitCast(try again.symbol(named: "sf_test_answer"), to: Answer.self)(0) == 42)
        #expect(try again.close().isEmpty)
        #expect(try library.close().isEmpty)
        #expect(throws: VolatileLibraryError.alreadyClosed("memfd:test-module")) { try library.close() }
        #expect(try dir.entries().isEmpty)
        #else
        #expect(throws: VolatileLibraryError.self) { try VolatileLibrary.load(bytes: bytes) }
        #endif
    }

    @Test("garbage bytes and a symlinked library are refused with typed errors")
    func refusals() throws {
        let dir = try TempDir()
        #expect(throws: VolatileLibraryError.self) { try VolatileLibrary.load(bytes: [0x7F, 0x45, 0x4C, 0x46, 1, 2, 3]) }
        let file = try dir.file("x.so", [1, 2, 3])
        #expect(throws: VolatileLibraryError.self) { try VolatileLibrary.open(file) }
        try #require(symlink(file, dir.path + "/l.so") == 0)
        #expect(throws: VolatileLibraryError.shred(.symlink(dir.path + "/l.so"))) { try VolatileLibrary.open(dir.path + "/l.so") }
    }
}
