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

/// One recipient stanza of an age header: `-> TYPE ARG...` and a binary body.
public struct AgeStanza: Sendable, Hashable {
    /// The first argument, naming the recipient type (`X25519`, `scrypt`, `mlkem768x25519`, ...).
    public var type: String
    /// The remaining arguments.
    public var arguments: [String]
    /// The decoded body.
    public var body: [UInt8]

    /// Creates a stanza.
    /// - Parameters:
    ///   - type: The recipient type, the first argument on the `->` line.
    ///   - arguments: The further arguments (each non-empty printable ASCII without spaces).
    ///   - body: The body bytes, base64-encoded in the header.
    public init(type: String, arguments: [String], body: [UInt8]) {
        self.type = type
        self.arguments = arguments
        self.body = body
    }

    /// The stanza's header text, ending with the short final body line.
    func encoded() -> [UInt8] {
        var out = Array("->".utf8)
        for argument in [type] + arguments { out.append(0x20); out += Array(argument.utf8) }
        out.append(0x0A)
        let text = AgeBase64.encode(body)
        var index = 0
        while true {
            let end = min(index + 64, text.count)
            out += text[index..<end]
            out.append(0x0A)
            if end - index < 64 { break }
            index = end
        }
        return out
    }
}

/// The parsed age header.
struct AgeHeader {
    static let versionLine = Array("age-encryption.org/v1\n".utf8)
    var stanzas: [AgeStanza]
    /// The header bytes up to and including `---`, which the MAC covers.
    var macInput: [UInt8]
    var mac: [UInt8]

    /// HMAC key = HKDF-SHA-256(file key, salt empty, info "header").
    static func computeMAC(fileKey: SecretBytes, macInput: [UInt8]) -> [UInt8] {
        let key = KeyDerivation.hkdf(fileKey, info: "header")
        defer { key.wipe() }
        let code = HMAC<SHA256>.authenticationCode(for: macInput, using: key.symmetricKey)
        return Array(code)
    }

    /// The full header text for `stanzas`, MAC included.
    static func encode(stanzas: [AgeStanza], fileKey: SecretBytes) -> [UInt8] {
        var out = versionLine
        for stanza in stanzas { out += stanza.encoded() }
        out += Array("---".utf8)
        let mac = computeMAC(fileKey: fileKey, macInput: out)
        out.append(0x20)
        out += AgeBase64.encode(mac)
        out.append(0x0A)
        return out
    }
}

/// Incremental, strict header parser: feed bytes until it reports the header complete.
struct AgeHeaderParser {
    /// Lines longer than this are refused (the post-quantum stanza line is about 1.5 KB).
    static let maxLineLength = 1 << 20
    /// Headers larger than this are refused.
    static let maxHeaderLength = 16 << 20

    private enum State { case version, stanzaOrEnd, body }
    private var state = State.version
    private var line = [UInt8]()
    private var raw = [UInt8]()
    private var stanzas = [AgeStanza]()
    private var currentArguments = [String]()
    private var currentBody = [UInt8]()
    private(set) var header: AgeHeader?

    /// Consumes bytes from `input` up to the end of the header.
    /// - Returns: The number of bytes consumed (less than `input.count` once the header ends).
    mutating func feed(_ input: UnsafeRawBufferPointer) throws(AgeError) -> Int {
        var consumed = 0
        while header == nil && consumed < input.count {
            let byte = input[consumed]
            consumed += 1
            line.append(byte)
            if line.count > Self.maxLineLength { throw AgeError.headerFailure("a header line is longer than \(Self.maxLineLength) bytes") }
            if byte == 0x0A {
                try processLine()
                line.removeAll(keepingCapacity: true)
            }
        }
        return consumed
    }

    /// Called at end of input: throws unless the header is complete.
    func finish() throws(AgeError) {
        if header == nil {
            if raw.isEmpty && line.isEmpty { throw AgeError.headerFailure("the input is empty") }
            if state == .version { throw AgeError.headerFailure("the input does not start with age-encryption.org/v1 (not an age file)") }
            throw AgeError.headerFailure("the header ends before its MAC line")
        }
    }

    private mutating func processLine() throws(AgeError) {
        raw += line
        if raw.count > Self.maxHeaderLength { throw AgeError.headerFailure("the header is larger than \(Self.maxHeaderLength) bytes") }
        let content = line.dropLast()  // without LF
        switch state {
        case .version:
            guard line == AgeHeader.versionLine else {
                if line.starts(with: Array("age-encryption.org/".utf8)) {
                    throw AgeError.headerFailure("unsupported version \(String(decoding: content.dropFirst(19), as: UTF8.self).debugDescription); this library reads age-encryption.org/v1")
                }
                throw AgeError.headerFailure("the input does not start with age-encryption.org/v1 (not an age file, or armored and not detected)")
            }
            state = .stanzaOrEnd
        case .stanzaOrEnd:
            if content.starts(with: Array("---".utf8)) {
                guard stanzas.count >= 1 else { throw AgeError.headerFailure("the header has no recipient stanza") }
                let rest = content.dropFirst(3)
                guard rest.first == 0x20, rest.count == 44 else { throw AgeError.headerFailure("malformed MAC line") }
                guard let mac = AgeBase64.decode(rest.dropFirst()), mac.count == 32 else {
                    throw AgeError.headerFailure("the MAC is not canonical base64 of 32 bytes")
                }
                let macInput = Array(raw.dropLast(line.count)) + Array("---".utf8)
                header = AgeHeader(stanzas: stanzas, macInput: macInput, mac: mac)
            } else if content.starts(with: Array("-> ".utf8)) {
                let arguments = content.dropFirst(3).split(separator: 0x20, omittingEmptySubsequences: false)
                guard !arguments.isEmpty else { throw AgeError.headerFailure("a stanza has no arguments") }
                var strings = [String]()
                for argument in arguments {
                    guard !argument.isEmpty else { throw AgeError.headerFailure("a stanza has an empty argument") }
                    guard argument.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
                        throw AgeError.headerFailure("a stanza argument has a character outside printable ASCII")
                    }
                    strings.append(String(decoding: argument, as: UTF8.self))
                }
                currentArguments = strings
                currentBody = []
                state = .body
            } else {
                throw AgeError.headerFailure("expected a stanza (`-> `) or the MAC line (`--- `)")
            }
        case .body:
            guard content.count <= 64 else { throw AgeError.headerFailure("a stanza body line is longer than 64 columns") }
            guard let decoded = AgeBase64.decode(content) else {
                throw AgeError.headerFailure("a stanza body line is not canonical unpadded base64")
            }
            currentBody += decoded
            if content.count < 64 {
                stanzas.append(AgeStanza(type: currentArguments[0], arguments: Array(currentArguments.dropFirst()), body: currentBody))
                state = .stanzaOrEnd
            }
        }
    }
}
