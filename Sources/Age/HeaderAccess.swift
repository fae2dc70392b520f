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
import CPlatform
import Cipher

/// The header of a binary age file, read without any key: its stanzas and where it ends.
///
/// Nothing here is authenticated until ``verify(identities:)`` (or a decryption) checks the
/// header MAC with the file key.
public struct AgeFileHeader: Sendable {
    /// The recipient stanzas, in header order.
    public var stanzas: [AgeStanza] { parsed.stanzas }
    /// The number of bytes from the start of the file to the end of the MAC line; the 16-byte
    /// payload nonce and the payload follow.
    public let length: Int64
    let parsed: AgeHeader

    /// Reads the header of the binary age file open on `fd`, from offset 0 (`pread`; the
    /// descriptor's offset is not moved).
    /// - Parameter fd: A descriptor open on the binary age file.
    /// - Returns: The parsed header.
    /// - Throws: ``AgeError/headerFailure(_:)`` for input that is not a binary age file,
    ///   ``AgeError/invalidArgument(_:)`` for an armored file, ``AgeError/io(_:)``.
    public static func read(fileDescriptor fd: Int32) throws(AgeError) -> AgeFileHeader {
        var parser = AgeHeaderParser()
        var offset: Int64 = 0
        var piece = [UInt8](repeating: 0, count: 16 * 1024)
        var first = true
        while parser.header == nil {
            let n = piece.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            if first {
                first = false
                if piece[0] != 0x61, piece[0..<n].first(where: { !Armor.isWhitespace($0) }) == 0x2D {
                    throw AgeError.invalidArgument("the file is armored; this operation needs a binary age file")
                }
            }
            let used = try piece.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try parser.feed(UnsafeRawBufferPointer(rebasing: bytes[0..<n])) }
            offset += Int64(used)
        }
        try parser.finish()
        guard let header = parser.header else { throw AgeError.headerFailure("incomplete header") }
        return AgeFileHeader(length: offset, parsed: header)
    }

    /// Unwraps the file key with `identities` and checks the header MAC; the key is wiped at once.
    /// - Parameter identities: Keys and passphrases to try.
    /// - Throws: ``AgeError/noMatchingIdentity(_:)``, ``AgeError/headerMACFailure``,
    ///   ``AgeError/headerFailure(_:)``; an identity's own error as ``AgeError/external(_:)``
    ///   (a Cipher error as ``AgeError/cipher(_:)``).
    public func verify(identities: [any AgeIdentity]) throws(AgeError) {
        try PayloadStart.unwrapFileKey(header: parsed, identities: identities).wipe()
    }
}

extension Age {
    /// Writes to `output` the binary age file open on `input` with a new header: the file key is
    /// unwrapped with `identities` (header MAC checked), wrapped again for `recipients`, and the
    /// nonce and payload are copied byte for byte, not re-encrypted (the payload stays
    /// authenticated by the same file key, checked when it is read). Reads `input` with `pread`
    /// from offset 0; the file key lives only during the call and is wiped.
    ///
    /// - Parameters:
    ///   - input: A descriptor open on the binary age file.
    ///   - output: Where the new file is written.
    ///   - identities: Keys and passphrases that unwrap the file key.
    ///   - recipients: The new file's recipients.
    /// - Throws: ``AgeError``: header failures, ``AgeError/noMatchingIdentity(_:)``,
    ///   ``AgeError/headerMACFailure``, ``AgeError/invalidArgument(_:)`` for an armored file or
    ///   no recipients, ``AgeError/io(_:)``.
    package static func rewrapHeader(from input: Int32, to output: Int32, identities: [any AgeIdentity],
                                    recipients: [any AgeRecipient]) throws(AgeError) {
        guard !recipients.isEmpty else { throw AgeError.invalidArgument("no recipients") }
        if recipients.contains(where: { $0.requiresSoleStanza }) && recipients.count > 1 {
            throw AgeError.invalidArgument("a passphrase (scrypt) recipient cannot be combined with other recipients")
        }
        let header = try AgeFileHeader.read(fileDescriptor: input)
        let fileKey = try PayloadStart.unwrapFileKey(header: header.parsed, identities: identities)
        defer { fileKey.wipe() }
        let stanzas = try PayloadStart.wrap(fileKey, for: recipients)
        let newHeader = AgeHeader.encode(stanzas: stanzas, fileKey: fileKey)
        try newHeader.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try AgeIO.writeAll(output, bytes) }
        var offset = header.length
        var copied: Int64 = 0
        // The payload is copied by the kernel where it can (no trip through user memory);
        // otherwise, or when it stops, through a buffer from where it got to.
        var inputOffset = Int64(offset)
        while true {
            let n = sf_copy_file_range(input, &inputOffset, output, 1 << 30)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            copied += n
        }
        offset = inputOffset
        var buffer = [UInt8](repeating: 0, count: readSize)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            try buffer.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try AgeIO.writeAll(output, UnsafeRawBufferPointer(rebasing: bytes[0..<n])) }
            offset += Int64(n)
            copied += Int64(n)
        }
        guard copied >= Int64(PayloadCipher.nonceSize) else {
            throw AgeError.headerFailure("the file ends before the 16-byte payload nonce")
        }
    }
}
