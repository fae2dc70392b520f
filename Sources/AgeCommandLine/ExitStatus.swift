import Age
import Cipher
import Shredder

/// The exit status of every command: one table, documented in docs/CLI.md. A number means the
/// same thing whichever command returns it.
package enum ExitStatus: Int32, CaseIterable, Sendable {
    /// The command did what it was asked.
    case success = 0
    /// Any error no other row describes (the message says what); also a command over several
    /// files (hash, shred, protect status) of which some failed, each reported.
    case failure = 1
    /// Damaged or tampered data: authentication failed, truncated, a malformed header or armor,
    /// a damaged vault state, keychain record or protected file.
    case damaged = 2
    /// The secret given is wrong: passcode, answers, passphrase, PKCS#12 password, or no
    /// identity or key given opens the data.
    case wrongSecret = 3
    /// Too many failed unlock attempts: try again later (the message says when).
    case wait = 4
    /// No vault in the data directory: never set up, or erased (its keys are destroyed).
    case noVault = 5
    /// Nothing answers: no unlock agent runs, or no connection to the host.
    case noConnection = 7
    /// `tls fetch`: the server answered with HTTP status 400 or more.
    case httpError = 22
    /// Timed out (a connection, a handshake, an agent).
    case timedOut = 28
    /// Locked: a class key is unavailable (give --passcode-file, or unlock a running agent).
    case locked = 36
    /// Not found: no such keychain item, identity or group member.
    case notFound = 44
    /// Exists already: an item or identity with that name, or a vault in that directory.
    case exists = 45
    /// `backup restore`: the backup is of another vault than the home it would replace.
    case otherVault = 46
    /// `share`: the peer is not of this group, is revoked, or is another device.
    case shareRefused = 50
    /// `share`: the receiver did not store the file (digest mismatch, refused name or size).
    case shareNotStored = 51
    /// `share`: the invitation or request is invalid or expired.
    case shareEnrolment = 52
    /// TLS: the peer was refused by the trust policy (anchors, pins, name, dates).
    case peerRefused = 60
    /// Usage: wrong or conflicting arguments, binary output to a terminal.
    case usage = 64
    /// Input/output: a file or stream cannot be read or written (missing, permissions refused or
    /// found insecure, a symbolic link, directory, socket or block device refused as output,
    /// disk full).
    case io = 74

    /// A few words for the table `securefoundation --help` prints.
    package var label: String {
        switch self {
        case .success: return "success"
        case .failure: return "any other error (the message says what)"
        case .damaged: return "damaged or tampered data"
        case .wrongSecret: return "wrong passcode, answers, passphrase, password or key"
        case .wait: return "too many failed attempts: wait"
        case .noVault: return "no vault: not set up, or erased"
        case .noConnection: return "nothing answers: no agent, no connection"
        case .httpError: return "HTTP status 400 or more (tls fetch)"
        case .timedOut: return "timed out"
        case .locked: return "locked: a class key is unavailable"
        case .notFound: return "not found: item, identity, group member"
        case .exists: return "exists already: item, identity, vault"
        case .otherVault: return "backup of another vault than the home"
        case .peerRefused: return "TLS peer refused by the policy"
        case .usage: return "usage: wrong or conflicting arguments"
        case .shareRefused: return "share: peer refused"
        case .shareNotStored: return "share: the receiver did not store the file"
        case .shareEnrolment: return "share: invalid or expired enrolment"
        case .io: return "a file cannot be read or written, or is refused"
        }
    }

    /// The table, one row a line, for the top-level help.
    package static var helpTable: String {
        "Exit status, the same for every command (CLI.md in the documentation):\n"
            + allCases.map { status in
                // Padded by hand: Foundation's `padding(toLength:)` costs about a millisecond
                // at every start (the table is built for the command tree, help or not).
                let number = String(status.rawValue)
                return "  " + number + String(repeating: " ", count: max(0, 4 - number.count)) + status.label
            }.joined(separator: "\n")
    }
}

extension ExitStatus {
    /// The exit code for `error`: the rows of the errors the age commands meet (Age, Cipher,
    /// Shredder, sealed files, the command line's own) are here, so the front program
    /// (`securefoundation-front`, docs/CLI.md "Installed programs") reports them without the rest
    /// of the command line; any other error gets what `otherwise` says (the full program's table
    /// in ExitStatus.swift of the command line; `failure` by default).
    package static func exitCode(of error: any Error, otherwise: (any Error) -> ExitStatus = { _ in .failure }) -> Int32 {
        // What age passes on from the command's own code (a passphrase prompt) keeps its status.
        if case AgeError.external(let inner) = error { return exitCode(of: inner.error, otherwise: otherwise) }
        if let error = error as? CLIFailure { return error.exitCode }
        return status(of: error, otherwise: otherwise).rawValue
    }

    /// The row for `error` (see ``exitCode(of:otherwise:)``).
    package static func status(of error: any Error, otherwise: (any Error) -> ExitStatus) -> ExitStatus {
        switch error {
        case is UsageError, is Terminal.NoTerminal: return .usage
        case let error as AgeError: return status(of: error, otherwise: otherwise)
        case let error as CipherError: return status(of: error)
        case is SecureFile.Failure: return .io
        case let error as ShredError: return status(of: error)
        default: return otherwise(error)
        }
    }

    package static func status(of error: ShredError) -> ExitStatus {
        if case .system = error { return .io }
        return .failure
    }

    /// The status for `error`; `otherwise` gives the status of an error of the caller's own code
    /// that age passes on (``AgeError/external(_:)``).
    package static func status(of error: AgeError, otherwise: (any Error) -> ExitStatus) -> ExitStatus {
        switch error {
        case .headerFailure, .headerMACFailure, .payloadFailure, .armorFailure: return .damaged
        case .noMatchingIdentity: return .wrongSecret
        case .io: return .io
        case .cipher(let cause): return status(of: cause)
        case .external(let cause): return status(of: cause.error, otherwise: otherwise)
        default: return .failure
        }
    }

    package static func status(of error: CipherError) -> ExitStatus {
        switch error {
        // A header whose parameters are out of range or unknown was altered (or comes from
        // elsewhere): damaged data, as a failing tag in key mode.
        case .tampered, .truncated, .unknownVersion, .kdfParametersTooWeak, .kdfParametersTooExpensive, .unsupportedAlgorithm: return .damaged
        case .wrongKey: return .wrongSecret
        case .io: return .io
        default: return .failure
        }
    }
}
