import Foundation
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Plaintext that swift-crypto hands back in a `Data`, taken without leaving it in freed memory.
///
/// swift-crypto's AEAD `open` mallocs the output buffer and wraps it in a `Data` that frees it
/// unzeroed. A plaintext of more than 14 bytes stays in that buffer: it is copied out and the
/// buffer is zeroed in place before the `Data` is released. A shorter one was already copied into
/// the `Data`'s inline storage and its buffer freed when `open` returned; that chunk is the
/// most recently freed one of its size on this thread, so it is reclaimed from glibc's per-thread
/// cache (last in, first out) by allocating chunks of that size, zeroed, and freed again.
enum PlaintextScrub {
    static func take(_ data: Data) -> [UInt8] {
        let count = data.count
        let copy = Array(data)
        data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return }
            // The bytes belong to the Data's storage (the malloc'd buffer, or its inline copy on
            // this stack): both are writable memory that nothing else reads any more.
            sf_secure_zero(UnsafeMutableRawPointer(mutating: base), bytes.count)
        }
        if count <= 14 { reclaimFreedSmallChunks() }
        return copy
    }

    /// Zeroes the chunks of glibc's smallest size class (24 usable bytes on 64-bit, every
    /// request up to 24 bytes) this thread freed most recently: at most 7, its per-thread cache.
    static func reclaimFreedSmallChunks() {
        #if os(Linux)
        let size = 24
        withUnsafeTemporaryAllocation(of: UnsafeMutableRawPointer?.self, capacity: 7) { chunks in
            for index in 0..<7 {
                let chunk = malloc(size)
                if let chunk { sf_secure_zero(chunk, size) }
                chunks[index] = chunk
            }
            for index in 0..<7 { free(chunks[index]) }
        }
        #endif
    }
}
