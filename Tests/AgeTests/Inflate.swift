// A small zlib (RFC 1950) / DEFLATE (RFC 1951) decoder, used only to read the compressed
// vectors of the age test kit.

struct InflateError: Error, CustomStringConvertible {
    let description: String
}

enum Inflate {
    private struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int]
        init(lengths: [Int]) {
            symbols = [Int](repeating: 0, count: lengths.count)
            for l in lengths { counts[l] += 1 }
            counts[0] = 0
            var offsets = [Int](repeating: 0, count: 16)
            for i in 1..<16 { offsets[i] = offsets[i - 1] + counts[i - 1] }
            for (symbol, l) in lengths.enumerated() where l != 0 {
                symbols[offsets[l]] = symbol
                offsets[l] += 1
            }
        }
    }

    private struct Reader {
        let data: [UInt8]
        var position: Int
        var bitBuffer = 0
        var bitCount = 0
        mutating func bits(_ n: Int) throws -> Int {
            while bitCount < n {
                guard position < data.count else { throw InflateError(description: "truncated deflate stream") }
                bitBuffer |= Int(data[position]) << bitCount
                position += 1
                bitCount += 8
            }
            let value = bitBuffer & ((1 << n) - 1)
            bitBuffer >>= n
            bitCount -= n
            return value
        }
        mutating func decode(_ h: Huffman) throws -> Int {
            var code = 0, first = 0, index = 0
            for length in 1..<16 {
                code |= try bits(1)
                let count = h.counts[length]
                if code - count < first { return h.symbols[index + (code - first)] }
                index += count
                first += count
                first <<= 1
                code <<= 1
            }
            throw InflateError(description: "bad Huffman code")
        }
    }

    private static let lengthBase = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
    private static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    private static let distBase = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]
    private static let distExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]

    /// Decodes a zlib stream (2-byte header, deflate data; the Adler-32 trailer is not checked).
    static func zlib(_ data: [UInt8]) throws -> [UInt8] {
        guard data.count >= 2, data[0] & 0x0F == 8, (Int(data[0]) << 8 | Int(data[1])) % 31 == 0 else {
            throw InflateError(description: "not a zlib stream")
        }
        var reader = Reader(data: data, position: 2)
        var out = [UInt8]()
        var final = false
        while !final {
            final = try reader.bits(1) == 1
            let type = try reader.bits(2)
            switch type {
            case 0:
                reader.bitBuffer = 0; reader.bitCount = 0
                guard reader.position + 4 <= data.count else { throw InflateError(description: "truncated stored block") }
                let len = Int(data[reader.position]) | Int(data[reader.position + 1]) << 8
                reader.position += 4
                guard reader.position + len <= data.count else { throw InflateError(description: "truncated stored block") }
                out += data[reader.position..<(reader.position + len)]
                reader.position += len
            case 1, 2:
                let lit: Huffman, dist: Huffman
                if type == 1 {
                    var lengths = [Int](repeating: 8, count: 288)
                    for i in 144..<256 { lengths[i] = 9 }
                    for i in 256..<280 { lengths[i] = 7 }
                    lit = Huffman(lengths: lengths)
                    dist = Huffman(lengths: [Int](repeating: 5, count: 30))
                } else {
                    let nlen = try reader.bits(5) + 257, ndist = try reader.bits(5) + 1, ncode = try reader.bits(4) + 4
                    let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
                    var codeLengths = [Int](repeating: 0, count: 19)
                    for i in 0..<ncode { codeLengths[order[i]] = try reader.bits(3) }
                    let codeHuffman = Huffman(lengths: codeLengths)
                    var lengths = [Int]()
                    while lengths.count < nlen + ndist {
                        let symbol = try reader.decode(codeHuffman)
                        switch symbol {
                        case 0..<16: lengths.append(symbol)
                        case 16:
                            guard let last = lengths.last else { throw InflateError(description: "repeat with no length") }
                            lengths += [Int](repeating: last, count: 3 + (try reader.bits(2)))
                        case 17: lengths += [Int](repeating: 0, count: 3 + (try reader.bits(3)))
                        default: lengths += [Int](repeating: 0, count: 11 + (try reader.bits(7)))
                        }
                    }
                    lit = Huffman(lengths: Array(lengths[0..<nlen]))
                    dist = Huffman(lengths: Array(lengths[nlen..<(nlen + ndist)]))
                }
                while true {
                    let symbol = try reader.decode(lit)
                    if symbol < 256 { out.append(UInt8(symbol)); continue }
                    if symbol == 256 { break }
                    let li = symbol - 257
                    guard li < 29 else { throw InflateError(description: "bad length symbol") }
                    let length = lengthBase[li] + (try reader.bits(lengthExtra[li]))
                    let di = try reader.decode(dist)
                    guard di < 30 else { throw InflateError(description: "bad distance symbol") }
                    let distance = distBase[di] + (try reader.bits(distExtra[di]))
                    guard distance <= out.count else { throw InflateError(description: "distance too far back") }
                    let start = out.count - distance
                    for k in 0..<length { out.append(out[start + k]) }
                }
            default:
                throw InflateError(description: "reserved block type")
            }
        }
        return out
    }
}
