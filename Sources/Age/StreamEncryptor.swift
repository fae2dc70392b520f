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

/// Push-mode STREAM encryption with a bounded buffer of `batchChunks` chunks (plus one chunk
/// of look-ahead, needed to know which chunk is the last).
final class StreamEncryptor {
    let cipher: PayloadCipher
    let batches: StreamBatches
    private var finished = false

    init(cipher: PayloadCipher, batchChunks: Int = 16, parallel: Bool = true) {
        self.cipher = cipher
        batches = StreamBatches(batchChunks: batchChunks, inputChunk: PayloadCipher.chunkSize,
                                outputChunk: PayloadCipher.sealedChunkSize, parallel: parallel)
    }

    /// Threads sealing a batch (1: the calling thread alone).
    var workers: Int {
        get { batches.workers }
        set { batches.workers = newValue }
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        try batches.append(bytes) { try flush(count: $0, final: false, sink: sink) }
    }

    /// Reads from `fd` straight into the batch buffer (no intermediate copy).
    /// - Returns: The number of bytes read; 0 at end of file.
    func update(readingFrom fd: Int32, sink: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        while true {
            let n = read(fd, batches.input.pointer.baseAddress! + batches.filled, batches.input.pointer.count - batches.filled)
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            batches.added(n)
            try batches.drain { try flush(count: $0, final: false, sink: sink) }
            return n
        }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !finished else { return }
        finished = true
        try flush(count: batches.filled, final: true, sink: sink)
        batches.filled = 0
    }

    private func flush(count total: Int, final: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.chunkSize
        let chunks = max(1, (total + size - 1) / size)
        let base = batches.counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(batches.input.pointer))
        let cipher = self.cipher
        let output = batches.output
        // Each sealed chunk is copied out of swift-crypto's buffer at once, so that buffer is
        // freed while still hot (holding a batch of them made the allocator return and
        // re-fault pages for every batch).
        // Only the bytes ever written are zeroed when the buffers go (see ScratchBuffer).
        output.written = max(output.written, total + chunks * PayloadCipher.tagSize)
        let outShared = SharedBuffer(pointer: output.pointer)
        var failures = [Bool](repeating: false, count: chunks)
        failures.withUnsafeMutableBufferPointer { failedBuffer in
            let failed = SharedBuffer(pointer: failedBuffer)
            forEachChunk(chunks, workers: batches.workers) { (i: Int) -> Void in
                let start = i * size
                let length = min(size, total - start)
                let plain = UnsafeRawBufferPointer(rebasing: inShared.pointer[start..<(start + length)])
                let out = UnsafeMutableRawBufferPointer(rebasing: outShared.pointer[(i * PayloadCipher.sealedChunkSize)...])
                do {
                    try cipher.seal(plain, counter: base + UInt64(i), final: final && i == chunks - 1, into: out)
                } catch {
                    failed.pointer[i] = true
                }
            }
        }
        guard !failures.contains(true) else { throw AgeError.io("ChaCha20-Poly1305 sealing failed") }
        let produced = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(output.pointer)[0..<(total + chunks * PayloadCipher.tagSize)])
        batches.advanceOutput()
        try sink(produced)
        batches.counter += UInt64(chunks)
    }
}
