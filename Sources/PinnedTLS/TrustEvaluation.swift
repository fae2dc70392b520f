import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

/// The outcome of an accepted peer.
public struct TrustEvaluation: Sendable {
    /// The validated chain, leaf first, ending at the anchor.
    public let validatedChain: [Certificate]
    /// The pin that matched, if the entry has pins that were checked and one matched.
    public let matchedPin: SPKIPin?
    /// Why the peer was accepted although something was off: the pin set expired, or no pin
    /// matched in report mode. Empty when everything matched.
    public let warnings: [String]
}

extension TLSTrustError.PresentedCertificate {
    init(_ certificate: Certificate) {
        self.init(subject: certificate.subject.description, pin: try? SPKIPin(certificate: certificate))
    }
}

extension TLSTrustError {
    init(host: String, reason: Reason, chain: [Certificate]) {
        self.init(host: host, reason: reason, presented: chain.map(PresentedCertificate.init))
    }
}

enum ChainValidation {
    /// ``validate(presented:store:serverName:now:)`` against `anchors`, or the chain a full
    /// validation of the same presented certificates against the same anchors and name returned
    /// before, if every certificate of it is still valid at `now` (see ``VerifiedChainCache``).
    /// Only a success is stored.
    static func validate(
        presented: [Certificate], anchors: ResolvedAnchors, serverName: String?, now: Date, cache: CacheLookup?
    ) async -> Result<[Certificate], TLSTrustError.Reason> {
        let key = cache?.key(serverName: serverName, anchors: anchors)
        if let cache, let key, let chain = cache.cache.lookup(key, now: now) { return .success(chain) }
        let result = await validate(presented: presented, store: anchors.store(), serverName: serverName, now: now)
        if case .success(let chain) = result, let cache, let key {
            cache.cache.insert(key, validatedChain: chain)
        }
        return result
    }

    /// Validates `presented` (leaf first) against `store`: RFC 5280 at `now`, plus the server's
    /// identity when `serverName` is given. On failure, finds the most useful reason.
    static func validate(
        presented: [Certificate], store: CertificateStore, serverName: String?, now: Date
    ) async -> Result<[Certificate], TLSTrustError.Reason> {
        guard let leaf = presented.first else { return .failure(.noCertificate) }
        let intermediates = CertificateStore(presented.dropFirst())
        let result: CertificateValidationResult
        // A server's chain must be issued for serverAuth, a client's for clientAuth (see
        // KeyPurposePolicy).
        if let serverName {
            let ip = isIPAddress(serverName)
            var verifier = Verifier(rootCertificates: store) {
                RFC5280Policy(fixedExpiryValidationTime: now)
                KeyPurposePolicy(.server)
                ServerIdentityPolicy(serverHostname: ip ? nil : serverName, serverIP: ip ? serverName : nil)
            }
            result = await verifier.validate(leaf: leaf, intermediates: intermediates)
        } else {
            var verifier = Verifier(rootCertificates: store) {
                RFC5280Policy(fixedExpiryValidationTime: now)
                KeyPurposePolicy(.client)
            }
            result = await verifier.validate(leaf: leaf, intermediates: intermediates)
        }
        switch result {
        case .validCertificate(let chain):
            return .success(Array(chain))
        case .couldNotValidate(let failures):
            return .failure(await classify(leaf: leaf, intermediates: intermediates, store: store, now: now,
                                           serverName: serverName, failures: failures))
        }
    }

    /// Runs only after a failure (the cost is on refused peers): does a chain lead to an anchor
    /// at all (ignoring time), issued for the peer's purpose? Then is it in its validity period?
    /// Then it must be the name.
    private static func classify(
        leaf: Certificate, intermediates: CertificateStore, store: CertificateStore, now: Date, serverName: String?,
        failures: [CertificateValidationResult.PolicyFailure]
    ) async -> TLSTrustError.Reason {
        var timeless = Verifier(rootCertificates: store) {
            RFC5280Policy.withValidityCheckDisabled()
            KeyPurposePolicy(serverName != nil ? .server : .client)
        }
        switch await timeless.validate(leaf: leaf, intermediates: intermediates) {
        case .couldNotValidate(let structural):
            if let first = structural.first { return .invalidChain(first.policyFailureReason.description) }
            return .untrustedAnchor
        case .validCertificate(let chain):
            for certificate in chain {
                if certificate.notValidAfter < now { return .expired }
                if certificate.notValidBefore > now { return .notYetValid }
            }
            if serverName != nil { return .hostnameMismatch }
            return .invalidChain(failures.first?.policyFailureReason.description ?? "rejected by policy")
        }
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// ``matchingPin(_:chain:)`` with the chain's pins computed before (in the chain's order).
    static func matchingPin(_ pins: PinSet, chainPins: [SPKIPin]) -> SPKIPin? {
        chainPins.first { pins.pins.contains($0) }
    }

    /// Checks `pins` against `chain`; returns the matching pin, or nil.
    static func matchingPin(_ pins: PinSet, chain: [Certificate]) -> SPKIPin? {
        for certificate in chain {
            if let pin = SPKIPin.memoized(certificate), pins.pins.contains(pin) { return pin }
        }
        return nil
    }
}

extension TrustPolicy {
    /// Evaluates a server's presented chain (leaf first) for `host`: chain validation against
    /// the entry's anchors (RFC 5280 and the server's identity), then the pins against the
    /// validated chain. Reports go to ``reporter``.
    ///
    /// - Parameters:
    ///   - host: the name the client connects to (and checks the certificate against).
    ///   - port: the port, for reports.
    ///   - presented: the certificates the server sent, leaf first.
    /// - Throws: ``TLSTrustError`` with the reason and the presented chain's pins.
    /// - Returns: The evaluation: the validated chain and the pin that matched, if any.
    public func evaluate(host: String, port: Int, presented: [Certificate]) async throws(TLSTrustError)
        -> TrustEvaluation
    {
        try await evaluate(host: host, port: port, presented: presented, cache: nil)
    }

    /// ``evaluate(host:port:presented:)``, taking the chain validation from `cache` when the same
    /// certificates were validated against the same anchors for the same name before (and are
    /// still within their validity periods), and storing a new success in it.
    func evaluate(host: String, port: Int, presented: [Certificate], cache: CacheLookup?) async throws(TLSTrustError)
        -> TrustEvaluation
    {
        let now = clock()
        // One form for the entry, the name check, the cache key and the reports (see HostPattern).
        guard let host = HostPattern.canonicalHost(host) else {
            throw TLSTrustError(host: host, reason: .hostnameMismatch, chain: presented)
        }
        let entry = entry(for: host)
        guard let anchors = entry?.anchors ?? defaultAnchors else {
            throw TLSTrustError(host: host, reason: .noPolicyForHost, chain: presented)
        }
        let resolved: ResolvedAnchors
        do {
            resolved = try anchors.resolve(source: anchorSource)
        } catch {
            throw TLSTrustError(host: host, reason: error, chain: presented)
        }
        let revocationList: RevocationList?
        do {
            revocationList = try anchors.revocationList(resolved: resolved, now: now)
        } catch {
            throw TLSTrustError(host: host, reason: error, chain: presented)
        }
        let chain: [Certificate]
        switch await ChainValidation.validate(presented: presented, anchors: resolved, serverName: host, now: now,
                                              cache: cache) {
        case .success(let validated):
            if let revocationList {
                do { try RevocationCheck.check(validated, against: revocationList) } catch {
                    throw TLSTrustError(host: host, reason: error, chain: presented)
                }
            }
            chain = validated
        case .failure(let reason):
            if let entry, entry.pins != nil, let reporter {
                reporter.submit(
                    reporter.makeReport(host: host, port: port, entry: entry, served: presented, validated: [],
                                        result: .failedInvalidCertificateChain, reason: reason.code,
                                        pinSetExpired: false, now: now),
                    now: now)
            }
            throw TLSTrustError(host: host, reason: reason, chain: presented)
        }
        guard let entry, let pins = entry.pins else {
            return TrustEvaluation(validatedChain: chain, matchedPin: nil, warnings: [])
        }
        if pins.isExpired(at: now) {
            let warning = "the pin set of \(entry.pattern) expired; only the anchors were checked"
            if let reporter {
                reporter.submit(
                    reporter.makeReport(host: host, port: port, entry: entry, served: presented, validated: chain,
                                        result: .success,
                                        reason: "pin-set-expired", pinSetExpired: true, now: now),
                    now: now)
            }
            return TrustEvaluation(validatedChain: chain, matchedPin: nil, warnings: [warning])
        }
        if let pin = ChainValidation.matchingPin(pins, chain: chain) {
            return TrustEvaluation(validatedChain: chain, matchedPin: pin, warnings: [])
        }
        if let reporter {
            reporter.submit(
                reporter.makeReport(host: host, port: port, entry: entry, served: presented, validated: chain,
                                    result: .failedNoMatchingPin,
                                    reason: TLSTrustError.Reason.noPinMatched.code, pinSetExpired: false, now: now),
                now: now)
        }
        switch pins.mode {
        case .enforce:
            throw TLSTrustError(host: host, reason: .noPinMatched, chain: presented)
        case .report:
            return TrustEvaluation(
                validatedChain: chain, matchedPin: nil,
                warnings: ["no pin of \(entry.pattern) matched; report mode lets the connection proceed"])
        }
    }

    /// Whether evaluating a chain for `host` may wait on something other than computation:
    /// keychain anchors, the system store (loaded from disk on first use), or the report
    /// handler (the application's code, which may write a file).
    func evaluationMayBlock(host: String) -> Bool {
        guard let anchors = entry(for: host)?.anchors ?? defaultAnchors else { return false }
        return reporter != nil || anchors.system || !anchors.keychainLabels.isEmpty || anchors.revocationList != nil
    }

    /// The outcome ``evaluate(host:port:presented:cache:)`` would return, without suspending, when
    /// it is a plain acceptance decided from `cache`: the chain was validated before for this
    /// host against exactly these anchors, every certificate of it is valid now, and the
    /// entry has no pins or one of them matches the validated chain. Anything else (no cache
    /// hit, keychain anchors to resolve, an expired pin set, no pin matching, which all report or
    /// refuse) returns `nil`, and the full evaluation runs.
    func cachedAcceptance(host: String, cache: CacheLookup) -> TrustEvaluation? {
        guard let host = HostPattern.canonicalHost(host) else { return nil }
        let entry = entry(for: host)
        guard let anchors = entry?.anchors ?? defaultAnchors, anchors.keychainLabels.isEmpty,
              anchors.revocationList == nil, let resolved = try? anchors.resolve(source: nil)
        else { return nil }
        let now = clock()
        guard let cached = cache.cache.entry(cache.key(serverName: host, anchors: resolved), now: now) else {
            return nil
        }
        guard let pins = entry?.pins else {
            return TrustEvaluation(validatedChain: cached.validatedChain, matchedPin: nil, warnings: [])
        }
        guard !pins.isExpired(at: now), let pin = ChainValidation.matchingPin(pins, chainPins: cached.pins) else {
            return nil
        }
        return TrustEvaluation(validatedChain: cached.validatedChain, matchedPin: pin, warnings: [])
    }
}

extension ClientAuthentication {
    /// Evaluates a client's presented chain (leaf first): RFC 5280 against the anchors, then
    /// the pins, if any, against the validated chain.
    ///
    /// - Parameters:
    ///   - peer: the client's address, for the error.
    ///   - presented: the certificates the client sent, leaf first.
    /// - Throws: ``TLSTrustError``.
    /// - Returns: The evaluation: the validated chain and the pin that matched, if any.
    public func evaluate(peer: String, presented: [Certificate]) async throws(TLSTrustError) -> TrustEvaluation {
        try await evaluate(peer: peer, presented: presented, cache: nil)
    }

    /// ``evaluate(peer:presented:)`` with the chain validation taken from, and stored in, `cache`.
    func evaluate(peer: String, presented: [Certificate], cache: CacheLookup?) async throws(TLSTrustError)
        -> TrustEvaluation
    {
        do throws(TLSTrustError) {
            return try await evaluateClient(peer: peer, presented: presented, cache: cache)
        } catch {
            var refusal = error
            refusal.role = .client
            throw refusal
        }
    }

    private func evaluateClient(peer: String, presented: [Certificate], cache: CacheLookup?) async throws(TLSTrustError)
        -> TrustEvaluation
    {
        let now = clock()
        let resolved: ResolvedAnchors
        do {
            resolved = try anchors.resolve(source: anchorSource)
        } catch {
            throw TLSTrustError(host: peer, reason: error, chain: presented)
        }
        let revocationList: RevocationList?
        do {
            revocationList = try anchors.revocationList(resolved: resolved, now: now)
        } catch {
            throw TLSTrustError(host: peer, reason: error, chain: presented)
        }
        let chain: [Certificate]
        switch await ChainValidation.validate(presented: presented, anchors: resolved, serverName: nil, now: now,
                                              cache: cache) {
        case .success(let validated):
            if let revocationList {
                do { try RevocationCheck.check(validated, against: revocationList) } catch {
                    throw TLSTrustError(host: peer, reason: error, chain: presented)
                }
            }
            chain = validated
        case .failure(let reason): throw TLSTrustError(host: peer, reason: reason, chain: presented)
        }
        return try decide(peer: peer, presented: presented, chain: chain, now: now)
    }

    /// The pins, if any and not expired, against the validated chain.
    private func decide(peer: String, presented: [Certificate], chain: [Certificate], now: Date)
        throws(TLSTrustError) -> TrustEvaluation
    {
        guard let pins, !pins.isExpired(at: now) else {
            return TrustEvaluation(validatedChain: chain, matchedPin: nil, warnings: [])
        }
        if let pin = ChainValidation.matchingPin(pins, chain: chain) {
            return TrustEvaluation(validatedChain: chain, matchedPin: pin, warnings: [])
        }
        if pins.mode == .enforce {
            throw TLSTrustError(host: peer, reason: .noPinMatched, chain: presented)
        }
        return TrustEvaluation(validatedChain: chain, matchedPin: nil, warnings: ["no client pin matched (report mode)"])
    }

    /// As ``TrustPolicy/evaluationMayBlock(host:)``: keychain anchors or the system store.
    var evaluationMayBlock: Bool { anchors.system || !anchors.keychainLabels.isEmpty || anchors.revocationList != nil }

    /// As ``TrustPolicy/cachedAcceptance(host:cache:)``: a plain acceptance decided from `cache`
    /// without suspending, or `nil` for the full evaluation.
    func cachedAcceptance(cache: CacheLookup) -> TrustEvaluation? {
        guard anchors.keychainLabels.isEmpty, anchors.revocationList == nil,
              let resolved = try? anchors.resolve(source: nil)
        else { return nil }
        let now = clock()
        guard let cached = cache.cache.entry(cache.key(serverName: nil, anchors: resolved), now: now) else {
            return nil
        }
        guard let pins, !pins.isExpired(at: now) else {
            return TrustEvaluation(validatedChain: cached.validatedChain, matchedPin: nil, warnings: [])
        }
        guard let pin = ChainValidation.matchingPin(pins, chainPins: cached.pins) else { return nil }
        return TrustEvaluation(validatedChain: cached.validatedChain, matchedPin: pin, warnings: [])
    }
}
