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

/// Small wrappers over the descriptor calls the shredder needs, each throwing ``ShredError``.
enum FileIO {
    /// The ranges of `fd` holding data (holes skipped), found with SEEK_DATA / SEEK_HOLE; the
    /// whole file when the system cannot tell.
    static func dataRanges(_ fd: Int32, size: UInt64, path: String) throws(ShredError) -> [Range<UInt64>] {
        guard size > 0 else { return [] }
        var ranges: [Range<UInt64>] = []
        var offset: UInt64 = 0
        while offset < size {
            let start = sf_seek_data(fd, off_t(offset))
            if start < 0 {
                if errno == ENXIO { break }  // no more data after offset
                if ranges.isEmpty && offset == 0 && (errno == EINVAL || errno == ENOTSUP) {
                    return [0..<size]  // SEEK_DATA unsupported: overwrite everything
                }
                throw ShredError.system(operation: "lseek(SEEK_DATA)", path: path, errno: errno)
            }
            let dataStart = UInt64(start)
            if dataStart >= size { break }
            let end = sf_seek_hole(fd, start)
            guard end >= 0 else { throw ShredError.system(operation: "lseek(SEEK_HOLE)", path: path, errno: errno) }
            let dataEnd = min(UInt64(end), size)
            if dataEnd > dataStart { ranges.append(dataStart..<dataEnd) }
            offset = max(dataEnd, dataStart + 1)
        }
        return ranges
    }

    /// Writes all of `buffer` at `offset`.
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: UInt64, path: String) throws(ShredError) {
        do { try FileCalls.writeAll(fd, buffer, at: Int64(offset)) } catch {
            throw ShredError.system(operation: "write", path: path, errno: error.code)
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`; fails on a short file.
    static func readAll(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, path: String) throws(ShredError) {
        let done: Int
        do { done = try FileCalls.readFully(fd, into: buffer, at: Int64(offset)) } catch {
            throw ShredError.system(operation: "read", path: path, errno: error.code)
        }
        guard done == buffer.count else { throw ShredError.fileChanged(path) }
    }

    /// fdatasync (file data reaches the device).
    static func dataSync(_ fd: Int32, path: String) throws(ShredError) {
        while sf_datasync(fd) != 0 {
            if errno == EINTR { continue }
            throw ShredError.system(operation: "fdatasync", path: path, errno: errno)
        }
    }

    /// fsync of a directory descriptor (ignoring filesystems that refuse it with EINVAL).
    static func syncDirectory(_ fd: Int32, path: String) throws(ShredError) {
        if fsync(fd) != 0 && errno != EINVAL && errno != EROFS {
            throw ShredError.system(operation: "fsync directory", path: path, errno: errno)
        }
    }

    /// The names in a directory (without "." and ".."), sorted.
    static func listDirectory(_ fd: Int32, path: String) throws(ShredError) -> [String] {
        let copy = dup(fd)
        guard copy >= 0 else { throw ShredError.system(operation: "dup", path: path, errno: errno) }
        guard let stream = fdopendir(copy) else {
            let code = errno
            close(copy)
            throw ShredError.system(operation: "opendir", path: path, errno: code)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw ShredError.system(operation: "readdir", path: path, errno: errno) }
                break
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

extension ShredError {
    /// A failed call on `path`, named as the call names itself.
    init(_ error: SystemCallError, path: String) {
        self = .system(operation: error.operation, path: path, errno: error.code)
    }
}
