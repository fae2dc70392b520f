import Cipher
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

/// Erasure by key destruction: data the library encrypted is gone once its keys are gone.
///
/// This is the building block for erasing encrypted stores and files: their wrapped-key files
/// are overwritten in place with random bytes of their full length, synced, then shredded
/// (a further random pass over the allocated extents, truncate, random renames, unlink).
/// Unlike overwriting the data itself, this is sound on SSDs and copy-on-write filesystems
/// as long as the key never touched the disk unencrypted elsewhere; the reports still carry
/// the warnings about where the key files lived.
public enum CryptoErase {
    /// Overwrites each key file in place with random bytes of its length, fdatasyncs, then shreds and unlinks it.
    ///
    /// Every file is attempted even when an earlier one fails.
    ///
    /// - Parameter keyFiles: Paths of regular files (symlinks and hard-linked files are refused).
    /// - Returns: One report per key file, in order; ``ShredReport/passes`` counts the full-length
    ///   overwrite plus the shred pass.
    /// - Throws: The error of the single file when there is one path, otherwise
    ///   ``ShredError/incomplete(failures:reports:)`` listing the files that could not be destroyed.
    public static func destroy(keyFiles: [String]) throws(ShredError) -> [ShredReport] {
        var reports: [ShredReport] = []
        var failures: [String] = []
        var firstError: ShredError?
        for path in keyFiles {
            do {
                reports.append(try destroy(path))
            } catch {
                failures.append(error.description)
                firstError = firstError ?? error
            }
        }
        if failures.isEmpty { return reports }
        if keyFiles.count == 1, let firstError { throw firstError }
        throw ShredError.incomplete(failures: failures, reports: reports)
    }

    /// Destroys one key file; `beforeRemoval` sees the descriptor after the overwrites, before the
    /// truncation (tests read it there).
    static func destroy(_ path: String, beforeRemoval: (Int32) -> Void = { _ in }) throws(ShredError) -> ShredReport {
        let options = ShredOptions()
        let (directory, parent, name, info) = try FileShredder.openParent(of: path)
        defer { close(parent) }
        switch info.kind {
        case .regular: break
        case .symbolicLink: throw ShredError.symlink(path)
        case .directory: throw ShredError.isDirectory(path)
        default: throw ShredError.notRegularFile(path)
        }
        let fd: Int32
        do {
            fd = try FileCalls.open(in: parent, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        } catch {
            if error.code == ELOOP { throw ShredError.symlink(path) }
            throw ShredError(error, path: path)
        }
        defer { close(fd) }
        let opened: FileStatus
        do { opened = try FileCalls.status(fd) } catch { throw ShredError(error, path: path) }
        guard opened.isRegularFile else { throw ShredError.notRegularFile(path) }
        guard opened.isSameFile(as: info) else { throw ShredError.fileChanged(path) }
        try FileShredder.checkLinks(opened, path: path, options: options)

        // 1. The whole length, holes included, with fresh random bytes.
        let size = Int(max(0, opened.size))
        let chunk = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer {
            sf_secure_zero(buffer.baseAddress, chunk)
            buffer.deallocate()
        }
        var offset = 0
        while offset < size {
            let count = min(chunk, size - offset)
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
            do { try SecureRandom.fill(slice) } catch { throw ShredError.random(String(describing: error)) }
            try FileIO.writeAll(fd, UnsafeRawBufferPointer(slice), at: UInt64(offset), path: path)
            offset += count
        }
        try FileIO.dataSync(fd, path: path)

        // 2. The regular shred: a random pass over the allocated extents, then removal.
        var report = try FileShredder.overwriteOpenFile(fd, info: opened, path: path, options: options)
        report.passes += 1
        report.passKinds.insert(.random, at: 0)
        report.bytesWritten += UInt64(size)
        beforeRemoval(fd)
        try FileShredder.remove(fd: fd, info: opened, parent: parent, parentPath: directory, name: name, path: path,
                                report: &report)
        return report
    }
}
