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
            if p.count > 0 { out.baseAddress!.copyMemory(from: p.baseAddress!, byteCount: p.count) }
        }
        return n
    }
}

/// Runs `body(i)` for i in 0..<count, in parallel when asked and worthwhile.
@inline(__always)
func forEachChunk(_ count: Int, parallel: Bool, _ body: @Sendable (Int) -> Void) {
    if parallel && count > 1 {
        DispatchQueue.concurrentPerform(iterations: count, execute: body)
    } else {
        for i in 0..<count { body(i) }
    }
}

/// Pointers handed to the parallel chunk workers. Unchecked: each worker touches only the
/// disjoint region of its own chunk index, and `concurrentPerform` returns only when all are done.
struct SharedBuffer<Pointer>: @unchecked Sendable {
    let pointer: Pointer
}

/// A fixed-size page-aligned scratch buffer, zeroed when freed (it may hold plaintext).
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

/// Push-mode STREAM encryption with a bounded buffer of `batchChunks` chunks.
final class StreamEncryptor {
    let cipher: PayloadCipher
    let batchChunks: Int
    let parallel: Bool
    private let input: ScratchBuffer
    private let output: ScratchBuffer
    private var filled = 0
    private var counter: UInt64 = 0
    private var finished = false

    init(cipher: PayloadCipher, batchChunks: Int = 32, parallel: Bool = true) {
        self.cipher = cipher
        self.batchChunks = max(1, batchChunks)
        self.parallel = parallel
        input = ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize)
        output = ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize)
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        let capacity = input.pointer.count
        while offset < bytes.count {
            if filled == capacity {
                // More data follows, so every chunk in the full batch is non-final.
                try flush(final: false, sink: sink)
            }
            let n = min(bytes.count - offset, capacity - filled)
            (input.pointer.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            filled += n
            offset += n
        }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !finished else { return }
        finished = true
        try flush(final: true, sink: sink)
    }

    private func flush(final: Bool, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let size = PayloadCipher.chunkSize
        let chunks = max(1, (filled + size - 1) / size)
        let base = counter
        let inShared = SharedBuffer(pointer: UnsafeRawBufferPointer(input.pointer))
        let outShared = SharedBuffer(pointer: output.pointer)
        let outBase = output.pointer
        let total = filled
        let cipher = self.cipher
        var failures = [Bool](repeating: false, count: chunks)
        failures.withUnsafeMutableBufferPointer { failedBuffer in
        let failedShared = SharedBuffer(pointer: failedBuffer)
        forEachChunk(chunks, parallel: parallel) { (i: Int) -> Void in
            let inBase = inShared.pointer, outBase = outShared.pointer, failed = failedShared.pointer
            let start = i * size
            let length = min(size, total - start)
            let isFinal = final && i == chunks - 1
            let plain = UnsafeRawBufferPointer(rebasing: inBase[start..<(start + length)])
            let out = UnsafeMutableRawBufferPointer(rebasing: outBase[(i * PayloadCipher.sealedChunkSize)...])
            do { try cipher.seal(plain, counter: base + UInt64(i), final: isFinal, into: out) } catch { failed[i] = true }
        }
        }
        guard !failures.contains(true) else { throw AgeError.io("ChaCha20-Poly1305 sealing failed") }
        let produced = total + chunks * PayloadCipher.tagSize
        try sink(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(outBase)[0..<produced]))
        counter += UInt64(chunks)
        filled = 0
    }
}

/// Push-mode STREAM decryption: releases only authenticated plaintext, in order.
final class StreamDecryptor {
    let cipher: PayloadCipher
    let batchChunks: Int
    let parallel: Bool
    private let input: ScratchBuffer
    private let output: ScratchBuffer
    private var filled = 0
    private var counter: UInt64 = 0
    private var finished = false
    private var failure: AgeError?

    init(cipher: PayloadCipher, batchChunks: Int = 32, parallel: Bool = true) {
        self.cipher = cipher
        self.batchChunks = max(1, batchChunks)
        self.parallel = parallel
        input = ScratchBuffer(self.batchChunks * PayloadCipher.sealedChunkSize)
        output = ScratchBuffer(self.batchChunks * PayloadCipher.chunkSize)
    }

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        var offset = 0
        let capacity = input.pointer.count
        while offset < bytes.count {
            if filled == capacity { try flush(atEnd: false, sink: sink) }
            let n = min(bytes.count - offset, capacity - filled)
            (input.pointer.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            filled += n
            offset += n
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
            forEachChunk(chunks, parallel: parallel) { (i: Int) -> Void in
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
        if released > 0 {
            try sink(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(outBase)[0..<released]))
        }
        memset(outBase.baseAddress!, 0, min(outBase.count, chunks * PayloadCipher.chunkSize))
        if let error {
            failure = error
            throw error
        }
        counter += UInt64(chunks)
        filled = 0
    }
}
