import CPlatform

/// glibc's allocator, tuned once per process for loops that allocate and free large buffers.
///
/// The settings are process-wide (a program embedding the library gets them once it runs one of
/// these loops) and change only where memory is reused, not how much is used at the peak. A
/// no-op outside glibc.
package enum AllocatorTuning {
    /// For bulk transfers: their buffers (256 KiB file pieces, the TLS layer's plaintext buffers
    /// of up to a few MiB) are above glibc's initial mmap threshold (128 KiB), so each was mapped
    /// fresh, unmapped when freed and its pages faulted in again (about 90,000 page faults and a
    /// tenth of the CPU time per 512 MiB received). Below 4 MiB they now come from the heap, and
    /// a 32 MiB trim threshold keeps freed memory for the next one.
    package static let bulkTransfers: Bool = sf_malloc_heap_below(4 << 20) == 1 && sf_malloc_keep_freed(32 << 20) == 1
}
