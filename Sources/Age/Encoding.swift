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

/// Bech32 (BIP 173) without the 90-character length limit, as age uses it for keys.
enum Bech32 {
    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (index, c) in charset.enumerated() { table[Int(c)] = Int8(index) }
        return table
    }()
    private static let generator: [UInt32] = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        var checksum: UInt32 = 1
        for value in values {
            let top = checksum >> 25
            checksum = (checksum & 0x1ffffff) << 5 ^ UInt32(value)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 { checksum ^= generator[i] }
        }
        return checksum
    }

    private static func hrpExpand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    /// Regroups bits: 8→5 with padding when encoding, 5→8 strictly when decoding.
    static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var accumulator = 0, bits = 0
        var result = [UInt8]()
        result.reserveCapacity(data.count * from / to + 1)
        let maxValue = (1 << to) - 1
        for value in data {
            guard Int(value) >> from == 0 else { return nil }
            accumulator = (accumulator << from) | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                result.append(UInt8((accumulator >> bits) & maxValue))
            }
            accumulator &= (1 << bits) - 1
        }
        if pad {
            if bits > 0 { result.append(UInt8((accumulator << (to - bits)) & maxValue)) }
        } else if bits >= from || ((accumulator << (to - bits)) & maxValue) != 0 {
            return nil
        }
        return result
    }

    /// Encodes `data` under the lowercase human-readable part `hrp`; uppercased on request.
    static func encode(hrp: String, data: [UInt8], uppercase: Bool = false) -> [UInt8] {
        let hrpBytes = Array(hrp.lowercased().utf8)
        let values = convertBits(data, from: 8, to: 5, pad: true) ?? []
        let mod = polymod(hrpExpand(hrpBytes) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        var out = hrpBytes + [0x31]
        out.reserveCapacity(hrpBytes.count + 1 + values.count + 6)
        for v in values { out.append(charset[Int(v)]) }
        for i in 0..<6 { out.append(charset[Int((mod >> UInt32(5 * (5 - i))) & 31)]) }
        if uppercase { out = out.map { ($0 >= 0x61 && $0 <= 0x7a) ? $0 - 0x20 : $0 } }
        return out
    }

    /// Decodes a Bech32 string (all lowercase or all uppercase): the lowercase HRP and the data.
    static func decode(_ input: UnsafeRawBufferPointer) -> (hrp: String, data: [UInt8])? {
        var lower = false, upper = false
        for c in input {
            guard c >= 33 && c <= 126 else { return nil }
            if c >= 0x61 && c <= 0x7a { lower = true }
            if c >= 0x41 && c <= 0x5a { upper = true }
        }
        guard !(lower && upper) else { return nil }
        let bytes = input.map { ($0 >= 0x41 && $0 <= 0x5a) ? $0 + 0x20 : $0 }
        guard let separator = bytes.lastIndex(of: 0x31), separator >= 1, bytes.count - separator - 1 >= 6 else { return nil }
        let hrp = Array(bytes[..<separator])
        var values = [UInt8]()
        values.reserveCapacity(bytes.count - separator - 1)
        for c in bytes[(separator + 1)...] {
            guard c < 128, reverse[Int(c)] >= 0 else { return nil }
            values.append(UInt8(reverse[Int(c)]))
        }
        guard polymod(hrpExpand(hrp) + values) == 1 else { return nil }
        guard let data = convertBits(Array(values.dropLast(6)), from: 5, to: 8, pad: false) else { return nil }
        return (String(decoding: hrp, as: UTF8.self), data)
    }

    static func decode(_ string: String) -> (hrp: String, data: [UInt8])? {
        Array(string.utf8).withUnsafeBytes { decode($0) }
    }
}

/// Standard base64 (RFC 4648 §4) as age uses it: unpadded, canonical.
enum AgeBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let decodeTable: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (index, c) in alphabet.enumerated() { table[Int(c)] = Int8(index) }
        return table
    }()

    /// Encodes without padding when `padded` is false.
    static func encode(_ data: UnsafeRawBufferPointer, padded: Bool = false) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity((data.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= data.count {
            let v = UInt32(data[i]) << 16 | UInt32(data[i + 1]) << 8 | UInt32(data[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)]); out.append(alphabet[Int(v & 63)])
            i += 3
        }
        let rest = data.count - i
        if rest == 1 {
            let v = UInt32(data[i]) << 16
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
            if padded { out.append(0x3d); out.append(0x3d) }
        } else if rest == 2 {
            let v = UInt32(data[i]) << 16 | UInt32(data[i + 1]) << 8
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            if padded { out.append(0x3d) }
        }
        return out
    }

    static func encode(_ data: [UInt8], padded: Bool = false) -> [UInt8] {
        data.withUnsafeBytes { encode($0, padded: padded) }
    }

    static func encodeString(_ data: [UInt8]) -> String { String(decoding: encode(data), as: UTF8.self) }

    /// Decodes canonical base64. With `padded` false, `=` is refused; with `padded` true, the
    /// input length must be a multiple of 4 with correct padding. Non-zero unused bits are refused.
    static func decode<C: Collection>(_ input: C, padded: Bool = false) -> [UInt8]? where C.Element == UInt8 {
        var chars = Array(input)
        if padded {
            guard chars.count % 4 == 0 else { return nil }
            var pad = 0
            while pad < 2, let last = chars.last, last == 0x3d { chars.removeLast(); pad += 1 }
            if pad > 0 && chars.count % 4 != 4 - pad { return nil }
        }
        guard chars.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count * 3 / 4)
        var accumulator: UInt32 = 0, bits = 0
        for c in chars {
            let v = decodeTable[Int(c)]
            guard v >= 0 else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Canonical: the leftover bits must be zero.
        guard accumulator == 0 else { return nil }
        return out
    }
}
