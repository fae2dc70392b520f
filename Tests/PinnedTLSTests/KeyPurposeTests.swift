import Foundation
import NIOCore
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// A server's certificate must be issued for serverAuth, a client's for clientAuth (RFC 5280
/// §4.2.1.12); a leaf without the extension, or with anyExtendedKeyUsage, is accepted for both.
/// The certificates are made by `openssl` (see PurposePKI).
@Suite("Extended key usage of peers", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"),
       .onOwnThreads)
struct KeyPurposeTests {
    let pki: PurposePKI

    init() throws {
        pki = try PurposePKI.get()
    }

    static let acceptedAsServer: Set<String> = ["server", "both", "noeku", "anyeku"]
    static let acceptedAsClient: Set<String> = ["client", "both", "noeku", "anyeku", "critical-client"]

    @Test("Server chains: serverAuth, both, none or any are accepted; clientAuth and codeSigning are refused")
    func serverPurpose() async throws {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))],
                                 defaultAnchors: nil)
        for leaf in PurposePKI.leaves.map(\.name) {
            let presented = [try pki.certificate(leaf)]
            do {
                _ = try await policy.evaluate(host: "localhost", port: 443, presented: presented)
                #expect(Self.acceptedAsServer.contains(leaf), "\(leaf) was accepted as a server")
            } catch {
                #expect(!Self.acceptedAsServer.contains(leaf), "\(leaf): \(error)")
                guard case .invalidChain(let detail) = error.reason else {
                    Issue.record("\(leaf): \(error.reason)")
                    continue
                }
                #expect(detail.contains("serverAuth"), "\(detail)")
            }
        }
    }

    @Test("Client chains: clientAuth, both, none or any are accepted; serverAuth and codeSigning are refused")
    func clientPurpose() async throws {
        let authentication = ClientAuthentication(anchors: .only([try pki.certificate("root")]))
        for leaf in PurposePKI.leaves.map(\.name) {
            let presented = [try pki.certificate(leaf)]
            do {
                _ = try await authentication.evaluate(peer: "127.0.0.1", presented: presented)
                #expect(Self.acceptedAsClient.contains(leaf), "\(leaf) was accepted as a client")
            } catch {
                #expect(!Self.acceptedAsClient.contains(leaf), "\(leaf): \(error)")
                guard case .invalidChain(let detail) = error.reason else {
                    Issue.record("\(leaf): \(error.reason)")
                    continue
                }
                #expect(detail.contains("clientAuth"), "\(detail)")
            }
        }
    }

    @Test("Our client refuses openssl s_server presenting a clientAuth-only certificate, accepts serverAuth")
    func clientAgainstOpenSSLServer() async throws {
        let root = try pki.certificate("root")
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))],
                                 defaultAnchors: nil)
        for (leaf, accepted) in [("client", false), ("codesign", false), ("server", true), ("noeku", true)] {
            let server = try PurposeServer(pki, leaf: leaf)
            defer { server.stop() }
            do {
                let connection = try await PinnedTLSClient(policy: policy)
                    .connect(host: "127.0.0.1", port: server.port, serverName: "localhost", timeout: .seconds(30))
                let response = try await exchange(connection, "GET / HTTP/1.0\r\n\r\n")
                #expect(accepted, "\(leaf) was accepted")
                #expect(response.contains("200 ok"))
            } catch let error as TLSTrustError {
                #expect(!accepted, "\(leaf): \(error)")
                if case .invalidChain(let detail) = error.reason { #expect(detail.contains("serverAuth")) } else {
                    Issue.record("\(leaf): \(error.reason)")
                }
            }
        }
    }

    @Test("Our server refuses openssl s_client presenting serverAuth-only or codeSigning-only certificates")
    func serverAgainstOpenSSLClient() async throws {
        let log = ServerLog()
        let server = try await PinnedTLSServer.bind(
            identity: try pki.identity("server"),
            clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")])),
            handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(onRefused: { log.refuse($0) }) { connection in
                log.serve(connection.peerChain)
                try await connection.channel.executeThenClose { inbound, outbound in
                    var received = ""
                    for try await var buffer in inbound {
                        received += buffer.readString(length: buffer.readableBytes) ?? ""
                        if received.contains("\n") || received.utf8.count > 4096 { break }
                    }
                    try await outbound.write(ByteBuffer(string: "PONG\n"))
                }
            }
        }
        defer { running.cancel() }
        var outcomes: [String: String] = [:]
        for leaf in ["server", "codesign", "client", "noeku"] {
            let result = try await Tools.runAsync(
                try #require(Tools.openssl),
                ["s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-CAfile", "root.pem",
                 "-verify_return_error", "-ign_eof", "-cert", "\(leaf).pem", "-key", "\(leaf).key"],
                stdin: "PING\n", directory: pki.directory, seconds: 60)
            outcomes[leaf] = result.stdout.contains("PONG") ? "served" : "refused"
        }
        await server.close()
        _ = await running.result
        #expect(outcomes == ["server": "refused", "codesign": "refused", "client": "served", "noeku": "served"])
        let reasons = log.refused.compactMap { ($0 as? TLSTrustError)?.reason }
        #expect(reasons.count == 2, "\(log.refused)")
        for reason in reasons {
            guard case .invalidChain(let detail) = reason else {
                Issue.record("\(reason)")
                continue
            }
            #expect(detail.contains("clientAuth"))
        }
    }
}
