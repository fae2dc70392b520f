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

/// Overwrites files with random data and removes them, and says honestly how far the result
/// can be trusted.
///
/// For each regular file: open it relative to its directory without following symlinks
/// (`openat` + `O_NOFOLLOW`), refuse non-regular files and (unless allowed) files with several
/// hard links; overwrite only the allocated extents (holes stay holes) with a CSPRNG stream, one
/// pass by default, `fdatasync` after each pass; optionally re-read and verify; then truncate,
/// rename to random names of decreasing length (syncing the directory each time) and unlink.
/// Every file gets a ``ShredReport`` whose ``ShredReport/warnings`` list each reason the
/// overwrite may not have reached the old data (copy-on-write, journalling, overlay, network,
/// RAM, SSD, relocation seen by FIEMAP).
public enum FileShredder {
    /// Shreds a file, or a directory tree when ``ShredOptions/recursive`` is set.
    ///
    /// - Parameters:
    ///   - path: The file or directory. A symlink is refused, never followed.
    ///   - options: Passes, removal, verification and what is accepted.
    /// - Returns: One report per file (and per directory, for a recursive shred), depth-first.
    /// - Throws: ``ShredError``; for a directory, ``ShredError/incomplete(failures:reports:)``
    ///   when some entries failed while the others were shredded.
    public static func shred(_ path: String, options: ShredOptions = ShredOptions()) throws(ShredError) -> [ShredReport] {
        try shred(path, options: options, onReport: { _ in })
    }

    /// Opens the directory holding `path` and stats the entry in it without following a
    /// symlink. The caller closes the returned directory descriptor.
    static func openParent(of path: String) throws(ShredError) -> (directory: String, parent: Int32, name: String, info: FileStatus) {
        let (directory, name) = try split(path)
        let parent = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { throw ShredError.system(operation: "open directory", path: directory, errno: errno) }
        do {
            return (directory, parent, name, try FileCalls.linkStatus(in: parent, name))
        } catch {
            close(parent)
            throw ShredError(error, path: path)
        }
    }

    /// Shreds a file or directory tree, calling `onReport` as each entry is done (for progress output).
    ///
    /// - Parameters:
    ///   - path: The file or directory. A symlink is refused, never followed.
    ///   - options: Passes, removal, verification and what is accepted.
    ///   - onReport: Called with each report as soon as the entry is done.
    /// - Returns: All reports, depth-first.
    /// - Throws: ``ShredError``.
    public static func shred(_ path: String, options: ShredOptions, onReport: (ShredReport) -> Void) throws(ShredError) -> [ShredReport] {
        try shred(path, options: options, onReport: onReport, onProgress: { _ in })
    }

    /// Shreds a file or directory tree, calling `onReport` as each entry is done and
    /// `onProgress` with the bytes written so far, across every pass and file of this call
    /// (after each chunk of ``ShredOptions/bufferSize`` bytes), for a progress display.
    ///
    /// - Parameters:
    ///   - path: The file or directory. A symlink is refused, never followed.
    ///   - options: Passes, removal, verification and what is accepted.
    ///   - onReport: Called with each report as soon as the entry is done.
    ///   - onProgress: Called with the total bytes written so far.
    /// - Returns: All reports, depth-first.
    /// - Throws: ``ShredError``.
    public static func shred(_ path: String, options: ShredOptions, onReport: (ShredReport) -> Void,
                             onProgress: (Int64) -> Void) throws(ShredError) -> [ShredReport] {
        try withoutActuallyEscaping(onProgress) { (progress) throws(ShredError) in
            try shred(path, options: options, onReport: onReport, progress: ProgressCounter(progress))
        }
    }

    /// The bytes written so far by one call, reported after each chunk.
    final class ProgressCounter {
        private let report: (Int64) -> Void
        private var written: Int64 = 0
        init(_ report: @escaping (Int64) -> Void) { self.report = report }
        func add(_ count: Int) {
            written += Int64(count)
            report(written)
        }
    }

    private static func shred(_ path: String, options: ShredOptions, onReport: (ShredReport) -> Void,
                              progress: ProgressCounter) throws(ShredError) -> [ShredReport] {
        try options.validate()
        let (directory, parent, name, info) = try openParent(of: path)
        defer { close(parent) }
        switch info.kind {
        case .symbolicLink:
            throw ShredError.symlink(path)
        case .directory:
            guard options.recursive else { throw ShredError.isDirectory(path) }
            return try withoutActuallyEscaping(onReport) { (callback) throws(ShredError) in
                var walk = Walk(options: options, onReport: callback, progress: progress)
                walk.directory(parent: parent, parentPath: directory, name: name, path: path)
                if !walk.failures.isEmpty { throw ShredError.incomplete(failures: walk.failures, reports: walk.reports) }
                return walk.reports
            }
        case .regular:
            let report = try shredFile(parent: parent, parentPath: directory, name: name, path: path, expected: info,
                                       options: options, progress: progress)
            onReport(report)
            return [report]
        default:
            throw ShredError.notRegularFile(path)
        }
    }

    /// Overwrites the allocated extents of an already-open regular file (used after an atomic
    /// replace, to destroy the old plaintext inode); does not truncate/rename/unlink.
    ///
    /// The descriptor must be open for writing (and reading, for ``ShredOptions/verify``); it is
    /// not closed. ``ShredOptions/remove`` and ``ShredOptions/recursive`` are ignored.
    ///
    /// - Parameters:
    ///   - fileDescriptor: An open regular file.
    ///   - path: The name used in the report and errors.
    ///   - options: Passes, hard links and verification.
    /// - Returns: The report for the file (``ShredReport/removed`` is false).
    /// - Throws: ``ShredError``.
    public static func overwrite(fileDescriptor: Int32, path: String, options: ShredOptions = ShredOptions()) throws(ShredError) -> ShredReport {
        try options.validate()
        let info: FileStatus
        do { info = try FileCalls.status(fileDescriptor) } catch { throw ShredError(error, path: path) }
        guard info.isRegularFile else { throw ShredError.notRegularFile(path) }
        // pwrite on an O_APPEND descriptor appends instead of overwriting (Linux).
        let flags = fcntl(fileDescriptor, F_GETFL)
        guard flags >= 0 else { throw ShredError.system(operation: "fcntl", path: path, errno: errno) }
        if flags & O_APPEND != 0 {
            throw ShredError.system(operation: "overwrite (the descriptor is in append mode)", path: path, errno: EINVAL)
        }
        if flags & O_ACCMODE == O_RDONLY {
            throw ShredError.system(operation: "overwrite (the descriptor is read-only)", path: path, errno: EBADF)
        }
        try checkLinks(info, path: path, options: options)
        return try overwriteOpenFile(fileDescriptor, info: info, path: path, options: options)
    }

    // MARK: - Files

    static func shredFile(parent: Int32, parentPath: String, name: String, path: String, expected: FileStatus,
                          options: ShredOptions, progress: ProgressCounter? = nil) throws(ShredError) -> ShredReport {
        let fd: Int32
        do {
            fd = try FileCalls.open(in: parent, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        } catch {
            if error.code == ELOOP { throw ShredError.symlink(path) }
            if error.code == EISDIR { throw ShredError.isDirectory(path) }
            throw ShredError(error, path: path)
        }
        defer { close(fd) }
        let info: FileStatus
        do { info = try FileCalls.status(fd) } catch { throw ShredError(error, path: path) }
        guard info.isRegularFile else { throw ShredError.notRegularFile(path) }
        guard info.isSameFile(as: expected) else { throw ShredError.fileChanged(path) }
        try checkLinks(info, path: path, options: options)
        var report = try overwriteOpenFile(fd, info: info, path: path, options: options, progress: progress)
        if options.remove {
            try remove(fd: fd, info: info, parent: parent, parentPath: parentPath, name: name, path: path, report: &report)
        }
        return report
    }

    static func checkLinks(_ info: FileStatus, path: String, options: ShredOptions) throws(ShredError) {
        if info.links > 1 && !options.allowHardLinks {
            throw ShredError.hardLinked(path: path, count: Int(info.links))
        }
    }

    /// The overwrite passes, placement check and verification of an open file.
    static func overwriteOpenFile(_ fd: Int32, info: FileStatus, path: String, options: ShredOptions,
                                  progress: ProgressCounter? = nil) throws(ShredError) -> ShredReport {
        var report = ShredReport(path: path)
        let size = UInt64(max(0, info.size))
        report.size = size
        let probe = FileSystemProbe.inspect(fd: fd, device: info.device)
        report.filesystem = probe.filesystem
        var warnings = probe.warnings
        if info.links > 1 { warnings.append(.otherHardLinks(count: Int(info.links))) }

        let ranges = try FileIO.dataRanges(fd, size: size, path: path)
        report.extents = ranges.count
        let perPass = ranges.reduce(UInt64(0)) { $0 + ($1.upperBound - $1.lowerBound) }
        report.bytesOverwritten = perPass
        let before = perPass > 0 ? Placement.map(fd) : .extents([], shared: false, encoded: false)

        let chunk = options.bufferSize
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        defer {
            sf_secure_zero(buffer.baseAddress, chunk)
            buffer.deallocate()
        }
        let stream = options.passes > 0 ? try KeyStream(chunkSize: chunk) : nil
        var lastKind = ShredReport.PassKind.zero
        for pass in 0..<options.totalPasses {
            let kind: ShredReport.PassKind = pass < options.passes ? .random : .zero
            if kind == .random, pass > 0 { try stream?.rekey() }
            if kind == .zero { buffer.initializeMemory(as: UInt8.self, repeating: 0) }
            for range in ranges {
                var offset = range.lowerBound
                while offset < range.upperBound {
                    let count = Int(min(UInt64(chunk), range.upperBound - offset))
                    let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
                    if kind == .random, let stream { try stream.fill(offset: offset, into: slice) }
                    try FileIO.writeAll(fd, UnsafeRawBufferPointer(slice), at: offset, path: path)
                    offset += UInt64(count)
                    progress?.add(count)
                }
            }
            try FileIO.dataSync(fd, path: path)
            report.passes += 1
            report.passKinds.append(kind)
            report.bytesWritten += perPass
            lastKind = kind
        }

        if perPass > 0 {
            let (status, placementWarnings) = Placement.compare(before: before, after: Placement.map(fd))
            report.inPlace = status
            warnings += placementWarnings
        }

        if options.verify {
            let expected = lastKind == .random ? stream : nil
            do {
                try verify(fd, ranges: ranges, stream: expected, buffer: buffer, path: path, warnings: &warnings)
                report.verified = true
            } catch ShredError.system(let operation, _, let code) where code == EBADF {
                warnings.append(.verifyUnavailable(reason: "the descriptor is not open for reading (\(operation))"))
            }
        }
        report.warnings = deduplicated(warnings)
        return report
    }

    /// Drops the cached pages and re-reads every range, comparing with the last pass.
    static func verify(_ fd: Int32, ranges: [Range<UInt64>], stream: KeyStream?, buffer: UnsafeMutableRawBufferPointer,
                       path: String, warnings: inout [ShredWarning]) throws(ShredError) {
        let code = sf_drop_cache(fd)
        if code != 0 {
            warnings.append(.verifyFromCache(reason: "posix_fadvise: \(String(cString: strerror(code)))"))
        }
        let chunk = buffer.count
        let expected = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer {
            sf_secure_zero(expected.baseAddress, chunk)
            expected.deallocate()
        }
        expected.initializeMemory(as: UInt8.self, repeating: 0)
        for range in ranges {
            var offset = range.lowerBound
            while offset < range.upperBound {
                let count = Int(min(UInt64(chunk), range.upperBound - offset))
                let read = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
                try FileIO.readAll(fd, read, at: offset, path: path)
                let want = UnsafeMutableRawBufferPointer(rebasing: expected[0..<count])
                if let stream { try stream.fill(offset: offset, into: want) }
                if !read.elementsEqual(want) {
                    var index = 0
                    while index < count && read[index] == want[index] { index += 1 }
                    throw ShredError.verificationFailed(path: path, offset: offset + UInt64(index))
                }
                offset += UInt64(count)
            }
        }
    }

    // MARK: - Removal

    /// Truncates, renames to random names of decreasing length and unlinks the file.
    static func remove(fd: Int32, info: FileStatus, parent: Int32, parentPath: String, name: String, path: String,
                       report: inout ShredReport) throws(ShredError) {
        do {
            try FileCalls.truncate(fd)
            try FileCalls.sync(fd)
        } catch {
            throw ShredError(error, path: path)
        }
        report.truncated = true
        let current = try renameAway(parent: parent, parentPath: parentPath, name: name, path: path, report: &report)
        // The name must still be our inode before it is unlinked.
        let now: FileStatus
        do { now = try FileCalls.linkStatus(in: parent, current) } catch { throw ShredError(error, path: path) }
        guard now.isSameFile(as: info) else { throw ShredError.fileChanged(path) }
        do { try FileCalls.unlink(in: parent, current) } catch { throw ShredError(error, path: path) }
        try FileIO.syncDirectory(parent, path: parentPath)
        report.removed = true
    }

    /// Renames `name` to random names of decreasing length, syncing the directory after each,
    /// and returns the final name.
    static func renameAway(parent: Int32, parentPath: String, name: String, path: String,
                           report: inout ShredReport) throws(ShredError) -> String {
        var current = name
        for length in renameLengths(name.utf8.count) {
            var renamed = false
            for _ in 0..<8 {
                let candidate: String
                do { candidate = try SecureRandom.string(length: length, alphabet: SecureRandom.alphanumeric) } catch {
                    throw ShredError.random(String(describing: error))
                }
                if candidate == current { continue }
                let code = sf_rename_noreplace(parent, current, parent, candidate)
                if code == EEXIST { continue }
                guard code == 0 else { throw ShredError.system(operation: "rename", path: path, errno: code) }
                current = candidate
                renamed = true
                break
            }
            if renamed {
                report.renames += 1
                try FileIO.syncDirectory(parent, path: parentPath)
            }
        }
        return current
    }

    /// The lengths of the successive random names: the original length, then halving down to 1.
    static func renameLengths(_ original: Int) -> [Int] {
        var length = max(1, min(original, 255))
        var lengths = [length]
        while length > 1 {
            length /= 2
            lengths.append(length)
        }
        return lengths
    }

    // MARK: - Directories

    /// A depth-first walk collecting reports and failures.
    struct Walk {
        let options: ShredOptions
        let onReport: (ShredReport) -> Void
        let progress: ProgressCounter
        var reports: [ShredReport] = []
        var failures: [String] = []

        mutating func directory(parent: Int32, parentPath: String, name: String, path: String) {
            let failuresBefore = failures.count
            let fd: Int32
            do {
                fd = try FileCalls.open(in: parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            } catch {
                failures.append(String(describing: error.code == ELOOP || error.code == ENOTDIR ? ShredError.symlink(path)
                                       : ShredError.system(operation: "open directory", path: path, errno: error.code)))
                return
            }
            defer { close(fd) }
            let names: [String]
            do { names = try FileIO.listDirectory(fd, path: path) } catch {
                failures.append(String(describing: error))
                return
            }
            for entry in names {
                let child = path.hasSuffix("/") ? path + entry : path + "/" + entry
                let info: FileStatus
                do {
                    info = try FileCalls.linkStatus(in: fd, entry)
                } catch {
                    failures.append(String(describing: ShredError(error, path: child)))
                    continue
                }
                switch info.kind {
                case .directory:
                    directory(parent: fd, parentPath: path, name: entry, path: child)
                case .regular:
                    do {
                        let report = try FileShredder.shredFile(parent: fd, parentPath: path, name: entry, path: child,
                                                                expected: info, options: options, progress: progress)
                        reports.append(report)
                        onReport(report)
                    } catch {
                        failures.append(String(describing: error))
                    }
                case .symbolicLink:
                    failures.append(String(describing: ShredError.symlink(child)))
                default:
                    failures.append(String(describing: ShredError.notRegularFile(child)))
                }
            }
            var report = ShredReport(path: path, isDirectory: true)
            if options.remove && failures.count == failuresBefore {
                do {
                    let current = try FileShredder.renameAway(parent: parent, parentPath: parentPath, name: name,
                                                              path: path, report: &report)
                    do throws(SystemCallError) {
                        try FileCalls.unlink(in: parent, current, isDirectory: true)
                    } catch {
                        throw ShredError.system(operation: "rmdir", path: path, errno: error.code)
                    }
                    try FileIO.syncDirectory(parent, path: parentPath)
                    report.removed = true
                } catch {
                    failures.append(String(describing: error))
                }
            }
            reports.append(report)
            onReport(report)
        }
    }

    // MARK: - Helpers

    /// Splits a path into its directory and last component (trailing slashes ignored).
    static func split(_ path: String) throws(ShredError) -> (String, String) {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard !trimmed.isEmpty, trimmed != "/" else { throw ShredError.notRegularFile(path.isEmpty ? "(empty path)" : path) }
        let directory: String
        let name: String
        if let slash = trimmed.lastIndex(of: "/") {
            directory = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
            name = String(trimmed[trimmed.index(after: slash)...])
        } else {
            directory = "."
            name = trimmed
        }
        guard name != "." && name != ".." else { throw ShredError.notRegularFile(path) }
        return (directory, name)
    }

    static func deduplicated(_ warnings: [ShredWarning]) -> [ShredWarning] {
        var result: [ShredWarning] = []
        for warning in warnings where !result.contains(warning) { result.append(warning) }
        return result
    }
}
