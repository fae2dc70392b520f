import Cipher
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SwiftASN1
import X509

/// A ``TrustPolicy`` (a client checking servers) or a ``ClientAuthentication`` (a server
/// checking clients) for any stack that builds its own swift-nio-ssl pipeline and takes the
/// verification callback with metadata: a `ClientBootstrap` or `ServerBootstrap` of one's own,
/// grpc-swift's NIO transport.
///
/// ``verificationCallback(peer:port:onOutcome:)`` gives swift-nio-ssl's
/// `NIOSSLCustomVerificationCallbackWithMetadata` for one connection: the presented chain is
/// validated (RFC 5280, the server's name on the client side), the pins are checked against the
/// validated chain, reports and revocation lists apply, exactly as in ``PinnedTLSClient`` and
/// ``PinnedTLSServer`` (the same code). The validated chain is handed back to BoringSSL, so
/// the application reads it from the channel afterwards
/// (`channel.nioSSL_peerValidatedCertificateChain()`), and the typed refusal or acceptance
/// reaches `onOutcome`, since BoringSSL itself only reports a failed handshake.
///
/// Give the handler a `TLSConfiguration` whose `certificateVerification` is not `.none`
/// (swift-nio-ssl calls the callback only then): ``TLSIdentity/serverConfiguration(clientCertificates:)``
/// and ``clientConfiguration(identity:)`` make such configurations.
///
/// ```swift
/// let verifier = NIOVerifier(policy: policy)
/// let handler = try NIOSSLClientHandler(
///     context: NIOSSLContext(configuration: try NIOVerifier.clientConfiguration()),
///     serverHostname: "api.example.com",
///     customVerificationCallbackWithMetadata: verifier.verificationCallback(peer: "api.example.com", port: 443))
/// ```
public final class NIOVerifier: Sendable {
    private enum Checks: Sendable {
        case servers(TrustPolicy)
        case clients(ClientAuthentication)
    }

    private let checks: Checks
    private let cache: VerifiedChainCache?

    /// Checks servers (the client side) under `policy`.
    /// - Parameters:
    ///   - policy: the anchors and pins per host.
    ///   - verifiedChainCacheSize: how many validated chains are remembered (0: none); validity
    ///     periods and pins are checked again at every handshake, refusals are never remembered.
    public init(policy: TrustPolicy, verifiedChainCacheSize: Int = 256) {
        checks = .servers(policy)
        cache = verifiedChainCacheSize > 0 ? VerifiedChainCache(capacity: verifiedChainCacheSize) : nil
    }

    /// Checks clients (the server side, mutual TLS) under `clientAuthentication`.
    /// - Parameters:
    ///   - clientAuthentication: the anchors and pins a client's chain must meet.
    ///   - verifiedChainCacheSize: as for ``init(policy:verifiedChainCacheSize:)``.
    public init(clientAuthentication: ClientAuthentication, verifiedChainCacheSize: Int = 256) {
        checks = .clients(clientAuthentication)
        cache = verifiedChainCacheSize > 0 ? VerifiedChainCache(capacity: verifiedChainCacheSize) : nil
    }

    /// The callback for one connection.
    /// - Parameters:
    ///   - peer: checking servers: the host name connected to (the certificate is checked
    ///     against it, and it selects the policy's entry); checking clients: the client's
    ///     address, for messages.
    ///   - port: the port connected to, for pin reports (checking servers).
    ///   - onOutcome: called once per handshake with the evaluation or the typed refusal,
    ///     before swift-nio-ssl continues the handshake.
    /// - Returns: the callback to give `NIOSSLClientHandler` or `NIOSSLServerHandler`.
    public func verificationCallback(
        peer: String, port: Int = 443,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        let outcome = NIOLockedValueBox<VerificationOutcome?>(nil)
        let inner: NIOSSLCustomVerificationCallbackWithMetadata
        switch checks {
        case .servers(let policy):
            let name = HostPattern.canonicalHost(peer) ?? peer
            inner = NIOBridge.callback(
                outcome: outcome, peer: { name }, cache: cache, evaluationMayBlock: policy.evaluationMayBlock(host: name),
                cachedAcceptance: { policy.cachedAcceptance(host: name, cache: $0) }
            ) { presented, lookup throws(TLSTrustError) in
                try await policy.evaluate(host: name, port: port, presented: presented, cache: lookup)
            }
        case .clients(let authentication):
            inner = NIOBridge.callback(
                outcome: outcome, peer: { peer }, cache: cache, evaluationMayBlock: authentication.evaluationMayBlock,
                cachedAcceptance: { authentication.cachedAcceptance(cache: $0) }
            ) { presented, lookup throws(TLSTrustError) in
                try await authentication.evaluate(peer: peer, presented: presented, cache: lookup)
            }
        }
        guard let onOutcome else { return inner }
        return { presented, promise in
            let decided = promise.futureResult.eventLoop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
            decided.futureResult.whenComplete { result in
                switch outcome.withLockedValue({ $0 }) {
                case .accepted(let evaluation): onOutcome(.success(evaluation))
                case .refused(let error): onOutcome(.failure(error))
                case nil: break
                }
                promise.completeWith(result)
            }
            inner(presented, decided)
        }
    }

    /// A client configuration for a handler given ``verificationCallback(peer:port:onOutcome:)``:
    /// TLS 1.2 and 1.3, verification requested (so swift-nio-ssl calls the callback, which then
    /// decides alone: the policy's anchors and the host name check, not the system's), and `identity` as the client
    /// certificate for mutual TLS (a key in a token or the TPM stays there).
    /// - Parameter identity: the client certificate and key to present, if any.
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` when the identity cannot be handed to TLS.
    /// - Returns: the configuration.
    public static func clientConfiguration(identity: TLSIdentity? = nil) throws(PinnedTLSError) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        NIOBridge.restrictVersions(&configuration)
        configuration.certificateVerification = .noHostnameVerification
        configuration.trustRoots = .certificates([])
        if let identity { try NIOBridge.install(identity, in: &configuration) }
        return configuration
    }
}

extension TLSIdentity {
    /// This identity as a swift-nio-ssl server configuration (TLS 1.2 and 1.3; a key in a token
    /// or the TPM signs there), for a server stack that takes a `TLSConfiguration`.
    ///
    /// With `clientCertificates` the server requires a client certificate and verification is
    /// left to a ``NIOVerifier`` callback given to the `NIOSSLServerHandler` (the configuration
    /// trusts no root by itself); without it, no client certificate is asked for.
    /// - Parameter clientCertificates: whether clients must present a certificate (mutual TLS).
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` when the identity cannot be handed to TLS.
    /// - Returns: the configuration.
    public func serverConfiguration(clientCertificates: Bool) throws(PinnedTLSError) -> TLSConfiguration {
        let material = try NIOBridge.material(self)
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: material.chain, privateKey: material.key)
        NIOBridge.restrictVersions(&configuration)
        configuration.trustRoots = .certificates([])
        configuration.certificateVerification = clientCertificates ? .noHostnameVerification : .none
        return configuration
    }
}

extension TLSIdentity {
    /// The certificate chain, leaf first, DER-encoded: for TLS stacks that take certificates as
    /// bytes (grpc-swift's `TLSConfig.CertificateSource.bytes(_:format:)`).
    public var chainDER: [[UInt8]] {
        get throws(PinnedTLSError) {
            do {
                return try chain.map { certificate in
                    var serializer = DER.Serializer()
                    try serializer.serialize(certificate)
                    return serializer.serializedBytes
                }
            } catch {
                throw .invalidIdentity("a certificate of the identity cannot be encoded: \(error)")
            }
        }
    }

    /// A key in a PKCS #11 token or the TPM as swift-nio-ssl's custom key (BoringSSL asks the
    /// hardware for each signature), for stacks that take one
    /// (grpc-swift's `TLSConfig.PrivateKeySource.customPrivateKey(_:)`); nil for a key in memory.
    public var hardwareTLSKey: (any NIOSSLCustomPrivateKey & Hashable)? {
        guard case .hardware(let key) = self.key else { return nil }
        return TokenTLSKey(key: key)
    }

    /// A key in memory as PKCS #8 DER in `SecretBytes`, for stacks that take a key as bytes;
    /// nil for a key in hardware (see ``hardwareTLSKey``).
    public func softwareKeyDER() throws(PinnedTLSError) -> SecretBytes? {
        guard case .software(let key) = self.key else { return nil }
        do {
            var der = try key.serializeAsPEM().derBytes
            defer { scrubBytes(&der) }
            return SecretBytes(copying: der)
        } catch {
            throw .invalidIdentity("the identity's key cannot be encoded: \(error)")
        }
    }
}
