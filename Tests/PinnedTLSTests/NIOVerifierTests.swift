import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// The policy in a pipeline of one's own (what Hummingbird, Vapor or grpc-swift configure):
/// a plain `ClientBootstrap` with `NIOSSLClientHandler` against the real `openssl s_server`,
/// and a plain `ServerBootstrap` with `NIOSSLServerHandler` against the real `openssl s_client`.
@Suite("NIOVerifier: the policy in a swift-nio-ssl pipeline of one's own", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"),
       .onOwnThreads)
struct NIOVerifierTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    /// Connects with a plain NIO client whose handler checks the server under `policy`; sends an
    /// HTTP request to s_server -www and returns the answer (nil when the handshake failed) and
    /// the outcome the verifier reported.
    func fetch(_ policy: TrustPolicy, port: Int) async throws -> (answer: String?, outcome: Result<TrustEvaluation, TLSTrustError>?) {
        let verifier = NIOVerifier(policy: policy)
        let outcome = NIOLockedValueBox<Result<TrustEvaluation, TLSTrustError>?>(nil)
        let context = try NIOSSLContext(configuration: try NIOVerifier.clientConfiguration())
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(.seconds(10))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(
                        context: context, serverHostname: "localhost",
                        customVerificationCallbackWithMetadata: verifier.verificationCallback(peer: "localhost", port: port) { result in
                            outcome.withLockedValue { $0 = result }
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let answer: String? = try await withTimeout(30) {
            do {
                return try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(ByteBuffer(string: "GET / HTTP/1.0\r\n\r\n"))
                    var text = ""
                    for try await var buffer in inbound {
                        text += buffer.readString(length: buffer.readableBytes) ?? ""
                        if text.utf8.count > 1 << 20 { break }
                    }
                    return text
                }
            } catch {
                return nil
            }
        }
        return (answer, outcome.withLockedValue { $0 })
    }

    func policy(pins: PinSet? = nil) throws -> TrustPolicy {
        TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([try pki.certificate("root")]), pins: pins)],
                    defaultAnchors: nil)
    }

    @Test("client side: a pinned server is accepted (the validated chain ends at the root); a wrong pin refuses the handshake with .noPinMatched")
    func pinnedServerThroughAPlainPipeline() async throws {
        let server = try OpenSSLServer(pki, ["-cert", "leaf.pem", "-key", "leaf.key", "-cert_chain", "inter.pem"])
        defer { server.stop() }
        let rootPin = try pki.pin("root")
        let backupPin = try pki.pin("backup", isKey: true)
        let accepted = try await fetch(try policy(pins: try PinSet(pins: [backupPin, rootPin])), port: server.port)
        #expect(accepted.answer?.contains("HTTP/1.0 200 ok") == true, "\(accepted.answer ?? "no answer")")
        guard case .success(let evaluation)? = accepted.outcome else { Issue.record("\(String(describing: accepted.outcome))"); return }
        #expect(evaluation.validatedChain.last == (try pki.certificate("root")))
        #expect(evaluation.matchedPin == rootPin)

        let refused = try await fetch(try policy(pins: try PinSet(pins: [backupPin, try pki.pin("abe")])), port: server.port)
        #expect(refused.answer == nil || refused.answer?.contains("200 ok") == false)
        guard case .failure(let error)? = refused.outcome else { Issue.record("\(String(describing: refused.outcome))"); return }
        #expect(error.reason == .noPinMatched)
        // Another name than the certificate's: refused by the policy's name check.
        let wrongName = try OpenSSLServer(pki, ["-cert", "wrongname.pem", "-key", "wrongname.key", "-cert_chain", "inter.pem"])
        defer { wrongName.stop() }
        let misnamed = try await fetch(try policy(), port: wrongName.port)
        guard case .failure(let nameError)? = misnamed.outcome else { Issue.record("\(String(describing: misnamed.outcome))"); return }
        #expect(nameError.reason == .hostnameMismatch)
    }

    @Test("server side: mutual TLS with a plain ServerBootstrap; openssl s_client with the client certificate is served, without one it is not, and the handler reads the validated chain")
    func mutualTLSThroughAPlainPipeline() async throws {
        let openssl = try #require(Tools.openssl)
        let verifier = NIOVerifier(clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")])))
        let outcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
        let subjects = NIOLockedValueBox<[String]>([])
        let context = try NIOSSLContext(configuration: try pki.identity("leaf").serverConfiguration(clientCertificates: true))
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let peer = channel.remoteAddress?.description ?? "client"
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(
                        context: context,
                        customVerificationCallbackWithMetadata: verifier.verificationCallback(peer: peer) { result in
                            outcomes.withLockedValue { $0.append(result) }
                        }))
                    try channel.pipeline.syncOperations.addHandler(Greeter(subjects: subjects))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { listener.close(promise: nil) }
        let port = try #require(listener.localAddress?.port)

        func client(_ certificate: [String]) async throws -> ToolResult {
            try await Tools.runAsync(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", "root.pem", "-servername", "localhost",
                                               "-ign_eof"] + certificate, directory: pki.directory, seconds: 20)
        }
        let served = try await client(["-cert", "client.pem", "-key", "client.key", "-cert_chain", "inter.pem"])
        #expect(served.stdout.contains("hello from the server"), "\(served.stdout)\(served.stderr)")
        let clientSubject = try pki.certificate("client").subject.description
        #expect(subjects.withLockedValue { $0 } == [clientSubject])
        guard case .success(let evaluation)? = outcomes.withLockedValue({ $0.first }) else {
            Issue.record("\(outcomes.withLockedValue { $0 })"); return
        }
        #expect(evaluation.validatedChain.first == (try pki.certificate("client")))

        // Without a certificate, and with one from another CA: never served.
        let anonymous = try await client([])
        #expect(!anonymous.stdout.contains("hello from the server"))
        let stranger = try await client(["-cert", "abe-client.pem", "-key", "abe-client.key"])
        #expect(!stranger.stdout.contains("hello from the server"))
        #expect(outcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { return error.reason == .untrustedAnchor } else { return false } } },
                "\(outcomes.withLockedValue { $0 })")
        #expect(subjects.withLockedValue { $0 }.count == 1)
    }
}

/// After the handshake: records the client's validated leaf (as an application's handler reads
/// it), says hello and closes.
private final class Greeter: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let subjects: NIOLockedValueBox<[String]>

    init(subjects: NIOLockedValueBox<[String]>) { self.subjects = subjects }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            if let chain = try? context.channel.pipeline.syncOperations.nioSSL_peerValidatedCertificateChain(),
               let leaf = chain.first, let der = try? leaf.toDERBytes(), let certificate = try? Certificate(derEncoded: der) {
                subjects.withLockedValue { $0.append(certificate.subject.description) }
            }
            context.writeAndFlush(NIOAny(ByteBuffer(string: "hello from the server\n")), promise: nil)
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}
