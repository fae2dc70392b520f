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
import Cipher

/// Descriptor plumbing shared by the age streams, pipelines and front ends: opening inputs,
/// recognising the file being read, reading and writing with retries.
package enum AgeIO {
    /// Opens an input for reading: the file at `path`, or standard input (descriptor 0, which
    /// the caller must not close) for nil or `-`.
    /// - Parameter path: A path, `-` or nil.
    /// - Returns: A readable descriptor (close-on-exec).
    /// - Throws: ``AgeError/io(_:)`` naming the path and the reason.
    package static func openInput(_ path: String?) throws(AgeError) -> Int32 {
        guard let path, path != "-" else { return 0 }
        return try openForReading(path)
    }

    /// Whether writing to the output `path` would write the regular file open on `fd`: the
    /// same inode at `path` (a symbolic link there is not followed: it is refused as output),
    /// or `/dev/stdout` or `/dev/fd/N` when that descriptor is the file. Never true for a
    /// pipe, socket or terminal.
    /// - Parameters:
    ///   - fd: The descriptor being read.
    ///   - path: The output path.
    package static func isSameFile(_ fd: Int32, _ path: String) -> Bool {
        guard let a = try? FileCalls.status(fd), a.isRegularFile else { return false }
        let b: FileStatus?
        if case .descriptor(let output)? = try? SecureFile.outputTarget(of: path) {
            b = try? FileCalls.status(output)
        } else {
            b = try? FileCalls.linkStatus(path)
        }
        guard let b else { return false }
        return b.isRegularFile && a.isSameFile(as: b)
    }

    static func openForReading(_ path: String) throws(AgeError) -> Int32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AgeError.io("cannot open \(path): \(String(cString: strerror(errno)))") }
        return fd
    }

    /// Reads once into `buffer` (retrying on EINTR); 0 at end of input.
    static func read(_ fd: Int32, into buffer: inout [UInt8]) throws(AgeError) -> Int {
        let read = buffer.withUnsafeMutableBytes { raw in Result { () throws(SystemCallError) in try FileCalls.readSome(fd, into: raw) } }
        do { return try read.get() } catch { throw AgeError.io("read failed: \(String(cString: strerror(error.code)))") }
    }

    /// Writes all of `bytes` (retrying short writes and EINTR).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(AgeError) {
        do { try SecureFile.writeAll(fd, bytes, path: "output") } catch {
            throw AgeError.io("write failed: \(error)")
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` whose body's error type is kept (the standard library's is `rethrows`,
    /// which a `throws(AgeError)` function cannot call with a throwing body).
    func withBytes<Result, Failure: Error>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> Result) throws(Failure) -> Result {
        let outcome: Swift.Result<Result, Failure> = withUnsafeBytes { raw in
            do throws(Failure) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try outcome.get()
    }
}
