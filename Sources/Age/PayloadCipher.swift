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
import Cipher
// ChaCha20-Poly1305 of swift-crypto's BoringSSL through a C shim of the project's own, whose
// header names no BoringSSL type: no client of Age loads swift-crypto's internal C module.
import CAgePayload

/// The age payload: STREAM over ChaCha20-Poly1305 with 64 KiB chunks, and the rule that opens
/// a chunk (final flag, trailing data, truncation) for every reader of the payload.
///
/// Chunks are independent given their counter, so chunks are sealed or opened in parallel; the
/// bytes are the same as a sequential run. Seal and open may be called from several threads
/// at once.
final class PayloadCipher: @unchecked Sendable {
    // Unchecked: the context is written only by `init` and `deinit`; BoringSSL allows
    // concurrent seal and open calls on one context.
    static let chunkSize = 64 * 1024
    static let tagSize = 16
    static let sealedChunkSize = chunkSize + tagSize
    static let nonceSize = 16

    private let context: OpaquePointer

    /// payload key = HKDF-SHA-256(ikm = file key, salt = nonce, info = "payload").
    /// - Throws: ``AgeError/io(_:)`` when the cipher cannot be set up.
    init(fileKey: SecretBytes, nonce: [UInt8]) throws(AgeError) {
        let derived = KeyDerivation.hkdf(fileKey, salt: nonce, info: "payload")
        defer { derived.wipe() }
        let made = derived.withUnsafeBytes { key in
            sf_payload_aead_new(key.bindMemory(to: UInt8.self).baseAddress, key.count)
        }
        guard let made else { throw AgeError.io("ChaCha20-Poly1305 could not be set up") }
        context = made
    }

    deinit {
        // Clears the key schedule (it holds the payload key) before freeing it.
        sf_payload_aead_free(context)
    }

    /// The 12-byte ChaCha20-Poly1305 nonce of chunk `counter`: 11 bytes of big-endian counter,
    /// then the final flag.
    @inline(__always)
    private static func withChunkNonce<Result>(_ counter: UInt64, final: Bool, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var nonce: (UInt32, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &nonce) { bytes in
            var value = counter.bigEndian
            withUnsafeBytes(of: &value) { for i in 0..<8 { bytes[3 + i] = $0[i] } }
            bytes[11] = final ? 1 : 0
            return body(UnsafeRawBufferPointer(rebasing: bytes[0..<12]))
        }
    }

    /// Seals `plain` into `out` (plain.count + 16 bytes; `out` must not overlap `plain`).
    /// - Throws: ``AgeError/io(_:)`` when sealing fails.
    func seal(_ plain: UnsafeRawBufferPointer, counter: UInt64, final: Bool, into out: UnsafeMutableRawBufferPointer) throws(AgeError) {
        precondition(out.count >= plain.count + Self.tagSize)
        var written = 0
        let sealed = Self.withChunkNonce(counter, final: final) { nonce in
            sf_payload_aead_seal(context, out.bindMemory(to: UInt8.self).baseAddress, &written, out.count,
                                 nonce.bindMemory(to: UInt8.self).baseAddress, nonce.count,
                                 plain.bindMemory(to: UInt8.self).baseAddress, plain.count)
        }
        guard sealed == 1, written == plain.count + Self.tagSize else { throw AgeError.io("ChaCha20-Poly1305 sealing failed") }
    }

    /// Opens `sealed` into `out` (at least sealed.count - 16 bytes; no overlap); the plaintext
    /// length, or nil when it does not authenticate (`out` then holds no plaintext).
    func open(_ sealed: UnsafeRawBufferPointer, counter: UInt64, final: Bool, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard sealed.count >= Self.tagSize else { return nil }
        let n = sealed.count - Self.tagSize
        precondition(out.count >= n)
        var written = 0
        let opened = Self.withChunkNonce(counter, final: final) { nonce in
            sf_payload_aead_open(context, out.bindMemory(to: UInt8.self).baseAddress, &written, out.count,
                                 nonce.bindMemory(to: UInt8.self).baseAddress, nonce.count,
                                 sealed.bindMemory(to: UInt8.self).baseAddress, sealed.count)
        }
        guard opened == 1, written == n else { return nil }
        return n
    }

    /// Opens chunk `counter` of a payload by the spec's rules; every reader of the payload
    /// (``StreamDecryptor``, ``ChunkPipeline``, ``AgeRandomAccessReader``) goes through here.
    ///
    /// - Parameters:
    ///   - sealed: The chunk as read: a full sealed chunk, or less when the input ended.
    ///   - counter: The chunk's index in the payload.
    ///   - last: Nothing follows this chunk in the input.
    ///   - out: Room for a chunk of plaintext.
    /// - Returns: The plaintext to release (authenticated), and the failure that ends the stream
    ///   after it, if any: a final chunk followed by more data, a last chunk that is not final
    ///   (truncation), an empty final chunk after others, or a chunk that does not authenticate.
    func openChunk(_ sealed: UnsafeRawBufferPointer, counter: UInt64, last: Bool,
                   into out: UnsafeMutableRawBufferPointer) -> (count: Int, failure: AgeError?) {
        if last {
            if sealed.count == 0 {
                return (0, .payloadFailure(counter == 0 ? "the payload has no chunks" : "the file ends without a final chunk"))
            }
            if sealed.count < Self.tagSize { return (0, .payloadFailure("chunk \(counter) is truncated")) }
            if let count = open(sealed, counter: counter, final: true, into: out) {
                return count == 0 && counter != 0 ? (0, .payloadFailure("the final chunk is empty")) : (count, nil)
            }
            if sealed.count == Self.sealedChunkSize, let count = open(sealed, counter: counter, final: false, into: out) {
                return (count, .payloadFailure("the file ends without a final chunk (truncated)"))
            }
            return (0, .payloadFailure("chunk \(counter) does not authenticate"))
        }
        if let count = open(sealed, counter: counter, final: false, into: out) { return (count, nil) }
        if let count = open(sealed, counter: counter, final: true, into: out) {
            return (count, .payloadFailure("data follows the final chunk"))
        }
        return (0, .payloadFailure("chunk \(counter) does not authenticate"))
    }
}
