import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import X509

/// An HTTP response read by ``PinnedHTTPSClient``.
public struct HTTPSResponse: Sendable {
    /// The status code (200, 404...).
    public let status: Int
    /// The headers, in order.
    public let headers: [(name: String, value: String)]
    /// The body.
    public let body: [UInt8]
    /// The server's validated chain, leaf first.
    public let peerChain: [Certificate]
    /// What the policy noted (expired pin set, report-mode mismatch).
    public let warnings: [String]

    /// The first header called `name` (case-insensitive).
    /// - Parameter name: the header's name, in any case.
    /// - Returns: its value, or `nil` when the response has no such header.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// GET and POST over HTTPS (HTTP/1.1, one request per connection) with a ``PinnedTLSClient``.
public struct PinnedHTTPSClient: Sendable {
    /// The TLS client.
    public let client: PinnedTLSClient
    /// Responses with a larger body are refused.
    public var maximumBodySize: Int

    /// An HTTPS client over `client`.
    /// - Parameters:
    ///   - client: the TLS client that connects under its policy.
    ///   - maximumBodySize: responses with a larger body are refused (default 16 MiB).
    public init(client: PinnedTLSClient, maximumBodySize: Int = 16 * 1024 * 1024) {
        self.client = client
        self.maximumBodySize = maximumBodySize
    }

    /// GET `url`.
    ///
    /// - Parameters:
    ///   - url: an `https://` URL.
    ///   - headers: extra request headers.
    ///   - connectTo: connect to this address instead of the URL's host (the certificate is still
    ///     checked against the URL's host).
    ///   - timeout: bounds the connection, the handshake, and the whole exchange.
    /// - Returns: the response: status, headers, body, the validated chain and the policy's warnings.
    /// - Throws: ``TLSTrustError`` or ``PinnedTLSError``.
    public func get(
        _ url: String, headers: [(String, String)] = [], connectTo: String? = nil, timeout: TimeAmount = .seconds(30)
    ) async throws -> HTTPSResponse {
        try await send(method: .GET, url: url, body: nil, headers: headers, connectTo: connectTo, timeout: timeout)
    }

    /// POST `body` to `url`.
    ///
    /// - Parameters:
    ///   - url: an `https://` URL.
    ///   - body: the request body.
    ///   - contentType: the `Content-Type` header.
    ///   - headers: extra request headers.
    ///   - connectTo: connect to this address instead of the URL's host (the certificate is still
    ///     checked against the URL's host).
    ///   - timeout: bounds the connection, the handshake, and the whole exchange.
    /// - Returns: the response: status, headers, body, the validated chain and the policy's warnings.
    /// - Throws: ``TLSTrustError`` or ``PinnedTLSError``.
    public func post(
        _ url: String, body: [UInt8], contentType: String = "application/octet-stream",
        headers: [(String, String)] = [], connectTo: String? = nil, timeout: TimeAmount = .seconds(30)
    ) async throws -> HTTPSResponse {
        try await send(method: .POST, url: url, body: body, headers: [("Content-Type", contentType)] + headers,
                       connectTo: connectTo, timeout: timeout)
    }

    /// Splits an `https://host[:port]/path?query` URL.
    static func split(_ url: String) throws(PinnedTLSError) -> (host: String, port: Int, target: String) {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
              let host = components.host, !host.isEmpty
        else {
            throw .http("\(url) is not an https:// URL with a host")
        }
        let port = components.port ?? 443
        guard (1...65535).contains(port) else { throw .http("\(url): port out of range") }
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return (bareHost, port, target)
    }

    private func send(
        method: HTTPMethod, url: String, body: [UInt8]?, headers: [(String, String)], connectTo: String?,
        timeout: TimeAmount
    ) async throws -> HTTPSResponse {
        let (host, port, target) = try Self.split(url)
        // Before anything is written: a head that swift-nio's validator drops would let the body
        // through as raw bytes.
        try HTTPFieldCheck.check(headers)
        let (channel, evaluation) = try await client.connectChannel(
            host: connectTo ?? host, port: port, serverName: host, timeout: timeout,
            inbound: HTTPClientResponsePart.self, outbound: HTTPClientRequestPart.self
        ) { pipeline in
            try pipeline.addHTTPClientHandlers()
        }
        let raw = channel.channel
        let timedOut = NIOLockedValueBox(false)
        let timer = raw.eventLoop.scheduleTask(in: timeout) {
            timedOut.withLockedValue { $0 = true }
            raw.close(promise: nil)
        }
        defer { timer.cancel() }
        let limit = maximumBodySize
        do {
            return try await channel.executeThenClose { inbound, outbound in
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: target)
                head.headers.add(name: "Host", value: port == 443 ? host : "\(host):\(port)")
                head.headers.add(name: "User-Agent", value: "securefoundation")
                head.headers.add(name: "Connection", value: "close")
                if let body { head.headers.add(name: "Content-Length", value: String(body.count)) }
                for (name, value) in headers { head.headers.add(name: name, value: value) }
                // The whole request in one write: written part by part, a server that answers
                // once it has the head (as most do for a GET) could answer and close before the
                // next part, which then failed with "I/O on closed channel" and lost the answer.
                var request: [HTTPClientRequestPart] = [.head(head)]
                if let body, !body.isEmpty { request.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                request.append(.end(nil))
                // A server may also answer before it has read the request (an early refusal such
                // as 413 or 401) and close: its answer is still read and returned.
                var sent = true
                do {
                    try await outbound.write(contentsOf: request)
                } catch {
                    sent = false
                }
                var status: Int?
                var responseHeaders: [(name: String, value: String)] = []
                var received: [UInt8] = []
                for try await part in inbound {
                    switch part {
                    case .head(let response):
                        status = Int(response.status.code)
                        responseHeaders = response.headers.map { ($0.name, $0.value) }
                    case .body(var buffer):
                        guard received.count + buffer.readableBytes <= limit else {
                            throw PinnedTLSError.http("the response body is larger than \(limit) bytes")
                        }
                        received += buffer.readBytes(length: buffer.readableBytes) ?? []
                    case .end:
                        guard let status else { throw PinnedTLSError.http("the response ended before its head") }
                        return HTTPSResponse(status: status, headers: responseHeaders, body: received,
                                             peerChain: evaluation.validatedChain, warnings: evaluation.warnings)
                    }
                }
                if !sent {
                    throw PinnedTLSError.http("the server closed the connection before the request was sent, without an answer")
                }
                throw PinnedTLSError.http("the server closed the connection before the response was complete")
            }
        } catch {
            // The timer closes the channel: whatever that made the exchange see, it timed out.
            if timedOut.withLockedValue({ $0 }) {
                throw PinnedTLSError.timedOut(what: "HTTPS exchange with \(host):\(port)", seconds: timeout.seconds)
            }
            if let error = error as? PinnedTLSError { throw error }
            throw PinnedTLSError.http("\(error)")
        }
    }
}
