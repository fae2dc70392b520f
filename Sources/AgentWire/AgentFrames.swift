#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Cipher
import Age

/// The unlock agent's frames and what the age plugin sends, below the vault's meaning (the
/// agent's protocol is documented on UnlockAgent's `AgentProtocol`, which reads and writes its
/// frames through these): every message is a 4-byte big-endian length (at most
/// ``maximumFrame``), then that many bytes; a request is `version (1) ‖ operation (1) ‖
/// payload`, a response `status (0 ok, 1 error) ‖ payload`, an error's payload the JSON of
/// ``WireError``. Here so that the front program's age plugin, which links no Vault, speaks
/// the same protocol through the same code as every other client.
package enum AgentFrames {
    /// The protocol version every request starts with.
    package static let version: UInt8 = 1
    /// The largest frame either side accepts (64 KiB: 16 answers of up to 4 KiB fit).
    package static let maximumFrame = 64 * 1024
    /// The operation code of an unwrap request (UnlockAgent's `AgentProtocol.Operation.unwrapFileKey`).
    package static let unwrapFileKey: UInt8 = 7
    /// What an agent with all its connection slots taken answers before reading a request.
    package static let busyMessage = "the agent is busy; try again"

    /// At most this many stanzas go in one unwrap request (the `X25519` and class stanzas of one header).
    package static let maximumUnwrapStanzas = 64

    /// The payload of an ``unwrapFileKey`` request. Each stanza is
    /// `type (1-byte length) ‖ argument count (1) ‖ arguments (1-byte length each) ‖ body (4-byte length)`.
    /// - Throws: ``AgentWireError/protocolViolation(_:)`` for too many stanzas or an over-long field.
    package static func unwrapRequest(onlyClass: String?, stanzas: [AgeStanza]) throws -> [UInt8] {
        guard stanzas.count <= maximumUnwrapStanzas else {
            throw AgentWireError.protocolViolation("a header with \(stanzas.count) stanzas of a protection class; at most \(maximumUnwrapStanzas)")
        }
        var writer = ByteWriter([version, unwrapFileKey])
        do {
            try writer.shortField(Array((onlyClass ?? "").utf8), "class name")
            writer.byte(UInt8(stanzas.count))
            for stanza in stanzas {
                try writer.shortField(Array(stanza.type.utf8), "stanza type")
                guard stanza.arguments.count <= 255 else { throw AgentWireError.protocolViolation("a stanza with \(stanza.arguments.count) arguments") }
                writer.byte(UInt8(stanza.arguments.count))
                for argument in stanza.arguments { try writer.shortField(Array(argument.utf8), "stanza argument") }
                writer.field(stanza.body)
            }
        } catch let error as CipherError {
            throw AgentWireError.protocolViolation("\(error)")
        }
        guard writer.bytes.count <= maximumFrame else { throw AgentWireError.protocolViolation("an unwrap request of \(writer.bytes.count) bytes") }
        return writer.bytes
    }

    /// Reads an ``unwrapFileKey`` request (the whole frame, version and operation included).
    /// - Throws: ``AgentWireError/protocolViolation(_:)`` for anything malformed or trailing.
    package static func parseUnwrapRequest(_ frame: [UInt8]) throws -> (onlyClass: String?, stanzas: [AgeStanza]) {
        var reader = ByteReader(frame)
        do {
            _ = try reader.take(2)
            let name = String(decoding: try reader.shortField("class name"), as: UTF8.self)
            let count = Int(try reader.byte("stanza count"))
            guard count <= maximumUnwrapStanzas else { throw AgentWireError.protocolViolation("an unwrap request with \(count) stanzas") }
            var stanzas = [AgeStanza]()
            for _ in 0..<count {
                let type = String(decoding: try reader.shortField("stanza type"), as: UTF8.self)
                let argumentCount = Int(try reader.byte("argument count"))
                var arguments = [String]()
                for _ in 0..<argumentCount { arguments.append(String(decoding: try reader.shortField("stanza argument"), as: UTF8.self)) }
                let body = Array(try reader.field("stanza body", maximum: maximumFrame))
                stanzas.append(AgeStanza(type: type, arguments: arguments, body: body))
            }
            guard reader.remaining == 0 else { throw AgentWireError.protocolViolation("trailing bytes after the stanzas") }
            return (name.isEmpty ? nil : name, stanzas)
        } catch let error as CipherError {
            throw AgentWireError.protocolViolation("a malformed unwrap request: \(error)")
        }
    }

    /// Writes one frame holding `body`.
    package static func writeFrame(_ fd: Int32, _ body: UnsafeRawBufferPointer) throws {
        guard body.count <= maximumFrame else { throw AgentWireError.protocolViolation("a message of \(body.count) bytes is too large") }
        var header = ByteWriter(capacity: 4)
        header.uint32(UInt32(body.count))
        try header.bytes.withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
        if body.count > 0 { try UnixSocket.writeAll(fd, body) }
    }

    package static func writeFrame(_ fd: Int32, _ body: [UInt8]) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    package static func writeFrame(_ fd: Int32, _ body: SecretBytes) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    /// Reads one frame into locked memory; refuses a length over ``maximumFrame`` before reading
    /// it. With a `deadline` (``UnixSocket/monotonicNow()``) the whole frame must have arrived by
    /// then; without one, each read waits for the socket's receive timeout.
    package static func readFrame(_ fd: Int32, deadline: Double? = nil) throws -> SecretBytes {
        var header = [UInt8](repeating: 0, count: 4)
        try header.withUnsafeMutableBytes { try UnixSocket.readExactly(fd, into: $0, deadline: deadline) }
        var reader = ByteReader(header)
        let length = Int(try reader.uint32("frame length"))
        guard length <= maximumFrame else {
            throw AgentWireError.protocolViolation("a message of \(length) bytes is larger than the \(maximumFrame) allowed")
        }
        return try SecretBytes(count: length) { try UnixSocket.readExactly(fd, into: $0, deadline: deadline) }
    }

    /// A status-0 answer with `payload`.
    package static func okResponse(_ payload: [UInt8] = []) -> [UInt8] { [0] + payload }

    /// A status-1 answer: the JSON of `error`.
    package static func errorResponse(_ error: WireError) -> [UInt8] {
        [1] + ((try? JSONEncoder().encode(error)).map { [UInt8]($0) } ?? [])
    }
}

/// An error as it crosses the socket: its kind (the vault's or the protected files' case, or
/// `other`, `protocol`, `refused`), its message as the agent prints it, and the fields the
/// client needs to rebuild the typed error (UnlockAgent's `WireError.error`).
package struct WireError: Codable, Sendable, Equatable, CustomStringConvertible {
    package var kind: String
    package var message: String
    package var failures: Int?
    package var seconds: Int64?
    package var accessibility: String?
    package var reason: String?

    package init(kind: String, message: String, failures: Int? = nil, seconds: Int64? = nil, accessibility: String? = nil, reason: String? = nil) {
        self.kind = kind
        self.message = message
        self.failures = failures
        self.seconds = seconds
        self.accessibility = accessibility
        self.reason = reason
    }

    package static func seconds(_ duration: Duration?) -> Int64? { duration.map { $0.components.seconds } }

    /// The kinds that carry the vault's or the protected files' own error (its message is theirs).
    static let typedKinds: Set<String> = [
        "wrongPasscode", "wrongAnswers", "tooManyAttempts", "attemptRecordDamaged", "erased", "notSetUp", "locked",
        "noPasscode", "noSecurityQuestions", "wrongTokenPIN", "tokenPINUnavailable", "notProtectedFile", "tampered", "invalidArgument",
    ]
    /// The reasons a class can be unavailable for (Vault's `ClassKeyUnavailableReason`).
    static let unavailableReasons: Set<String> = ["locked", "noFirstUnlockYet", "notSetUp", "deviceKeyMissing"]

    /// The message a client prints for it, as UnlockAgent's `AgentError` prints the error the
    /// client rebuilds from it: the vault's or the protected files' own message for their
    /// kinds (a class unavailable only with a class and a known reason), the plumbing's words
    /// for `protocol` and `refused`, and "the unlock agent reported: …" for anything else.
    package var description: String {
        switch kind {
        case _ where Self.typedKinds.contains(kind): return message
        case _ where (kind == "classKeyUnavailable" || kind == "fileClassUnavailable")
            && accessibility != nil && Self.unavailableReasons.contains(reason ?? ""):
            return message
        case "protocol": return "unlock agent protocol error: \(message)"
        case "refused": return "the unlock agent refused the connection: \(message)"
        default: return "the unlock agent reported: \(message)"
        }
    }
}
