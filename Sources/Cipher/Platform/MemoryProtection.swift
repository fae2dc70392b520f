import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The operating-system calls behind ``SecretBytes``: page-aligned allocation, page locking,
/// exclusion from core dumps, and zeroing that the optimiser may not remove.
enum MemoryProtection {
    static let pageSize: Int = {
        let size = sysconf(Int32(_SC_PAGESIZE))
        return size > 0 ? Int(size) : 4096
    }()

    /// Allocates `count` bytes (at least one page), page-aligned, locked and excluded from core
    /// dumps where the OS allows. Returns the pointer, the allocated size and whether mlock held.
    static func allocate(_ count: Int) -> (UnsafeMutableRawPointer, Int, Bool) {
        let size = max(pageSize, (count + pageSize - 1) / pageSize * pageSize)
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, pageSize, size) == 0, let pointer = raw else {
            // Allocation failure of a few pages is not recoverable.
            fatalError("SecretBytes: out of memory allocating \(size) bytes")
        }
        memset(pointer, 0, size)
        #if os(Linux)
        _ = madvise(pointer, size, MADV_DONTDUMP)
        #endif
        let locked = mlock(pointer, size) == 0
        return (pointer, size, locked)
    }

    /// Zeroes `size` bytes in a way the compiler cannot elide.
    static func zero(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        guard size > 0 else { return }
        sf_secure_zero(pointer, size)
    }

    static func release(_ pointer: UnsafeMutableRawPointer, _ size: Int, locked: Bool) {
        zero(pointer, size)
        if locked { _ = munlock(pointer, size) }
        #if os(Linux)
        _ = madvise(pointer, size, MADV_DODUMP)
        #endif
        free(pointer)
    }
}
