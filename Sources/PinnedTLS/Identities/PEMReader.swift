import Foundation

/// PEM blocks (RFC 7468) read from bytes without going through `String`, so that the base64 of a
/// private key is decoded straight into an array the caller zeroes.
enum PEMReader {
    struct Block {
        /// The label between `-----BEGIN ` and `-----`, for example `CERTIFICATE`.
        var type: String
        /// The decoded contents.
        var der: [UInt8]
    }

    /// Enough for a system bundle (about 140 certificates) with room to spare.
    static let maxBlocks = 1024

    /// Every block in `bytes`, in order. Text outside blocks (openssl's "Bag Attributes",
    /// comments) is skipped.
    /// - Throws: ``IdentityError/invalidPEM(_:)`` for a block without its END line, an END line
    ///   of another type, a header line (an encrypted legacy key), bad base64, or no block at all.
    static func blocks(_ bytes: UnsafeRawBufferPointer) throws(IdentityError) -> [Block] {
        let begin = Array("-----BEGIN ".utf8), end = Array("-----END ".utf8), dashes = Array("-----".utf8)
        var result: [Block] = []
        var offset = 0
        while let start = find(begin, in: bytes, from: offset) {
            guard result.count < maxBlocks else { throw .invalidPEM("more than \(maxBlocks) PEM blocks") }
            let typeStart = start + begin.count
            guard let typeEnd = find(dashes, in: bytes, from: typeStart), typeEnd - typeStart <= 64,
                  let type = String(validating: bytes[typeStart..<typeEnd], as: UTF8.self),
                  !type.contains("\n")
            else { throw .invalidPEM("a BEGIN line is not closed by -----") }
            let bodyStart = typeEnd + dashes.count
            guard let endLine = find(end, in: bytes, from: bodyStart) else {
                throw .invalidPEM("the \(type) block has no END line (the file is truncated)")
            }
            let endTypeStart = endLine + end.count
            let expected = Array(type.utf8) + dashes
            guard bytes.count - endTypeStart >= expected.count,
                  Array(bytes[endTypeStart..<(endTypeStart + expected.count)]) == expected
            else { throw .invalidPEM("the \(type) block ends with an END line of another type") }
            if find(Array(":".utf8), in: UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<endLine]), from: 0) != nil {
                throw .invalidPEM("the \(type) block has header lines (an encrypted legacy key); decrypt it first: openssl pkey -in KEY -out PLAIN.pem")
            }
            let der = try base64(UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<endLine]), type: type)
            result.append(Block(type: type, der: der))
            offset = endTypeStart + expected.count
        }
        if result.isEmpty {
            if find(end, in: bytes, from: 0) != nil { throw .invalidPEM("an END line without its BEGIN line (the file is truncated)") }
            throw .invalidPEM("no -----BEGIN block found")
        }
        return result
    }

    private static func find(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard needle.count > 0, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var index = start
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0] {
                var matched = true
                for offset in 1..<needle.count where haystack[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }

    /// Decodes base64, skipping whitespace; padding only at the end.
    private static func base64(_ text: UnsafeRawBufferPointer, type: String) throws(IdentityError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text {
            let value: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                guard padding <= 2 else { throw .invalidPEM("bad base64 padding in the \(type) block") }
                continue
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"):
                continue
            default:
                throw .invalidPEM("a byte that is not base64 in the \(type) block")
            }
            guard padding == 0 else { throw .invalidPEM("base64 continues after its padding in the \(type) block") }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        accumulator = 0
        // Whole base64 quanta only: 4 characters give 3 bytes; a truncated last line shows here.
        let characters = (output.count * 8 + bits) / 6
        guard (characters + padding) % 4 == 0, bits < 6 else {
            IdentityRecord.zero(&output)
            throw .invalidPEM("the base64 of the \(type) block is cut short (the file is truncated)")
        }
        guard !output.isEmpty else { throw .invalidPEM("the \(type) block is empty") }
        return output
    }
}
