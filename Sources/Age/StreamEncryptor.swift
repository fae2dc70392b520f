import Foundation

/// Push-mode STREAM encryption with a bounded buffer of `batchChunks` chunks (plus one chunk
/// of look-ahead, needed to know which chunk is the last).
final class StreamEncryptor {
    let cipher: PayloadCipher
    let batchChunks: Int
    /// Threads sealing or opening a batch (1: the calling thread alone).
    var workers: Int
    private let input: ScratchBuffer
    private let outputs: [ScratchBuffer]
    private var flushes = 0
    /// The output of the current batch; the two buffers alternate, so the bytes handed to the
    /// sink stay valid until the next sink call returns (used by ``BackgroundWriter``).
    private var output: ScratchBuffer { outputs[flushes & 1] }
    private let batchBytes: Int
    private var filled = 0
    private var counter: UInt64 = 0
    private var finished = false

    init(cipher: PayloadCipher, batchChunks: Int = 16, parallel: Bool = true) {
        self.cipher = cipher
        self.batchChunks = max(1, batchChunks)
        self.workers = parallel ? ChunkWorkers.all : 1
        _ = AllocatorTuning.applied
        batchBytes = self.batchChunks * PayloadCipher.chunkSize
        input = ScratchBuffer(batchBytes + PayloadCipher.chunkSize, written: 0)
        outputs = [ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize, written: 0), ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize, written: 0)]
    }

    /// Seals full batches while more data follows them, keeping the look-ahead at the front.
    private func drain(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        while filled > batchBytes {
            try flush(count: batchBytes, final: false, sink: sink)
            let rest = filled - batchBytes
            let base = input.pointer.baseAddress!
            if rest > 0 { memmove(base, base + batchBytes, rest) }
            filled = rest
        }
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, input.pointer.count - filled)
            (input.pointer.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            filled += n
            input.written = max(input.written, filled)
            offset += n
            try drain(sink: sink)
        }
    }

    /// Reads from `fd` straight into the batch buffer (no intermediate copy).
    /// - Returns: The number of bytes read; 0 at end of file.
    func update(readingFrom fd: Int32, sink: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        while true {
            let n = read(fd, input.pointer.baseAddress! + filled, input.pointer.count - filled)
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            filled += n
            input.written = max(input.written, filled)
            try drain(sink: sink)
            return n
        }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !finished else { return }
        finished = true
        try flush(count: filled, final: true, sink: sink)
        filled = 0
    }

    private func flush(count total: Int, final: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.chunkSize
        let chunks = max(1, (total + size - 1) / size)
        let base = counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(input.pointer))
        let cipher = self.cipher
        // Each sealed chunk is copied out of swift-crypto's buffer at once, so that buffer is
        // freed while still hot (holding a batch of them made the allocator return and
        // re-fault pages for every batch).
        // Only the bytes ever written are zeroed when the buffers go (see ScratchBuffer).
        output.written = max(output.written, total + chunks * PayloadCipher.tagSize)
        let outShared = SharedBuffer(pointer: output.pointer)
        var failures = [Bool](repeating: false, count: chunks)
        failures.withUnsafeMutableBufferPointer { failedBuffer in
            let failed = SharedBuffer(pointer: failedBuffer)
            forEachChunk(chunks, workers: workers) { (i: Int) -> Void in
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
        flushes += 1
        try sink(produced)
        counter += UInt64(chunks)
    }
}
