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

/// What ``FileShredder`` does to each file.
///
/// The defaults are one random pass (NIST SP 800-88 "clear"), no zero pass, removal of the file
/// afterwards, no hard-linked files, no verification, no directories.
public struct ShredOptions: Sendable, Equatable {
    /// The number of random passes (0 is accepted only together with ``zeroPass``).
    public var passes: Int
    /// Adds a final pass of zeros, to hide that the file was shredded.
    public var zeroPass: Bool
    /// Truncates, renames and unlinks the file after overwriting it (directories are removed too).
    public var remove: Bool
    /// Accepts a file with more than one hard link. Its other names keep pointing at the
    /// (overwritten) inode; a warning says so.
    public var allowHardLinks: Bool
    /// Re-reads the file after the last pass, bypassing the page cache where possible, and checks
    /// that it holds exactly what the last pass wrote.
    public var verify: Bool
    /// Accepts directories and shreds their content depth-first.
    public var recursive: Bool
    /// The size of the single buffer used for writing and verifying (constant memory).
    public var bufferSize: Int

    /// Creates options; every parameter has the library default.
    ///
    /// - Parameters:
    ///   - passes: Random passes, default 1.
    ///   - zeroPass: A final zero pass, default false.
    ///   - remove: Truncate, rename and unlink afterwards, default true.
    ///   - allowHardLinks: Accept files with several hard links, default false.
    ///   - verify: Re-read and check the last pass, default false.
    ///   - recursive: Accept directories, default false.
    ///   - bufferSize: The I/O buffer size, default 1 MiB.
    public init(passes: Int = 1, zeroPass: Bool = false, remove: Bool = true, allowHardLinks: Bool = false,
                verify: Bool = false, recursive: Bool = false, bufferSize: Int = 1 << 20) {
        self.passes = passes
        self.zeroPass = zeroPass
        self.remove = remove
        self.allowHardLinks = allowHardLinks
        self.verify = verify
        self.recursive = recursive
        self.bufferSize = bufferSize
    }

    /// The total number of passes (random passes plus the zero pass).
    public var totalPasses: Int { passes + (zeroPass ? 1 : 0) }

    func validate() throws(ShredError) {
        guard passes >= 0, passes <= 100 else {
            throw ShredError.invalidOptions("passes must be between 0 and 100, not \(passes)")
        }
        guard totalPasses >= 1 else {
            throw ShredError.invalidOptions("at least one pass is needed (passes 0 requires zeroPass)")
        }
        guard bufferSize >= 4096, bufferSize <= 64 << 20, bufferSize % 4096 == 0 else {
            throw ShredError.invalidOptions("bufferSize must be a multiple of 4096 between 4 KiB and 64 MiB, not \(bufferSize)")
        }
    }
}

/// Whether the overwrite provably reached the blocks that held the old data.
public enum InPlaceStatus: String, Sendable, Equatable, CustomStringConvertible {
    /// FIEMAP showed the same physical extents before and after the overwrite.
    case verified = "in place verified"
    /// FIEMAP showed different physical extents afterwards: the old blocks may still hold the data.
    case relocated = "relocated"
    /// The filesystem does not report physical extents (or the file had none): nothing is proved.
    case unknown = "unknown"

    /// A one-line explanation for people.

    public var description: String { rawValue }
}

/// A reason why an overwrite cannot be trusted to have destroyed the old data, or a caveat.
public enum ShredWarning: Sendable, Equatable, CustomStringConvertible {
    /// A copy-on-write or log-structured filesystem (btrfs, zfs, bcachefs, f2fs, nilfs2):
    /// writes go to new blocks.
    case copyOnWrite(filesystem: String)
    /// ext4 journals file data (`data=journal` mount option or the per-file `j` attribute):
    /// copies of the old data may remain in the journal.
    case dataJournaling(reason: String)
    /// overlayfs: the overwrite went to the upper layer; a lower-layer copy is untouched.
    case overlay
    /// A network filesystem: the server decides where the bytes go, and may keep snapshots.
    case networkFilesystem(filesystem: String)
    /// tmpfs or ramfs: the data lived in RAM (and possibly swap); overwriting it is all that can be done.
    case memoryFilesystem(filesystem: String)
    /// A non-rotational device (SSD, flash, or a virtual disk reporting so): the controller remaps
    /// writes (wear levelling), so old blocks may survive. Use crypto-erase or the device's own sanitize.
    case solidStateDevice(device: String)
    /// The device could not be identified as rotational or not.
    case unknownDevice(reason: String)
    /// FIEMAP showed the data moved to other blocks during the overwrite.
    case relocated
    /// Placement could not be checked (no FIEMAP, delayed allocation, inline data...).
    case placementUnknown(reason: String)
    /// The filesystem stores this file compressed or encoded, so the bytes written are not the bytes stored.
    case encodedExtents
    /// Some extents are shared with other files (reflinks or snapshots): their old blocks stay.
    case sharedExtents
    /// The file has other hard links, which still name the overwritten inode.
    case otherHardLinks(count: Int)
    /// The page cache could not be dropped before verification; the re-read may come from memory.
    case verifyFromCache(reason: String)
    /// Verification was asked for but could not be done on this descriptor.
    case verifyUnavailable(reason: String)

    /// A one-line explanation for people.

    public var description: String {
        switch self {
        case .copyOnWrite(let fs):
            return "\(fs) is copy-on-write: the overwrite went to new blocks and the old data may remain; use crypto-erase"
        case .dataJournaling(let reason):
            return "file data is journalled (\(reason)): copies of the old data may remain in the journal"
        case .overlay:
            return "overlayfs: only the upper layer was overwritten; a lower-layer copy of the file is untouched"
        case .networkFilesystem(let fs):
            return "\(fs) is a network filesystem: the server decides where the bytes go and may keep snapshots"
        case .memoryFilesystem(let fs):
            return "\(fs) keeps files in RAM only (and possibly swap); the pages were overwritten"
        case .solidStateDevice(let device):
            return "\(device) is non-rotational (SSD or flash): wear levelling may keep the old blocks; use crypto-erase or the device's sanitize command"
        case .unknownDevice(let reason):
            return "the storage device could not be identified (\(reason)); the overwrite may not reach the medium"
        case .relocated:
            return "the filesystem moved the data to other blocks during the overwrite; the old blocks may still hold it"
        case .placementUnknown(let reason):
            return "whether the overwrite happened in place is unknown (\(reason))"
        case .encodedExtents:
            return "the file is stored compressed or encoded: the bytes written are not the bytes stored"
        case .sharedExtents:
            return "some extents are shared with other files or snapshots: their old blocks remain"
        case .otherHardLinks(let count):
            return "the file has \(count) hard links; the other names still point to the overwritten inode"
        case .verifyFromCache(let reason):
            return "the page cache could not be dropped (\(reason)); verification may have read memory, not the disk"
        case .verifyUnavailable(let reason):
            return "verification was not done: \(reason)"
        }
    }
}

/// What was done to one file or directory, and how far the result can be trusted.
public struct ShredReport: Sendable, Equatable, CustomStringConvertible {
    /// The path as given (or as found while walking a directory).
    public var path: String
    /// True for a directory entry of a recursive shred (only removed, nothing overwritten).
    public var isDirectory: Bool
    /// The file size before shredding.
    public var size: UInt64
    /// Bytes of the file overwritten by each pass (the allocated extents; holes are skipped).
    public var bytesOverwritten: UInt64
    /// Bytes written over all passes.
    public var bytesWritten: UInt64
    /// The number of passes done, in order.
    public var passes: Int
    /// The kind of each pass, in order.
    public var passKinds: [PassKind]
    /// The number of data extents (ranges between holes) that were overwritten.
    public var extents: Int
    /// The number of renames before unlinking.
    public var renames: Int
    /// Whether the file was truncated to zero length.
    public var truncated: Bool
    /// Whether the name was removed (unlinked, or rmdir for a directory).
    public var removed: Bool
    /// Whether ``ShredOptions/verify`` re-read the file and found the last pattern (nil: not asked).
    public var verified: Bool?
    /// Whether the overwrite provably happened in place.
    public var inPlace: InPlaceStatus
    /// The filesystem type found (for example "ext4").
    public var filesystem: String
    /// Every reason not to trust the overwrite. Empty means: nothing known against it.
    public var warnings: [ShredWarning]

    /// The kind of one pass.
    public enum PassKind: String, Sendable, Equatable {
        /// CSPRNG data (AES-CTR keystream under a fresh random key).
        case random
        /// Zero bytes.
        case zero
    }

    /// Creates an empty report for `path`.
    /// - Parameters:
    ///   - path: The file or directory the report is about.
    ///   - isDirectory: Whether it is a directory.
    public init(path: String, isDirectory: Bool = false) {
        self.path = path
        self.isDirectory = isDirectory
        self.size = 0
        self.bytesOverwritten = 0
        self.bytesWritten = 0
        self.passes = 0
        self.passKinds = []
        self.extents = 0
        self.renames = 0
        self.truncated = false
        self.removed = false
        self.verified = nil
        self.inPlace = .unknown
        self.filesystem = "unknown"
        self.warnings = []
    }

    /// True when nothing is known against the overwrite: no warnings and placement verified.
    public var isTrusted: Bool { warnings.isEmpty && inPlace == .verified }

    /// A one-line explanation for people.

    public var description: String {
        if isDirectory {
            return "\(path): directory\(removed ? " removed" : " kept")"
        }
        var parts = ["\(path): \(passes) pass\(passes == 1 ? "" : "es") (\(passKinds.map(\.rawValue).joined(separator: ", ")))",
                     "\(bytesOverwritten) of \(size) bytes in \(extents) extent\(extents == 1 ? "" : "s")",
                     "placement \(inPlace)"]
        if let verified { parts.append(verified ? "verified" : "verification failed") }
        if removed { parts.append("renamed \(renames)x and removed") }
        return parts.joined(separator: ", ")
    }
}

/// Everything shredding can fail with. Each case names the path and what to do.
public enum ShredError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path is a symbolic link; links are never followed. Shred the target by its own path.
    case symlink(String)
    /// The path is not a regular file (device, FIFO, socket...).
    case notRegularFile(String)
    /// The path is a directory and ``ShredOptions/recursive`` is off.
    case isDirectory(String)
    /// The file has `count` hard links; pass ``ShredOptions/allowHardLinks`` to accept it.
    case hardLinked(path: String, count: Int)
    /// The options are out of range.
    case invalidOptions(String)
    /// Verification read back something other than the last pass wrote, at `offset`.
    case verificationFailed(path: String, offset: UInt64)
    /// The file changed (replaced or resized) while it was being shredded.
    case fileChanged(String)
    /// Random data could not be produced.
    case random(String)
    /// Some entries of a directory walk or of a list of files failed; the others were shredded.
    case incomplete(failures: [String], reports: [ShredReport])
    /// A system call failed.
    case system(operation: String, path: String, errno: Int32)

    /// A one-line explanation for people.

    public var description: String {
        switch self {
        case .symlink(let path):
            return "\(path) is a symbolic link; links are not followed (shred the target by its own path)"
        case .notRegularFile(let path):
            return "\(path) is not a regular file"
        case .isDirectory(let path):
            return "\(path) is a directory; to shred its content, set ShredOptions.recursive (-r on the command line)"
        case .hardLinked(let path, let count):
            return "\(path) has \(count) hard links; its data stays reachable by the other names (to shred it anyway, set ShredOptions.allowHardLinks: --force on the command line)"
        case .invalidOptions(let why):
            return "invalid shred options: \(why)"
        case .verificationFailed(let path, let offset):
            return "\(path): verification failed at offset \(offset): the file does not hold what the last pass wrote"
        case .fileChanged(let path):
            return "\(path) changed while it was being shredded"
        case .random(let why):
            return "random data unavailable: \(why)"
        case .incomplete(let failures, let reports):
            return "\(failures.count) item\(failures.count == 1 ? "" : "s") could not be shredded (\(reports.count) done): "
                + failures.joined(separator: "; ")
        case .system(let operation, let path, let code):
            return "\(operation) \(path) failed: \(String(cString: strerror(code)))"
        }
    }
}
