import Foundation
import Cipher
import AgentWire
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
    static var version: UInt8 { AgentFrames.version }
    /// The largest frame either side accepts (64 KiB: 16 answers of up to 4 KiB fit).
    static var maximumFrame: Int { AgentFrames.maximumFrame }

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

    /// At most this many stanzas go in one unwrap request (AgentWire's `AgentFrames`).
    static var maximumUnwrapStanzas: Int { AgentFrames.maximumUnwrapStanzas }

    /// The payload of an ``Operation/unwrapFileKey`` request (AgentWire's `AgentFrames`).
    /// - Throws: ``AgentError/protocolViolation(_:)`` for too many stanzas or an over-long field.
    static func unwrapRequest(onlyClass: String?, stanzas: [AgeStanza]) throws -> [UInt8] {
        do { return try AgentFrames.unwrapRequest(onlyClass: onlyClass, stanzas: stanzas) } catch { throw AgentError.mapping(error) }
    }

    /// Reads an ``Operation/unwrapFileKey`` request (the whole frame, version and operation included).
    /// - Throws: ``AgentError/protocolViolation(_:)`` for anything malformed or trailing.
    static func parseUnwrapRequest(_ frame: [UInt8]) throws -> (onlyClass: String?, stanzas: [AgeStanza]) {
        do { return try AgentFrames.parseUnwrapRequest(frame) } catch { throw AgentError.mapping(error) }
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

    // MARK: Frames (AgentWire's `AgentFrames`, with the errors as ``AgentError``)

    static func writeFrame(_ fd: Int32, _ body: UnsafeRawBufferPointer) throws {
        do { try AgentFrames.writeFrame(fd, body) } catch { throw AgentError.mapping(error) }
    }

    static func writeFrame(_ fd: Int32, _ body: [UInt8]) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    static func writeFrame(_ fd: Int32, _ body: SecretBytes) throws {
        try body.withUnsafeBytes { try writeFrame(fd, $0) }
    }

    static func readFrame(_ fd: Int32, deadline: Double? = nil) throws -> SecretBytes {
        do { return try AgentFrames.readFrame(fd, deadline: deadline) } catch { throw AgentError.mapping(error) }
    }

    static func okResponse(_ payload: [UInt8] = []) -> [UInt8] { AgentFrames.okResponse(payload) }

    static func errorResponse(_ error: WireError) -> [UInt8] { AgentFrames.errorResponse(error) }
}

/// The vault's and the protected files' errors as they cross the socket (AgentWire's
/// `WireError`); the client turns the vault's own cases back into `VaultError`, so a wrong
/// passcode given to the agent exits like one given to the vault.
extension WireError {
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
        case let error as AgentWireError:
            if case let .answered(wire) = error { self = wire } else { self.init(AgentError(error)) }
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
