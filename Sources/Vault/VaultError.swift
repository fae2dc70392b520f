import Foundation
import Cipher

/// Everything the vault can fail with. Each case carries what a person needs to act on.
public enum VaultError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key of this class cannot be had now, for the given reason.
    case classKeyUnavailable(Accessibility, ClassKeyUnavailableReason)
    /// The passcode is wrong. `failures` counts consecutive failed attempts; `nextAttemptAfter` is
    /// how long to wait before the next attempt is accepted (nil: no wait).
    case wrongPasscode(failures: Int, nextAttemptAfter: Duration?)
    /// The security answers are wrong (fewer than the threshold matched).
    case wrongAnswers(failures: Int, nextAttemptAfter: Duration?)
    /// Too many failed attempts: no attempt is accepted before `retryAfter` has passed.
    case tooManyAttempts(retryAfter: Duration)
    /// The failed-attempt record (`attempts`) did not parse. It is read as the longest delay, never
    /// as a reason to erase; no attempt is accepted before `retryAfter` has passed.
    case attemptRecordDamaged(retryAfter: Duration)
    /// Some of the given answers (1-based question numbers) did not verify against the vault, so
    /// they cannot be used for new wrappings. Nothing was changed.
    case unverifiedAnswers(questions: [Int])
    /// The wrapped keys were destroyed (after too many failed attempts, or by ``CryptoManager/erase()``).
    case erased
    /// No vault has been set up in this directory.
    case notSetUp
    /// A vault is already set up in this directory.
    case alreadySetUp
    /// The operation needs the vault unlocked.
    case locked
    /// The vault has no passcode (it was set up with security questions only).
    case noPasscode
    /// The vault has no security questions.
    case noSecurityQuestions
    /// The recovery key does not open this vault. Counted as a failed attempt, as a wrong passcode.
    case wrongRecoveryKey(failures: Int, nextAttemptAfter: Duration?)
    /// The vault has no recovery key (make one with `vault recovery-key create`).
    case noRecoveryKey
    /// A file or directory of the vault is accessible to others or owned by another user.
    case insecurePermissions(path: String, reason: String, fix: String)
    /// The state is damaged or was modified.
    case corrupted(String)
    /// `file` is older than the rollback anchor beside the device key says it must be: its
    /// generation is `found`, the anchor's `expected`. A copy from before a change (a passcode
    /// change, a key rotation…) was put back in the data directory.
    case rolledBack(file: String, found: UInt64, expected: UInt64)
    /// An argument is not acceptable (empty passcode, threshold out of range, …).
    case invalidArgument(String)
    /// The device key cannot be read or created.
    case deviceKey(String)
    /// The token that holds the device key refused its PIN (`CKR_PIN_INCORRECT` and the like):
    /// a wrong secret, as a wrong passcode is. The text names the token's answer.
    case wrongTokenPIN(String)
    /// The PIN of the token that holds the device key was not given (or cannot be read from
    /// where it was to come from). The text says where it is looked for.
    case tokenPINUnavailable(String)
    /// A file operation failed.
    case io(String)
    /// A cryptographic operation failed (for example the system random generator).
    case crypto(String)

    /// A message that says what went wrong and what to do.
    public var description: String {
        switch self {
        case let .classKeyUnavailable(accessibility, reason):
            return "the \(accessibility.name) class key is unavailable: \(reason)"
        case let .wrongPasscode(failures, wait):
            return "wrong passcode (\(failures) failed attempt\(failures == 1 ? "" : "s") in a row)" + VaultError.waitText(wait)
        case let .wrongAnswers(failures, wait):
            return "wrong answers to the security questions (\(failures) failed attempt\(failures == 1 ? "" : "s") in a row)" + VaultError.waitText(wait)
        case let .tooManyAttempts(retryAfter):
            return "too many failed attempts; try again in \(VaultError.format(retryAfter))"
        case let .attemptRecordDamaged(retryAfter):
            return "the failed-attempt record (attempts) is damaged; it is read as the longest delay and the vault is not erased because of it: try again in \(VaultError.format(retryAfter))"
        case let .unverifiedAnswers(questions):
            let list = questions.map { "\($0)" }.joined(separator: ", ")
            return "the answer\(questions.count == 1 ? "" : "s") to question\(questions.count == 1 ? "" : "s") \(list) did not verify; nothing was changed: give the answers the vault was set up with"
        case .erased:
            return "the vault was erased after too many failed attempts (or on request); its keys are destroyed and data sealed under them cannot be recovered"
        case .notSetUp:
            return "no vault is set up here; create one with `securefoundation vault init`"
        case .alreadySetUp:
            return "a vault is already set up here; change it with change-passcode / change-questions, or erase it first"
        case .locked:
            return "the vault is locked; unlock it with the passcode or the security answers first"
        case .noPasscode:
            return "this vault has no passcode; unlock it with the security answers"
        case .noSecurityQuestions:
            return "this vault has no security questions; unlock it with the passcode"
        case let .wrongRecoveryKey(failures, wait):
            return "the recovery key does not open this vault: it is another vault's, or one that was replaced since (\(failures) failed attempt\(failures == 1 ? "" : "s") in a row)" + VaultError.waitText(wait)
        case .noRecoveryKey:
            return "this vault has no recovery key; unlock it with the passcode or the answers (and make one with `securefoundation vault recovery-key create`)"
        case let .insecurePermissions(path, reason, fix):
            return "refusing \(path): \(reason). Fix it with: \(fix)"
        case let .corrupted(why):
            return "the vault state is damaged or was modified: \(why)"
        case let .rolledBack(file, found, expected):
            return "\(file) was rolled back: it is generation \(found), but the rollback anchor beside the device key says this vault wrote generation \(expected) already, so an older copy was put back in the data directory (undoing a later passcode change, key rotation or revocation). Restore the newest backup of the data directory; if you put this copy back on purpose and accept losing the later changes, delete the anchor (vaults/VAULTID.anchor beside the device key) and try again"
        case let .invalidArgument(why):
            return "invalid argument: \(why)"
        case let .deviceKey(why):
            return "device key: \(why)"
        case let .wrongTokenPIN(why):
            return "the device key's token refused the PIN: \(why)"
        case let .tokenPINUnavailable(why):
            return "the device key's token needs its PIN, which cannot be read: \(why)"
        case let .io(why):
            return why
        case let .crypto(why):
            return "cryptographic failure: \(why)"
        }
    }

    static func waitText(_ wait: Duration?) -> String {
        guard let wait, wait > .zero else { return "" }
        return "; the next attempt is accepted in \(format(wait))"
    }

    /// "1 h", "15 min", "59 s".
    static func format(_ duration: Duration) -> String {
        let seconds = Int((Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18).rounded(.up))
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600) h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60) min" }
        if seconds >= 60 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds) s"
    }

    /// Maps errors of the lower layers to vault errors.
    package static func wrap(_ error: any Error) -> VaultError {
        if let error = error as? VaultError { return error }
        if let failure = error as? SecureFile.Failure {
            switch failure {
            case let .insecurePermissions(path, reason, fix): return .insecurePermissions(path: path, reason: reason, fix: fix)
            case let .system(operation, path, code): return .io("\(operation) \(path): \(String(cString: strerror(code)))")
            }
        }
        if let error = error as? CipherError {
            switch error {
            case .io(let why): return .io(why)
            case .randomUnavailable, .invalidParameter: return .crypto(error.description)
            default: return .corrupted(error.description)
            }
        }
        return .io(String(describing: error))
    }
}
