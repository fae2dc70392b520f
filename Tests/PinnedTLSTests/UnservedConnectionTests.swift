import Foundation
import NIOCore
import Testing
import TestSupport
@testable import PinnedTLS
import NIOConcurrencyHelpers

/// Connections whose handshake completes but which are never served, or served by a handler
/// that fails at once: each must be closed, and none may stop the process (NIO stops it when an
/// async channel's writer is released unfinished).
@Suite("Pinned TLS connections that are never served", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"),
       .onOwnThreads)
struct UnservedConnectionTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    func client() throws -> PinnedTLSClient {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))], defaultAnchors: nil)
        return try PinnedTLSClient(policy: policy)
    }

    /// Connects `count` clients (each handshake completed on the client's side).
    func connectAll(_ client: PinnedTLSClient, port: Int, count: Int) async throws -> [PinnedTLSConnection] {
        var connections: [PinnedTLSConnection] = []
        for _ in 0..<count {
            connections.append(try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost",
                                                        timeout: .seconds(30)))
        }
        return connections
    }

    /// Reads each connection until the server closes it (at most 30 s each); returns what was
    /// read (a channel that errs as it closes reads as what it had read).
    func drain(_ connections: [PinnedTLSConnection]) async throws -> [String] {
        var texts: [String] = []
        for connection in connections {
            let channel = connection.channel
            texts.append(try await withTimeout(30) {
                let text = NIOLockedValueBox("")
                _ = try? await channel.executeThenClose { inbound, _ in
                    for try await var buffer in inbound {
                        let part = buffer.readString(length: buffer.readableBytes) ?? ""
                        text.withLockedValue { $0 += part }
                    }
                }
                return text.withLockedValue { $0 }
            })
        }
        return texts
    }

    @Test("A server closed with handshaken connections it never served closes each of them")
    func closedWithPendingConnections() async throws {
        let client = try client()
        var connections: [PinnedTLSConnection] = []
        for _ in 0..<3 {
            // Bound, handshakes completed, closed and released without ever serving.
            let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"), handshakeTimeout: .seconds(30))
            connections += try await connectAll(client, port: server.port, count: 4)
            // Let the server's side of the last handshake finish too.
            try await Task.sleep(nanoseconds: 100_000_000)
            await server.close()
        }
        let texts = try await drain(connections)
        #expect(texts == Array(repeating: "", count: 12))
    }

    @Test("Clients completing handshakes while the server shuts down: every connection ends, the process survives")
    func handshakesDuringShutdown() async throws {
        let client = try client()
        for round in 0..<4 {
            let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"), handshakeTimeout: .seconds(30))
            let port = server.port
            let served = NIOLockedValueBox(0)
            let running = Task(executorPreference: TestExecutor.shared) {
                try await server.run { connection in
                    served.withLockedValue { $0 += 1 }
                    // Holds the connection until the serving task is cancelled (at most 30 s).
                    for _ in 0..<3000 where !Task.isCancelled {
                        try? await Task.sleep(nanoseconds: 10_000_000)
                    }
                    _ = connection
                }
            }
            let clients = (0..<6).map { _ in
                Task(executorPreference: TestExecutor.shared) { () -> PinnedTLSConnection? in
                    try? await client.connect(host: "127.0.0.1", port: port, serverName: "localhost",
                                              timeout: .seconds(30))
                }
            }
            // Shut down while the handshakes run: cancel the serving task (round 0, 2) or close the
            // listener first (round 1, 3).
            try await Task.sleep(nanoseconds: UInt64(round) * 2_000_000)
            if round % 2 == 0 {
                running.cancel()
                await server.close()
            } else {
                await server.close()
                running.cancel()
            }
            _ = await running.result
            var connections: [PinnedTLSConnection] = []
            for task in clients {
                if let connection = await task.value { connections.append(connection) }
            }
            let texts = try await drain(connections)
            #expect(texts.allSatisfy { $0.isEmpty }, "\(texts)")
        }
    }

    @Test("A handler that throws at once: the connection is closed, the server goes on serving")
    func handlerThrowsImmediately() async throws {
        struct Refused: Error {}
        let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"), handshakeTimeout: .seconds(30))
        let calls = NIOLockedValueBox(0)
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run { _ in
                calls.withLockedValue { $0 += 1 }
                throw Refused()
            }
        }
        let connections = try await connectAll(try client(), port: server.port, count: 5)
        let texts = try await drain(connections)
        await server.close()
        _ = await running.result
        #expect(texts == Array(repeating: "", count: 5))
        #expect(calls.withLockedValue { $0 } == 5)
    }

    @Test("A client whose task is cancelled during the handshake gets CancellationError; its connection is closed")
    func cancelledClient() async throws {
        let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"), handshakeTimeout: .seconds(30))
        let ended = NIOLockedValueBox(0)
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run { connection in
                // Reads until the client's side closes.
                _ = try? await connection.channel.executeThenClose { inbound, _ in
                    for try await _ in inbound {}
                }
                ended.withLockedValue { $0 += 1 }
            }
        }
        let client = try client()
        let port = server.port
        for _ in 0..<4 {
            let attempt = Task(executorPreference: TestExecutor.shared) { () throws -> Bool in
                // Waits (at most 30 s) until cancelled, then connects: the handshake completes for
                // a caller that no longer wants the connection.
                for _ in 0..<3000 where !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 10_000_000)
                }
                _ = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost",
                                             timeout: .seconds(30))
                return true
            }
            attempt.cancel()
            let result = await attempt.result
            #expect(throws: CancellationError.self) { try result.get() }
        }
        for _ in 0..<3000 where ended.withLockedValue({ $0 }) < 4 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        await server.close()
        _ = await running.result
        #expect(ended.withLockedValue { $0 } == 4)
    }
}
