import Foundation
import Crypto
import Cipher
import CPlatform

/// The age payload: STREAM over ChaCha20-Poly1305 with 64 KiB chunks.
///
/// Chunks are independent given their counter, so a batch of chunks is sealed or opened in
/// parallel (`DispatchQueue.concurrentPerform`); the bytes are the same as a sequential run.
struct PayloadCipher: Sendable {
    static let chunkSize = 64 * 1024
    static let tagSize = 16
    static let sealedChunkSize = chunkSize + tagSize
    static let nonceSize = 16

    let key: SymmetricKey

    /// payload key = HKDF-SHA-256(ikm = file key, salt = nonce, info = "payload").
    init(fileKey: SecretBytes, nonce: [UInt8]) {
        let derived = KeyDerivation.hkdf(fileKey, salt: nonce, info: "payload")
        key = derived.symmetricKey
        derived.wipe()
    }

    static func chunkNonce(_ counter: UInt64, final: Bool) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        var value = counter.bigEndian
        withUnsafeBytes(of: &value) { for i in 0..<8 { bytes[3 + i] = $0[i] } }
        bytes[11] = final ? 1 : 0
        // A 12-byte nonce is always accepted.
        return try! ChaChaPoly.Nonce(data: bytes)
    }

    /// Seals `plain` into `out` (plain.count + 16 bytes).
    func seal(_ plain: UnsafeRawBufferPointer, counter: UInt64, final: Bool, into out: UnsafeMutableRawBufferPointer) throws {
        let box = try ChaChaPoly.seal(plain, using: key, nonce: Self.chunkNonce(counter, final: final))
        box.ciphertext.withUnsafeBytes { c in
            if c.count > 0 { out.baseAddress!.copyMemory(from: c.baseAddress!, byteCount: c.count) }
        }
        box.tag.withUnsafeBytes { t in (out.baseAddress! + plain.count).copyMemory(from: t.baseAddress!, byteCount: 16) }
    }

    /// Opens `sealed` into `out`; the plaintext length, or nil when it does not authenticate.
    func open(_ sealed: UnsafeRawBufferPointer, counter: UInt64, final: Bool, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard sealed.count >= Self.tagSize else { return nil }
        let n = sealed.count - Self.tagSize
        guard let box = try? ChaChaPoly.SealedBox(nonce: Self.chunkNonce(counter, final: final),
                                                  ciphertext: UnsafeRawBufferPointer(rebasing: sealed[0..<n]),
                                                  tag: UnsafeRawBufferPointer(rebasing: sealed[n...])),
              let plain = try? ChaChaPoly.open(box, using: key) else { return nil }
        plain.withUnsafeBytes { p in
            if p.count > 0 {
                out.baseAddress!.copyMemory(from: p.baseAddress!, byteCount: p.count)
                // swift-crypto frees this buffer unzeroed: clear the plaintext before it goes.
                sf_secure_zero(UnsafeMutableRawPointer(mutating: p.baseAddress!), p.count)
            }
        }
        return n
    }
}

/// How many threads seal or open the chunks of a batch.
enum ChunkWorkers {
    /// All the active cores.
    static var all: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }

    /// The cores left once the background writer has one of its own. Copying a batch into a
    /// file or a pipe costs the kernel about as much CPU as sealing it, so on two cores the
    /// fastest pipeline is one thread sealing and one writing: sealing on every core as well
    /// left three busy threads on two cores, the writer (the critical path) waiting for a core
    /// and the batches bouncing between the cores' caches.
    static var besideWriter: Int { max(1, all - 1) }

    /// Whether writes to `fd` cost real CPU: anything but a character device (`/dev/null`,
    /// a terminal), i.e. regular files, pipes and sockets.
    static func writesCostCPU(_ fd: Int32) -> Bool {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return true }
        return info.st_mode & S_IFMT != S_IFCHR
    }
}

/// Runs `body(i)` for i in 0..<count on up to `workers` threads (the calling one included).
@inline(__always)
func forEachChunk(_ count: Int, workers: Int, _ body: @Sendable (Int) -> Void) {
    if workers <= 1 || count <= 1 {
        for i in 0..<count { body(i) }
    } else if workers >= ChunkWorkers.all {
        DispatchQueue.concurrentPerform(iterations: count, execute: body)
    } else {
        let threads = min(workers, count)
        DispatchQueue.concurrentPerform(iterations: threads) { (thread: Int) -> Void in
            for i in stride(from: thread, to: count, by: threads) { body(i) }
        }
    }
}

/// swift-crypto returns every sealed or opened chunk in a fresh 64 KiB heap buffer. With
/// glibc's default trim threshold, freeing them hands the pages back to the kernel and the next
/// chunk faults them in again (about 100,000 page faults per GiB). Raising the threshold once
/// to 8 MiB keeps that memory mapped; peak memory is unchanged.
enum AllocatorTuning {
    static let applied: Bool = sf_malloc_keep_freed(8 << 20) == 1
}

/// Pointers handed to the parallel chunk workers. Unchecked: each worker touches only the
/// disjoint region of its own chunk index, and `concurrentPerform` returns only when all are done.
struct SharedBuffer<Pointer>: @unchecked Sendable {
    let pointer: Pointer
}

/// A fixed-size scratch buffer (64-byte aligned), zeroed when freed (it may hold plaintext).
final class ScratchBuffer {
    let pointer: UnsafeMutableRawBufferPointer
    init(_ count: Int) {
        pointer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 64)
    }
    deinit {
        if let base = pointer.baseAddress { sf_secure_zero(base, pointer.count) }
        pointer.deallocate()
    }
}

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
        input = ScratchBuffer(batchBytes + PayloadCipher.chunkSize)
        outputs = [ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize), ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize)]
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
        input = ScratchBuffer(batchBytes + PayloadCipher.sealedChunkSize)
        outputs = [ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize), ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize)]
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
            offset += n
            try drain(sink: sink)
        }
    }

    /// Reads from `fd` straight into the batch buffer. Returns the bytes read, 0 at end of file.
    func update(readingFrom fd: Int32, sink: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        if let failure { throw failure }
        while true {
            let n = read(fd, input.pointer.baseAddress! + filled, input.pointer.count - filled)
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            filled += n
            try drain(sink: sink)
            return n
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

    /// Per-chunk outcome of a parallel open.
    private enum Outcome { case plain(Int), finalWithTrailingData(Int), noFinal(Int), failed(String) }

    private func flush(atEnd: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.sealedChunkSize
        let chunks = (filled + size - 1) / size
        let base = counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(input.pointer))
        let outShared = SharedBuffer(pointer: output.pointer)
        let outBase = output.pointer
        let total = filled
        let cipher = self.cipher
        var outcomes = [Outcome](repeating: .failed(""), count: chunks)
        outcomes.withUnsafeMutableBufferPointer { resultBuffer in
            let resultShared = SharedBuffer(pointer: resultBuffer)
            forEachChunk(chunks, workers: workers) { (i: Int) -> Void in
                let inBase = inShared.pointer, outBase = outShared.pointer, results = resultShared.pointer
                let start = i * size
                let length = min(size, total - start)
                let sealed = UnsafeRawBufferPointer(rebasing: inBase[start..<(start + length)])
                let out = UnsafeMutableRawBufferPointer(rebasing: outBase[(i * PayloadCipher.chunkSize)...])
                let n = base + UInt64(i)
                let last = atEnd && i == chunks - 1
                if last {
                    if length < PayloadCipher.tagSize {
                        results[i] = .failed("chunk \(n) is truncated")
                    } else if let count = cipher.open(sealed, counter: n, final: true, into: out) {
                        results[i] = (count == 0 && n != 0) ? .failed("the final chunk is empty") : .plain(count)
                    } else if length == size, let count = cipher.open(sealed, counter: n, final: false, into: out) {
                        results[i] = .noFinal(count)
                    } else {
                        results[i] = .failed("chunk \(n) does not authenticate")
                    }
                } else if let count = cipher.open(sealed, counter: n, final: false, into: out) {
                    results[i] = .plain(count)
                } else if let count = cipher.open(sealed, counter: n, final: true, into: out) {
                    results[i] = .finalWithTrailingData(count)
                } else {
                    results[i] = .failed("chunk \(n) does not authenticate")
                }
            }
        }
        // Release in order, stopping at the first failure.
        var released = 0
        var error: AgeError?
        for (i, outcome) in outcomes.enumerated() {
            switch outcome {
            case .plain(let count):
                released = i * PayloadCipher.chunkSize + count
            case .finalWithTrailingData(let count):
                released = i * PayloadCipher.chunkSize + count
                error = .payloadFailure("data follows the final chunk")
            case .noFinal(let count):
                released = i * PayloadCipher.chunkSize + count
                error = .payloadFailure("the file ends without a final chunk (truncated)")
            case .failed(let why):
                error = .payloadFailure(why)
            }
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
            do { try Age.writeAll(self.fd, shared.pointer) } catch let failure as AgeError { self.error = failure } catch {
                self.error = .io("\(error)")
            }
            self.pending.signal()
        }
    }

    /// Writes `bytes` now, after the queued write.
    func writeSync(_ bytes: UnsafeRawBufferPointer) throws {
        try waitForPrevious()
        defer { pending.signal() }
        try Age.writeAll(fd, bytes)
    }

    /// Waits for the queued write; throws its error.
    func finish() throws {
        try waitForPrevious()
        pending.signal()
    }
}
