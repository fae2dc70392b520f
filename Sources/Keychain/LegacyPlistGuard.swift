import Foundation

/// Checks an untrusted legacy keychain file before it reaches `PropertyListSerialization`, whose
/// parsers recurse once per level of nesting (a file of a few hundred kilobytes of nested arrays
/// exhausts the stack) and follow object references without bound. The legacy format is at most
/// three levels deep (services, accounts, values), so anything deeper is refused unparsed.
enum LegacyPlistGuard {
    /// The largest legacy file read.
    static let maximumSize = 16 << 20
    /// Root dictionary, account dictionaries, values.
    static let maximumDepth = 3
    /// The most objects a binary property list may declare.
    static let maximumObjects = 4_000_000

    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    static func check(_ bytes: [UInt8]) throws {
        guard bytes.count <= maximumSize else {
            throw Refusal(description: "it is \(bytes.count) bytes, over the \(maximumSize)-byte limit of a legacy keychain")
        }
        if bytes.starts(with: Array("bplist".utf8)) {
            try checkBinary(bytes)
        } else if isXML(bytes) {
            try checkXML(bytes)
        } else {
            // The legacy files are binary or XML; the other text format (OpenStep) has its own
            // parser, which is not handed untrusted input.
            throw Refusal(description: "it is neither a binary nor an XML property list")
        }
    }

    /// Whether the text starts (after a byte-order mark and white space) with an XML declaration,
    /// a document type or a `<plist` element.
    private static func isXML(_ bytes: [UInt8]) -> Bool {
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        let rest = bytes[index...]
        return ["<?xml", "<!DOCTYPE", "<plist"].contains { rest.starts(with: Array($0.utf8)) }
    }

    /// XML: the nesting of `<dict>` and `<array>` elements, counted over the whole text
    /// (conservatively, also inside comments).
    private static func checkXML(_ bytes: [UInt8]) throws {
        var depth = 0
        var index = 0
        let open: [[UInt8]] = [Array("<dict".utf8), Array("<array".utf8)]
        let close: [[UInt8]] = [Array("</dict".utf8), Array("</array".utf8)]
        // A tag name ends at white space, ">" or "/" (XML allows `<array\n>`); `<dict/>` is empty.
        func matches(_ tag: [UInt8]) -> Bool {
            guard index + tag.count < bytes.count, bytes[index..<index + tag.count].elementsEqual(tag) else { return false }
            return [0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ">"), UInt8(ascii: "/")].contains(bytes[index + tag.count])
        }
        func selfClosing() -> Bool {
            var end = index
            while end < bytes.count, bytes[end] != UInt8(ascii: ">") { end += 1 }
            return end > index && end < bytes.count && bytes[end - 1] == UInt8(ascii: "/")
        }
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "<") {
                if open.contains(where: matches), !selfClosing() {
                    depth += 1
                    guard depth <= maximumDepth else {
                        throw Refusal(description: "its dictionaries and arrays nest deeper than \(maximumDepth) levels")
                    }
                } else if close.contains(where: matches) {
                    depth -= 1
                }
            }
            index += 1
        }
    }

    /// Binary (`bplist00`): the trailer, the offset table and every object reachable from the
    /// top object, to the maximum depth, with every reference and offset in range and every
    /// object of a type the legacy format has.
    private static func checkBinary(_ bytes: [UInt8]) throws {
        func refuse(_ why: String) -> Refusal { Refusal(description: "its binary property list \(why)") }
        guard bytes.count >= 8 + 32, bytes.starts(with: Array("bplist00".utf8)) else { throw refuse("is truncated or not version 00") }
        let trailer = bytes.count - 32
        func integer(_ offset: Int, _ size: Int) -> Int? {
            guard size >= 1, size <= 8, offset >= 0, offset + size <= bytes.count else { return nil }
            var value: UInt64 = 0
            for byte in bytes[offset..<offset + size] { value = value << 8 | UInt64(byte) }
            return value > UInt64(Int.max) ? nil : Int(value)
        }
        let offsetSize = Int(bytes[trailer + 6]), refSize = Int(bytes[trailer + 7])
        guard let count = integer(trailer + 8, 8), let top = integer(trailer + 16, 8), let table = integer(trailer + 24, 8),
              (1...8).contains(offsetSize), (1...8).contains(refSize),
              count >= 1, count <= maximumObjects, top < count,
              table >= 8, table <= trailer, count <= (trailer - table) / offsetSize else {
            throw refuse("has an impossible trailer")
        }
        func objectOffset(_ object: Int) throws -> Int {
            guard object >= 0, object < count, let offset = integer(table + object * offsetSize, offsetSize), offset >= 8, offset < table else {
                throw refuse("refers to an object outside the file")
            }
            return offset
        }
        // Depth-first over containers, each (object, depth) at most once per path; the depth bound
        // also ends reference cycles.
        var stack: [(object: Int, depth: Int)] = [(top, 1)]
        var visits = 0
        while let (object, depth) = stack.popLast() {
            visits += 1
            guard visits <= maximumObjects else { throw refuse("has too many object references") }
            let offset = try objectOffset(object)
            let marker = bytes[offset]
            let kind = marker >> 4
            // Only the types a legacy keychain can hold: null/booleans, integers, reals, dates,
            // data, strings, arrays and dictionaries. Sets (0xC) crash the bridging of the
            // parsed list on Linux, and UIDs (0x8) belong to keyed archives, not to this format.
            guard [0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0xA, 0xD].contains(kind) else {
                throw refuse("holds an object of type 0x\(String(kind, radix: 16)) (a set, UID or unknown type), which a legacy keychain never holds")
            }
            guard kind == 0xA || kind == 0xD else { continue }   // not a container
            guard depth <= maximumDepth else { throw refuse("nests containers deeper than \(maximumDepth) levels") }
            var length = Int(marker & 0x0F)
            var start = offset + 1
            if length == 0x0F {
                guard start < table else { throw refuse("has a truncated container length") }
                let lengthMarker = bytes[start]
                let size = 1 << Int(lengthMarker & 0x0F)
                guard lengthMarker >> 4 == 0x1, let value = integer(start + 1, size) else { throw refuse("has a bad container length") }
                length = value
                start += 1 + size
            }
            let references = kind == 0xD ? length * 2 : length
            guard references <= count * 2, start + references * refSize <= table else {
                throw refuse("has a container larger than the file")
            }
            for slot in 0..<references {
                guard let child = integer(start + slot * refSize, refSize), child < count else {
                    throw refuse("refers to an object outside the file")
                }
                stack.append((child, depth + 1))
            }
        }
    }
}
