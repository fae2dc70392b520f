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

/// Strict PEM armor (RFC 7468 §3) with the label `AGE ENCRYPTED FILE`.
enum Armor {
    static let begin = Array("-----BEGIN AGE ENCRYPTED FILE-----".utf8)
    static let end = Array("-----END AGE ENCRYPTED FILE-----".utf8)
    static let lineChars = 64
    static let lineBytes = 48

    static func isWhitespace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
    /// The most whitespace accepted before the BEGIN line and after the END line, as age's
    /// reference implementation (more before, or 1024 bytes or more after, is refused).
    static let maxWhitespace = 1024
}

/// Streams bytes into armored text: 64-column padded base64 lines between BEGIN and END.
final class ArmorEncoder {
    private var pending = [UInt8]()
    private var started = false

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var out = [UInt8]()
        if !started {
            started = true
            out += Armor.begin
            out.append(0x0A)
        }
        var offset = 0
        if !pending.isEmpty {
            let take = min(Armor.lineBytes - pending.count, bytes.count)
            pending += UnsafeRawBufferPointer(rebasing: bytes[0..<take])
            offset = take
            if pending.count == Armor.lineBytes {
                out += AgeBase64.encode(pending, padded: true)
                out.append(0x0A)
                pending.removeAll(keepingCapacity: true)
            }
        }
        out.reserveCapacity(out.count + (bytes.count - offset) / Armor.lineBytes * (Armor.lineChars + 1))
        while bytes.count - offset >= Armor.lineBytes {
            out += AgeBase64.encode(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + Armor.lineBytes)]), padded: true)
            out.append(0x0A)
            offset += Armor.lineBytes
        }
        if offset < bytes.count { pending += UnsafeRawBufferPointer(rebasing: bytes[offset...]) }
        if !out.isEmpty { try out.withUnsafeBytes { try sink($0) } }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var out = [UInt8]()
        if !started { out += Armor.begin; out.append(0x0A); started = true }
        if !pending.isEmpty {
            out += AgeBase64.encode(pending, padded: true)
            out.append(0x0A)
            pending.removeAll()
        }
        out += Armor.end
        out.append(0x0A)
        try out.withUnsafeBytes { try sink($0) }
    }
}

/// Strict streaming armor decoder: as age's reference implementation, only whole lines of
/// whitespace before the BEGIN line (up to 1024 bytes; the BEGIN line itself starts in column
/// one) and only whitespace after the END line (under 1024 bytes); no headers; every line 64
/// columns but the last (1...64); canonical padded base64; LF or CRLF line ends.
final class ArmorDecoder {
    private enum State { case leading, data, trailing }
    private var state = State.leading
    private var line = [UInt8]()
    private var sawFinalLine = false
    private var lines = 0
    /// Whitespace bytes seen before the BEGIN line, or after the END line.
    private var whitespace = 0
    /// Whether the current leading line holds anything but whitespace.
    private var lineHasText = false

    func update(_ bytes: UnsafeRawBufferPointer, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        for c in bytes {
            switch state {
            case .leading:
                if c == 0x0A {
                    if lineHasText {
                        try beginLine()
                    } else {
                        whitespace += line.count + 1
                        if whitespace > Armor.maxWhitespace {
                            throw AgeError.armorFailure("more than \(Armor.maxWhitespace) bytes of whitespace before the BEGIN line")
                        }
                    }
                    line.removeAll(keepingCapacity: true)
                    lineHasText = false
                } else {
                    line.append(c)
                    if !Armor.isWhitespace(c) { lineHasText = true }
                    if lineHasText && line.count > Armor.begin.count + 1 {
                        throw AgeError.armorFailure("the first line is not -----BEGIN AGE ENCRYPTED FILE----- (starting in the first column)")
                    }
                    if !lineHasText && whitespace + line.count > Armor.maxWhitespace {
                        throw AgeError.armorFailure("more than \(Armor.maxWhitespace) bytes of whitespace before the BEGIN line")
                    }
                }
            case .data:
                if c == 0x0A {
                    try dataLine(sink: sink)
                    line.removeAll(keepingCapacity: true)
                } else {
                    line.append(c)
                    if line.count > Armor.end.count + 1 && line.count > Armor.lineChars + 1 {
                        throw AgeError.armorFailure("a line is longer than 64 columns")
                    }
                }
            case .trailing:
                guard Armor.isWhitespace(c) else { throw AgeError.armorFailure("data follows the END line") }
                whitespace += 1
                if whitespace >= Armor.maxWhitespace {
                    throw AgeError.armorFailure("\(Armor.maxWhitespace) bytes or more of whitespace after the END line")
                }
            }
        }
    }

    func finish(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch state {
        case .leading:
            throw AgeError.armorFailure(lineHasText ? "the armor has no data and no END line" : "the armored input is empty")
        case .data:
            // The END line may lack its final newline.
            if stripCR(line) == Armor.end[...] {
                try endLine()
            } else {
                throw AgeError.armorFailure("the armor has no -----END AGE ENCRYPTED FILE----- line")
            }
        case .trailing:
            break
        }
    }

    private func stripCR(_ l: [UInt8]) -> ArraySlice<UInt8> {
        l.last == 0x0D ? l.dropLast() : l[...]
    }

    private func beginLine() throws {
        guard stripCR(line) == Armor.begin[...] else {
            throw AgeError.armorFailure("the first line is not -----BEGIN AGE ENCRYPTED FILE----- (starting in the first column)")
        }
        state = .data
    }

    private func endLine() throws {
        state = .trailing
        whitespace = 0
    }

    private func dataLine(sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let content = stripCR(line)
        if content == Armor.end[...] { return try endLine() }
        guard !sawFinalLine else { throw AgeError.armorFailure("a short or padded line is not the last line") }
        guard !content.isEmpty else { throw AgeError.armorFailure("an empty line inside the armor") }
        guard content.count <= Armor.lineChars else { throw AgeError.armorFailure("a line is longer than 64 columns") }
        let padded = content.contains(0x3D)
        if content.count < Armor.lineChars || padded { sawFinalLine = true }
        let decoded: [UInt8]?
        if content.count == Armor.lineChars && !padded {
            decoded = AgeBase64.decode(content)
        } else {
            decoded = AgeBase64.decode(content, padded: true)
        }
        guard let decoded else { throw AgeError.armorFailure("a line is not canonical padded base64") }
        lines += 1
        try decoded.withUnsafeBytes { try sink($0) }
    }
}
