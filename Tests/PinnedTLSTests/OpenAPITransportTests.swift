import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import OpenAPIRuntime
import PinnedTLSHummingbird
import PinnedTLSOpenAPI
import Testing
import TestSupport
@testable import PinnedTLS

/// The OpenAPI transport and the keep-alive HTTP client under it, against a Hummingbird 2
/// server with mutual TLS (whose verdicts count the handshakes).
@Suite("OpenAPI transport: keep-alive HTTPS under the policy", .enabled(if: Tools.available, "needs openssl"), .onOwnThreads)
struct OpenAPITransportTests {
    let pki: TestPKI
    let handshakes = NIOLockedValueBox(0)

    init() throws {
        pki = try TestPKI.get()
    }

    /// The channels requests came on, so that a request can close the others (a server closing
    /// kept connections, on cue rather than on a timer).
    final class Channels: @unchecked Sendable {
        private let lock = NSLock()
        private var channels: [any Channel] = []
        func add(_ channel: any Channel) { lock.withLock { channels.append(channel) } }
        func closeAll(but kept: any Channel) -> Int {
            let others = lock.withLock { channels.filter { $0 !== kept } }
            for channel in others { channel.close(promise: nil) }
            return others.count
        }
    }

    /// Runs a server and `body` with its base URL.
    func withServer(_ body: @Sendable (URL) async throws -> Void) async throws {
        let router = Hummingbird.Router(context: PinnedTLSRequestContext.self)
        let channels = Channels()
        router.get("api/items/:id") { _, context in
            channels.add(context.channel)
            return "item \(context.parameters.get("id") ?? "?")"
        }
        // Closes, from the server's side, every connection but the one it came on.
        router.get("api/drop") { _, context in "dropped \(channels.closeAll(but: context.channel))" }
        router.post("api/echo") { request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            return Response(status: .ok, body: .init(byteBuffer: bytes))
        }
        router.get("api/big") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(repeating: 0x61, count: 2 << 20))) }
        let counter = handshakes
        let (ports, sink) = AsyncStream<Int>.makeStream()
        let app = Hummingbird.Application(
            router: router,
            server: try .pinnedTLS(identity: try pki.identity("leaf"),
                                   clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")]))) { _ in
                counter.withLockedValue { $0 += 1 }
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in if let port = channel.localAddress?.port { sink.yield(port) } })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            let port = try #require(try await withTimeout(300) { await ports.first { _ in true } })
            try await body(URL(string: "https://localhost:\(port)/api")!)
        }
    }

    func transport(pins: [SPKIPin]? = nil, maximumBodySize: Int = 1 << 20) throws -> PinnedOpenAPITransport {
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([try pki.certificate("root")]),
                                                    pins: try pins.map { try PinSet(pins: $0) })],
                                 defaultAnchors: nil)
        var configuration = PinnedHTTPClient.Configuration()
        configuration.maximumBodySize = maximumBodySize
        return try PinnedOpenAPITransport(policy: policy, identity: try pki.identity("client"), configuration: configuration)
    }

    func text(_ body: HTTPBody?) async throws -> String {
        guard let body else { return "" }
        return try await String(collecting: body, upTo: 4 << 20)
    }

    @Test("twenty requests share one connection and one handshake; bodies go both ways")
    func keepAlive() async throws {
        let transport = try transport()
        try await withServer { base in
            for index in 0..<20 {
                // The base URL's path ("/api") comes before the operation's path.
                let (response, body) = try await transport.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/\(index)"),
                                                                body: nil, baseURL: base, operationID: "getItem")
                #expect(response.status == .ok)
                #expect(try await text(body) == "item \(index)")
            }
            let (echoed, echoBody) = try await transport.send(
                HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/echo", headerFields: [.contentType: "application/json"]),
                body: HTTPBody("{\"ok\":true}"), baseURL: base, operationID: "echo")
            #expect(echoed.status == .ok)
            #expect(try await text(echoBody) == "{\"ok\":true}")
            #expect(transport.http.connectionsOpened == 1)
            #expect(handshakes.withLockedValue { $0 } == 1)

            // Concurrent requests open connections of their own, and are all answered.
            try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        let (_, body) = try await transport.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/c\(index)"),
                                                                 body: nil, baseURL: base, operationID: "getItem")
                        return try await text(body)
                    }
                }
                var answers: [String] = []
                for try await answer in group { answers.append(answer) }
                #expect(answers.sorted() == ["item c0", "item c1", "item c2", "item c3"])
            }
            #expect(transport.http.connectionsOpened <= 5)
            transport.http.shutdown()
        }
    }

    @Test("a kept connection the server closed is replaced, and the request answered")
    func closedByServer() async throws {
        let transport = try self.transport()
        let other = try self.transport()
        try await withServer { base in
            let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/1")
            _ = try await transport.send(request, body: nil, baseURL: base, operationID: "getItem")
            // The server closes the connection the first client keeps.
            let (_, dropped) = try await other.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/drop"),
                                                    body: nil, baseURL: base, operationID: "drop")
            #expect(try await text(dropped) == "dropped 1")
            try await Task.sleep(for: .milliseconds(500))
            // Whether the client has seen the close yet (the connection is not taken) or not (the
            // request fails on it before any answer and is sent again), it is answered on a new one.
            let (response, body) = try await transport.send(request, body: nil, baseURL: base, operationID: "getItem")
            #expect(response.status == .ok)
            #expect(try await text(body) == "item 1")
            #expect(transport.http.connectionsOpened == 2)
            transport.http.shutdown()
            other.http.shutdown()
        }
    }

    @Test("a server no pin matches is refused with the policy's error; a body over the limit is refused and the next request still works")
    func refusals() async throws {
        try await withServer { base in
            let pinned = try transport(pins: [try pki.pin("backup", isKey: true), try pki.pin("abe")])
            await #expect(throws: TLSTrustError.self) {
                _ = try await pinned.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/1"),
                                          body: nil, baseURL: base, operationID: "getItem")
            }
            do {
                _ = try await pinned.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/1"),
                                          body: nil, baseURL: base, operationID: "getItem")
            } catch let error as TLSTrustError {
                #expect(error.reason == .noPinMatched)
            }

            let small = try transport(maximumBodySize: 1 << 20)
            let big = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big")
            do {
                _ = try await small.send(big, body: nil, baseURL: base, operationID: "big")
                Issue.record("a body over the limit was accepted")
            } catch let error as PinnedTLSError {
                #expect("\(error)".contains("larger than 1048576 bytes"), "\(error)")
            }
            let (after, _) = try await small.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/2"),
                                                  body: nil, baseURL: base, operationID: "getItem")
            #expect(after.status == .ok)

            // Only https:// base URLs.
            await #expect(throws: PinnedTLSError.self) {
                _ = try await small.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/1"),
                                         body: nil, baseURL: URL(string: "http://localhost:1")!, operationID: "getItem")
            }
            // A head that could split the request is refused before anything is sent.
            for (method, headers) in [("GET", [("X-Name", "a\r\nX-Injected: 1")]), ("GET", [("X-Name ", "a")]),
                                      ("GET", [("X-Name", "a\u{0}b")]), ("PUT/", []), ("CONNECT", [])] {
                await #expect(throws: PinnedTLSError.self, "\(method) \(headers)") {
                    _ = try await small.http.execute(method: method, url: base.absoluteString + "/items/1", headers: headers, body: [1, 2, 3])
                }
            }
            small.http.shutdown()
            pinned.http.shutdown()
        }
    }
}
