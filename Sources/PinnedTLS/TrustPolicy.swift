import Foundation
import X509

/// The keys a host's certificate chain must contain one of, and what to do when it does not.
public struct PinSet: Sendable, Equatable {
    /// What happens when no pin matches.
    public enum Mode: String, Sendable, Equatable, CaseIterable {
        /// The connection is refused (and reported).
        case enforce
        /// The connection proceeds; the mismatch is reported.
        case report
    }

    /// The pins; any one of them matching a key of the validated chain is enough.
    public let pins: [SPKIPin]
    /// After this instant the pins are no longer checked (the anchors still are) and a warning
    /// is reported: an application that is not updated in time keeps working instead of
    /// refusing every connection. `nil`: the pins never expire.
    public let expires: Date?
    /// Enforce or report only.
    public let mode: Mode

    /// Creates a pin set.
    ///
    /// - Parameters:
    ///   - pins: the pins; duplicates are dropped.
    ///   - expires: when the pins stop being enforced (nil: never).
    ///   - mode: enforce, or report only.
    /// - Throws: ``PinnedTLSError/invalidConfiguration(_:)`` when enforcing with fewer than two
    ///   distinct pins: with a single pin, losing or rotating that key locks every client out;
    ///   keep a backup key (not yet in use) pinned beside the live one.
    public init(pins: [SPKIPin], expires: Date? = nil, mode: Mode = .enforce) throws(PinnedTLSError) {
        var unique: [SPKIPin] = []
        for pin in pins where !unique.contains(pin) { unique.append(pin) }
        if mode == .enforce && unique.count < 2 {
            throw .invalidConfiguration(
                "an enforced pin set needs at least two distinct pins (the live key and a backup key), got \(unique.count)")
        }
        self.pins = unique
        self.expires = expires
        self.mode = mode
    }

    /// Whether the pins have expired at `date`.
    /// - Parameter date: the time to check.
    /// - Returns: `true` when the set has an expiry and `date` is at or after it.
    public func isExpired(at date: Date) -> Bool {
        guard let expires else { return false }
        return date >= expires
    }
}

/// Supplies anchor certificates kept elsewhere (the keychain) under a label.
public protocol AnchorSource: Sendable {
    /// The certificates stored under `label`.
    ///
    /// - Throws: any error; it refuses the connection with
    ///   ``TLSTrustError/Reason/anchorsUnavailable(_:)``.
    /// - Parameter label: the label the anchors are stored under.
    /// - Returns: the certificates.
    func anchorCertificates(label: String) throws -> [Certificate]
}

/// An ``AnchorSource`` made of a closure.
public struct ClosureAnchorSource: AnchorSource {
    private let body: @Sendable (String) throws -> [Certificate]

    /// Wraps `body`, which returns the certificates for a label.
    /// - Parameter body: returns the certificates stored under a label, or throws.
    public init(_ body: @escaping @Sendable (String) throws -> [Certificate]) {
        self.body = body
    }

    /// The certificates `body` returns for `label`.
    /// - Parameter label: the label the anchors are stored under.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    public func anchorCertificates(label: String) throws -> [Certificate] {
        try body(label)
    }
}

/// The certificates a chain may lead to.
public struct TrustAnchors: Sendable, Equatable {
    /// Whether the system's root store is trusted. Switch it off to trust only the
    /// application's own anchors.
    public var system: Bool
    /// Anchor certificates given directly (read from files, or built in).
    public var certificates: [Certificate]
    /// Labels resolved through the policy's ``AnchorSource`` at each handshake.
    public var keychainLabels: [String]
    /// Marks these anchors as the application's own CA and names its revocation list file (PEM
    /// or DER, as `securefoundation tls crl` writes it). The file is read at the first
    /// handshake and read again whenever it changes; a certificate of a peer's chain that the
    /// list names is refused with ``TLSTrustError/Reason/revoked``. A list that is missing,
    /// malformed, not signed by one of ``certificates`` (or the keychain anchors), or past its
    /// nextUpdate refuses every handshake these anchors cover with
    /// ``TLSTrustError/Reason/revocationListUnusable(_:)``. `nil`: no revocation check.
    public var revocationList: String?

    /// Anchors from their parts.
    /// - Parameters:
    ///   - system: whether the system's root store is trusted.
    ///   - certificates: anchor certificates given directly.
    ///   - keychainLabels: labels resolved through the policy's ``AnchorSource``.
    ///   - revocationList: the own CA's revocation list file (nil: no revocation check).
    public init(system: Bool = false, certificates: [Certificate] = [], keychainLabels: [String] = [],
                revocationList: String? = nil) {
        self.system = system
        self.certificates = certificates
        self.keychainLabels = keychainLabels
        self.revocationList = revocationList
    }

    /// The application's own CA: only `certificates`, checked against the revocation list at
    /// `revocationList`.
    /// - Parameters:
    ///   - certificates: the CA's certificates.
    ///   - revocationList: the revocation list file (see ``revocationList``).
    /// - Returns: anchors with the system store off.
    public static func ownCA(_ certificates: [Certificate], revocationList: String) -> TrustAnchors {
        TrustAnchors(system: false, certificates: certificates, revocationList: revocationList)
    }

    /// The system's root store only.
    public static let systemRoots = TrustAnchors(system: true)

    /// Only the given certificates; the system store is off.
    /// - Parameter certificates: the anchor certificates.
    /// - Returns: anchors with the system store off and no revocation check.
    public static func only(_ certificates: [Certificate]) -> TrustAnchors {
        TrustAnchors(system: false, certificates: certificates)
    }

    var isEmpty: Bool { !system && certificates.isEmpty && keychainLabels.isEmpty }

    /// The anchors with the keychain labels resolved through `source`.
    func resolve(source: (any AnchorSource)?) throws(TLSTrustError.Reason) -> ResolvedAnchors {
        var certificates = self.certificates
        for label in keychainLabels {
            guard let source else {
                throw .anchorsUnavailable("keychain label \"\(label)\" but the policy has no anchor source")
            }
            do {
                certificates += try source.anchorCertificates(label: label)
            } catch {
                throw .anchorsUnavailable("keychain label \"\(label)\": \(error)")
            }
        }
        if !system && certificates.isEmpty {
            throw .anchorsUnavailable("no anchors: the system store is off and no certificate was given")
        }
        return ResolvedAnchors(system: system, certificates: certificates)
    }

    /// The revocation list of these anchors, if they name one, checked against the resolved
    /// anchor certificates and `now`.
    func revocationList(resolved: ResolvedAnchors, now: Date) throws(TLSTrustError.Reason) -> RevocationList? {
        guard let path = revocationList else { return nil }
        return try RevocationCheck.list(path: path, anchors: resolved.certificates, now: now)
    }
}

/// Anchors whose keychain labels were resolved: exactly the certificates a chain is validated
/// against (never empty: ``TrustAnchors/resolve(source:)`` refuses that).
struct ResolvedAnchors: Sendable {
    let system: Bool
    let certificates: [Certificate]

    fileprivate init(system: Bool, certificates: [Certificate]) {
        self.system = system
        self.certificates = certificates
    }

    func store() -> CertificateStore {
        system ? CertificateStore.systemTrustRoots.appending(contentsOf: certificates) : CertificateStore(certificates)
    }
}

/// The trust rules of the hosts a pattern matches.
public struct HostPolicy: Sendable, Equatable {
    /// The hosts this entry covers.
    public var pattern: HostPattern
    /// What the chain must lead to.
    public var anchors: TrustAnchors
    /// The keys the validated chain must contain one of; `nil`: no pinning.
    public var pins: PinSet?

    /// An entry from its parts.
    /// - Parameters:
    ///   - pattern: the hosts this entry covers.
    ///   - anchors: what the chain must lead to (default: the system's roots).
    ///   - pins: the keys the validated chain must contain one of (nil: no pinning).
    public init(pattern: HostPattern, anchors: TrustAnchors = .systemRoots, pins: PinSet? = nil) {
        self.pattern = pattern
        self.anchors = anchors
        self.pins = pins
    }
}

/// The trust policy of a client: per host pattern, the anchors and the pins.
///
/// A server's chain is validated first (RFC 5280 and the server's identity, by
/// swift-certificates' `Verifier`, against the entry's anchors); then the pins are checked
/// against the *validated* chain, so a pinned key that the peer merely sends along in an
/// unrelated certificate does not count.
public struct TrustPolicy: Sendable {
    /// The entries; the most specific matching pattern applies (exact, then `*.`, then `**.`,
    /// longer domains first).
    public var hosts: [HostPolicy]
    /// The anchors for hosts no entry covers; `nil`: such hosts are refused.
    public var defaultAnchors: TrustAnchors?
    /// Resolves ``TrustAnchors/keychainLabels``.
    public var anchorSource: (any AnchorSource)?
    /// Receives pin validation reports (failures, report-mode mismatches, expired pin sets).
    public var reporter: PinReporter?
    /// The current time, for certificate validity and pin expiry.
    public var clock: @Sendable () -> Date

    /// A policy from its parts.
    /// - Parameters:
    ///   - hosts: the entries.
    ///   - defaultAnchors: the anchors for hosts no entry covers (nil: such hosts are refused).
    ///   - anchorSource: resolves ``TrustAnchors/keychainLabels``.
    ///   - reporter: receives pin validation reports.
    ///   - clock: the current time, for certificate validity and pin expiry.
    public init(
        hosts: [HostPolicy] = [],
        defaultAnchors: TrustAnchors? = .systemRoots,
        anchorSource: (any AnchorSource)? = nil,
        reporter: PinReporter? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.hosts = hosts
        self.defaultAnchors = defaultAnchors
        self.anchorSource = anchorSource
        self.reporter = reporter
        self.clock = clock
    }

    /// The entry that applies to `host`, if any.
    /// - Parameter host: the host connected to.
    /// - Returns: the most specific entry whose pattern matches `host`, or `nil` when none does.
    public func entry(for host: String) -> HostPolicy? {
        hosts.filter { $0.pattern.matches(host) }
            .max { $0.pattern.specificity < $1.pattern.specificity }
    }
}

/// Which client certificates a server accepts (mutual TLS).
public struct ClientAuthentication: Sendable {
    /// What the client's chain must lead to.
    public var anchors: TrustAnchors
    /// Optionally, keys the client's validated chain must contain one of.
    public var pins: PinSet?
    /// Resolves ``TrustAnchors/keychainLabels``.
    public var anchorSource: (any AnchorSource)?
    /// The current time, for certificate validity.
    public var clock: @Sendable () -> Date

    /// Requires a client certificate issued under `anchors`.
    /// - Parameters:
    ///   - anchors: what the client's chain must lead to.
    ///   - pins: keys the client's validated chain must contain one of (nil: no pinning).
    ///   - anchorSource: resolves ``TrustAnchors/keychainLabels``.
    ///   - clock: the current time, for certificate validity.
    public init(
        anchors: TrustAnchors,
        pins: PinSet? = nil,
        anchorSource: (any AnchorSource)? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.anchors = anchors
        self.pins = pins
        self.anchorSource = anchorSource
        self.clock = clock
    }
}
