/// Everything PinnedTLS fails with, apart from a refused peer (``TLSTrustError``). Each case says
/// what went wrong and what to do.
public enum PinnedTLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A policy or configuration file is not acceptable; the text says where and why.
    case invalidConfiguration(String)
    /// A certificate or key could not be read or does not fit (`what` names the file or item).
    case invalidIdentity(String)
    /// The TCP connection could not be made, or the TLS handshake failed for a reason other
    /// than the policy (the peer's alert, no shared protocol version or cipher...).
    case connectionFailed(host: String, port: Int, detail: String)
    /// A network wait ran out: `what` was not done within `seconds`.
    case timedOut(what: String, seconds: Double)
    /// The HTTP exchange failed or the response could not be parsed.
    case http(String)
    /// Reading or writing a file failed.
    case io(path: String, detail: String)
    /// A file named by a policy, a command or a configuration is not a regular file (`kind`
    /// says what it is: a FIFO, a character device...); it is refused without being read.
    case notARegularFile(path: String, kind: String)
    /// A file named by a policy, a command or a configuration is larger than `limit` bytes.
    case fileTooLarge(path: String, limit: Int)

    /// What went wrong, for people.
    public var description: String {
        switch self {
        case .invalidConfiguration(let detail):
            return "invalid TLS policy: \(detail)"
        case .invalidIdentity(let detail):
            return "invalid certificate or key: \(detail)"
        case let .connectionFailed(host, port, detail):
            return "connection to \(host):\(port) failed: \(detail)"
        case let .timedOut(what, seconds):
            return "\(what) did not finish within \(seconds) s; check that the peer is up and reachable"
        case .http(let detail):
            return "HTTP exchange failed: \(detail)"
        case let .io(path, detail):
            return "cannot access \(path): \(detail)"
        case let .notARegularFile(path, kind):
            return "\(path) is \(kind), not a regular file: name a file (certificates, keys, policies and reports are plain files)"
        case let .fileTooLarge(path, limit):
            return "\(path) is larger than \(limit) bytes: name the right file (a certificate, key or policy file is small)"
        }
    }
}

/// A peer refused by the trust policy: who, why, and the `sha256/` pin of every certificate it
/// presented, so that the right pin can be copied from the message.
public struct TLSTrustError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why the peer was refused.
    public enum Reason: Error, Sendable, Equatable, CustomStringConvertible {
        /// The peer presented no certificate (a client that the server asked for one).
        case noCertificate
        /// A presented certificate does not parse.
        case malformedCertificate(String)
        /// No chain leads from the presented certificates to one of the policy's anchors.
        case untrustedAnchor
        /// The chain is trusted but the leaf is not issued for the host name.
        case hostnameMismatch
        /// A certificate of the chain has expired.
        case expired
        /// A certificate of the chain is not valid yet.
        case notYetValid
        /// The chain breaks another RFC 5280 rule (basic constraints, key usage...).
        case invalidChain(String)
        /// The chain is trusted, but none of its keys is among the host's pins.
        case noPinMatched
        /// No entry of the policy covers the host and the policy has no default.
        case noPolicyForHost
        /// The policy's anchors could not be loaded (a keychain label without a source...).
        case anchorsUnavailable(String)
        /// A certificate of the validated chain is on the revocation list of the application's
        /// own CA.
        case revoked
        /// The revocation list the anchors name cannot be used (missing, malformed, not signed
        /// by the anchors, past its nextUpdate): every peer under these anchors is refused.
        case revocationListUnusable(String)

        /// A short phrase.
        public var description: String {
            switch self {
            case .noCertificate: return "the peer presented no certificate"
            case .malformedCertificate(let detail): return "a presented certificate does not parse (\(detail))"
            case .untrustedAnchor: return "the chain does not lead to a trusted anchor"
            case .hostnameMismatch: return "the certificate is not issued for this host name"
            case .expired: return "a certificate of the chain has expired"
            case .notYetValid: return "a certificate of the chain is not valid yet"
            case .invalidChain(let detail): return "the chain is invalid (\(detail))"
            case .noPinMatched: return "no key of the validated chain matches the host's pins"
            case .noPolicyForHost: return "no policy entry covers this host"
            case .anchorsUnavailable(let detail): return "the anchors could not be loaded (\(detail))"
            case .revoked: return "a certificate of the chain is revoked by its CA's revocation list"
            case .revocationListUnusable(let detail): return "the revocation list cannot be used (\(detail))"
            }
        }

        /// A stable identifier for reports and scripts.
        public var code: String {
            switch self {
            case .noCertificate: return "no-certificate"
            case .malformedCertificate: return "malformed-certificate"
            case .untrustedAnchor: return "untrusted-anchor"
            case .hostnameMismatch: return "hostname-mismatch"
            case .expired: return "expired"
            case .notYetValid: return "not-yet-valid"
            case .invalidChain: return "invalid-chain"
            case .noPinMatched: return "no-pin-matched"
            case .noPolicyForHost: return "no-policy-for-host"
            case .anchorsUnavailable: return "anchors-unavailable"
            case .revoked: return "revoked"
            case .revocationListUnusable: return "revocation-list-unusable"
            }
        }
    }

    /// One presented certificate: its subject and the pin of its key.
    public struct PresentedCertificate: Sendable, Equatable {
        /// The subject's distinguished name.
        public let subject: String
        /// The `sha256/` pin of its public key, if the key could be encoded.
        public let pin: SPKIPin?
    }

    /// Which side the refused peer was.
    public enum PeerRole: Sendable, Equatable {
        /// A server this client connected to.
        case server
        /// A client of this server (mutual TLS).
        case client
    }

    /// The host name (or, for a client certificate, the peer's address) that was refused.
    public let host: String
    /// Whether the refused peer was a server or a client (the advice differs).
    public var role: PeerRole = .server
    /// Why.
    public let reason: Reason
    /// The certificates the peer presented, in the order it sent them (leaf first).
    public let presented: [PresentedCertificate]

    /// The `sha256/` pins of the presented chain, leaf first.
    public var presentedPins: [SPKIPin] { presented.compactMap(\.pin) }

    /// A refusal of the chain `host` presented.
    /// - Parameters:
    ///   - host: The peer's name or address.
    ///   - reason: Why it was refused.
    ///   - presented: The certificates it presented, leaf first.
    public init(host: String, reason: Reason, presented: [PresentedCertificate]) {
        self.host = host
        self.reason = reason
        self.presented = presented
    }

    /// The refusal, the chain's pins, and what to do.
    public var description: String {
        var lines = ["TLS peer \(host) refused: \(reason)"]
        if !presented.isEmpty {
            lines.append("presented chain (leaf first):")
            for (index, certificate) in presented.enumerated() {
                lines.append("  \(index): \(certificate.pin?.description ?? "(key not encodable)")  \(certificate.subject)")
            }
        }
        switch reason {
        case .noPinMatched where role == .client:
            lines.append("if this client is genuine, add the pin of its key or its CA's key (and a backup pin) to the client pins")
        case .noPinMatched:
            lines.append("if this server is genuine, add the pin of its key or its CA's key (and a backup pin) to the policy")
        case .untrustedAnchor where role == .client:
            lines.append("if this client is genuine, add its CA certificate to the anchors of client certificates (--client-ca, or the policy's defaultAnchors)")
        case .untrustedAnchor:
            lines.append("if this server is genuine, add its CA certificate to the host's anchors")
        case .noCertificate where role == .client:
            lines.append("the client must present a certificate issued under the anchors of client certificates")
        case .hostnameMismatch:
            lines.append("connect with the name the certificate is issued for, or issue a certificate for this name")
        case .expired, .notYetValid:
            lines.append("renew the certificate, or check the clock")
        case .revoked:
            lines.append("the CA revoked this certificate: issue a new one with `securefoundation tls issue` (on the CA machine)")
        case .revocationListUnusable:
            lines.append("every peer under these anchors is refused until a valid list is in place: export one with `securefoundation tls crl` on the CA machine")
        default:
            break
        }
        return lines.joined(separator: "\n")
    }
}
