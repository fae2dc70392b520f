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
import Dispatch

/// Writes to a descriptor on a background thread, one write in flight, so writing a batch
/// overlaps with encrypting or decrypting the next one.
///
/// ``writeAsync(_:)`` takes the caller's buffer without copying: the buffer must stay valid until
/// the next call to this writer returns (the stream's alternating output buffers guarantee it).
final class BackgroundWriter: @unchecked Sendable {
    // Unchecked: `error` is written on the queue and read only after `pending.wait()`, which
    // orders the accesses; `fd` is immutable.
    let fd: Int32
    private let queue = DispatchQueue(label: "org.securefoundation.age.writer")
    private let pending = DispatchSemaphore(value: 1)
    private var error: AgeError?

    init(fd: Int32) { self.fd = fd }

    private func waitForPrevious() throws {
        pending.wait()
        if let error {
            pending.signal()
            throw error
        }
    }

    /// Queues a write of `bytes` (not copied) and returns at once.
    func writeAsync(_ bytes: UnsafeRawBufferPointer) throws {
        try waitForPrevious()
        let shared = SharedBuffer(pointer: bytes)
        queue.async {
            do throws(AgeError) { try AgeIO.writeAll(self.fd, shared.pointer) } catch { self.error = error }
            self.pending.signal()
        }
    }

    /// Waits for the queued write; throws its error.
    func finish() throws {
        try waitForPrevious()
        pending.signal()
    }
}
