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

/// What an age file's structure says without any key (as `age-inspect` reports it): armor,
/// recipient stanza types, and the sizes of header, overhead and payload. Nothing here is
/// authenticated: the header MAC and the payload are only checked by a decryption.
public struct AgeFileInfo: Sendable, Equatable {
    /// The file is ASCII-armored (the sizes below are of the binary file inside).
    public var armored: Bool
    /// The stanza types of the header, in order (`X25519`, `ssh-ed25519`, `scrypt`, …).
    public var stanzaTypes: [String]
    /// The header, from the version line to the end of the MAC line.
    public var headerSize: Int64
    /// The nonce and the 16-byte tag of each chunk.
    public var overhead: Int64
    /// The plaintext size, if the file decrypts (nil when the payload length cannot be one of a
    /// valid file).
    public var payloadSize: Int64?
    /// The size of the binary age file.
    public var totalSize: Int64

    /// True when every stanza is post-quantum (`mlkem768x25519`).
    public var postQuantum: Bool { !stanzaTypes.isEmpty && stanzaTypes.allSatisfy { $0 == "mlkem768x25519" } }
}

extension Age {
    /// Reads the age file on `fd` to its end (streamed, constant memory) and describes it.
    /// - Parameter fd: A readable descriptor holding the age file.
    /// - Returns: The file's description.
    /// - Throws: ``AgeError/headerFailure(_:)`` when the header does not parse or the nonce is
    ///   missing, ``AgeError/armorFailure(_:)``, ``AgeError/io(_:)``.
    public static func inspect(from fd: Int32) throws(AgeError) -> AgeFileInfo {
        return try ageCall {
            var parser = AgeHeaderParser()
            var headerSize: Int64 = 0
            var total: Int64 = 0
            var armored: Bool?
            let decoder = ArmorDecoder()
            let consume: (UnsafeRawBufferPointer) throws -> Void = { piece in
                total += Int64(piece.count)
                if parser.header == nil {
                    headerSize += Int64(try parser.feed(piece))
                }
            }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
                }
                if n == 0 { break }
                try buffer.withUnsafeBytes { raw in
                    let piece = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                    if armored == nil, let first = piece.first(where: { !Armor.isWhitespace($0) }) {
                        armored = first == 0x2D
                    }
                    if armored == true { try decoder.update(piece, sink: consume) } else if armored == false { try consume(piece) }
                }
            }
            if armored == true { try decoder.finish(sink: consume) }
            try parser.finish()
            guard let header = parser.header else { throw AgeError.headerFailure("incomplete header") }
            let afterHeader = total - headerSize
            guard afterHeader >= Int64(PayloadCipher.nonceSize) else { throw AgeError.headerFailure("the file ends before the 16-byte payload nonce") }
            let sealed = afterHeader - Int64(PayloadCipher.nonceSize)
            let chunk: Int64 = 64 * 1024 + 16
            let chunks = max(1, (sealed + chunk - 1) / chunk)
            let plain = sealed - 16 * chunks
            // The last chunk holds its tag, and data unless it is the only chunk.
            let last = sealed - (chunks - 1) * chunk
            let valid = last > 16 || (last == 16 && chunks == 1)
            return AgeFileInfo(armored: armored == true, stanzaTypes: header.stanzas.map(\.type), headerSize: headerSize,
                               overhead: Int64(PayloadCipher.nonceSize) + 16 * chunks,
                               payloadSize: valid ? plain : nil, totalSize: total)
        }
    }
}
