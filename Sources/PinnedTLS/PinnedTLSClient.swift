import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import X509

/// A TLS connection whose peer passed the policy.
public struct PinnedTLSConnection: Sendable {
    /// The channel, for reading and writing bytes (NIO's async channel API). Use its
    /// `executeThenClose`.
    public let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
    /// What the policy found: the validated chain, the matched pin, warnings.
    public let evaluation: TrustEvaluation

    /// The peer's validated chain, leaf first.
    public var peerChain: [Certificate] { evaluation.validatedChain }
}

/// A TLS client (TLS 1.2 and 1.3) that trusts servers by a ``TrustPolicy`` and can present a
/// client certificate.
public struct PinnedTLSClient: Sendable {
    /// The trust policy.
    public let policy: TrustPolicy
    private let context: NIOSSLContext
    private let group: any EventLoopGroup
    /// Server chains this client validated, owned with its policy (see ``VerifiedChainCache``).
    let verifiedChains: VerifiedChainCache?
    /// Tests only: the connect future's callbacks are held back this long, as a loaded machine
    /// may hold them back, so that the handshake (and what the server sends right after it)
    /// completes first. Nil (no delay) everywhere else.
    var lateConnectCallbacks: TimeAmount?

    /// Prepares a client.
    ///
    /// - Parameters:
    ///   - policy: how servers are trusted.
    ///   - identity: the client certificate and key to present when a server asks for one.
    ///   - eventLoopGroup: where the connections run; NIO's shared group by default.
    ///   - verifiedChainCacheSize: how many validated server chains are remembered, so that a
    ///     server presenting the same certificates again skips the chain building and signature
    ///     checks (validity periods are checked again at each handshake against the policy's
    ///     clock, pins are always checked, refusals are never remembered); 0 turns it off.
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` when the identity cannot be used.
    public init(
        policy: TrustPolicy, identity: TLSIdentity? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        verifiedChainCacheSize: Int = 256
    ) throws(PinnedTLSError) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        NIOBridge.restrictVersions(&configuration)
        // The policy's callback replaces BoringSSL's verification, the host name included.
        configuration.certificateVerification = .noHostnameVerification
        configuration.trustRoots = .certificates([])
        if let identity { try NIOBridge.install(identity, in: &configuration) }
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .invalidIdentity("TLS context: \(error)")
        }
        self.policy = policy
        self.group = eventLoopGroup
        verifiedChains = verifiedChainCacheSize > 0 ? VerifiedChainCache(capacity: verifiedChainCacheSize) : nil
    }

    /// Connects to `host:port`, performs the handshake and applies the policy.
    ///
    /// - Parameters:
    ///   - host: the host to connect to.
    ///   - port: the TCP port.
    ///   - serverName: the name the certificate is checked against (and sent as SNI); `host`
    ///     by default.
    ///   - timeout: the bound on the TCP connection and, separately, on the handshake.
    /// - Returns: the connection and its validated peer chain.
    /// - Throws: ``TLSTrustError`` when the policy refuses the server; ``PinnedTLSError`` when
    ///   the connection or handshake fails otherwise or times out; `CancellationError` when the
    ///   calling task was cancelled before the connection was handed over (it is then closed).
    public func connect(
        host: String, port: Int, serverName: String? = nil, timeout: TimeAmount = .seconds(10)
    ) async throws -> PinnedTLSConnection {
        let (channel, evaluation) = try await connectChannel(
            host: host, port: port, serverName: serverName, timeout: timeout,
            inbound: ByteBuffer.self, outbound: ByteBuffer.self) { _ in }
        return PinnedTLSConnection(channel: channel, evaluation: evaluation)
    }

    /// Connects and wraps the channel after `configure` added its handlers behind TLS.
    ///
    /// The connection, the handshake and the verification run on the event loop, chained: the
    /// caller resumes once, when the handshake has finished (or failed), as it would after a
    /// plain connect. The handshake timeout is armed and cancelled on the event loop too.
    func connectChannel<Inbound: Sendable, Outbound: Sendable>(
        host: String, port: Int, serverName: String?, timeout: TimeAmount,
        inbound: Inbound.Type, outbound: Outbound.Type,
        configure: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) async throws -> (NIOAsyncChannel<Inbound, Outbound>, TrustEvaluation) {
        // The name in its canonical form (see HostPattern): an address written another way is
        // matched, checked and reported as the same address.
        guard let name = HostPattern.canonicalHost(serverName ?? host) else {
            throw PinnedTLSError.invalidConfiguration(
                "\"\(serverName ?? host)\" is neither a host name nor an IP address in standard form (write 127.0.0.1 or an IPv6 address)")
        }
        let policy = self.policy
        let context = self.context
        let outcome = NIOLockedValueBox<VerificationOutcome?>(nil)
        let cache = verifiedChains
        let sni = ChainValidation.isIPAddress(name) ? nil : name
        let mayBlock = policy.evaluationMayBlock(host: name)
        // The handshake of each channel the bootstrap initializes (one per address tried).
        let handshakes = NIOLockedValueBox<[ObjectIdentifier: EventLoopFuture<PendingAsyncChannel<Inbound, Outbound>>]>([:])
        let timedOut = NIOLockedValueBox(false)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let promise = channel.eventLoop.makePromise(of: PendingAsyncChannel<Inbound, Outbound>.self)
                    let callback = NIOBridge.callback(
                        outcome: outcome, peer: { name }, cache: cache, evaluationMayBlock: mayBlock,
                        cachedAcceptance: { policy.cachedAcceptance(host: name, cache: $0) }
                    ) { presented, lookup throws(TLSTrustError) in
                        try await policy.evaluate(host: name, port: port, presented: presented, cache: lookup)
                    }
                    let handler = try NIOSSLClientHandler(
                        context: context, serverHostname: sni, customVerificationCallbackWithMetadata: callback)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    // The async channel is made in the handshake's completion event itself, on
                    // the event loop, before the TLS handler decodes the first application
                    // data: a reply the server sends at once (a refusal right after its
                    // handshake) is never handed to a pipeline without its reader. Made later
                    // (when the connect future's callbacks ran, which can be after the
                    // handshake under load), that data was dropped and the channel seen closed.
                    // It exists only for an accepted peer; until the caller takes it, it is
                    // finished and closed if released (see PendingAsyncChannel).
                    try channel.pipeline.syncOperations.addHandler(HandshakeWaiter { result in
                        promise.completeWith(result.flatMap {
                            guard case .accepted = outcome.withLockedValue({ $0 }) else { return .failure(ConnectStage.unverified) }
                            return Result {
                                PendingAsyncChannel(try NIOAsyncChannel<Inbound, Outbound>(wrappingChannelSynchronously: channel))
                            }
                        })
                    })
                    try configure(channel.pipeline.syncOperations)
                    handshakes.withLockedValue { $0[ObjectIdentifier(channel)] = promise.futureResult }
                }
            }
        let late = lateConnectCallbacks
        let established = bootstrap.connect(host: host, port: port)
            .flatMapErrorThrowing { error in throw ConnectStage.connect(error) }
            .flatMap { (channel: any Channel) -> EventLoopFuture<any Channel> in
                guard let late else { return channel.eventLoop.makeSucceededFuture(channel) }
                return channel.eventLoop.scheduleTask(in: late) { channel }.futureResult
            }
            .flatMap { channel -> EventLoopFuture<PendingAsyncChannel<Inbound, Outbound>> in
                let handshake = handshakes.withLockedValue { entries in
                    defer { entries.removeAll() }
                    return entries[ObjectIdentifier(channel)]
                }
                guard let handshake else {
                    channel.close(promise: nil)
                    return channel.eventLoop.makeFailedFuture(ConnectStage.connect(ChannelError.inappropriateOperationForState))
                }
                let timer = channel.eventLoop.scheduleTask(in: timeout) {
                    timedOut.withLockedValue { $0 = true }
                    channel.close(promise: nil)
                }
                return handshake.flatMapErrorThrowing { error in
                    timer.cancel()
                    channel.close(promise: nil)
                    if case ConnectStage.unverified = error { throw error }
                    throw ConnectStage.handshake(error)
                }.map { wrapped in
                    timer.cancel()
                    return wrapped
                }
            }
        let pending: PendingAsyncChannel<Inbound, Outbound>
        do {
            pending = try await established.get()
        } catch ConnectStage.connect(let error) {
            if let error = error as? ChannelError, case .connectTimeout = error {
                throw PinnedTLSError.timedOut(what: "connecting to \(host):\(port)", seconds: timeout.seconds)
            }
            throw PinnedTLSError.connectionFailed(host: host, port: port, detail: "\(error)")
        } catch ConnectStage.handshake(let error) {
            if case .refused(let refusal) = outcome.withLockedValue({ $0 }) { throw refusal }
            if timedOut.withLockedValue({ $0 }) {
                throw PinnedTLSError.timedOut(what: "TLS handshake with \(host):\(port)", seconds: timeout.seconds)
            }
            throw PinnedTLSError.connectionFailed(host: host, port: port, detail: "TLS handshake: \(error)")
        } catch ConnectStage.unverified {
            throw PinnedTLSError.connectionFailed(host: host, port: port, detail: "the handshake ended without verification")
        }
        // A caller cancelled while the handshake ran gets no connection: the channel is finished
        // and closed here rather than handed to a task that no longer wants it.
        if Task.isCancelled {
            pending.discard()
            throw CancellationError()
        }
        guard case .accepted(let evaluation) = outcome.withLockedValue({ $0 }), let channel = pending.take() else {
            // Not reached: the channel is only wrapped for an accepted peer, and taken once.
            pending.discard()
            throw PinnedTLSError.connectionFailed(host: host, port: port, detail: "the handshake ended without verification")
        }
        return (channel, evaluation)
    }
}

/// Where a connection attempt failed: before the TCP connection was up, or in the handshake.
private enum ConnectStage: Error {
    case connect(any Error)
    case handshake(any Error)
    /// The handshake completed but the policy's callback recorded no acceptance.
    case unverified
}
