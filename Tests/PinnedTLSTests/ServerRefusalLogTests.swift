import Foundation
import NIOCore
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// What a server tells its operator: a client refused by the policy, with advice for a client;
/// a client that went away during the handshake, as that, not as a refusal.
@Suite("The server's account of unfinished handshakes", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"),
       .onOwnThreads)
struct ServerRefusalLogTests {
    let pki: PurposePKI

    init() throws {
        pki = try PurposePKI.get()
    }

    func run(_ clients: [[String]]) async throws -> ServerLog {
        let log = ServerLog()
        let server = try await PinnedTLSServer.bind(
            identity: try pki.identity("server"),
            clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")])),
            handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(onRefused: { log.refuse($0) }) { connection in
                log.serve(connection.peerChain)
                try await connection.channel.executeThenClose { _, outbound in
                    try await outbound.write(ByteBuffer(string: "PONG\n"))
                }
            }
        }
        for arguments in clients {
            _ = try await Tools.runAsync(
                try #require(Tools.openssl),
                ["s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost",
                 "-verify_return_error", "-ign_eof"] + arguments,
                stdin: "PING\n", directory: pki.directory, seconds: 60)
        }
        for _ in 0..<3000 where log.refused.count < clients.count {
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        await server.close()
        _ = await running.result
        return log
    }

    @Test("A client that does not trust the server hangs up: not filed as a refusal, no advice about anchors")
    func clientHangsUp() async throws {
        // Another CA's root: s_client refuses our server's certificate and sends an alert.
        let otherRoot = try TestPKI.get().path("root.pem")
        let log = try await run([["-CAfile", otherRoot, "-cert", "client.pem", "-key", "client.key"]])
        #expect(log.served.isEmpty)
        #expect(log.refused.count == 1, "\(log.refused)")
        let error = try #require(log.refused.first)
        #expect(!(error is TLSTrustError), "\(error)")
        let text = String(describing: error)
        #expect(text.contains("nothing was refused here"), "\(text)")
        #expect(!text.contains("anchors"), "\(text)")
    }

    @Test("A client refused for its certificate gets advice for a client, not for a server")
    func clientRefused() async throws {
        let other = try TestPKI.get()
        let log = try await run([["-CAfile", "root.pem", "-cert", other.path("client.pem"), "-key", other.path("client.key"),
                                  "-cert_chain", other.path("inter.pem")]])
        let refusal = try #require(log.refused.first as? TLSTrustError, "\(log.refused)")
        #expect(refusal.reason == .untrustedAnchor)
        #expect(refusal.role == .client)
        #expect(refusal.description.contains("if this client is genuine"), "\(refusal.description)")
        #expect(!refusal.description.contains("if this server is genuine"), "\(refusal.description)")
    }
}
