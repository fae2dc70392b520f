import Foundation
import HardwareKeys

/// Everything device sharing fails with; each message says what to do.
public enum ShareError: Error, Sendable, Equatable, CustomStringConvertible {
    /// This machine has no group root or device identity: run `share init`.
    case notAMember(String)
    /// The vault is locked and the key needed is sealed under it.
    case locked(String)
    /// A device name is not a DNS label (letters, digits, hyphens; 1 to 63 characters).
    case invalidDeviceName(String)
    /// A file name announced or given is not acceptable (empty, over 255 bytes, a path
    /// separator, `..`, a leading dot or a control character).
    case invalidFileName(String)
    /// The file is larger than the receiver accepts.
    case tooLarge(size: UInt64, limit: UInt64)
    /// The peer's certificate was refused: it is not issued by the group's root, is expired,
    /// or was presented without one.
    case peerRefused(String)
    /// A device certificate is revoked in this group: the peer's (the receiver's, checked by
    /// the sender; the sender's, checked by the receiver), or, on the sender, its own, as the
    /// receiver's refusal said.
    case revoked(device: String)
    /// The receiver is a member, but not the device named with `--device`.
    case deviceMismatch(expected: String, found: [String])
    /// The connection could not be made or broke.
    case connectionFailed(String)
    /// The peer sent bytes that are not this protocol (wrong magic, unknown version, a field
    /// out of bounds, extra or missing bytes).
    case protocolViolation(String)
    /// The bytes received do not have the digest the sender announced.
    case digestMismatch
    /// The receiver refused or failed to store the file.
    case rejected(String)
    /// A file of this machine could not be read or written.
    case io(path: String, detail: String)
    /// The keychain or a protected file failed.
    case storage(String)
    /// An enrolment invitation or request is unusable (expired, used, forged, damaged).
    case invalidEnrolment(String)
    /// Nothing of that name.
    case notFound(String)
    /// The group's record of revoked devices is missing or does not match what it commits to:
    /// the data directory was changed behind this program's back, and which devices are revoked
    /// is unknown. Nothing is served or sent until it is repaired.
    case revocationsTampered(String)
    /// The state file of a watched folder (`share send --watch`) does not open under this
    /// vault's key for that folder and receiver: it was changed, or is another one's.
    case watchStateTampered(path: String, folder: String)
    /// A key of the group that stays in hardware (this device's key, or the group root's, in a
    /// PKCS #11 token or the TPM) could not be opened or did not sign: the hardware's own error.
    /// Nothing falls back to a software key.
    case hardwareKey(HardwareKeyError)
    /// A key of the group stays in a PKCS #11 token at `location`, and no way to open it was
    /// given (its module and PIN).
    case hardwareKeyRequired(location: String)
    /// The key in hardware at `location` is not the key its certificate certifies: the record
    /// naming it was replaced, or the token holds another key under that name.
    case hardwareKeyMismatch(location: String)

    public var description: String {
        switch self {
        case .notAMember(let detail):
            return "this machine is not a member of a sharing group (\(detail)): run `securefoundation share init --new-group` or join one"
        case .locked(let detail):
            return "the vault is locked (\(detail)): give the passcode with --passcode-file"
        case .invalidDeviceName(let name):
            return "\"\(name)\" is not a device name: use letters, digits and hyphens (1 to 63 characters)"
        case .invalidFileName(let detail):
            return "unacceptable file name: \(detail)"
        case let .tooLarge(size, limit):
            return "the file has \(size) bytes, more than the receiver accepts (\(limit)); raise its --max-size"
        case .peerRefused(let detail):
            return "the peer's certificate was refused: \(detail); only devices of this group are trusted"
        case .revoked(let device):
            return "the device \(device) is revoked in this group"
        case let .deviceMismatch(expected, found):
            return "the receiver is \(found.joined(separator: ", ")), not \(expected): check the address"
        case .connectionFailed(let detail):
            return "connection failed: \(detail)"
        case .protocolViolation(let detail):
            return "protocol violation: \(detail)"
        case .digestMismatch:
            return "the bytes received do not match the SHA-256 digest announced by the sender; nothing was stored: send the file again"
        case .rejected(let detail):
            return "the receiver did not store the file: \(detail)"
        case let .io(path, detail):
            return "\(path): \(detail)"
        case .storage(let detail):
            return "storage failed: \(detail)"
        case .invalidEnrolment(let detail):
            return "unusable enrolment: \(detail); ask for a new invitation"
        case .notFound(let detail):
            return "not found: \(detail)"
        case let .watchStateTampered(path, folder):
            return "the watch state \(path) does not open under this vault's key for this folder and receiver (changed, or another one's): remove it to send every file of \(folder) again"
        case .hardwareKey(let error):
            return "a key of this group in hardware cannot be used: \(error)"
        case .hardwareKeyRequired(let location):
            return "a key of this group stays in hardware (\(location)): give the token's --module and PIN"
        case .hardwareKeyMismatch(let location):
            return "the key in hardware at \(location) is not the key its certificate certifies: the record naming it was "
                + "replaced, or the token holds another key under that name; nothing was signed"
        case .revocationsTampered(let detail):
            return "the revocation list cannot be trusted: \(detail); the data directory was changed: restore it from a backup, or make this machine's group again (`share init --new-group --replace`, or join again) and revoke the devices again"
        }
    }
}
