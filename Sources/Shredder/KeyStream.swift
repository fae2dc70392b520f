import Cipher
import Crypto
import CryptoExtras
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

/// A fast CSPRNG stream for overwrite passes: the AES-256-CTR keystream (the encryption of
/// zeros) under a key drawn from ``SecureRandom``, addressed by file offset so that the bytes
/// of any range can be produced again for verification.
///
/// The bytes at file offset `o` are keystream block `o / 16`, byte `o % 16`, with the 128-bit
/// counter block `nonce + o / 16` (big-endian addition). Memory is constant: one zero input
/// buffer of the chunk size plus the output of one chunk.
final class KeyStream {
    private var key: SymmetricKey
    private var nonceHigh: UInt64
    private var nonceLow: UInt64
    private let zeros: [UInt8]

    /// - Parameter chunkSize: The largest range ``fill(offset:into:)`` will be asked for.
    init(chunkSize: Int) throws(ShredError) {
        zeros = [UInt8](repeating: 0, count: chunkSize + 16)
        (key, nonceHigh, nonceLow) = try KeyStream.freshKey()
    }

    /// Draws a new key and nonce (one per pass).
    func rekey() throws(ShredError) {
        (key, nonceHigh, nonceLow) = try KeyStream.freshKey()
    }

    private static func freshKey() throws(ShredError) -> (SymmetricKey, UInt64, UInt64) {
        do {
            let secret = try SecretBytes.random(count: 32)
            defer { secret.wipe() }
            var high: UInt64 = 0
            var low: UInt64 = 0
            try withUnsafeMutableBytes(of: &high) { try SecureRandom.fill($0) }
            try withUnsafeMutableBytes(of: &low) { try SecureRandom.fill($0) }
            return (secret.symmetricKey, high, low)
        } catch {
            throw ShredError.random(String(describing: error))
        }
    }

    /// Writes the stream bytes for file offsets `offset ..< offset + buffer.count` into `buffer`.
    func fill(offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(ShredError) {
        guard buffer.count > 0 else { return }
        let skip = Int(offset % 16)
        let block = offset / 16
        let (low, carry) = nonceLow.addingReportingOverflow(block)
        let high = nonceHigh &+ (carry ? 1 : 0)
        var nonceBytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            nonceBytes[i] = UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * i))
            nonceBytes[8 + i] = UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * i))
        }
        let needed = skip + buffer.count
        guard needed <= zeros.count else {
            throw ShredError.invalidOptions("keystream chunk of \(buffer.count) bytes exceeds the buffer size")
        }
        do {
            let nonce = try AES._CTR.Nonce(nonceBytes: nonceBytes)
            let stream = try zeros.withUnsafeBufferPointer { input in
                try AES._CTR.encrypt(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(input)[0..<needed]),
                                     using: key, nonce: nonce)
            }
            stream.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[skip..<needed]))
            }
        } catch {
            throw ShredError.random("AES-CTR keystream: \(error)")
        }
    }
}
