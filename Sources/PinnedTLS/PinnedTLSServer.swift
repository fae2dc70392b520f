import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import X509

/// A TLS server (TLS 1.2 and 1.3) presenting an identity and, optionally, requiring client
/// certificates issued under given anchors (mutual TLS).
public final class PinnedTLSServer: Sendable {
    /// An accepted connection.
    public struct Connection: Sendable {
        /// The channel (NIO's async channel API); use its `executeThenClose`.
        public let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        /// The client's validated chain, leaf first, when client certificates are required.
        public let peerChain: [Certificate]?
        /// The client's address.
        public let remoteAddress: String
    }

    /// An accepted channel; the handshake yields it wrapped for async use (wrapped on the event
    /// loop once the handshake has succeeded, so a refused client never gets an async channel
    /// that would have to be finished). A child released without being served (the server
    /// closed with connections still queued, the serving task cancelled) closes its channel and
    /// finishes the async channel, if the handshake made one.
    private final class Child: Sendable {
        let channel: any Channel
        let handshake: HandshakeSignal<PendingAsyncChannel<ByteBuffer, ByteBuffer>>
        let outcome: NIOLockedValueBox<VerificationOutcome?>

        init(channel: any Channel, handshake: HandshakeSignal<PendingAsyncChannel<ByteBuffer, ByteBuffer>>,
             outcome: NIOLockedValueBox<VerificationOutcome?>) {
            self.channel = channel
            self.handshake = handshake
            self.outcome = outcome
        }

        /// Closes the channel and finishes its async channel unless a handler took it.
        func abandon() {
            handshake.peek()?.discard()
            channel.close(promise: nil)
        }

        deinit {
            // After a served connection this is a no-op: it is closed already.
            abandon()
        }
    }

    /// Children accepted and not yet taken by a serving task, closed when the server stops.
    private final class Unserved: Sendable {
        /// The children not yet taken by a serving task, and whether the server has stopped.
        private let state = NIOLockedValueBox<(children: [ObjectIdentifier: Child], stopped: Bool)>(([:], false))

        /// Records an accepted child; once the server has stopped, abandons it at once. A
        /// connection accepted just before the listener closed has its child made afterwards,
        /// on its own event loop: without this it was never closed, and its client waited for
        /// ever.
        func add(_ child: Child) {
            let stopped = state.withLockedValue { state in
                if !state.stopped { state.children[ObjectIdentifier(child)] = child }
                return state.stopped
            }
            if stopped { child.abandon() }
        }

        func remove(_ child: Child) {
            _ = state.withLockedValue { $0.children.removeValue(forKey: ObjectIdentifier(child)) }
        }

        /// Abandons every child not taken by a serving task, and every child recorded later.
        func abandonAll() {
            let all = state.withLockedValue { state in
                defer { state.children.removeAll(); state.stopped = true }
                return Array(state.children.values)
            }
            for child in all { child.abandon() }
        }
    }

    private let listener: NIOAsyncChannel<Child, Never>
    private let unserved: Unserved
    /// The port the server listens on (useful after binding port 0).
    public let port: Int

    private init(listener: NIOAsyncChannel<Child, Never>, unserved: Unserved) {
        self.listener = listener
        self.unserved = unserved
        self.port = listener.channel.localAddress?.port ?? 0
    }

    /// Listens on `host:port`.
    ///
    /// - Parameters:
    ///   - host: the address to listen on; loopback by default.
    ///   - port: the port; 0 picks a free one (read it from ``port``).
    ///   - identity: the server's chain and key.
    ///   - clientAuthentication: when given, a client must present a certificate that passes
    ///     it; the handler sees the validated chain.
    ///   - handshakeTimeout: a client that has not finished its handshake within this time is
    ///     disconnected.
    ///   - eventLoopGroup: where the connections run.
    ///   - verifiedChainCacheSize: how many validated client chains are remembered, so that a
    ///     client presenting the same certificates again skips the chain building and signature
    ///     checks (validity periods are checked again at each handshake, pins are always checked,
    ///     refusals are never remembered); 0 turns it off.
    /// - Throws: ``PinnedTLSError``.
    /// - Returns: The server, listening; ``run(onRefused:handlersOnEventLoop:handler:)`` serves its connections.
    public static func bind(
        host: String = "127.0.0.1", port: Int = 0, identity: TLSIdentity,
        clientAuthentication: ClientAuthentication? = nil, handshakeTimeout: TimeAmount = .seconds(10),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        verifiedChainCacheSize: Int = 256
    ) async throws(PinnedTLSError) -> PinnedTLSServer {
        let cache = verifiedChainCacheSize > 0 ? VerifiedChainCache(capacity: verifiedChainCacheSize) : nil
        let material = try NIOBridge.material(identity)
        let unserved = Unserved()
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: material.chain, privateKey: material.key)
        NIOBridge.restrictVersions(&configuration)
        configuration.trustRoots = .certificates([])
        configuration.certificateVerification = clientAuthentication == nil ? .none : .noHostnameVerification
        // What each connection's own context is made from (clients checked: see below).
        let perConnection = configuration
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .invalidIdentity("TLS context: \(error)")
        }
        do {
            let listener = try await ServerBootstrap(group: eventLoopGroup)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .bind(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture { () throws -> Child in
                        let outcome = NIOLockedValueBox<VerificationOutcome?>(nil)
                        let signal = HandshakeSignal<PendingAsyncChannel<ByteBuffer, ByteBuffer>>()
                        let peer = channel.remoteAddress?.description ?? "client"
                        let handler: NIOSSLServerHandler
                        if let clientAuthentication {
                            // A context of its own per connection when clients are checked: BoringSSL
                            // resumes a session (a TLS 1.3 ticket, a TLS 1.2 session id) without
                            // asking for the client's certificate or calling the verification
                            // callback, so a shared context let a client once accepted (since
                            // revoked, expired or unpinned) come back without any certificate. A
                            // fresh context knows no session: every handshake is a full one.
                            handler = NIOSSLServerHandler(
                                context: try NIOSSLContext(configuration: perConnection),
                                customVerificationCallbackWithMetadata: NIOBridge.callback(
                                    outcome: outcome, peer: { peer }, cache: cache,
                                    evaluationMayBlock: clientAuthentication.evaluationMayBlock,
                                    cachedAcceptance: { clientAuthentication.cachedAcceptance(cache: $0) }
                                ) { presented, lookup throws(TLSTrustError) in
                                    try await clientAuthentication.evaluate(peer: peer, presented: presented,
                                                                            cache: lookup)
                                })
                        } else {
                            handler = NIOSSLServerHandler(context: context)
                        }
                        try channel.pipeline.syncOperations.addHandler(handler)
                        // The handshake timeout runs from the accept, armed and cancelled on the
                        // event loop.
                        let timer = channel.eventLoop.scheduleTask(in: handshakeTimeout) {
                            signal.finish(.failure(HandshakeTimeout(seconds: handshakeTimeout.seconds)))
                            channel.close(promise: nil)
                        }
                        let checksClients = clientAuthentication != nil
                        try channel.pipeline.syncOperations.addHandler(HandshakeWaiter { result in
                            timer.cancel()
                            if case .success = result { Self.acknowledgeNow(channel) }
                            signal.finish(result.flatMap {
                                // Checked clients only: a handshake the callback did not accept
                                // (however it completed) is never served.
                                if checksClients {
                                    guard case .accepted = outcome.withLockedValue({ $0 }) else {
                                        return .failure(PinnedTLSError.connectionFailed(
                                            host: peer, port: 0, detail: "the handshake completed without an accepted client certificate"))
                                    }
                                }
                                // On the event loop, before any application data is read.
                                return Result {
                                    PendingAsyncChannel(
                                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel))
                                }
                            })
                        })
                        let child = Child(channel: channel, handshake: signal, outcome: outcome)
                        unserved.add(child)
                        return child
                    }
                }
            return PinnedTLSServer(listener: listener, unserved: unserved)
        } catch {
            throw .connectionFailed(host: host, port: port, detail: "cannot listen: \(error)")
        }
    }

    /// Accepts connections until ``close()`` or until the calling task is cancelled: each
    /// client's handshake runs (bounded by the handshake timeout) and, if it passes, `handler`
    /// gets the connection; the channel is closed when the handler returns or throws. When it
    /// returns, connections accepted but not handed to the handler are closed.
    ///
    /// - Parameters:
    ///   - onRefused: told about each client refused or failed during the handshake: a
    ///     ``TLSTrustError`` when the client-certificate policy refused it (no certificate,
    ///     another CA...), a ``PinnedTLSError`` otherwise.
    ///   - handler: serves one connection.
    ///   - handlersOnEventLoop: run each connection's `handler` on its channel's event loop
    ///     instead of Swift's cooperative pool: no thread switch between the two at each read and
    ///     write, for handlers that never block (they compute briefly and await I/O). A handler
    ///     that blocks then stalls every connection of its event loop. Default false.
    /// - Throws: The listener's failure (SwiftNIO's error) when accepting stops for another reason than ``close()``.
    public func run(
        onRefused: @escaping @Sendable (any Error) -> Void = { _ in },
        handlersOnEventLoop: Bool = false,
        handler: @escaping @Sendable (Connection) async throws -> Void
    ) async throws {
        let unserved = self.unserved
        defer { unserved.abandonAll() }
        try await listener.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { group in
                for try await child in inbound {
                    let executor: (any TaskExecutor)? = handlersOnEventLoop ? EventLoopTaskExecutor(child.channel.eventLoop) : nil
                    group.addTask(executorPreference: executor) {
                        await Self.serve(child, unserved: unserved, onRefused: onRefused, handler: handler)
                    }
                }
            }
        }
    }

    /// Sends the acknowledgement of the client's last handshake flight now (Linux:
    /// `TCP_QUICKACK`). A TLS 1.3 server has nothing to send after the client's Finished, so the
    /// kernel would delay that ACK (up to 40 ms), and a client with Nagle's algorithm on (Python's
    /// `ssl`, many others) holds its first request until the ACK arrives.
    static func acknowledgeNow(_ channel: any Channel) {
        #if os(Linux)
        let quickAck = ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_QUICKACK)))
        try? channel.syncOptions?.setOption(quickAck, value: 1)
        #endif
    }

    /// Stops listening and closes the connections accepted but not yet handed to a handler;
    /// ``run(onRefused:handlersOnEventLoop:handler:)`` returns once running handlers finish.
    public func close() async {
        try? await listener.channel.close()
        unserved.abandonAll()
    }

    private static func serve(
        _ child: Child, unserved: Unserved, onRefused: @Sendable (any Error) -> Void,
        handler: @Sendable (Connection) async throws -> Void
    ) async {
        unserved.remove(child)
        let raw = child.channel
        let remote = raw.remoteAddress?.description ?? "client"
        let pending: PendingAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            pending = try await child.handshake.wait()
        } catch {
            raw.close(promise: nil)
            if case .refused(let refusal) = child.outcome.withLockedValue({ $0 }) {
                onRefused(refusal)
            } else if Self.isMissingCertificate(error) {
                var refusal = TLSTrustError(host: remote, reason: .noCertificate, presented: [])
                refusal.role = .client
                onRefused(refusal)
            } else {
                onRefused(PinnedTLSError.connectionFailed(host: remote, port: 0, detail: Self.unfinishedHandshake(error)))
            }
            return
        }
        // Nil when the server stopped first and closed it.
        guard let channel = pending.take() else { return }
        var peerChain: [Certificate]?
        if case .accepted(let evaluation) = child.outcome.withLockedValue({ $0 }) {
            peerChain = evaluation.validatedChain
        }
        do {
            try await handler(Connection(channel: channel, peerChain: peerChain, remoteAddress: remote))
        } catch {
            // The handler's own failure ends its connection only.
        }
        // Finishes the async channel and closes it, whatever the handler did with it.
        try? await channel.executeThenClose { _, _ in }
    }

    /// What happened to a handshake that ended without a verdict of this server's: the client
    /// went away, or refused something of this server's, which is not a refusal of the client.
    static func unfinishedHandshake(_ error: any Error) -> String {
        let text = String(describing: error)
        if let timeout = error as? HandshakeTimeout {
            return "TLS handshake not completed within \(timeout.seconds) s (the client sent nothing, or too slowly); "
                + "the connection was closed"
        }
        if let channelError = error as? ChannelError, case .eof = channelError {
            return "the client closed the connection during the handshake; nothing was refused here "
                + "(a client that does not accept this server's certificate hangs up so)"
        }
        if let range = text.range(of: #"(SSLV3|TLSV1)_ALERT_[A-Z_]+"#, options: .regularExpression) {
            let alert = text[range].split(separator: "_").dropFirst(2).joined(separator: " ").lowercased()
            let meaning = alert.contains("ca") || alert.contains("certificate")
                ? "the client does not accept this server's certificate" : "the client gave up"
            return "the client ended the handshake with the TLS alert \"\(alert)\"; nothing was refused here "
                + "(\(meaning)): \(text)"
        }
        return "the handshake did not complete: the client hung up or sent what this server could not read; "
            + "nothing was refused here (a client that does not accept this server's certificate often ends so): \(text)"
    }

    private static func isMissingCertificate(_ error: any Error) -> Bool {
        let text = String(describing: error)
        return text.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE") || text.contains("CERTIFICATE_REQUIRED")
    }
}

/// The server's handshake timeout ran out before the client finished its handshake.
struct HandshakeTimeout: Error {
    let seconds: Double
}
