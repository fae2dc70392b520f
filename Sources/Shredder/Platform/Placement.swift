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

/// Physical placement of a file's data (FIEMAP on Linux), to tell whether an overwrite went
/// to the same blocks.
enum Placement {
    /// One contiguous mapping of logical bytes to physical bytes.
    struct Extent: Equatable {
        var logical: UInt64
        var physical: UInt64
        var length: UInt64
    }

    /// The physical map of a file, or why it is not known.
    enum Map {
        case extents([Extent], shared: Bool, encoded: Bool)
        case unavailable(String)
    }

    static let capacity: UInt32 = 4096

    /// Reads the extents of `fd` (syncing delayed allocations first).
    static func map(_ fd: Int32) -> Map {
        var raw = [sf_extent](repeating: sf_extent(), count: Int(capacity))
        var count: UInt32 = 0
        var truncated: Int32 = 0
        let code = raw.withUnsafeMutableBufferPointer { sf_fiemap(fd, $0.baseAddress, capacity, &count, &truncated) }
        if code != 0 {
            if code == ENOSYS { return .unavailable("FIEMAP does not exist on this system") }
            if code == EOPNOTSUPP || code == ENOTTY || code == EINVAL {
                return .unavailable("the filesystem does not report physical extents")
            }
            return .unavailable("FIEMAP failed: \(String(cString: strerror(code)))")
        }
        if truncated != 0 { return .unavailable("more than \(capacity) extents") }
        var shared = false
        var encoded = false
        var result: [Extent] = []
        for item in raw.prefix(Int(count)) {
            if item.flags & (sf_fiemap_flag_unknown() | sf_fiemap_flag_delalloc()) != 0 {
                return .unavailable("the filesystem has not placed the data yet")
            }
            if item.flags & (sf_fiemap_flag_data_inline() | sf_fiemap_flag_not_aligned()) != 0 {
                return .unavailable("the data is stored inline in metadata")
            }
            if item.flags & sf_fiemap_flag_encoded() != 0 { encoded = true }
            if item.flags & sf_fiemap_flag_shared() != 0 { shared = true }
            let next = Extent(logical: item.logical, physical: item.physical, length: item.length)
            // Merge extents contiguous both logically and physically, so that a different split
            // of the same mapping compares equal.
            if let last = result.last, last.logical + last.length == next.logical, last.physical + last.length == next.physical {
                result[result.count - 1].length += next.length
            } else {
                result.append(next)
            }
        }
        return .extents(result, shared: shared, encoded: encoded)
    }

    /// Compares the maps taken before and after the overwrite.
    static func compare(before: Map, after: Map) -> (InPlaceStatus, [ShredWarning]) {
        switch (before, after) {
        case let (.extents(first, sharedBefore, encodedBefore), .extents(second, _, encodedAfter)):
            var warnings: [ShredWarning] = []
            if sharedBefore { warnings.append(.sharedExtents) }
            if encodedBefore || encodedAfter { warnings.append(.encodedExtents) }
            if first.isEmpty && second.isEmpty {
                return (.unknown, warnings)
            }
            if first == second { return (.verified, warnings) }
            return (.relocated, warnings + [.relocated])
        case let (.unavailable(reason), _), let (_, .unavailable(reason)):
            return (.unknown, [.placementUnknown(reason: reason)])
        }
    }
}
