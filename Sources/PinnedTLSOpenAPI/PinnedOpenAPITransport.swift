import Foundation
import HTTPTypes
import NIOCore
import OpenAPIRuntime
import PinnedTLS

/// A swift-openapi-runtime `ClientTransport` under the project's TLS policy: any client that
/// swift-openapi-generator made checks its server's anchors, name and pins (and presents the
/// device's certificate for mutual TLS) through ``PinnedTLS/PinnedHTTPClient``, with
/// connections kept alive.
///
/// ```swift
/// let transport = try PinnedOpenAPITransport(policy: policy, identity: deviceIdentity)
/// let client = Client(serverURL: URL(string: "https://api.example.com")!, transport: transport)
/// ```
///
/// Bodies are sent and received whole, up to ``maximumRequestBodySize`` and the HTTP client's
/// `maximumBodySize`: this transport is for API calls, not for streaming large files.
public struct PinnedOpenAPITransport: ClientTransport {
    /// The HTTP client (its pool of kept connections is shared by every copy of the transport).
    public let http: PinnedHTTPClient
    /// Requests with a larger body are refused before anything is sent.
    public var maximumRequestBodySize: Int
    /// Bounds each request: the connection and handshake, and separately the exchange.
    public var timeout: TimeAmount

    /// A transport over an HTTP client of one's own (to share its connections, or set its limits).
    /// - Parameters:
    ///   - http: the HTTP client.
    ///   - maximumRequestBodySize: the largest request body sent (default 16 MiB).
    ///   - timeout: the bound on each request (default 30 s).
    public init(http: PinnedHTTPClient, maximumRequestBodySize: Int = 16 * 1024 * 1024, timeout: TimeAmount = .seconds(30)) {
        self.http = http
        self.maximumRequestBodySize = maximumRequestBodySize
        self.timeout = timeout
    }

    /// A transport that checks servers under `policy` and presents `identity` (if any).
    /// - Parameters:
    ///   - policy: the anchors and pins per host.
    ///   - identity: the client certificate and key for mutual TLS (a key in a token or the TPM
    ///     signs there).
    ///   - configuration: the HTTP client's limits.
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` when the identity cannot be used.
    public init(policy: TrustPolicy, identity: TLSIdentity? = nil,
                configuration: PinnedHTTPClient.Configuration = PinnedHTTPClient.Configuration()) throws(PinnedTLSError) {
        self.init(http: PinnedHTTPClient(client: try PinnedTLSClient(policy: policy, identity: identity), configuration: configuration))
    }

    public func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        guard let url = Self.url(baseURL, request.path) else {
            throw PinnedTLSError.http("\(operationID): \(baseURL.absoluteString) with path \(request.path ?? "") is not an https:// URL")
        }
        var bytes: [UInt8]?
        if let body {
            do {
                bytes = try await [UInt8](collecting: body, upTo: maximumRequestBodySize)
            } catch {
                throw PinnedTLSError.http("\(operationID): the request body is larger than \(maximumRequestBodySize) bytes, or could not be read: \(error)")
            }
        }
        let headers = request.headerFields.map { ($0.name.rawName, $0.value) }
        let answer = try await http.execute(method: request.method.rawValue, url: url, headers: headers, body: bytes, timeout: timeout)
        var fields = HTTPFields()
        for (name, value) in answer.headers {
            guard let field = HTTPField.Name(name) else { continue }   // not a valid field name: dropped
            fields.append(HTTPField(name: field, value: value))
        }
        let response = HTTPResponse(status: .init(code: answer.status), headerFields: fields)
        return (response, request.method == .head ? nil : HTTPBody(answer.body))
    }

    /// The base URL with the request's path appended, as swift-openapi-runtime's transports join
    /// them (the base's path, then the operation's path and query).
    static func url(_ base: URL, _ path: String?) -> String? {
        guard base.scheme?.lowercased() == "https" else { return nil }
        var text = base.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        let tail = path ?? "/"
        return text + (tail.hasPrefix("/") ? tail : "/" + tail)
    }
}
