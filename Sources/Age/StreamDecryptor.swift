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

/// Push-mode STREAM decryption: releases only authenticated plaintext, in order.
final class StreamDecryptor {
    let cipher: PayloadCipher
    let batches: StreamBatches
    private var finished = false
    private var failure: AgeError?

    init(cipher: PayloadCipher, batchChunks: Int = 16, parallel: Bool = true) {
        self.cipher = cipher
        batches = StreamBatches(batchChunks: batchChunks, inputChunk: PayloadCipher.sealedChunkSize,
                                outputChunk: PayloadCipher.chunkSize, parallel: parallel)
    }

    /// Threads opening a batch (1: the calling thread alone).
    var workers: Int {
        get { batches.workers }
        set { batches.workers = newValue }
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        try batches.append(bytes) { try flush(count: $0, atEnd: false, sink: sink) }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        guard !finished else { return }
        finished = true
        if batches.filled == 0 {
            throw AgeError.payloadFailure(batches.counter == 0 ? "the payload has no chunks" : "the file ends without a final chunk")
        }
        try flush(count: batches.filled, atEnd: true, sink: sink)
        batches.filled = 0
    }

    private func flush(count total: Int, atEnd: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.sealedChunkSize
        let chunks = (total + size - 1) / size
        let base = batches.counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(batches.input.pointer))
        let output = batches.output
        // Only the bytes ever written are zeroed when the buffers go (see ScratchBuffer).
        output.written = max(output.written, chunks * PayloadCipher.chunkSize)
        let outShared = SharedBuffer(pointer: output.pointer)
        let outBase = output.pointer
        let cipher = self.cipher
        var outcomes = [(count: Int, failure: AgeError?)](repeating: (0, nil), count: chunks)
        outcomes.withUnsafeMutableBufferPointer { resultBuffer in
            let resultShared = SharedBuffer(pointer: resultBuffer)
            forEachChunk(chunks, workers: batches.workers) { (i: Int) -> Void in
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
        batches.advanceOutput()
        if released > 0 {
            try sink(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(outBase)[0..<released]))
        }
        if let error {
            failure = error
            throw error
        }
        batches.counter += UInt64(chunks)
    }
}
