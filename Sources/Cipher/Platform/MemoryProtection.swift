import CPlatform
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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

    /// Allocates `count` bytes, locked and excluded from core dumps where the OS allows, zeroed.
    /// Up to ``SecretPool/largestSlot`` bytes come from the shared pool of locked arenas (no system
    /// call per secret); larger ones get pages of their own. Returns the pointer, the allocated
    /// size and whether mlock held.
    static func allocate(_ count: Int) -> (UnsafeMutableRawPointer, Int, Bool) {
        if let slot = SecretPool.shared.allocate(count) { return slot }
        return allocatePages(count)
    }

    /// Allocates `count` bytes (at least one page), page-aligned, locked and excluded from core
    /// dumps where the OS allows.
    static func allocatePages(_ count: Int) -> (UnsafeMutableRawPointer, Int, Bool) {
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
        if size <= SecretPool.largestSlot {
            SecretPool.shared.release(pointer, size, locked: locked)
            return
        }
        if locked { _ = munlock(pointer, size) }
        #if os(Linux)
        _ = madvise(pointer, size, MADV_DODUMP)
        #endif
        free(pointer)
    }
}

/// A pool of small secret slots carved out of 64 KiB arenas that are mapped anonymously (apart
/// from the malloc heap), locked with `mlock` and excluded from core dumps once, when the arena is
/// made. A secret of up to 1 KiB then costs no system call to allocate or free: without the pool
/// each one took a page of its own and four system calls (mlock, madvise, munlock, madvise), which
/// dominated short operations such as a keychain read.
///
/// Slots are zeroed before they go back on the free list (``MemoryProtection/release(_:_:locked:)``
/// zeroes first). Arenas are never unmapped: the pool holds at most the peak number of small
/// secrets alive at once, rounded up to whole arenas.
final class SecretPool: @unchecked Sendable {
    static let shared = SecretPool()
    /// Slot sizes; a request takes the smallest that fits.
    static let slotSizes = [32, 64, 128, 256, 512, 1024]
    static var largestSlot: Int { slotSizes[slotSizes.count - 1] }
    static let arenaSize = 64 * 1024

    private struct Slot {
        let pointer: UnsafeMutableRawPointer
        let locked: Bool
    }

    // Guarded by `lock`.
    private let lock = Lock()
    private var free: [[Slot]] = Array(repeating: [], count: SecretPool.slotSizes.count)
    private var arenaFailed = false

    private static func sizeClass(_ count: Int) -> Int? {
        slotSizes.firstIndex { $0 >= count }
    }

    /// A zeroed slot of at least `count` bytes, or nil when `count` is too large for the pool or
    /// no arena could be mapped (the caller then allocates pages).
    func allocate(_ count: Int) -> (UnsafeMutableRawPointer, Int, Bool)? {
        guard let sizeClass = SecretPool.sizeClass(count) else { return nil }
        let size = SecretPool.slotSizes[sizeClass]
        return lock.withLock {
            if free[sizeClass].isEmpty, !arenaFailed {
                guard let (base, locked) = SecretPool.mapArena() else {
                    arenaFailed = true
                    return nil
                }
                free[sizeClass].reserveCapacity(SecretPool.arenaSize / size)
                for offset in stride(from: SecretPool.arenaSize - size, through: 0, by: -size) {
                    free[sizeClass].append(Slot(pointer: base + offset, locked: locked))
                }
            }
            guard let slot = free[sizeClass].popLast() else { return nil }
            return (slot.pointer, size, slot.locked)
        }
    }

    /// Returns a slot that the caller has already zeroed.
    func release(_ pointer: UnsafeMutableRawPointer, _ size: Int, locked: Bool) {
        guard let sizeClass = SecretPool.sizeClass(size) else { return }
        lock.withLock { free[sizeClass].append(Slot(pointer: pointer, locked: locked)) }
    }

    /// Maps, locks and excludes from core dumps one arena (anonymous memory is zero-filled).
    private static func mapArena() -> (UnsafeMutableRawPointer, Bool)? {
        let raw = mmap(nil, arenaSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let base = raw, base != MAP_FAILED else { return nil }
        #if os(Linux)
        _ = madvise(base, arenaSize, MADV_DONTDUMP)
        #endif
        let locked = mlock(base, arenaSize) == 0
        return (base, locked)
    }
}
