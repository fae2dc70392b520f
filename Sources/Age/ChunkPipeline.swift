#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher
import CPlatform

/// Descriptor-to-descriptor STREAM encryption or decryption without batch barriers.
///
/// The batch design (read a batch, seal it on every core, write it) leaves cores idle while the
/// calling thread reads and while the slowest chunk of a batch finishes. Here every worker loops
/// on its own: it takes the read lock, reads the next 64 KiB chunk into a free slot of a ring,
/// releases the lock and processes (seals or opens) the chunk *before* it (whether it is the
/// last is known once the next read has returned), then publishes it. Reads stay in order (one
/// reader at a time), so pipes and sockets work as well as files.
///
/// Sealing, the bytes are those of a sequential run with the same file key and nonce: chunk `i`
/// is sealed with counter `i`, and only the last chunk carries the final flag; an empty final
/// chunk occurs only for an empty input, as the spec requires.
///
/// Opening, only authenticated plaintext is written, in order: a chunk that fails stops the
/// stream, after the chunks before it (and, where the rules say so, its own verified plaintext)
/// are written, with the same ``AgeError/payloadFailure(_:)`` as ``StreamDecryptor``.
///
/// Memory: `slots` input chunks plus `slots` output chunks (2 MiB for 16 slots), zeroed when
/// freed.
final class ChunkPipeline: @unchecked Sendable {
    enum Direction { case seal, open }
    // Unchecked: the mutable state below is guarded by `condition`, except `pending`,
    // `nextRead` and `endOfInput`, which only the holder of `readLock` touches; slot memory is
    // owned by one thread at a time, handed over under `condition` (slot states).
    private enum SlotState: UInt8 { case free, busy, processed }

    private let input: Int32
    private let output: Int32
    private let cipher: PayloadCipher
    private let direction: Direction
    private let slots: Int
    /// Chunk sizes read and written: 64 KiB and 64 KiB + 16 sealing, the other way round opening.
    private let inSize: Int
    private let outSize: Int
    private let inputs: ScratchBuffer
    private let outputs: ScratchBuffer
    /// Bytes of the input already read (after the header), consumed before `input`.
    private var prefix: [UInt8]
    private var prefixOffset = 0

    private let readLock = Lock()
    /// Whether a thread waiting for the read lock spins first (set before the threads start).
    private var spinForReads = true
    /// Held by the one thread spinning for the read lock.
    private let spinToken = Lock()
    private var nextRead = 0
    /// The last chunk read, not processed yet: whether it is the last depends on the next read.
    private var pending: Int?
    private var endOfInput = false
    /// The end of the furthest byte read into `inputs` (under the read lock).
    private var inputHighWater = 0

    private let condition = Condition()
    // Guarded by `condition`.
    private var state: [SlotState]
    /// Per slot: input length, output length to write, and the failure that ends the stream there.
    private var lengths: [Int]
    private var outLengths: [Int]
    private var errors: [AgeError?]
    private var chunkCount: Int?
    private var failure: AgeError?
    /// A chunk failed: no more reads.
    private var stopReading = false
    /// Chunks 0..<processedUpTo are sealed or opened (or already written).
    private var processedUpTo = 0
    /// Chunks 0..<written are written; their slots are free.
    private var written = 0
    private var inputDone: Int64 = 0
    /// A worker is writing (outside the lock).
    private var writing = false
    /// Sleepers, so that a thread signals only when someone waits for what it did (a futex
    /// wake-up costs a context switch).
    private var sleepers = 0
    /// A run shorter than this is left for later unless someone waits for its slots or it ends
    /// the stream (fewer, larger writes).
    private let writeRun = 4

    init(direction: Direction, input: Int32, output: Int32, cipher: PayloadCipher, prefix: [UInt8] = [], slots: Int = 16) {
        self.direction = direction
        self.input = input
        self.output = output
        self.cipher = cipher
        self.prefix = prefix
        self.slots = max(4, slots)
        inSize = direction == .seal ? PayloadCipher.chunkSize : PayloadCipher.sealedChunkSize
        outSize = direction == .seal ? PayloadCipher.sealedChunkSize : PayloadCipher.chunkSize
        inputs = ScratchBuffer(self.slots * inSize)
        outputs = ScratchBuffer(self.slots * outSize)
        state = Array(repeating: .free, count: self.slots)
        lengths = Array(repeating: 0, count: self.slots)
        outLengths = Array(repeating: 0, count: self.slots)
        errors = Array(repeating: nil, count: self.slots)
    }

    /// Runs `workers` threads (the calling thread and `workers - 1` others) until the input is
    /// sealed or opened and written.
    /// - Parameter progress: Called on the calling thread with the input bytes (prefix included)
    ///   whose output is written.
    /// - Throws: ``AgeError/io(_:)`` for a failed read, seal or write (the output then holds a
    ///   prefix of the stream); opening, ``AgeError/payloadFailure(_:)``.
    /// - Parameter workers: Evaluated only when the input may hold more than one chunk (the
    ///   count of cores costs a process start about half a millisecond).
    func run(workers: @autoclosure () -> Int, progress: ((Int64) -> Void)?) throws {
        // No more threads than chunks to process when the input is a regular file (a small
        // file is done before a thread would have started).
        var chunks = Int64.max
        if let info = try? FileCalls.status(input), info.isRegularFile {
            let position = max(0, lseek(input, 0, SEEK_CUR))
            let remaining = max(0, info.size - Int64(position)) + Int64(prefix.count)
            chunks = remaining / Int64(inSize) + 1
        }
        let threads = chunks <= 1 ? 1 : Int(min(Int64(max(1, workers())), chunks))
        // Spinning for the read lock pays only when every thread has a core: with more threads
        // than cores, a spinner takes the core the reader or the writer needs.
        spinForReads = threads == 1 || threads <= ChunkWorkers.cores
        let others = threads - 1
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<others {
            // A thread the system will not start is one worker fewer: the others do its share.
            let started = Threads.detach(name: direction == .seal ? "age-seal" : "age-open") { [self] in
                work(progress: nil)
                done.signal()
            }
            if !started { done.signal() }
        }
        work(progress: progress)
        for _ in 0..<others { done.wait() }
        // Only the bytes read into the slots (and what was sealed or opened from them) hold
        // data to zero when the buffers go; slots are taken in order from the first, so a
        // small input leaves the rest of the 2 MiB untouched (zeroing it would fault it in).
        inputs.written = inputHighWater
        let lastSlot = inputHighWater / inSize
        let outputHighWater = lastSlot * outSize + min(outSize, inputHighWater - lastSlot * inSize + PayloadCipher.tagSize)
        outputs.written = min(outputHighWater, slots * outSize)
        condition.lock()
        defer { condition.unlock() }
        if let failure { throw failure }
        progress?(inputDone)
    }

    private func fail(_ error: AgeError) {
        condition.lock()
        if failure == nil { failure = error }
        condition.broadcast()
        condition.unlock()
    }

    // MARK: Workers

    /// One chunk to seal or open, and whether it is the last of the input (sealing: the one
    /// that carries the final flag; opening: the one that must carry it).
    private struct Job {
        var index: Int
        var last: Bool
    }

    private func work(progress: ((Int64) -> Void)?) {
        var reported: Int64 = 0
        while let job = nextJob() {
            let slot = job.index % slots
            condition.lock()
            let length = lengths[slot]
            condition.unlock()
            let source = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(inputs.pointer)[(slot * inSize)...].prefix(length))
            let target = UnsafeMutableRawBufferPointer(rebasing: outputs.pointer[(slot * outSize)..<((slot + 1) * outSize)])
            let (produced, error) = direction == .seal ? seal(source, job, into: target) : open(source, job, into: target)
            condition.lock()
            state[slot] = .processed
            outLengths[slot] = produced
            errors[slot] = error
            if error != nil {
                // The stream ends at this chunk: nothing after it is read or written.
                chunkCount = min(chunkCount ?? Int.max, job.index + 1)
                stopReading = true
            } else if job.last {
                chunkCount = min(chunkCount ?? Int.max, job.index + 1)
            }
            while processedUpTo != chunkCount && state[processedUpTo % slots] == .processed { processedUpTo += 1 }
            if sleepers > 0 { condition.broadcast() }
            let minimum = sleepers > 0 || processedUpTo == chunkCount ? 1 : writeRun
            if !writing && failure == nil && processedUpTo - written >= minimum { writeRunLocked() }
            let now = inputDone
            condition.unlock()
            if let progress, now != reported {
                reported = now
                progress(now)
            }
        }
        // Nothing left to read: help write what remains, or wait for whoever is writing it.
        condition.lock()
        while failure == nil && (chunkCount == nil || written != chunkCount) { writeOrWaitLocked() }
        condition.unlock()
    }

    private func seal(_ source: UnsafeRawBufferPointer, _ job: Job, into target: UnsafeMutableRawBufferPointer) -> (Int, AgeError?) {
        do {
            try cipher.seal(source, counter: UInt64(job.index), final: job.last, into: target)
            return (source.count + PayloadCipher.tagSize, nil)
        } catch {
            return (0, .io("ChaCha20-Poly1305 sealing failed"))
        }
    }

    /// Opens one chunk by the payload's rule (``PayloadCipher/openChunk(_:counter:last:into:)``):
    /// the plaintext to release, and the failure that ends the stream after it, if any.
    private func open(_ sealed: UnsafeRawBufferPointer, _ job: Job, into target: UnsafeMutableRawBufferPointer) -> (Int, AgeError?) {
        let opened = cipher.openChunk(sealed, counter: UInt64(job.index), last: job.last, into: target)
        return (opened.count, opened.failure)
    }

    /// Under `condition`: writes the next run of processed chunks if nobody is writing and there is
    /// one, otherwise sleeps until another thread signals progress.
    private func writeOrWaitLocked() {
        if !writing && processedUpTo > written {
            writeRunLocked()
        } else {
            sleepers += 1
            condition.wait()
            sleepers -= 1
        }
    }

    /// Under `condition`, with no write in progress and at least one processed chunk unwritten:
    /// writes the run of processed chunks that starts at `written` (up to the end of the ring)
    /// outside the lock, then frees their slots. Returns with `condition` held.
    private func writeRunLocked() {
        writing = true
        let first = written % slots
        var run = 0
        var bytes = 0
        var inputBytes = 0
        var ending: AgeError?
        while run < min(processedUpTo - written, slots - first) {
            let slot = first + run
            run += 1
            bytes += outLengths[slot]
            inputBytes += lengths[slot]
            // Only the last chunk (or the failing one) is short; nothing after it is contiguous.
            if let error = errors[slot] {
                ending = error
                break
            }
            if outLengths[slot] < outSize { break }
        }
        condition.unlock()
        var writeError: AgeError?
        if bytes > 0 {
            do {
                try AgeIO.writeAll(output, UnsafeRawBufferPointer(start: outputs.pointer.baseAddress! + first * outSize, count: bytes))
            } catch {
                writeError = error
            }
        }
        condition.lock()
        writing = false
        if let failed = writeError ?? ending, failure == nil { failure = failed }
        for slot in first..<(first + run) { state[slot] = .free }
        if writeError == nil {
            written += run
            inputDone += Int64(inputBytes)
        }
        if sleepers > 0 || failure != nil { condition.broadcast() }
    }

    /// Under the read lock: reads ahead until a chunk's finality is known and returns it, or nil
    /// once everything is taken or the pipeline failed.
    private func nextJob() -> Job? {
        // A read takes a few microseconds: one waiting thread at a time spins briefly before
        // sleeping on the lock (when every thread has a core); the others sleep at once, so
        // surplus workers cost nothing and do not fight over the lock's cache line.
        if !readLock.try() {
            if spinForReads && spinToken.try() {
                var spins = 0
                while !readLock.try() {
                    spins += 1
                    if spins > 2000 {
                        readLock.lock()
                        break
                    }
                }
                spinToken.unlock()
            } else {
                readLock.lock()
            }
        }
        defer { readLock.unlock() }
        while true {
            condition.lock()
            let stop = stopReading
            condition.unlock()
            if stop { return nil }
            if endOfInput {
                guard let last = pending else { return nil }
                pending = nil
                return Job(index: last, last: true)
            }
            let index = nextRead
            let slot = index % slots
            // The slot is free once its previous chunk is written: write it here if it is
            // processed and nobody is writing; otherwise wait for whoever processes or writes it.
            condition.lock()
            while state[slot] != .free && failure == nil { writeOrWaitLocked() }
            if failure != nil {
                condition.unlock()
                return nil
            }
            state[slot] = .busy
            condition.unlock()

            let got: Int
            do {
                got = try readFull(into: inputs.pointer.baseAddress! + slot * inSize)
            } catch {
                fail(error as? AgeError ?? .io("\(error)"))
                return nil
            }
            if got < inSize { endOfInput = true }
            if got == 0 && pending != nil {
                // The input ended on a chunk boundary: the pending chunk is the last one.
                condition.lock()
                state[slot] = .free
                condition.unlock()
                continue
            }
            condition.lock()
            lengths[slot] = got
            condition.unlock()
            nextRead += 1
            let previous = pending
            pending = index
            // The chunk before this one is now known not to be the last.
            if let previous { return Job(index: previous, last: false) }
            // Empty input: one empty last chunk, taken on the next turn.
        }
    }

    /// Reads a whole chunk (`inSize` bytes) or up to end of input, the prefix first.
    private func readFull(into base: UnsafeMutableRawPointer) throws -> Int {
        var got = 0
        defer { inputHighWater = max(inputHighWater, base - inputs.pointer.baseAddress! + got) }
        if prefixOffset < prefix.count {
            got = min(inSize, prefix.count - prefixOffset)
            let offset = prefixOffset
            prefix.withUnsafeBytes { base.copyMemory(from: $0.baseAddress! + offset, byteCount: got) }
            prefixOffset += got
        }
        while got < inSize {
            let n = read(input, base + got, inSize - got)
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            got += n
        }
        return got
    }
}
