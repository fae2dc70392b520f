import GRPCNIOTransportHTTP2
import NIOSSL
import PinnedTLS

// No server side here: grpc-swift's NIO server transport makes one TLS context for its
// listener, and BoringSSL resumes a session on it without asking for the client's certificate or
// calling the verification callback, so a client once accepted could come back without one.
// PinnedTLSServer and PinnedTLSHummingbird make a context per connection for this reason; the
// gRPC transport offers no way to (docs/SERVER-SWIFT.md).

@available(macOS 15.0, iOS 18.0, *)
extension HTTP2ClientTransport.Posix.TransportSecurity {
    /// TLS for a grpc-swift 2 client over the NIO transport, the server checked under `policy`
    /// for `host` (the name the server's certificate must carry, and the policy's entry): its
    /// anchors only, never the system's unless the policy says so, the pins against the
    /// validated chain, report mode and revocation lists as `PinnedTLSClient` applies them; with
    /// `identity`, the client presents it (mutual TLS; a key in a token or the TPM signs there).
    ///
    /// ```swift
    /// let transport = try HTTP2ClientTransport.Posix(
    ///     target: .dns(host: "orders.internal", port: 8443),
    ///     transportSecurity: try .pinnedTLS(policy: policy, host: "orders.internal", identity: deviceIdentity))
    /// ```
    /// - Parameters:
    ///   - policy: the anchors and pins.
    ///   - host: the server's name, checked against its certificate.
    ///   - port: the port, for pin reports.
    ///   - identity: the client certificate and key to present, if any.
    ///   - onOutcome: called once per handshake with the verdict on the server's chain.
    /// - Throws: `PinnedTLSError.invalidIdentity` when the identity cannot be handed to TLS.
    public static func pinnedTLS(
        policy: TrustPolicy, host: String, port: Int = 443, identity: TLSIdentity? = nil,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) throws(PinnedTLSError) -> Self {
        var tls: TLS
        if let identity {
            let (chain, key) = try GRPCMaterial.of(identity)
            tls = TLS(certificateChain: chain, privateKey: key, serverCertificateVerification: .noHostnameVerification,
                      trustRoots: .certificates([]))
        } else {
            tls = TLS(certificateChain: [], privateKey: nil, serverCertificateVerification: .noHostnameVerification,
                      trustRoots: .certificates([]))
        }
        let verifier = NIOVerifier(policy: policy)
        tls.customVerificationCallback = { presented, promise in
            verifier.verificationCallback(peer: host, port: port, onOutcome: onOutcome)(presented, promise)
        }
        return .tls(tls)
    }
}

/// An identity in the forms grpc-swift's TLS configuration takes.
@available(macOS 15.0, iOS 18.0, *)
enum GRPCMaterial {
    static func of(_ identity: TLSIdentity) throws(PinnedTLSError) -> ([TLSConfig.CertificateSource], TLSConfig.PrivateKeySource) {
        let chain = try identity.chainDER.map { TLSConfig.CertificateSource.bytes($0, format: .der) }
        if let hardware = identity.hardwareTLSKey {
            return (chain, .customPrivateKey(hardware))
        }
        guard let der = try identity.softwareKeyDER() else {
            throw .invalidIdentity("the identity has no key")
        }
        // grpc-swift keeps the key's bytes in its configuration for the transport's life; they
        // are not wiped when it ends (docs/SERVER-SWIFT.md).
        return (chain, .bytes(der.withUnsafeBytes { Array($0) }, format: .der))
    }
}
