#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Stanzas over a pair of descriptors, as the age plugin protocol exchanges them (C2SP
/// age-plugin.md): `-> COMMAND ARGS…`, then the body in canonical base64 lines of 64
/// characters, ended by a shorter line. Both ends of the protocol use it: a client driving
/// `age-plugin-NAME`, and a plugin answering `age`.
package final class StanzaChannel {
    /// Bounds on what the other side may send: bytes per line and per body.
    package static let maxLine = 64 << 10
    package static let maxBody = 1 << 20

    let input: Int32
    let output: Int32
    private let failure: (String) -> AgeError
    private let peerStoppedReading: String
    private let peerEnded: String
    private var buffer = [UInt8]()

    /// - Parameters:
    ///   - input: Read from (not closed here).
    ///   - output: Written to (not closed here).
    ///   - failure: Makes the error thrown for a failure described by its argument.
    ///   - peerStoppedReading: Says that the other side no longer reads (a write failed).
    ///   - peerEnded: Says that the other side ended before the protocol did (end of input).
    package init(input: Int32, output: Int32, failure: @escaping (String) -> AgeError,
                 peerStoppedReading: String, peerEnded: String) {
        self.input = input
        self.output = output
        self.failure = failure
        self.peerStoppedReading = peerStoppedReading
        self.peerEnded = peerEnded
    }

    deinit { wipe() }

    /// Zeroes what was read and not yet consumed.
    package func wipe() {
        Scrub.zero(buffer)
        buffer = []
    }

    /// Writes one stanza (its bytes are zeroed after the write: a body may be a file key).
    package func send(_ command: String, _ arguments: [String], body: [UInt8] = []) throws(AgeError) {
        var bytes = AgeStanza(type: command, arguments: arguments, body: body).encoded()
        defer { Scrub.zero(bytes); bytes = [] }
        try bytes.withBytes { (raw: UnsafeRawBufferPointer) throws(AgeError) in
            var offset = 0
            while offset < raw.count {
                let n = write(output, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { throw failure(peerStoppedReading) }
                offset += n
            }
        }
    }

    private func readLine() throws(AgeError) -> [UInt8] {
        for _ in 0..<(Self.maxLine / 512 + 2) {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                for index in 0...newline { buffer[index] = 0 }
                buffer.removeSubrange(...newline)
                return line
            }
            guard buffer.count <= Self.maxLine else { throw failure("sent a line longer than \(Self.maxLine) bytes") }
            var chunk = [UInt8](repeating: 0, count: 4096)
            var n = 0
            repeat { n = read(input, &chunk, chunk.count) } while n < 0 && errno == EINTR
            if n <= 0 { throw failure(peerEnded) }
            buffer += chunk[0..<n]
            Scrub.zero(chunk)
        }
        throw failure("sent a line longer than \(Self.maxLine) bytes")
    }

    /// Reads one stanza: `-> COMMAND ARGS…` and its base64 body, up to the short line.
    package func receive() throws(AgeError) -> AgeStanza {
        let first = try readLine()
        guard first.starts(with: Array("-> ".utf8)) else { throw failure("sent a line that is not a stanza") }
        var arguments = [String]()
        for argument in first.dropFirst(3).split(separator: 0x20, omittingEmptySubsequences: false) {
            guard !argument.isEmpty, argument.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
                throw failure("sent a stanza with an empty or non-printable argument")
            }
            arguments.append(String(decoding: argument, as: UTF8.self))
        }
        guard let type = arguments.first else { throw failure("sent a stanza without a command") }
        var body = [UInt8]()
        for _ in 0...(Self.maxBody / 48 + 1) {
            let line = try readLine()
            defer { Scrub.zero(line) }
            guard line.count <= 64, let decoded = AgeBase64.decode(line) else { throw failure("sent a body line that is not canonical base64") }
            body += decoded
            Scrub.zero(decoded)
            guard body.count <= Self.maxBody else { throw failure("sent a body larger than \(Self.maxBody) bytes") }
            if line.count < 64 { return AgeStanza(type: type, arguments: Array(arguments.dropFirst()), body: body) }
        }
        throw failure("sent a body larger than \(Self.maxBody) bytes")
    }
}
