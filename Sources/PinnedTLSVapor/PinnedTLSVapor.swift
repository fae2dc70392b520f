import NIOSSL
import PinnedTLS
import Vapor

extension HTTPServer.Configuration {
    /// Serves HTTPS with `identity` (its key may be in a token or the TPM: it signs there), and
    /// with `clientAuthentication` requires mutual TLS under it: a client without a certificate,
    /// or whose chain does not lead to the anchors, or whose key no pin matches, is refused
    /// during the handshake by the same checks as `PinnedTLSServer`.
    ///
    /// The chain the policy validated is handed back to swift-nio-ssl, so a route reads it from
    /// `Request.peerCertificateChain` (leaf first).
    ///
    /// ```swift
    /// let app = try await Application.make(.production)
    /// try app.http.server.configuration.usePinnedTLS(identity: identity, clientAuthentication: clients)
    /// app.get("whoami") { request in
    ///     request.peerCertificateChain?.leaf.subject.description ?? "nobody"
    /// }
    /// ```
    /// - Parameters:
    ///   - identity: the server's certificate chain and key.
    ///   - clientAuthentication: the client certificates accepted; nil asks for none.
    ///   - onOutcome: called once per handshake with the verdict on the client's chain (a
    ///     refused client never reaches a route, so this is where refusals are seen).
    /// - Throws: `PinnedTLSError.invalidIdentity` when the identity cannot be handed to TLS.
    public mutating func usePinnedTLS(
        identity: TLSIdentity, clientAuthentication: ClientAuthentication? = nil,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) throws(PinnedTLSError) {
        let configuration = try identity.serverConfiguration(clientCertificates: clientAuthentication != nil)
        // Fails here, not at the first connection, when swift-nio-ssl refuses the identity.
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .invalidIdentity("swift-nio-ssl refused the identity: \(error)")
        }
        tlsConfiguration = configuration
        customCertificateVerifyCallback = nil
        customCertificateVerifyCallbackWithMetadata = clientAuthentication.map { authentication in
            let verifier = NIOVerifier(clientAuthentication: authentication)
            // Vapor gives every connection this one closure: each handshake gets a callback of its
            // own (its own outcome record), as NIOVerifier's callbacks are made per connection.
            return { presented, promise in
                verifier.verificationCallback(peer: "client", onOutcome: onOutcome)(presented, promise)
            }
        }
    }
}
