import CPlatform

/// Through `ChaChaPoly` (where swift-crypto's BoringSSL cannot be called directly), swift-crypto
/// returns every sealed or opened chunk in a fresh 64 KiB heap buffer. With glibc's default trim
/// threshold, freeing them hands the pages back to the kernel and the next chunk faults them in
/// again (about 100,000 page faults per GiB). Raising the threshold once to 8 MiB keeps that
/// memory mapped; peak memory is unchanged. With BoringSSL, chunks go straight between the
/// caller's buffers and nothing is tuned.
enum AllocatorTuning {
    #if canImport(CCryptoBoringSSL)
    static let applied = true
    #else
    static let applied: Bool = sf_malloc_keep_freed(8 << 20) == 1
    #endif
}
