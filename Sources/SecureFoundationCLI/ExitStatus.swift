import AgeCommandLine
import ArgumentParser
import DeviceSharing
import EmbeddedSecrets
import Foundation
import HardwareKeys
import Migration
import PinnedTLS
import SecureFoundation

extension ExitStatus {
    /// The status for `error`.
    static func of(_ error: any Error) -> Int32 {
        // What age passes on from the command's own code (a passphrase prompt) keeps its status.
        if case AgeError.external(let inner) = error { return of(inner.error) }
        if let error = error as? ExitCode { return error.rawValue }
        // The age commands' rows (AgeCommandLine's ExitStatus.swift) first, then this table's.
        return exitCode(of: error) { (other: any Error) in status(of: other) }
    }

    // One switch per error type keeps the table readable; anything not listed is `failure`.
    private static func status(of error: any Error) -> ExitStatus {
        switch error {
        case is ValidationError: return .usage
        case let error as VaultError: return status(of: error)
        case let error as BackupError: return status(of: error)
        case let error as KeychainError: return status(of: error)
        case let error as ProtectedFileError: return status(of: error)
        case let error as ProtectedDatabaseError: return status(of: error)
        case let error as IdentityError: return status(of: error)
        case let error as ShareError: return status(of: error)
        case let error as AgentError: return status(of: error)
        case let error as PinnedTLSError: return status(of: error)
        case let error as MigrationError: return status(of: error)
        case let error as HardwareKeyError: return status(of: error)
        case is TLSTrustError: return .peerRefused
        case VolatileLibraryError.shred(let error): return status(of: error)
        case EmbeddedSecretsError.cipher(let error): return status(of: error)
        default: return .failure
        }
    }

    private static func status(of error: HardwareKeyError) -> ExitStatus {
        switch error {
        case .invalidURI, .pinUnavailable: return .usage
        case .moduleRefused, .moduleUnavailable: return .io
        case .tokenNotFound, .keyNotFound: return .notFound
        case .pkcs11:
            switch error.returnValueName {
            case let name? where HardwareKeyError.wrongPINNames.contains(name): return .wrongSecret
            default: return .failure
            }
        case .ambiguousKey, .unsupportedKey: return .failure
        case .tpmStackMissing, .tpmUnreachable: return .io
        case .tpmKeyRefused: return .damaged
        case .tpmPolicyFailed, .tpm: return .failure
        }
    }

    private static func status(of error: BackupError) -> ExitStatus {
        switch error {
        case .damaged: return .damaged
        case .otherVault: return .otherVault
        case .exists: return .exists
        case .invalidArgument: return .usage
        case .io: return .io
        }
    }

    private static func status(of error: VaultError) -> ExitStatus {
        switch error {
        case .wrongPasscode, .wrongAnswers, .unverifiedAnswers, .wrongRecoveryKey, .wrongTokenPIN: return .wrongSecret
        case .tokenPINUnavailable: return .usage
        case .tooManyAttempts, .attemptRecordDamaged: return .wait
        case .erased, .notSetUp: return .noVault
        case .locked, .classKeyUnavailable: return .locked
        case .alreadySetUp: return .exists
        case .corrupted, .rolledBack: return .damaged
        case .io, .insecurePermissions: return .io
        default: return .failure
        }
    }

    private static func status(of error: KeychainError) -> ExitStatus {
        switch error {
        case .itemNotFound: return .notFound
        case .duplicateItem: return .exists
        case .interactionNotAllowed: return .locked
        case .corrupted, .damagedItems: return .damaged
        case .diskFull, .permissionDenied, .insecurePermissions, .file: return .io
        case .vault(let error): return status(of: error)
        default: return .failure
        }
    }

    private static func status(of error: ProtectedFileError) -> ExitStatus {
        switch error {
        case .locked, .noKeyPairYet: return .locked
        case .tampered, .notProtectedFile, .keyTable: return .damaged
        case .io, .permission: return .io
        case .vault(let error): return status(of: error)
        default: return .failure
        }
    }

    private static func status(of error: ProtectedDatabaseError) -> ExitStatus {
        switch error {
        case .locked: return .locked
        case .tampered, .keyMismatch, .notProtectedDatabase: return .damaged
        case .notFound: return .notFound
        case .exists: return .exists
        case .diskFull, .io: return .io
        case .invalidArgument: return .usage
        case .protectedFile(let error): return status(of: error)
        default: return .failure
        }
    }

    private static func status(of error: IdentityError) -> ExitStatus {
        switch error {
        case .notFound: return .notFound
        case .duplicate: return .exists
        case .locked: return .locked
        case .wrongPassword: return .wrongSecret
        case .corruptedRecord, .invalidRevocationList, .hardwareKeyMismatch: return .damaged
        case .hardwareKey(let cause): return status(of: cause)
        case .hardwareKeyRequired: return .usage
        default: return .failure
        }
    }

    private static func status(of error: ShareError) -> ExitStatus {
        switch error {
        case .locked: return .locked
        case .notAMember, .notFound: return .notFound
        case .invalidDeviceName, .invalidFileName: return .usage
        case .peerRefused, .revoked, .deviceMismatch: return .shareRefused
        case .digestMismatch, .rejected, .tooLarge: return .shareNotStored
        case .invalidEnrolment: return .shareEnrolment
        case .revocationsTampered, .watchStateTampered: return .damaged
        case .connectionFailed: return .noConnection
        case .io: return .io
        case .hardwareKey(let cause): return status(of: cause)
        case .hardwareKeyRequired: return .usage
        case .hardwareKeyMismatch: return .damaged
        default: return .failure
        }
    }

    private static func status(of error: AgentError) -> ExitStatus {
        switch error {
        case .notRunning: return .noConnection
        case .timedOut: return .timedOut
        case .insecureDirectory: return .io
        case .vault(let error): return status(of: error)
        case .protectedFile(let error): return status(of: error)
        default: return .failure
        }
    }

    private static func status(of error: PinnedTLSError) -> ExitStatus {
        switch error {
        case .connectionFailed: return .noConnection
        case .timedOut: return .timedOut
        case .io: return .io
        default: return .failure
        }
    }

    private static func status(of error: MigrationError) -> ExitStatus {
        switch error {
        case .wrongPasscode, .wrongAnswers, .genItemNotOpened: return .wrongSecret
        case .legacyDataRejected, .legacyFormat: return .damaged
        case .failed(let failures):
            // Damaged data first: it cannot be fixed by another secret or file.
            if failures.contains(where: { $0.kind == .damaged }) { return .damaged }
            if failures.allSatisfy({ $0.kind == .notOpened }) { return .wrongSecret }
            if failures.allSatisfy({ $0.kind == .io }) { return .io }
            return .failure
        default: return .failure
        }
    }

    /// The message for `error`, saying which option helps where the error alone does not.
    static func message(for error: any Error) -> String {
        switch error {
        case KeychainError.duplicateItem(let item):
            // The library's own advice names its API; here the option is -U.
            return "duplicate item: \(item) exists already (add -U to update it)"
        case KeychainError.interactionNotAllowed(_, .notSetUp):
            return "\(CLI.describe(error)): create the vault with `securefoundation vault init`, or store the item with --accessibility always (device key only)"
        case KeychainError.interactionNotAllowed, VaultError.classKeyUnavailable, VaultError.locked,
             ProtectedFileError.locked, IdentityError.locked, ShareError.locked, ProtectedDatabaseError.locked,
             AgentError.vault(.classKeyUnavailable), AgentError.vault(.locked), AgentError.protectedFile(.locked):
            return "\(CLI.describe(error)) (give the vault passcode with --passcode-file, or unlock a running agent with `securefoundation agent unlock`)"
        default:
            return CLI.describe(error)
        }
    }
}

/// The unlock agent the command's vault asked for keys (``HomeOptions/manager(useAgent:policy:eraseAfter:provider:)``):
/// a class reported locked because the agent did not answer is reported as what happened.
enum AgentInUse {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var clients: [AgentClient] = []

    static func register(_ client: AgentClient) { lock.withLock { clients.append(client) } }

    /// Why the agent could not give keys, if it could not be reached.
    static var failure: AgentError? { lock.withLock { clients.lazy.compactMap(\.lastFailure).first } }

    /// A locked error caused by an agent that did not answer, as that failure: 28 for a stopped
    /// or hung agent, 7 for the socket of one that died.
    static func explain(_ error: any Error) -> (message: String, status: ExitStatus)? {
        guard ExitStatus.of(error) == ExitStatus.locked.rawValue, let failure else { return nil }
        switch failure {
        case .timedOut:
            return ("\(failure); so the vault's class keys are unavailable (or give --passcode-file)", .timedOut)
        case .notRunning(let socket):
            return ("no unlock agent answers at \(socket): its socket is left by an agent that stopped without removing it (killed or crashed); start it again with `securefoundation agent start` and unlock it, or give --passcode-file", .noConnection)
        default:
            return ("\(failure); so the vault's class keys are unavailable (or give --passcode-file)", ExitStatus(rawValue: ExitStatus.of(failure)) ?? .failure)
        }
    }
}

extension CLI {
    /// Reports `error` on stderr (`securefoundation: error: …`, naming the option that helps where
    /// there is one; an `ExitCode` was reported already) and returns the exit code of the table for it.
    static func fail(_ error: any Error) -> ExitCode {
        if let error = error as? ExitCode { return error }
        if let (message, status) = AgentInUse.explain(error) {
            warn("securefoundation: error: \(message)")
            return ExitCode(status.rawValue)
        }
        warn("securefoundation: error: \(ExitStatus.message(for: error))")
        return ExitCode(ExitStatus.of(error))
    }

    /// `text` as one shell word: as it is when it holds only safe characters, else in single quotes.
    static func shellQuoted(_ text: String) -> String {
        let safe = !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "/._-+=:,@%".unicodeScalars.contains($0)) }
        return safe ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Whether `error` is a full disk or quota (a keychain's `diskFull`, or an I/O error whose
    /// message carries ENOSPC's or EDQUOT's text).
    static func isDiskFull(_ error: any Error) -> Bool {
        if case KeychainError.diskFull = error { return true }
        if case KeychainError.vault(let inner) = error { return isDiskFull(inner) }
        let text = "\(error)"
        return text.contains(String(cString: strerror(ENOSPC))) || text.contains(String(cString: strerror(EDQUOT)))
    }

    /// Runs `body`; an error for which `note` gives a next step is thrown again as that error's
    /// message followed by the step, with the error's own exit status.
    static func withNextStep<Result>(_ note: (any Error) -> String?, _ body: () throws -> Result) throws -> Result {
        do { return try body() } catch {
            guard !(error is ExitCode), let step = note(error) else { throw error }
            throw CLIFailure("\(ExitStatus.message(for: error)); \(step)", exitCode: ExitStatus.of(error))
        }
    }

    /// Runs a command's body: a failure is reported on stderr without the usage text (also a
    /// `ValidationError` raised while running) and ends the command with its exit code.
    static func run(_ body: () throws -> Void) throws {
        do { try body() } catch { throw fail(error) }
    }

    /// Runs an async command's body (see ``run(_:)``).
    static func run(_ body: () async throws -> Void) async throws {
        do { try await body() } catch { throw fail(error) }
    }
}
