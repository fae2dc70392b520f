import AgeCommandLine
import Foundation
import SecureFoundation

/// `--json` output (docs/CLI.md, "JSON output"): one JSON object and a newline on standard
/// output, keys sorted, dates in ISO 8601 (UTC), every object with `"version": 1`, the version
/// of its schema. Fields that do not apply are left out. Secrets never appear, except the
/// password that `keychain find-generic-password -w --json` is asked for.
enum JSONOutput {
    /// The schema version every `--json` object carries.
    static let schemaVersion = 1

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    /// Writes `value` as one line of JSON on standard output.
    static func write<T: Encodable>(_ value: T) throws {
        var bytes = [UInt8](try encoder().encode(value))
        bytes.append(0x0A)
        try CLI.writeStdout(bytes)
    }

    /// Writes `value` with one more string member, `key`, whose value is `secret` (UTF-8 text),
    /// escaped straight from the secret's bytes so that no copy of it is made in a String.
    /// - Throws: ``CLIFailure`` when the secret is not UTF-8 text (it has no JSON form).
    static func write<T: Encodable>(_ value: T, adding key: String, secret: SecretBytes) throws {
        let object = [UInt8](try encoder().encode(value))
        guard object.last == UInt8(ascii: "}") else { throw CLIFailure("internal error: not a JSON object") }
        let valid = secret.withUnsafeBytes { isUTF8(UnsafeRawBufferPointer($0)) }
        guard valid else { throw CLIFailure("the \(key) is not UTF-8 text and has no JSON form: print it with -w alone") }
        // Keys stay sorted only when `key` sorts last; the caller picks such a key.
        var head = Array(object.dropLast())
        head += Array(((object.count > 2 ? "," : "") + "\"\(key)\":\"").utf8)
        try CLI.writeStdout(head)
        let length = secret.withUnsafeBytes { source in source.reduce(0) { $0 + escape($1) { _ in } } }
        let escaped = SecretBytes(count: length) { target in
            var offset = 0
            secret.withUnsafeBytes { source in
                for byte in source { _ = escape(byte) { target[offset] = $0; offset += 1 } }
            }
        }
        defer { escaped.wipe() }
        try escaped.withUnsafeBytes { try CLI.writeStdout(UnsafeRawBufferPointer($0)) }
        try CLI.writeStdout(Array("\"}\n".utf8))
    }

    /// Emits the JSON string form of one byte of UTF-8 text; returns how many bytes it emitted.
    @discardableResult
    static func escape(_ byte: UInt8, _ emit: (UInt8) -> Void) -> Int {
        func text(_ string: StaticString) -> Int {
            string.withUTF8Buffer { for out in $0 { emit(out) }; return $0.count }
        }
        switch byte {
        case UInt8(ascii: "\""): return text("\\\"")
        case UInt8(ascii: "\\"): return text("\\\\")
        case 0x0A: return text("\\n")
        case 0x0D: return text("\\r")
        case 0x09: return text("\\t")
        case 0..<0x20, 0x7F:
            let hex: StaticString = "0123456789abcdef"
            _ = text("\\u00")
            hex.withUTF8Buffer { emit($0[Int(byte >> 4)]); emit($0[Int(byte & 0x0F)]) }
            return 6
        default: emit(byte); return 1
        }
    }

    /// Whether `bytes` are well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < bytes.count {
            let first = bytes[index]
            let length: Int
            var minimum: UInt32
            var scalar: UInt32
            switch first {
            case 0x00...0x7F: index += 1; continue
            case 0xC2...0xDF: length = 2; minimum = 0x80; scalar = UInt32(first & 0x1F)
            case 0xE0...0xEF: length = 3; minimum = 0x800; scalar = UInt32(first & 0x0F)
            case 0xF0...0xF4: length = 4; minimum = 0x10000; scalar = UInt32(first & 0x07)
            default: return false
            }
            guard index + length <= bytes.count else { return false }
            for offset in 1..<length {
                let next = bytes[index + offset]
                guard next & 0xC0 == 0x80 else { return false }
                scalar = scalar << 6 | UInt32(next & 0x3F)
            }
            guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return false }
            index += length
        }
        return true
    }
}
