import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import X509

/// HTTP/1.1 over TLS under a ``PinnedTLSClient``'s policy, with connections kept alive and
/// reused: each server is checked once per connection (anchors, name, pins, reports), then
/// requests follow one another on it.
///
/// Requests on one connection are sequential (no pipelining); concurrent requests to one server
/// open more connections, of which up to ``Configuration/maximumIdleConnectionsPerServer`` are
/// kept after use, each for ``Configuration/idleTimeout``. A connection is given up when the
/// server asks (`Connection: close`, HTTP/1.0), on any error, and on a timeout.
///
/// A request that fails on a *reused* connection before any of the answer arrived (the server
/// closed the idle connection as it was being used, the race every keep-alive client meets) is
/// sent again once on a new connection, for methods that may be repeated (GET, HEAD, OPTIONS,
/// PUT, DELETE, TRACE); a POST or PATCH is never sent twice.
public final class PinnedHTTPClient: Sendable {
    /// Limits of the client.
    public struct Configuration: Sendable {
        /// Responses with a larger body are refused (and their connection closed).
        public var maximumBodySize: Int = 16 * 1024 * 1024
        /// How many unused connections are kept per server.
        public var maximumIdleConnectionsPerServer: Int = 4
        /// How long an unused connection is kept.
        public var idleTimeout: TimeAmount = .seconds(60)
        /// The `User-Agent` header (nil: none).
        public var userAgent: String? = "securefoundation"

        public init() {}
    }

    /// The TLS client that connects under its policy.
    public let client: PinnedTLSClient
    /// The limits.
    public let configuration: Configuration
    private let pool = NIOLockedValueBox(Pool())

    private struct Pool {
        var idle: [String: [KeptConnection]] = [:]
        var opened = 0
        var closed = false
    }

    /// A client over `client`.
    public init(client: PinnedTLSClient, configuration: Configuration = Configuration()) {
        self.client = client
        self.configuration = configuration
    }

    /// How many connections this client has opened (each one a handshake and a policy check).
    public var connectionsOpened: Int { pool.withLockedValue { $0.opened } }

    /// Closes the kept connections; later requests fail with ``PinnedTLSError/http(_:)``.
    public func shutdown() {
        let idle = pool.withLockedValue { state -> [KeptConnection] in
            state.closed = true
            defer { state.idle = [:] }
            return state.idle.values.flatMap { $0 }
        }
        for connection in idle { connection.close() }
    }

    deinit {
        for connection in pool.withLockedValue({ $0.idle.values.flatMap { $0 } }) { connection.close() }
    }

    /// Sends one request and returns the whole answer.
    ///
    /// - Parameters:
    ///   - method: the method (`GET`, `POST`...).
    ///   - url: an `https://` URL.
    ///   - headers: request headers (`Host`, `Content-Length` and `Connection` are the client's).
    ///   - body: the request body, sent with its length.
    ///   - connectTo: connect to this address instead of the URL's host (the certificate is still
    ///     checked against the URL's host).
    ///   - timeout: bounds the connection and handshake, and separately the exchange.
    /// - Returns: the response: status, headers, body, the validated chain and the policy's warnings.
    /// - Throws: ``TLSTrustError`` when the policy refuses the server; ``PinnedTLSError``
    ///   otherwise (`http`, `timedOut`...).
    public func execute(
        method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        connectTo: String? = nil, timeout: TimeAmount = .seconds(30)
    ) async throws -> HTTPSResponse {
        let (host, port, target) = try PinnedHTTPSClient.split(url)
        guard HTTPFieldCheck.isToken(method) else { throw PinnedTLSError.http("\"\(method)\" is not an HTTP method") }
        guard method != "CONNECT" else { throw PinnedTLSError.http("CONNECT is not supported: it would turn the connection into a tunnel") }
        try HTTPFieldCheck.check(headers + (configuration.userAgent.map { [("User-Agent", $0)] } ?? []))
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: target)
        head.headers.add(name: "Host", value: port == 443 ? Self.hostHeader(host) : "\(Self.hostHeader(host)):\(port)")
        if let userAgent = configuration.userAgent { head.headers.add(name: "User-Agent", value: userAgent) }
        for (name, value) in headers where !["host", "content-length", "connection", "transfer-encoding"].contains(name.lowercased()) {
            head.headers.add(name: name, value: value)
        }
        if body != nil || ["POST", "PUT", "PATCH"].contains(method) {
            head.headers.add(name: "Content-Length", value: String(body?.count ?? 0))
        }
        let key = "\(connectTo ?? host)|\(port)|\(host)"
        let repeatable = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"].contains(method)
        for attempt in 0..<2 {
            // The retry always takes a new connection: another kept one may be as stale.
            let (connection, reused) = try await acquire(key: key, host: connectTo ?? host, port: port, serverName: host, timeout: timeout,
                                                         fresh: attempt > 0)
            do {
                let (response, keepAlive) = try await connection.exchange(head: head, body: body, limit: configuration.maximumBodySize,
                                                                        timeout: timeout, what: "HTTPS exchange with \(host):\(port)")
                release(connection, key: key, keepAlive: keepAlive)
                return response
            } catch let failure as ExchangeFailure {
                connection.close()
                // The server closed a kept connection as it was taken: once more, on a new one.
                if reused && failure.nothingReceived && repeatable && attempt == 0 { continue }
                throw failure.error
            }
        }
        throw PinnedTLSError.http("unreachable")
    }

    private static func hostHeader(_ host: String) -> String {
        host.contains(":") ? "[\(host)]" : host
    }

    private func acquire(key: String, host: String, port: Int, serverName: String, timeout: TimeAmount, fresh: Bool)
        async throws -> (KeptConnection, reused: Bool)
    {
        while !fresh {
            let candidate = try pool.withLockedValue { state throws(PinnedTLSError) -> KeptConnection? in
                guard !state.closed else { throw .http("the HTTP client was shut down") }
                return state.idle[key]?.popLast()
            }
            guard let candidate else { break }
            if candidate.takeIfOpen() { return (candidate, true) }
            // Closed while it was kept: its task and channel go now.
            candidate.close()
        }
        let (channel, evaluation) = try await client.connectChannel(
            host: host, port: port, serverName: serverName, timeout: timeout,
            inbound: HTTPClientResponsePart.self, outbound: HTTPClientRequestPart.self
        ) { pipeline in
            try pipeline.addHTTPClientHandlers()
        }
        pool.withLockedValue { $0.opened += 1 }
        return (KeptConnection(channel: channel, evaluation: evaluation), false)
    }

    private func release(_ connection: KeptConnection, key: String, keepAlive: Bool) {
        guard keepAlive else { connection.close(); return }
        // Armed before the connection is in the pool, so that whoever takes it from there
        // cancels this very timer (closed when still unused after the idle timeout).
        connection.putIdle(for: configuration.idleTimeout) { [weak self] in
            self?.pool.withLockedValue { state in state.idle[key]?.removeAll { $0 === connection } }
        }
        let kept = pool.withLockedValue { state -> Bool in
            guard !state.closed, state.idle[key, default: []].count < configuration.maximumIdleConnectionsPerServer else { return false }
            state.idle[key, default: []].append(connection)
            return true
        }
        if !kept { connection.close() }
    }
}

/// What may go into a request head: RFC 9110's token characters for methods and field names, and
/// no control character but the tab in field values. swift-nio's validator drops a bad head but
/// not the body parts behind it, which would then reach the server as raw bytes (a smuggled
/// request), so heads are checked before anything is written.
enum HTTPFieldCheck {
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    static func isValue(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }
    }

    static func check(_ headers: [(String, String)]) throws(PinnedTLSError) {
        for (name, value) in headers {
            guard isToken(name) else { throw .http("the header name \"\(name)\" is not a token (RFC 9110)") }
            guard isValue(value) else { throw .http("the value of the header \(name) holds a control character (CR, LF, NUL...)") }
        }
    }
}

/// Why an exchange failed, and whether any of the answer had arrived.
struct ExchangeFailure: Error {
    let error: any Error
    let nothingReceived: Bool
}

/// One kept-alive connection: a task owns the channel (and the one iterator of its jobs) and runs the requests given to it, one at
/// a time.
final class KeptConnection: Sendable {
    private struct Job: Sendable {
        let head: HTTPRequestHead
        let body: [UInt8]?
        let limit: Int
        let done: @Sendable (Result<(HTTPSResponse, keepAlive: Bool), ExchangeFailure>) -> Void
    }

    private struct State {
        var open = true
        var idleTimer: Scheduled<Void>?
        var generation = 0
    }

    let evaluation: TrustEvaluation
    private let raw: any Channel
    private let jobs: AsyncStream<Job>.Continuation
    private let state = NIOLockedValueBox(State())

    init(channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, evaluation: TrustEvaluation) {
        self.evaluation = evaluation
        raw = channel.channel
        let (stream, continuation) = AsyncStream<Job>.makeStream()
        jobs = continuation
        let state = self.state
        let chain = evaluation.validatedChain, warnings = evaluation.warnings
        // On the connection's own event loop: the worker only awaits its channel, and it never
        // waits for a thread of Swift's cooperative pool, which blocking code elsewhere in the
        // process can hold (the exchange would then time out with the server's answer unread).
        Task(executorPreference: EventLoopTaskExecutor(channel.channel.eventLoop)) {
            var pending = stream.makeAsyncIterator()
            do {
                try await channel.executeThenClose { inbound, outbound in
                    var responses = inbound.makeAsyncIterator()
                    while let job = await pending.next() {
                        let result = await Self.run(job, inbound: &responses, outbound: outbound, chain: chain, warnings: warnings)
                        job.done(result)
                        guard case .success(let (_, keepAlive)) = result, keepAlive else { break }
                    }
                }
            } catch {
                // Closing is what ends the loop; nothing is waiting on it.
            }
            state.withLockedValue { $0.open = false }
            continuation.finish()
            // Whatever was given after the end fails without waiting.
            while let job = await pending.next() {
                job.done(.failure(ExchangeFailure(error: PinnedTLSError.http("the connection was closed"), nothingReceived: true)))
            }
        }
    }

    private static func run(
        _ job: Job, inbound responses: inout NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>, chain: [Certificate], warnings: [String]
    ) async -> Result<(HTTPSResponse, keepAlive: Bool), ExchangeFailure> {
        var received = false
        do {
            var request: [HTTPClientRequestPart] = [.head(job.head)]
            if let body = job.body, !body.isEmpty { request.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            request.append(.end(nil))
            // A server may answer before it has read the request (an early refusal) and close:
            // the answer is still read.
            var sent = true
            do { try await outbound.write(contentsOf: request) } catch { sent = false }
            var head: HTTPResponseHead?
            var body: [UInt8] = []
            while let part = try await responses.next() {
                received = true
                switch part {
                case .head(let response):
                    if response.status.code == 101 {
                        throw PinnedTLSError.http("the server switched protocols (101), which this client does not speak")
                    }
                    // Other 1xx answers are interim: the real one follows.
                    if response.status.code >= 100 && response.status.code < 200 { continue }
                    head = response
                case .body(var buffer):
                    guard body.count + buffer.readableBytes <= job.limit else {
                        throw PinnedTLSError.http("the response body is larger than \(job.limit) bytes")
                    }
                    body += buffer.readBytes(length: buffer.readableBytes) ?? []
                case .end:
                    guard let head else { throw PinnedTLSError.http("the response ended before its head") }
                    let response = HTTPSResponse(status: Int(head.status.code), headers: head.headers.map { ($0.name, $0.value) },
                                                 body: body, peerChain: chain, warnings: warnings)
                    return .success((response, head.isKeepAlive && sent))
                }
            }
            if !sent {
                throw PinnedTLSError.http("the server closed the connection before the request was sent, without an answer")
            }
            throw PinnedTLSError.http("the server closed the connection before the response was complete")
        } catch {
            return .failure(ExchangeFailure(error: error, nothingReceived: !received))
        }
    }

    /// Takes an idle connection for a request: false when it has closed meanwhile.
    func takeIfOpen() -> Bool {
        state.withLockedValue { state in
            state.generation += 1
            state.idleTimer?.cancel()
            state.idleTimer = nil
            return state.open && raw.isActive
        }
    }

    /// Marks the connection idle: closed after `timeout` unless taken before.
    func putIdle(for timeout: TimeAmount, onExpiry: @escaping @Sendable () -> Void) {
        state.withLockedValue { state in
            state.idleTimer?.cancel()
            let generation = state.generation
            let box = self.state
            state.idleTimer = raw.eventLoop.scheduleTask(in: timeout) { [weak self] in
                // Still unused: marked closed in the same step, so that no one takes it after.
                let expired = box.withLockedValue { state -> Bool in
                    guard state.generation == generation, state.open else { return false }
                    state.open = false
                    return true
                }
                guard expired else { return }
                onExpiry()
                self?.close()
            }
        }
    }

    /// One exchange on this connection.
    func exchange(head: HTTPRequestHead, body: [UInt8]?, limit: Int, timeout: TimeAmount, what: String)
        async throws -> (HTTPSResponse, keepAlive: Bool)
    {
        let timedOut = NIOLockedValueBox(false)
        let raw = self.raw
        let timer = raw.eventLoop.scheduleTask(in: timeout) {
            timedOut.withLockedValue { $0 = true }
            raw.close(promise: nil)
        }
        defer { timer.cancel() }
        let result = await withCheckedContinuation { continuation in
            let job = Job(head: head, body: body, limit: limit) { continuation.resume(returning: $0) }
            if case .terminated = jobs.yield(job) {
                job.done(.failure(ExchangeFailure(error: PinnedTLSError.http("the connection was closed"), nothingReceived: true)))
            }
        }
        switch result {
        case .success(let answer): return answer
        case .failure(let failure):
            if timedOut.withLockedValue({ $0 }) {
                throw ExchangeFailure(error: PinnedTLSError.timedOut(what: what, seconds: timeout.seconds), nothingReceived: false)
            }
            if failure.error is PinnedTLSError { throw failure }
            throw ExchangeFailure(error: PinnedTLSError.http("\(failure.error)"), nothingReceived: failure.nothingReceived)
        }
    }

    func close() {
        state.withLockedValue { state in
            state.open = false
            state.idleTimer?.cancel()
            state.idleTimer = nil
        }
        jobs.finish()
        raw.close(promise: nil)
    }
}
