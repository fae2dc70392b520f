import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SecureFoundationServices
import ServiceLifecycle
import Testing
import TestSupport
@testable import PinnedTLS

/// A pinned TLS server run as a swift-service-lifecycle `Service` inside a `ServiceGroup`.
@Suite("PinnedTLSServerService: graceful shutdown in a ServiceGroup, refusals logged", .enabled(if: Tools.available, "needs openssl"),
       .onOwnThreads)
struct ServiceTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    @Test("a connection in flight at the shutdown is answered in full; afterwards nothing is accepted; a refused client is logged with its reason")
    func gracefulShutdown() async throws {
        let log = CapturedLog()
        let root = try pki.certificate("root")
        let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"),
                                                    clientAuthentication: ClientAuthentication(anchors: .only([root])))
        let started = AsyncStream<Void>.makeStream()
        let service = PinnedTLSServerService(server: server, logger: log.logger()) { connection in
            try await connection.channel.executeThenClose { inbound, outbound in
                for try await _ in inbound {
                    started.continuation.yield()
                    // Slow on purpose: the shutdown arrives while this answer is being made.
                    try await Task.sleep(for: .milliseconds(500))
                    try await outbound.write(ByteBuffer(string: "answered in full\n"))
                    return
                }
            }
        }
        let group = ServiceGroup(services: [service], logger: log.logger("group"))
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))], defaultAnchors: nil)
        let client = try PinnedTLSClient(policy: policy, identity: try pki.identity("client"))
        let port = server.port

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // A client of another CA: refused, and the log says why.
            let stranger = try PinnedTLSClient(policy: policy, identity: try PEMFiles.identity(
                certificatePath: pki.path("abe-client.pem"), keyPath: pki.path("abe-client.key")))
            if let connection = try? await stranger.connect(host: "localhost", port: port, serverName: "localhost") {
                _ = try? await exchange(connection, "hello\n", seconds: 30)
            }
            let connection = try await client.connect(host: "localhost", port: port, serverName: "localhost")
            // On the suite's threads, as everything the test starts (the cooperative pool may be held).
            let answer = Task(executorPreference: TestExecutor.shared) { try await exchange(connection, "hello\n", seconds: 60) }
            // Once the handler has the request, shut the group down gracefully.
            _ = try await withTimeout(120) { await started.stream.first { _ in true } }
            await group.triggerGracefulShutdown()
            #expect(try await answer.value == "answered in full\n")
            try await tasks.next()
            // The listener is closed: a new connection fails.
            await #expect(throws: (any Error).self) {
                _ = try await client.connect(host: "localhost", port: port, serverName: "localhost", timeout: .seconds(10))
            }
        }
        let lines = log.lines.joined(separator: "\n")
        #expect(lines.contains("warning refused"), "\(lines)")
        #expect(lines.contains("untrusted") || lines.contains("anchor"), "\(lines)")
        #expect(lines.contains("TLS server stopped"), "\(lines)")
    }
}
