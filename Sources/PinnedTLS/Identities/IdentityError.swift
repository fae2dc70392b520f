import HardwareKeys
import Foundation
import HardwareKeys
import Keychain
import Vault

/// Everything the identity store, the importers and the certificate authority can fail with.
/// Each message says what went wrong and what to do.
public enum IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No item of this kind is stored under the label.
    case notFound(kind: IdentityItemKind, label: String)
    /// An item of this kind is stored under the label already.
    case duplicate(kind: IdentityItemKind, label: String)
    /// The class key of the item is unavailable: the vault is locked (or was never unlocked in
    /// this process, or is not set up).
    case locked(label: String, accessibility: Accessibility, reason: ClassKeyUnavailableReason)
    /// The item is stored under a weaker class than the caller requires.
    case accessibilityTooWeak(label: String, stored: Accessibility, required: Accessibility)
    /// A label that cannot name an item (empty, too long, or with control characters).
    case invalidLabel(String)
    /// PEM text that does not parse: truncated, no `BEGIN`/`END` block, bad base64, or a block
    /// of an unexpected type.
    case invalidPEM(String)
    /// Bytes that are not a PKCS#12 file, or one without the private key and its certificate.
    case invalidPKCS12(String)
    /// The PKCS#12 file's integrity check failed under the password given (or without one).
    case wrongPassword
    /// A certificate that does not parse.
    case invalidCertificate(String)
    /// The private key is not the key of the (leaf) certificate.
    case keyDoesNotMatchCertificate(String)
    /// A key type or size the store does not accept (P-256, P-384 and RSA of 2048 bits or more are).
    case unsupportedKey(String)
    /// A stored record that does not parse (damaged, or written by a newer version).
    case corruptedRecord(label: String, detail: String)
    /// A name that is neither a DNS name nor an IP address, or a certificate request that is not valid.
    case invalidName(String)
    /// A certificate signing request that does not parse or whose signature does not verify.
    case invalidRequest(String)
    /// A certificate that cannot act as a certificate authority (not CA:true, no keyCertSign, or
    /// its key is not the one given).
    case notAnAuthority(String)
    /// Building or signing a certificate failed.
    case signingFailed(String)
    /// The keychain failed otherwise (database, permissions, disk full, damaged row).
    case keychain(String)
    /// A certificate revocation list does not parse, is too large, or cannot take more entries.
    case invalidRevocationList(String)
    /// The certificate to revoke was not issued by this authority (or is the authority itself).
    case notIssuedByAuthority(String)
    /// The key that stays in hardware (a PKCS #11 token, the TPM) failed: it could not be
    /// opened or did not sign. Nothing falls back to a software key.
    case hardwareKey(HardwareKeyError)
    /// The item's key stays in hardware at `location`; the caller must open it (give the
    /// token's module and PIN).
    case hardwareKeyRequired(label: String, location: String)
    /// The hardware key the item names is not its certificate's key (a swapped record, or a
    /// token whose key was replaced).
    case hardwareKeyMismatch(label: String, location: String)

    public var description: String {
        switch self {
        case let .notFound(kind, label):
            return "no \(kind.noun) is stored under the label \"\(label)\"; list the stored items with `securefoundation tls list`"
        case let .duplicate(kind, label):
            return "a \(kind.noun) is stored under the label \"\(label)\" already; choose another label, delete it first, or replace it (--replace)"
        case let .locked(label, accessibility, reason):
            return "the \(accessibility.name) class key that protects \"\(label)\" is unavailable (\(reason)); unlock the vault with its passcode first"
        case let .accessibilityTooWeak(label, stored, required):
            return "refusing \"\(label)\": it is stored as \(stored.name), weaker than the \(required.name) required; store it again with the required accessibility"
        case .invalidLabel(let detail):
            return "invalid label: \(detail); use 1 to 200 printable characters"
        case .invalidPEM(let detail):
            return "not usable PEM: \(detail); give the complete file, with its -----BEGIN and -----END lines"
        case .invalidPKCS12(let detail):
            return "not a usable PKCS#12 file: \(detail); export it again with its private key and certificate (openssl pkcs12 -export -inkey KEY -in CERT)"
        case .wrongPassword:
            return "the PKCS#12 file does not open with this password (or it needs one); give the password it was exported with"
        case .invalidCertificate(let detail):
            return "not a usable certificate: \(detail)"
        case .keyDoesNotMatchCertificate(let detail):
            return "the private key does not belong to the certificate: \(detail); give the key that was used to request this certificate"
        case .unsupportedKey(let detail):
            return "unsupported key: \(detail); use a P-256 (recommended), P-384 or RSA key of at least 2048 bits"
        case let .corruptedRecord(label, detail):
            return "the stored item \"\(label)\" does not parse (\(detail)); delete it and import it again"
        case .invalidName(let detail):
            return "invalid name: \(detail); give a DNS name (device-1.example.com) or an IP address"
        case .invalidRequest(let detail):
            return "unusable certificate signing request: \(detail); create it again (openssl req -new -key KEY)"
        case .notAnAuthority(let detail):
            return "not a certificate authority: \(detail); create one with `securefoundation tls ca init`"
        case .signingFailed(let detail):
            return "could not build or sign the certificate: \(detail)"
        case .keychain(let detail):
            return "keychain error: \(detail)"
        case .invalidRevocationList(let detail):
            return "invalid certificate revocation list: \(detail); export a fresh one with `securefoundation tls crl`"
        case .notIssuedByAuthority(let detail):
            return "cannot revoke: \(detail); name a certificate this authority issued (by its label or pin), or give --ca"
        case .hardwareKey(let error):
            return "the key in hardware failed: \(error)"
        case let .hardwareKeyRequired(label, location):
            return "the key of \"\(label)\" stays in hardware (\(location)); give the token's module and PIN "
                + "(--module PATH, --pin-file FILE) to use it"
        case let .hardwareKeyMismatch(label, location):
            return "refusing \"\(label)\": the hardware key \(location) is not its certificate's key (the stored record "
                + "was swapped, or the token's key replaced); nothing was signed. Check the token, or create the item again"
        }
    }

    /// Maps a keychain error about the item `label` of `kind`.
    static func from(_ error: KeychainError, kind: IdentityItemKind, label: String) -> IdentityError {
        switch error {
        case .itemNotFound: return .notFound(kind: kind, label: label)
        case .duplicateItem: return .duplicate(kind: kind, label: label)
        case let .interactionNotAllowed(accessibility, reason):
            return .locked(label: label, accessibility: accessibility, reason: reason)
        case let .accessibilityTooWeak(_, stored, required):
            return .accessibilityTooWeak(label: label, stored: stored, required: required)
        default: return .keychain(error.description)
        }
    }
}

/// The three kinds of item, as the system keychain's key, certificate and identity classes.
public enum IdentityItemKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A private key.
    case privateKey = "key"
    /// One or more certificates (a chain, or a set of anchors).
    case certificate
    /// A private key and the certificate chain that vouches for it.
    case identity

    /// The reserved keychain service the kind's items are stored under (the account is the label).
    public var service: String { "securefoundation.tls." + rawValue }

    /// "private key", "certificate", "identity".
    var noun: String {
        switch self {
        case .privateKey: return "private key"
        case .certificate: return "certificate"
        case .identity: return "identity"
        }
    }

    public var description: String { rawValue }
}
