import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import PinnedTLS
import X509

/// A Hummingbird 2 child channel that puts TLS with a ``TLSIdentity`` in front of another
/// (HTTP/1.1 through ``HummingbirdCore/HTTPServerBuilder/pinnedTLS(_:identity:clientAuthentication:onOutcome:)``),
/// and with a `ClientAuthentication` requires client certificates that meet it.
///
/// Unlike HummingbirdTLS's `TLSChannel`, the client's chain is checked by `NIOVerifier` through
/// swift-nio-ssl's callback *with metadata*: the chain the policy validated is kept by the
/// channel, so a handler reads it (``PinnedTLSRequestContext/clientCertificateChain()``), not
/// only the leaf the client sent.
public struct PinnedTLSChannel<BaseChannel: ServerChildChannel>: ServerChildChannel {
    public typealias Value = BaseChannel.Value

    /// Without client checks, the one context every connection shares.
    let context: NIOSSLContext
    /// With client checks, each connection gets a context of its own made from this (see `setup`).
    let configuration: TLSConfiguration
    let verifier: NIOVerifier?
    let onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)?
    let baseChannel: BaseChannel

    /// TLS in front of `baseChannel`.
    /// - Parameters:
    ///   - baseChannel: the channel that handles what TLS decrypts (`HTTP1Channel`).
    ///   - identity: the server's certificate chain and key (the key may be in a token or the TPM).
    ///   - clientAuthentication: the client certificates accepted; nil asks for none.
    ///   - onOutcome: called once per handshake with the verdict on the client's chain.
    /// - Throws: `PinnedTLSError.invalidIdentity` when the identity cannot be handed to TLS.
    public init(
        _ baseChannel: BaseChannel, identity: TLSIdentity, clientAuthentication: ClientAuthentication?,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) throws(PinnedTLSError) {
        configuration = try identity.serverConfiguration(clientCertificates: clientAuthentication != nil)
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .invalidIdentity("swift-nio-ssl refused the identity: \(error)")
        }
        verifier = clientAuthentication.map { NIOVerifier(clientAuthentication: $0) }
        self.onOutcome = onOutcome
        self.baseChannel = baseChannel
    }

    fileprivate init(
        context: NIOSSLContext, configuration: TLSConfiguration, verifier: NIOVerifier?,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)?, baseChannel: BaseChannel
    ) {
        self.context = context
        self.configuration = configuration
        self.verifier = verifier
        self.onOutcome = onOutcome
        self.baseChannel = baseChannel
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let handler: NIOSSLServerHandler
            if let verifier {
                let peer = channel.remoteAddress.map { "\($0)" } ?? "client"
                // A context of its own: BoringSSL resumes a session without the client's
                // certificate or the callback, so with a shared context a client once accepted
                // (since revoked or unpinned) could come back without a certificate. A fresh
                // context knows no session, so every handshake is a full one.
                handler = NIOSSLServerHandler(
                    context: try NIOSSLContext(configuration: configuration), configuration: .init(),
                    customVerificationCallbackWithMetadata: verifier.verificationCallback(peer: peer, onOutcome: onOutcome))
            } else {
                handler = NIOSSLServerHandler(context: context)
            }
            try channel.pipeline.syncOperations.addHandler(handler)
        }.flatMap {
            baseChannel.setup(channel: channel, logger: logger)
        }
    }

    public func handle(value: BaseChannel.Value, logger: Logger) async {
        await baseChannel.handle(value: value, logger: logger)
    }
}

extension PinnedTLSChannel: HTTPChannelHandler where BaseChannel: HTTPChannelHandler {
    public var responder: HTTPChannelHandler.Responder { baseChannel.responder }
}

extension HTTPServerBuilder {
    /// HTTPS (HTTP/1.1) for a Hummingbird 2 application with `identity`, and with
    /// `clientAuthentication` mutual TLS under it: a client without a certificate, or whose chain
    /// does not lead to the anchors, or whose key no pin matches, is refused during the
    /// handshake by the same checks as `PinnedTLSServer`.
    ///
    /// ```swift
    /// let router = Router(context: PinnedTLSRequestContext.self)
    /// router.get("whoami") { _, context in
    ///     let chain = try await context.clientCertificateChain() ?? []
    ///     return chain.first.map { "\($0.subject)" } ?? "nobody"
    /// }
    /// let app = Application(
    ///     router: router,
    ///     server: try .pinnedTLS(identity: identity, clientAuthentication: clients))
    /// ```
    /// - Parameters:
    ///   - configuration: the HTTP/1.1 channel's configuration.
    ///   - identity: the server's certificate chain and key.
    ///   - clientAuthentication: the client certificates accepted; nil asks for none.
    ///   - onOutcome: called once per handshake with the verdict on the client's chain (a
    ///     refused client never reaches the HTTP layer, so this is where refusals are seen).
    /// - Throws: `PinnedTLSError.invalidIdentity` when the identity cannot be handed to TLS.
    /// - Returns: the server builder for `Application(router:server:)`.
    public static func pinnedTLS(
        _ configuration: HTTP1Channel.Configuration = .init(),
        identity: TLSIdentity, clientAuthentication: ClientAuthentication? = nil,
        onOutcome: (@Sendable (Result<TrustEvaluation, TLSTrustError>) -> Void)? = nil
    ) throws(PinnedTLSError) -> HTTPServerBuilder {
        // The context is made once, here, so that a bad identity fails before the server starts.
        let template = try PinnedTLSChannel(
            HTTP1Channel(responder: { _, _, _ in }, configuration: configuration),
            identity: identity, clientAuthentication: clientAuthentication, onOutcome: onOutcome)
        return HTTPServerBuilder { responder in
            template.replacingBase(HTTP1Channel(responder: responder, configuration: configuration))
        }
    }
}

extension PinnedTLSChannel {
    fileprivate func replacingBase<Other: ServerChildChannel>(_ other: Other) -> PinnedTLSChannel<Other> {
        PinnedTLSChannel<Other>(context: context, configuration: configuration, verifier: verifier, onOutcome: onOutcome,
                                baseChannel: other)
    }
}

/// A request context that keeps the connection's channel, so that a handler reads the client
/// certificate chain that `NIOVerifier` validated during the handshake.
///
/// Applications with a context of their own keep `source.channel` the same way and call
/// `Channel.pinnedTLSClientChain()`.
public struct PinnedTLSRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection the request came on.
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// The client's certificate chain as the policy validated it, leaf first, anchor last;
    /// nil when the server asked for no client certificate.
    public func clientCertificateChain() async throws -> [Certificate]? {
        try await channel.pinnedTLSClientChain()
    }
}

extension Channel {
    /// The peer's certificate chain that a `NIOVerifier` validated during this channel's
    /// handshake, leaf first (nil when no chain was verified, as without mutual TLS).
    /// - Throws: when the channel has no TLS handler, or a certificate does not parse.
    public func pinnedTLSClientChain() async throws -> [Certificate]? {
        guard let chain = try await nioSSL_peerValidatedCertificateChain().get() else { return nil }
        return try chain.map { try Certificate(derEncoded: try $0.toDERBytes()) }
    }
}
