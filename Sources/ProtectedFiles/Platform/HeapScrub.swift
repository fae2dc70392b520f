import Foundation
import CPlatform
#if canImport(Glibc)
import Glibc
#endif

/// Zeroes the heap chunks this thread freed most recently (glibc's per-thread cache, up to
/// 1 KiB): swift-crypto frees its AEAD contexts, which hold the payload key, without zeroing
/// them. Called when a protected file's key is released on this thread (a whole read or
/// write, a reader's close), with the stack below the caller. Chunks freed by other threads
/// (the parallel chunk workers of a large file) are out of its reach. The same technique as
/// the vault's.
enum HeapScrub {
    static func scrubRecentlyFreed() {
        #if os(Linux)
        let sizes = stride(from: 24, through: 1032, by: 16)
        let perSize = 7
        let capacity = 64 * perSize
        let slots = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: capacity)
        defer { slots.deallocate() }
        var used = 0
        for size in sizes {
            for _ in 0..<perSize where used < capacity {
                guard let chunk = malloc(size) else { continue }
                sf_secure_zero(chunk, size)
                slots[used] = chunk
                used += 1
            }
        }
        for index in 0..<used { free(slots[index]) }
        #endif
        scrubStack(depth: 32)
    }

    /// Zeroes about `depth` × 512 bytes of the stack below the caller, where the AEAD calls that
    /// just returned left copies of the payload key.
    @inline(never)
    static func scrubStack(depth: Int) {
        var block = SIMD64<UInt64>()
        withUnsafeMutableBytes(of: &block) { sf_secure_zero($0.baseAddress, $0.count) }
        if depth > 1 { scrubStack(depth: depth - 1) }
        withUnsafeMutableBytes(of: &block) { sf_secure_zero($0.baseAddress, $0.count) }
    }
}
