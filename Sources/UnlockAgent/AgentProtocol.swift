import Foundation
import Cipher
import Vault
import Age
import ProtectedFiles

/// The agent's wire protocol over a UNIX stream socket.
///
/// Every message is a frame: a 4-byte big-endian length (at most ``maximumFrame``), then that
/// many bytes. A request is `version (1) ‖ operation (1) ‖ payload`; a response is
/// `status (0 ok, 1 error) ‖ payload`, an error's payload being the JSON of ``WireError``.
/// One request per connection, except ``Operation/subscribe``, after which the agent sends one
/// `0 ‖ state` frame per lock-state change until either side closes. Requests holding secrets
/// (an unlock) and responses holding keys are read and built in `SecretBytes`.
enum AgentProtocol {
    static let version: UInt8 = 1
    /// The largest frame either side accepts (64 KiB: 16 answers of up to 4 KiB fit).
    static let maximumFrame = 64 * 1024

    enum Operation: UInt8 {
        /// → JSON ``AgentStatus``.
        case status = 1
        /// `kind (0 passcode, 1 answers) ‖ passcode` or `1 ‖ count (1) ‖ count × (length (2) ‖ answer)` → JSON status.
        case unlock = 2
        /// → empty.
        case lock = 3
        /// `class (0 whenUnlocked, 1 afterFirstUnlock) ‖ thisDeviceOnly (0/1) ‖ vault id (16)` →
        /// `count (1) ‖ count × key (32)`, the current key first, then retired ones, newest first.
        case classKeys = 4
        /// → `state (0 locked, 1 unlocked)`, then one such frame per change.
        case subscribe = 5
        /// → empty; the agent locks, answers and exits.
        case stop = 6
        /// `class name (1-byte length; empty: any class) ‖ count (1) ‖ count × stanza` → `file key (16)`:
        /// the agent unwraps a protected file's key with the class identity, which it keeps
        /// (``unwrapRequest(onlyClass:stanzas:)``; for `age-plugin-securefoundation`).
        case unwrapFileKey = 7
        /// `PIN (1 to 256 bytes)` → empty: the agent holds the user PIN of the token its
        /// device key is wrapped by (the `pkcs11` device-key provider) until it stops.
        case tokenPIN = 8
        /// `vault id (16)` → `device key (32)`: the device key as the agent reads it (its
        /// provider, with the token PIN it holds), for a process of the same user whose own
        /// provider cannot read it; that process checks it against the trusted record.
        case deviceKey = 9
    }

    /// The longest token PIN a ``Operation/tokenPIN`` request carries.
    static let maximumPIN = 256

    /// At most this many stanzas go in one unwrap request (the `X25519` and class stanzas of one header).
    static let maximumUnwrapStanzas = 64

    /// The payload of an ``Operation/unwrapFileKey`` request. Each stanza is
    /// `type (1-byte length) ‖ argument count (1) ‖ arguments (1-byte length each) ‖ body (4-byte length)`.
    /// - Throws: ``AgentError/protocolViolation(_:)`` for too many stanzas or an over-long field.
    static func unwrapRequest(onlyClass: String?, stanzas: [AgeStanza]) throws -> [UInt8] {
        guard stanzas.count <= maximumUnwrapStanzas else {
            throw AgentError.protocolViolation("a header with \(stanzas.count) stanzas of a protection class; at most \(maximumUnwrapStanzas)")
        }
        var writer = ByteWriter([version, Operation.unwrapFileKey.rawValue])
        do {
            try writer.shortField(Array((onlyClass ?? "").utf8), "class name")
            writer.byte(UInt8(stanzas.count))
            for stanza in stanzas {
                try writer.shortField(Array(stanza.type.utf8), "stanza type")
                guard stanza.arguments.count <= 255 else { throw AgentError.protocolViolation("a stanza with \(stanza.arguments.count) arguments") }
                writer.byte(UInt8(stanza.arguments.count))
                for argument in stanza.arguments { try writer.shortField(Array(argument.utf8), "stanza argument") }
                writer.field(stanza.body)
            }
        } catch let error as CipherError {
            throw AgentError.protocolViolation("\(error)")
        }
        guard writer.bytes.count <= maximumFrame else { throw AgentError.protocolViolation("an unwrap request of \(writer.bytes.count) bytes") }
        return writer.bytes
    }

    /// Reads an ``Operation/unwrapFileKey`` request (the whole frame, version and operation included).
    /// - Throws: ``AgentError/protocolViolation(_:)`` for anything malformed or trailing.
    static func parseUnwrapRequest(_ frame: [UInt8]) throws -> (onlyClass: String?, stanzas: [AgeStanza]) {
        var reader = ByteReader(frame)
        do {
            _ = try reader.take(2)
            let name = String(decoding: try reader.shortField("class name"), as: UTF8.self)
            let count = Int(try reader.byte("stanza count"))
            guard count <= maximumUnwrapStanzas else { throw AgentError.protocolViolation("an unwrap request with \(count) stanzas") }
            var stanzas = [AgeStanza]()
            for _ in 0..<count {
                let type = String(decoding: try reader.shortField("stanza type"), as: UTF8.self)
                let argumentCount = Int(try reader.byte("argument count"))
                var arguments = [String]()
                for _ in 0..<argumentCount { arguments.append(String(decoding: try reader.shortField("stanza argument"), as: UTF8.self)) }
                let body = Array(try reader.field("stanza body", maximum: maximumFrame))
                stanzas.append(AgeStanza(type: type, arguments: arguments, body: body))
            }
            guard reader.remaining == 0 else { throw AgentError.protocolViolation("trailing bytes after the stanzas") }
            return (name.isEmpty ? nil : name, stanzas)
        } catch let error as CipherError {
            throw AgentError.protocolViolation("a malformed unwrap request: \(error)")
        }
    }

    static func classCode(_ protectionClass: ProtectionClass) -> UInt8 {
        switch protectionClass {
        case .whenUnlocked: return 0
        case .afterFirstUnlock: return 1
        case .always: return 2
        }
    }

    static func protectionClass(_ code: UInt8) -> ProtectionClass? {
        switch code {
        case 0: return .whenUnlocked
        case 1: return .afterFirstUnlock
        case 2: return .always
        default: return nil
        }
    }

    static func stateCode(_ state: LockState) -> UInt8 { state == .unlocked ? 1 : 0 }

    // MARK: Frames

    /// Writes one frame holding `body`.
    static func writeFrame(_ fd: Int32, _ body: UnsafeRawBufferPointer) throws {
        guard body.count <= maximumFrame else { throw AgentError.protocolViolation("a message of \(body.count) bytes is too large") }
        var header = ByteWriter(capacity: 4)
        header.uint32(UInt32(body.count))
        try header.bytes.withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
        if body.count > 0 { try UnixSocket.writeAll(fd, body) }
    }

    static func writeFrame(_ fd: Int32, _ body: [UInt8]) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    static func writeFrame(_ fd: Int32, _ body: SecretBytes) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    /// Reads one frame into locked memory; refuses a length over ``maximumFrame`` before reading
    /// it. With a `deadline` (``UnixSocket/monotonicNow()``) the whole frame must have arrived by
    /// then; without one, each read waits for the socket's receive timeout.
    static func readFrame(_ fd: Int32, deadline: Double? = nil) throws -> SecretBytes {
        var header = [UInt8](repeating: 0, count: 4)
        try header.withUnsafeMutableBytes { try UnixSocket.readExactly(fd, into: $0, deadline: deadline) }
        var reader = ByteReader(header)
        let length = Int(try reader.uint32("frame length"))
        guard length <= maximumFrame else {
            throw AgentError.protocolViolation("a message of \(length) bytes is larger than the \(maximumFrame) allowed")
        }
        return try SecretBytes(count: length) { try UnixSocket.readExactly(fd, into: $0, deadline: deadline) }
    }

    static func okResponse(_ payload: [UInt8] = []) -> [UInt8] { [0] + payload }

    static func errorResponse(_ error: WireError) -> [UInt8] {
        [1] + ((try? JSONEncoder().encode(error)).map { [UInt8]($0) } ?? [])
    }
}

/// An error as it crosses the socket; the client turns the vault's own cases back into
/// `VaultError`, so a wrong passcode given to the agent exits like one given to the vault.
struct WireError: Codable, Sendable {
    var kind: String
    var message: String
    var failures: Int?
    var seconds: Int64?
    var accessibility: String?
    var reason: String?

    init(kind: String, message: String, failures: Int? = nil, seconds: Int64? = nil, accessibility: String? = nil, reason: String? = nil) {
        self.kind = kind
        self.message = message
        self.failures = failures
        self.seconds = seconds
        self.accessibility = accessibility
        self.reason = reason
    }

    static func seconds(_ duration: Duration?) -> Int64? { duration.map { $0.components.seconds } }

    static let reasons: [(String, ClassKeyUnavailableReason)] = [
        ("locked", .locked), ("noFirstUnlockYet", .noFirstUnlockYet), ("notSetUp", .notSetUp), ("deviceKeyMissing", .deviceKeyMissing),
    ]

    /// The wire form of any error the agent meets.
    init(_ error: any Error) {
        let message = String(describing: error)
        switch error {
        case let VaultError.wrongPasscode(failures, wait):
            self.init(kind: "wrongPasscode", message: message, failures: failures, seconds: Self.seconds(wait))
        case let VaultError.wrongAnswers(failures, wait):
            self.init(kind: "wrongAnswers", message: message, failures: failures, seconds: Self.seconds(wait))
        case let VaultError.tooManyAttempts(retryAfter):
            self.init(kind: "tooManyAttempts", message: message, seconds: Self.seconds(retryAfter))
        case let VaultError.attemptRecordDamaged(retryAfter):
            self.init(kind: "attemptRecordDamaged", message: message, seconds: Self.seconds(retryAfter))
        case VaultError.erased: self.init(kind: "erased", message: message)
        case VaultError.notSetUp: self.init(kind: "notSetUp", message: message)
        case VaultError.locked: self.init(kind: "locked", message: message)
        case VaultError.noPasscode: self.init(kind: "noPasscode", message: message)
        case VaultError.noSecurityQuestions: self.init(kind: "noSecurityQuestions", message: message)
        case let VaultError.wrongTokenPIN(why): self.init(kind: "wrongTokenPIN", message: message, reason: why)
        case let VaultError.tokenPINUnavailable(why): self.init(kind: "tokenPINUnavailable", message: message, reason: why)
        case let AgentError.remote(why): self.init(kind: "other", message: why)
        case let AgentError.protocolViolation(why): self.init(kind: "protocol", message: why)
        case let ProtectedFileError.locked(cls, reason):
            let name = Self.reasons.first(where: { $0.1 == reason })?.0 ?? "locked"
            self.init(kind: "fileClassUnavailable", message: message, accessibility: cls.name, reason: name)
        case let ProtectedFileError.notProtectedFile(_, why):
            self.init(kind: "notProtectedFile", message: message, reason: why)
        case let ProtectedFileError.tampered(_, why):
            self.init(kind: "tampered", message: message, reason: why)
        case let ProtectedFileError.invalidArgument(why):
            self.init(kind: "invalidArgument", message: message, reason: why)
        case let VaultError.classKeyUnavailable(accessibility, reason):
            let name = Self.reasons.first(where: { $0.1 == reason })?.0 ?? "locked"
            self.init(kind: "classKeyUnavailable", message: message, accessibility: accessibility.name, reason: name)
        default: self.init(kind: "other", message: message)
        }
    }

    /// The error the client throws.
    var error: AgentError {
        let wait = seconds.map { Duration.seconds($0) }
        switch kind {
        case "wrongPasscode": return .vault(VaultError.wrongPasscode(failures: failures ?? 0, nextAttemptAfter: wait))
        case "wrongAnswers": return .vault(VaultError.wrongAnswers(failures: failures ?? 0, nextAttemptAfter: wait))
        case "tooManyAttempts": return .vault(VaultError.tooManyAttempts(retryAfter: wait ?? .zero))
        case "attemptRecordDamaged": return .vault(VaultError.attemptRecordDamaged(retryAfter: wait ?? .zero))
        case "erased": return .vault(VaultError.erased)
        case "notSetUp": return .vault(VaultError.notSetUp)
        case "locked": return .vault(VaultError.locked)
        case "noPasscode": return .vault(VaultError.noPasscode)
        case "noSecurityQuestions": return .vault(VaultError.noSecurityQuestions)
        case "wrongTokenPIN": return .vault(VaultError.wrongTokenPIN(reason ?? message))
        case "tokenPINUnavailable": return .vault(VaultError.tokenPINUnavailable(reason ?? message))
        case "classKeyUnavailable":
            if let name = accessibility, let value = Accessibility(name: name),
               let reason = Self.reasons.first(where: { $0.0 == self.reason })?.1 {
                return .vault(VaultError.classKeyUnavailable(value, reason))
            }
            return AgentError.remote(message)
        case "fileClassUnavailable":
            if let name = accessibility, let cls = FileProtectionClass(name: name),
               let reason = Self.reasons.first(where: { $0.0 == self.reason })?.1 {
                return .protectedFile(ProtectedFileError.locked(cls, reason))
            }
            return AgentError.remote(message)
        case "notProtectedFile": return .protectedFile(ProtectedFileError.notProtectedFile(path: ProtectedFiles.stanzaSource, reason: reason ?? message))
        case "tampered": return .protectedFile(ProtectedFileError.tampered(path: ProtectedFiles.stanzaSource, reason: reason ?? message))
        case "invalidArgument": return .protectedFile(ProtectedFileError.invalidArgument(reason ?? message))
        case "refused": return AgentError.refused(message)
        case "protocol": return AgentError.protocolViolation(message)
        default: return AgentError.remote(message)
        }
    }
}

/// What `status` reports (no secret).
public struct AgentStatus: Codable, Sendable, Equatable {
    /// Whether the agent holds the vault unlocked.
    public var state: LockState
    /// Whether the vault was unlocked since the agent started (afterFirstUnlock keys available).
    public var firstUnlockDone: Bool
    /// The vault's data directory.
    public var home: String
    /// The idle time-to-live in seconds (reset by every use).
    public var idleTTL: Int
    /// The maximum time-to-live in seconds (from the unlock, not reset).
    public var maxTTL: Int
    /// Seconds until the idle TTL locks the vault (nil while locked).
    public var idleRemaining: Int?
    /// Seconds until the maximum TTL locks the vault (nil while locked).
    public var maxRemaining: Int?
    /// The agent's process id.
    public var pid: Int32
    /// The agent's user id (only this user is served).
    public var uid: UInt32
}
