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

/// The buffers and bookkeeping shared by the push-mode ``StreamEncryptor`` and
/// ``StreamDecryptor``: an input buffer of `batchChunks` chunks plus one of look-ahead (which
/// chunk is the last is known only once more data follows it or the stream ends), two output
/// buffers used in turn, so the bytes handed to the sink stay valid until the next sink call
/// returns (``BackgroundWriter`` relies on it), and the counter of the next chunk.
final class StreamBatches {
    let batchChunks: Int
    /// The input bytes of a full batch.
    let batchBytes: Int
    /// Threads sealing or opening a batch (1: the calling thread alone).
    var workers: Int
    let input: ScratchBuffer
    private let outputs: [ScratchBuffer]
    private var flushes = 0
    /// Input bytes held, from the start of ``input``.
    var filled = 0
    /// The counter of the next chunk.
    var counter: UInt64 = 0

    /// - Parameters:
    ///   - inputChunk: The size of a chunk as it comes in (plaintext or sealed).
    ///   - outputChunk: Its size as it goes out.
    init(batchChunks: Int, inputChunk: Int, outputChunk: Int, parallel: Bool) {
        self.batchChunks = max(1, batchChunks)
        workers = parallel ? ChunkWorkers.all : 1
        batchBytes = self.batchChunks * inputChunk
        input = ScratchBuffer(batchBytes + inputChunk, written: 0)
        outputs = [ScratchBuffer(self.batchChunks * outputChunk, written: 0), ScratchBuffer(self.batchChunks * outputChunk, written: 0)]
    }

    /// The output buffer of the current batch.
    var output: ScratchBuffer { outputs[flushes & 1] }

    /// Moves on to the other output buffer, once the current one has gone to the sink.
    func advanceOutput() { flushes += 1 }

    /// Copies `bytes` into the input buffer, handing every full batch that more data follows
    /// to `flush` (with its byte count) as the buffer fills.
    func append(_ bytes: UnsafeRawBufferPointer, flush: (Int) throws -> Void) throws {
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, input.pointer.count - filled)
            (input.pointer.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            added(n)
            offset += n
            try drain(flush)
        }
    }

    /// Records `n` bytes written into the input buffer after ``filled``.
    func added(_ n: Int) {
        filled += n
        input.written = max(input.written, filled)
    }

    /// Hands full batches to `flush` while more data follows them, keeping the look-ahead at
    /// the front of the input buffer.
    func drain(_ flush: (Int) throws -> Void) throws {
        while filled > batchBytes {
            try flush(batchBytes)
            let rest = filled - batchBytes
            let base = input.pointer.baseAddress!
            if rest > 0 { memmove(base, base + batchBytes, rest) }
            filled = rest
        }
    }
}
