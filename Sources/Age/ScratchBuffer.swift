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
import CPlatform

/// A fixed-size scratch buffer (64-byte aligned), zeroed when freed (it may hold plaintext).
final class ScratchBuffer {
    let pointer: UnsafeMutableRawBufferPointer
    /// How many bytes from the start may have been written, all of them unless the owner
    /// knows better: only these are zeroed when the buffer is freed (zeroing untouched pages
    /// would fault them in for nothing).
    var written: Int

    /// - Parameters:
    ///   - count: The size in bytes.
    ///   - written: The bytes counted as written from the start; all unless given (an owner
    ///     that passes 0 raises ``written`` before it writes further).
    init(_ count: Int, written: Int? = nil) {
        pointer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 64)
        self.written = written ?? pointer.count
    }

    deinit {
        if let base = pointer.baseAddress { sf_secure_zero(base, min(max(written, 0), pointer.count)) }
        pointer.deallocate()
    }
}
