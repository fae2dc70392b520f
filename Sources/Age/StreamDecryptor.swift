import Foundation

/// Push-mode STREAM decryption: releases only authenticated plaintext, in order.
final class StreamDecryptor {
    let cipher: PayloadCipher
    let batchChunks: Int
    /// Threads sealing or opening a batch (1: the calling thread alone).
    var workers: Int
    private let input: ScratchBuffer
    private let outputs: [ScratchBuffer]
    private var flushes = 0
    /// Alternating output buffers (see ``StreamEncryptor``).
    private var output: ScratchBuffer { outputs[flushes & 1] }
    private var filled = 0
    private var counter: UInt64 = 0
    private var finished = false
    private var failure: AgeError?
    private let batchBytes: Int

    init(cipher: PayloadCipher, batchChunks: Int = 16, parallel: Bool = true) {
        self.cipher = cipher
        self.batchChunks = max(1, batchChunks)
        self.workers = parallel ? ChunkWorkers.all : 1
        _ = AllocatorTuning.applied
        batchBytes = self.batchChunks * PayloadCipher.sealedChunkSize
        input = ScratchBuffer(batchBytes + PayloadCipher.sealedChunkSize, written: 0)
        outputs = [ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize, written: 0), ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize, written: 0)]
    }

    /// Opens full batches while more data follows them, keeping the look-ahead at the front.
    private func drain(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        while filled > batchBytes {
            let total = filled
            filled = batchBytes
            try flush(atEnd: false, sink: sink)
            let rest = total - batchBytes
            let base = input.pointer.baseAddress!
            if rest > 0 { memmove(base, base + batchBytes, rest) }
            filled = rest
        }
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
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

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        guard !finished else { return }
        finished = true
        if filled == 0 {
            throw AgeError.payloadFailure(counter == 0 ? "the payload has no chunks" : "the file ends without a final chunk")
        }
        try flush(atEnd: true, sink: sink)
    }

    private func flush(atEnd: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.sealedChunkSize
        let chunks = (filled + size - 1) / size
        let base = counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(input.pointer))
        // Only the bytes ever written are zeroed when the buffers go (see ScratchBuffer).
        output.written = max(output.written, chunks * PayloadCipher.chunkSize)
        let outShared = SharedBuffer(pointer: output.pointer)
        let outBase = output.pointer
        let total = filled
        let cipher = self.cipher
        var outcomes = [(count: Int, failure: AgeError?)](repeating: (0, nil), count: chunks)
        outcomes.withUnsafeMutableBufferPointer { resultBuffer in
            let resultShared = SharedBuffer(pointer: resultBuffer)
            forEachChunk(chunks, workers: workers) { (i: Int) -> Void in
                let start = i * size
                let length = min(size, total - start)
                let sealed = UnsafeRawBufferPointer(rebasing: inShared.pointer[start..<(start + length)])
                let out = UnsafeMutableRawBufferPointer(rebasing: outShared.pointer[(i * PayloadCipher.chunkSize)..<((i + 1) * PayloadCipher.chunkSize)])
                resultShared.pointer[i] = cipher.openChunk(sealed, counter: base + UInt64(i), last: atEnd && i == chunks - 1, into: out)
            }
        }
        // Release in order, stopping at the first failure.
        var released = 0
        var error: AgeError?
        for (i, outcome) in outcomes.enumerated() {
            released = i * PayloadCipher.chunkSize + outcome.count
            error = outcome.failure
            if error != nil { break }
        }
        flushes += 1
        if released > 0 {
            try sink(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(outBase)[0..<released]))
        }
        if let error {
            failure = error
            throw error
        }
        counter += UInt64(chunks)
        filled = 0
    }
}
