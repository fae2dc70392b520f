import HummingbirdTLS
import PinnedTLS

extension TLSChannelConfiguration {
    /// HTTPS for a Hummingbird 2 application with `identity` (its key may be in a token or the
    /// TPM: it signs there), and with `clientAuthentication` mutual TLS under it: a client
    /// without a certificate, or whose chain does not lead to the anchors, or whose key no pin
    /// matches, is refused during the handshake, by the same checks as ``PinnedTLSServer``.
    ///
    /// ```swift
    /// let app = Application(
    ///     router: router,
    ///     server: try .tls(.http1(), configuration: .pinned(identity: identity, clientAuthentication: clients)))
    /// ```
    ///
    /// A handler reads the client's certificate with `nioSSL_peerCertificate()` on the request's
    /// channel; `onOutcome` receives each verdict (the validated chain, or the typed refusal),
    /// since the HTTP layer never sees a refused client.
    /// - Parameters:
    ///   - identity: the server's certificate chain and key.
    ///   - clientAuthentication: the client certificates accepted (nil: none asked for).
    ///   - onOutcome: called once per handshake with the verdict on the client's chain.
    /// - Throws: `PinnedTLSError.invalidIdentity` when the identity cannot be handed to TLS.
    /// - Returns: the configuration for `HTTPServerBuilder.tls(_:configuration:)`.
    public static func pinned(
        identity: TLSIdentity, clientAuthentication: ClientAuthentication? = nil,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) throws(PinnedTLSError) -> TLSChannelConfiguration {
        let configuration = try identity.serverConfiguration(clientCertificates: clientAuthentication != nil)
        guard let clientAuthentication else { return TLSChannelConfiguration(tlsConfiguration: configuration) }
        let verifier = NIOVerifier(clientAuthentication: clientAuthentication)
        return TLSChannelConfiguration(
            tlsConfiguration: configuration,
            customVerificationCallback: verifier.plainVerificationCallback(peer: "client", onOutcome: onOutcome))
    }
}
