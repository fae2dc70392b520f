import Foundation
import NIOCore
import Testing
import TestSupport
import X509
@testable import PinnedTLS
import NIOConcurrencyHelpers

/// What a test server saw.
final class ServerLog: Sendable {
    private let box = NIOLockedValueBox<(served: [[Certificate]?], refused: [any Error])>(([], []))
    var served: [[Certificate]?] { box.withLockedValue { $0.served } }
    var refused: [any Error] { box.withLockedValue { $0.refused } }
    func serve(_ chain: [Certificate]?) { box.withLockedValue { $0.served.append(chain) } }
    func refuse(_ error: any Error) { box.withLockedValue { $0.refused.append(error) } }

    /// Waits (at most 30 s) until something was served or refused.
    func settle() async {
        for _ in 0..<3000 where served.isEmpty && refused.isEmpty {
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
    }
}

/// Our server, with and without client certificates, against `openssl s_client` and our client.
@Suite("Pinned TLS server and mutual TLS", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"), .onOwnThreads)
struct PinnedServerTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    /// Runs a server that answers one line with `PONG <client subject>`, runs `body` against
    /// its port, then stops it.
    func withServer(
        mutual: Bool, _ body: @Sendable (Int, ServerLog) async throws -> Void
    ) async throws {
        let log = ServerLog()
        let root = try pki.certificate("root")
        let authentication = mutual ? ClientAuthentication(anchors: .only([root])) : nil
        let server = try await PinnedTLSServer.bind(
            identity: try pki.identity("leaf"), clientAuthentication: authentication, handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(onRefused: { log.refuse($0) }) { connection in
                log.serve(connection.peerChain)
                let subject = connection.peerChain?.first?.subject.description ?? "anonymous"
                try await connection.channel.executeThenClose { inbound, outbound in
                    var received = ""
                    for try await var buffer in inbound {
                        received += buffer.readString(length: buffer.readableBytes) ?? ""
                        if received.contains("\n") || received.utf8.count > 4096 { break }
                    }
                    try await outbound.write(ByteBuffer(string: "PONG \(subject)\n"))
                }
            }
        }
        do {
            try await body(server.port, log)
        } catch {
            await server.close()
            _ = await running.result
            throw error
        }
        await server.close()
        _ = await running.result
    }

    func sClient(_ port: Int, _ extra: [String]) async throws -> ToolResult {
        try await Tools.runAsync(
            try #require(Tools.openssl),
            ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost", "-CAfile", "root.pem",
             "-verify_return_error", "-ign_eof"] + extra,
            stdin: "PING\n", directory: pki.directory, seconds: 60)
    }

    @Test("openssl s_client without a certificate is refused by a server that requires one")
    func clientWithoutCertificateRefused() async throws {
        try await withServer(mutual: true) { port, log in
            let result = try await sClient(port, [])
            await log.settle()
            #expect(!result.stdout.contains("PONG"))
            #expect(log.served.isEmpty)
            let refusal = try #require(log.refused.first as? TLSTrustError, "\(log.refused)")
            #expect(refusal.reason == .noCertificate)
        }
    }

    @Test("openssl s_client with Honest Abe's client certificate is refused")
    func clientFromAnotherCARefused() async throws {
        let abePin = try pki.opensslPin("abe-client")
        try await withServer(mutual: true) { port, log in
            let result = try await sClient(port, ["-cert", "abe-client.pem", "-key", "abe-client.key"])
            await log.settle()
            #expect(!result.stdout.contains("PONG"))
            #expect(log.served.isEmpty)
            let refusal = try #require(log.refused.first as? TLSTrustError, "\(log.refused)")
            #expect(refusal.reason == .untrustedAnchor)
            #expect(refusal.presentedPins.map(\.description) == [abePin])
        }
    }

    @Test("openssl s_client with a certificate from the anchor is served; the handler sees its chain")
    func clientFromAnchorAccepted() async throws {
        try await withServer(mutual: true) { port, log in
            let result = try await sClient(
                port, ["-cert", "client.pem", "-key", "client.key", "-cert_chain", "inter.pem"])
            #expect(result.stdout.contains("PONG CN=device-1"), "\(result.stderr)")
            #expect(result.stdout.contains("Verify return code: 0 (ok)"))
            let chain = try #require(log.served.first ?? nil)
            #expect(chain.map(\.subject.description) ==
                ["CN=device-1", "CN=SecureFoundation Test Intermediate", "CN=SecureFoundation Test Root"])
        }
    }

    @Test("a session saved by an accepted client is not resumed by one without a certificate (TLS 1.3 ticket, TLS 1.2 session id)")
    func resumptionDoesNotReplaceTheCertificate() async throws {
        try await withServer(mutual: true) { port, log in
            for (version, resumed) in try await ServerStackTests.resumeWithoutCertificate(pki, port: port, path: "/", served: "PONG CN=device-1") {
                #expect(!resumed.stdout.contains("Reused"), "\(version): \(resumed.stdout)")
                #expect(!resumed.stdout.contains("PONG"), "\(version): \(resumed.stdout)")
            }
            await log.settle()
            // Served: only clients that presented the certificate.
            let served = log.served
            #expect(!served.isEmpty && served.allSatisfy { $0?.first == (try? pki.certificate("client")) },
                     "\(served.count) served: \(served.map { $0?.first?.subject.description ?? "none" })")
        }
    }

    @Test("openssl s_client offering only TLS 1.1 is refused; TLS 1.2 with a good certificate is served")
    func protocolVersions() async throws {
        try await withServer(mutual: true) { port, log in
            let old = try await sClient(port, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0",
                                               "-cert", "client.pem", "-key", "client.key", "-cert_chain", "inter.pem"])
            #expect(!old.stdout.contains("PONG"))
            let current = try await sClient(port, ["-tls1_2", "-cert", "client.pem", "-key", "client.key",
                                                   "-cert_chain", "inter.pem"])
            #expect(current.stdout.contains("PONG CN=device-1"), "\(current.stderr)")
            #expect(current.stdout.contains("Protocol  : TLSv1.2"))
            #expect(log.served.count == 1)
        }
    }

    @Test("openssl s_client verifies our server's chain (no client certificates asked)")
    func plainServerVerifiedByOpenSSL() async throws {
        try await withServer(mutual: false) { port, log in
            let result = try await sClient(port, [])
            #expect(result.stdout.contains("PONG anonymous"))
            #expect(result.stdout.contains("Verify return code: 0 (ok)"))
            #expect(log.served.count == 1)
        }
    }

    @Test("Our client with its certificate against our server: both sides see the other's chain")
    func ourClientAgainstOurServer() async throws {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]),
                               pins: try PinSet(pins: [pki.pin("leaf"), pki.pin("backup", isKey: true)]))],
            defaultAnchors: nil)
        let identity = try pki.identity("client")
        try await withServer(mutual: true) { port, log in
            let client = try PinnedTLSClient(policy: policy, identity: identity)
            let connection = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost",
                                                      timeout: .seconds(30))
            #expect(connection.peerChain.first?.subject.description == "CN=localhost")
            let response = try await exchange(connection, "PING\n")
            #expect(response == "PONG CN=device-1\n")
            #expect((log.served.first ?? nil)?.count == 3)
        }
    }

    /// A server that speaks first, at once after its handshake, and hangs up (as a receiver
    /// refusing a revoked device does): our client reads every word of it, every time. Its
    /// async channel used to be made in a callback of the connect future, which could run
    /// after the handshake had completed and the server's words had arrived, and been dropped
    /// at the end of a pipeline with no reader: the client saw a connection closed without a
    /// word (or "I/O on closed channel"), now and then under load. The test holds those
    /// callbacks back on every third connection, so the old order fails it every time.
    @Test("A server that speaks first, right after the handshake: the client reads it every time")
    func aServerThatSpeaksFirstIsHeardEveryTime() async throws {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))], defaultAnchors: nil)
        let identity = try pki.identity("client")
        let server = try await PinnedTLSServer.bind(
            identity: try pki.identity("leaf"), clientAuthentication: ClientAuthentication(anchors: .only([root])),
            handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(handlersOnEventLoop: true) { connection in
                try await connection.channel.executeThenClose { _, outbound in
                    try await outbound.write(ByteBuffer(string: "REFUSED\n"))
                }
            }
        }
        var client = try PinnedTLSClient(policy: policy, identity: identity)
        var unheard: [String] = []
        for round in 0..<60 {
            // Every third connection has its connect future's callbacks held back 200 ms, as a
            // loaded machine may: the handshake and the server's words come first.
            client.lateConnectCallbacks = round % 3 == 2 ? .milliseconds(200) : nil
            do {
                let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                                          timeout: .seconds(30))
                var heard = ""
                try await connection.channel.executeThenClose { inbound, _ in
                    for try await var buffer in inbound {
                        heard += buffer.readString(length: buffer.readableBytes) ?? ""
                        if heard.contains("\n") { break }
                    }
                }
                if heard != "REFUSED\n" { unheard.append("round \(round): heard \"\(heard)\"") }
            } catch {
                unheard.append("round \(round): \(error)")
            }
        }
        await server.close()
        _ = await running.result
        #expect(unheard.isEmpty, "\(unheard)")
    }

    @Test("A client that connects and never sends a ClientHello is dropped after the handshake timeout")
    func silentClientDropped() async throws {
        let log = ServerLog()
        let server = try await PinnedTLSServer.bind(
            identity: try pki.identity("leaf"),
            clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")])),
            handshakeTimeout: .seconds(1))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(onRefused: { log.refuse($0) }) { connection in log.serve(connection.peerChain) }
        }
        let peer = try #require(LoopbackSocket.connected(to: server.port))
        defer { withExtendedLifetime(peer) {} }
        let fd = peer.fd
        // Wait (at most 30 s) for the server to close the connection: recv returns 0.
        var closed = false
        for _ in 0..<3000 {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
            if count == 0 { closed = true; break }
            if count < 0 && errno != EAGAIN && errno != EWOULDBLOCK { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        await log.settle()
        await server.close()
        _ = await running.result
        #expect(closed)
        #expect(log.served.isEmpty)
        #expect(log.refused.count == 1)
        if case .connectionFailed(_, _, let detail)? = log.refused.first as? PinnedTLSError {
            #expect(detail.hasPrefix("TLS handshake"))
        } else {
            Issue.record("expected a failed handshake, got \(log.refused)")
        }
    }

    @Test("Our client without a certificate gets nothing from a server that requires one")
    func ourClientWithoutCertificate() async throws {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))], defaultAnchors: nil)
        try await withServer(mutual: true) { port, log in
            let client = try PinnedTLSClient(policy: policy)
            var response = ""
            do {
                let connection = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost",
                                                          timeout: .seconds(30))
                response = (try? await exchange(connection, "PING\n", seconds: 5)) ?? ""
            } catch {
                // TLS 1.2 refuses during the handshake; TLS 1.3 after the client's Finished.
            }
            await log.settle()
            #expect(!response.contains("PONG"))
            #expect(log.served.isEmpty)
            #expect((log.refused.first as? TLSTrustError)?.reason == .noCertificate)
        }
    }

    @Test("handlersOnEventLoop: the handler runs on its connection's event loop and serves as before")
    func handlersOnTheEventLoop() async throws {
        let root = try pki.certificate("root")
        let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"), handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(handlersOnEventLoop: true) { connection in
                let onLoop = connection.channel.channel.eventLoop.inEventLoop
                try await connection.channel.executeThenClose { inbound, outbound in
                    for try await _ in inbound { break }
                    try await outbound.write(ByteBuffer(string: "PONG on the event loop: \(onLoop)\n"))
                }
            }
        }
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))], defaultAnchors: nil)
        let client = try PinnedTLSClient(policy: policy)
        for _ in 0..<3 {
            let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost", timeout: .seconds(30))
            let response = try await exchange(connection, "PING\n", seconds: 30)
            #expect(response == "PONG on the event loop: true\n")
        }
        await server.close()
        _ = await running.result
    }
}
