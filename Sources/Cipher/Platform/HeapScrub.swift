import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Best-effort zeroing of small heap chunks this thread freed recently, for the modules that
/// run swift-crypto's AEADs and key derivations on keys of their own.
///
/// swift-crypto keeps AES key schedules in `EVP_AEAD_CTX` structures inside Swift objects and
/// frees them without zeroing, and returns derived keys through temporary buffers that are
/// freed the same way. With glibc those chunks sit in this thread's cache of free chunks
/// (tcache: up to 7 chunks per size class, handed out last-in first-out). Allocating seven
/// chunks of every size class up to 1 KiB, zeroing them and freeing them again overwrites what was
/// cached there. It is a mitigation, not a guarantee: chunks that left the thread cache, or
/// were freed on another thread, are not reached.
package enum HeapScrub {
    /// Zeroes this thread's recently freed small chunks and, with `stackDepth` > 0, about
    /// `stackDepth` × 512 bytes of the stack below the caller (where AEAD calls that just
    /// returned left copies of their key).
    package static func scrubRecentlyFreed(stackDepth: Int = 0) {
        #if os(Linux)
        let sizes = stride(from: 24, through: 1032, by: 16)  // 64 size classes up to 1 KiB (an AEAD context is ~600 bytes)
        let perSize = 7  // glibc's tcache holds at most 7 chunks per class
        let capacity = 64 * perSize
        let slots = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: capacity)
        defer { slots.deallocate() }
        var used = 0
        for size in sizes {
            for _ in 0..<perSize where used < capacity {
                guard let chunk = malloc(size) else { continue }
                sf_secure_zero(chunk, size)  // 24 + 16k bytes is exactly the usable size of a glibc chunk class on 64-bit
                slots[used] = chunk
                used += 1
            }
        }
        for index in 0..<used { free(slots[index]) }
        #endif
        if stackDepth > 0 { scrubStack(depth: stackDepth) }
    }

    @inline(never)
    static func scrubStack(depth: Int) {
        var block = SIMD64<UInt64>()
        withUnsafeMutableBytes(of: &block) { sf_secure_zero($0.baseAddress, $0.count) }
        if depth > 1 { scrubStack(depth: depth - 1) }
        withUnsafeMutableBytes(of: &block) { sf_secure_zero($0.baseAddress, $0.count) }
    }
}
