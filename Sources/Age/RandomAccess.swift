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
import Crypto
import Cipher

/// Random-access decryption of a binary age file on a seekable descriptor: reads any byte
/// range by decrypting only the 64 KiB chunks that hold it.
///
/// Opening parses the header, unwraps the file key, checks the header MAC and verifies that
/// the last chunk is a valid final chunk, so ``plaintextSize`` can be trusted. Each read
/// authenticates the chunks it touches. Reads use `pread`, so one reader may serve several
/// threads at once.
public final class AgeRandomAccessReader: Sendable {
    /// The size of the plaintext in bytes.
    public let plaintextSize: Int64
    private let fd: Int32
    private let ownsDescriptor: Bool
    private let payloadStart: Int64
    private let chunkCount: Int64
    private let cipher: PayloadCipher

    /// Opens the age file at `path`.
    /// - Parameters:
    ///   - path: The binary age file.
    ///   - identities: Keys and passphrases to try.
    /// - Throws: ``AgeError``; ``AgeError/invalidArgument(_:)`` for an armored file (not seekable).
    public convenience init(path: String, identities: [any AgeIdentity]) throws(AgeError) {
        let fd = try AgeIO.openForReading(path)
        do throws(AgeError) { try self.init(fileDescriptor: fd, identities: identities, ownsDescriptor: true) } catch {
            close(fd)
            throw error
        }
    }

    /// Uses an open, seekable descriptor (not closed by the reader).
    /// - Parameters:
    ///   - fileDescriptor: The descriptor open on the binary age file.
    ///   - identities: Keys and passphrases to try.
    /// - Throws: ``AgeError``.
    public convenience init(fileDescriptor: Int32, identities: [any AgeIdentity]) throws(AgeError) {
        try self.init(fileDescriptor: fileDescriptor, identities: identities, ownsDescriptor: false)
    }

    private init(fileDescriptor fd: Int32, identities: [any AgeIdentity], ownsDescriptor: Bool) throws(AgeError) {
        self.fd = fd
        self.ownsDescriptor = ownsDescriptor
        let info: FileStatus
        do { info = try FileCalls.status(fd) } catch { throw AgeError.io("fstat failed: \(String(cString: strerror(error.code)))") }
        let fileSize = info.size
        // Parse the header.
        var parser = AgeHeaderParser()
        var offset: Int64 = 0
        var piece = [UInt8](repeating: 0, count: 16 * 1024)
        var first = true
        while parser.header == nil {
            let n = try Self.pread(fd, &piece, at: offset)
            if n == 0 { break }
            if first {
                first = false
                if let c = piece.first, c != 0x61 {
                    let start = piece[0..<n].first(where: { !Armor.isWhitespace($0) })
                    if start == 0x2D { throw AgeError.invalidArgument("random access needs a binary age file; this one is armored") }
                }
            }
            let used = try piece.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try parser.feed(UnsafeRawBufferPointer(rebasing: bytes[0..<n])) }
            offset += Int64(used)
        }
        try parser.finish()
        guard let header = parser.header else { throw AgeError.headerFailure("incomplete header") }
        var nonce = [UInt8](repeating: 0, count: PayloadCipher.nonceSize)
        guard try Self.pread(fd, &nonce, at: offset) == PayloadCipher.nonceSize else {
            throw AgeError.headerFailure("the file ends before the 16-byte payload nonce")
        }
        let fileKey = try PayloadStart.unwrapFileKey(header: header, identities: identities)
        defer { fileKey.wipe() }
        cipher = try PayloadCipher(fileKey: fileKey, nonce: nonce)
        payloadStart = offset + Int64(PayloadCipher.nonceSize)
        let sealedSize = fileSize - payloadStart
        guard sealedSize > 0 else { throw AgeError.payloadFailure("the payload has no chunks") }
        let full = Int64(PayloadCipher.sealedChunkSize)
        chunkCount = (sealedSize + full - 1) / full
        let lastSealed = sealedSize - (chunkCount - 1) * full
        guard lastSealed >= Int64(PayloadCipher.tagSize) else { throw AgeError.payloadFailure("the last chunk is truncated") }
        plaintextSize = sealedSize - chunkCount * Int64(PayloadCipher.tagSize)
        if chunkCount > 1 && lastSealed == Int64(PayloadCipher.tagSize) {
            throw AgeError.payloadFailure("the final chunk is empty")
        }
        // Verify the last chunk is a valid final chunk before trusting the size.
        var scratch = [UInt8](repeating: 0, count: PayloadCipher.chunkSize)
        _ = try readChunk(chunkCount - 1, into: &scratch)
        for i in scratch.indices { scratch[i] = 0 }
    }

    deinit {
        if ownsDescriptor { close(fd) }
    }

    private static func pread(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int64) throws(AgeError) -> Int {
        let read = buffer.withUnsafeMutableBytes { raw in Result { () throws(SystemCallError) in try FileCalls.readFully(fd, into: raw, at: offset) } }
        do { return try read.get() } catch { throw AgeError.io("read failed: \(String(cString: strerror(error.code)))") }
    }

    /// Decrypts chunk `index` into `out`; returns its plaintext length.
    private func readChunk(_ index: Int64, into out: inout [UInt8]) throws(AgeError) -> Int {
        var sealed = [UInt8](repeating: 0, count: PayloadCipher.sealedChunkSize)
        let n = try Self.pread(fd, &sealed, at: payloadStart + index * Int64(PayloadCipher.sealedChunkSize))
        let final = index == chunkCount - 1
        let expected = final ? Int(plaintextSize - index * Int64(PayloadCipher.chunkSize)) + PayloadCipher.tagSize : PayloadCipher.sealedChunkSize
        guard n == expected else { throw AgeError.payloadFailure("chunk \(index) is truncated (the file changed?)") }
        let opened = sealed.withUnsafeBytes { s in
            out.withUnsafeMutableBytes { o in cipher.openChunk(UnsafeRawBufferPointer(rebasing: s[0..<n]), counter: UInt64(index), last: final, into: o) }
        }
        if let failure = opened.failure {
            for i in out.indices { out[i] = 0 }
            throw failure
        }
        return opened.count
    }

    /// Reads the plaintext from `offset` into `buffer` (as much as fits, fewer bytes at the end of
    /// the plaintext), with no copy in between: for plaintext that must end up in wipeable memory.
    /// - Parameters:
    ///   - offset: The plaintext position, 0 ≤ offset ≤ ``plaintextSize``.
    ///   - buffer: Where the bytes go.
    /// - Returns: The number of bytes written into `buffer`, all authenticated.
    /// - Throws: As ``read(offset:count:)``; on a failure `buffer` is zeroed.
    public func read(offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws(AgeError) -> Int {
        guard offset >= 0, offset <= plaintextSize else {
            throw AgeError.invalidArgument("offset \(offset) is outside the plaintext (0...\(plaintextSize))")
        }
        let end = min(plaintextSize, offset + Int64(buffer.count))
        var position = offset
        var written = 0
        var chunk = [UInt8](repeating: 0, count: PayloadCipher.chunkSize)
        defer { for i in chunk.indices { chunk[i] = 0 } }
        do throws(AgeError) {
            while position < end {
                let index = position / Int64(PayloadCipher.chunkSize)
                let length = try readChunk(index, into: &chunk)
                let start = Int(position - index * Int64(PayloadCipher.chunkSize))
                let stop = min(length, Int(end - index * Int64(PayloadCipher.chunkSize)))
                guard stop > start else { break }
                chunk.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: buffer[written..<(written + stop - start)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<stop]))
                }
                written += stop - start
                position = index * Int64(PayloadCipher.chunkSize) + Int64(stop)
            }
        } catch {
            if let base = buffer.baseAddress { memset(base, 0, buffer.count) }
            throw error
        }
        return written
    }

    /// Reads up to `count` plaintext bytes starting at `offset`.
    /// - Parameters:
    ///   - offset: The plaintext position, 0 ≤ offset ≤ ``plaintextSize``.
    ///   - count: The number of bytes wanted; fewer are returned at the end of the plaintext.
    /// - Returns: The bytes, authenticated.
    /// - Throws: ``AgeError/payloadFailure(_:)`` when a chunk does not authenticate,
    ///   ``AgeError/invalidArgument(_:)`` for an offset outside the plaintext.
    public func read(offset: Int64, count: Int) throws(AgeError) -> [UInt8] {
        guard offset >= 0, offset <= plaintextSize, count >= 0 else {
            throw AgeError.invalidArgument("offset \(offset) is outside the plaintext (0...\(plaintextSize))")
        }
        var result = [UInt8](repeating: 0, count: Int(min(plaintextSize, offset + Int64(count)) - offset))
        let written: Result<Int, AgeError> = result.withUnsafeMutableBytes { buffer in
            Result { () throws(AgeError) in try self.read(offset: offset, into: buffer) }
        }
        let count = try written.get()
        return count == result.count ? result : Array(result.prefix(count))
    }
}
