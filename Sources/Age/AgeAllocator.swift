import Cipher

/// Chunks sealed and opened with swift-crypto's BoringSSL go straight between the caller's
/// buffers and need no allocator tuning; through `ChaChaPoly` each chunk is a fresh heap buffer
/// (``AllocatorTuning/chunkBuffers``).
enum AgeAllocator {
    #if canImport(CCryptoBoringSSL)
    static let tuned = true
    #else
    static let tuned = AllocatorTuning.chunkBuffers
    #endif
}
