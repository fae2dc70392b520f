import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import NIOConcurrencyHelpers
import PinnedTLSGRPC
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// Bytes in, bytes out: a gRPC method without generated code.
struct RawBytes: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

/// Answers each request with its bytes reversed.
struct ReverseService: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "test.Reverse", method: "Reverse")

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.method, deserializer: RawBytes(), serializer: RawBytes()) { request, _ in
            StreamingServerResponse { writer in
                for try await message in request.messages { try await writer.write(message.reversed()) }
                return [:]
            }
        }
    }
}

/// A grpc-swift 2 server and client over the NIO transport, both under the policy.
@Suite("gRPC: server and client over the NIO transport with mutual TLS under the policy",
       .enabled(if: Tools.available, "needs openssl"), .onOwnThreads)
struct GRPCTests {
    let pki: TestPKI
    let outcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])

    init() throws {
        pki = try TestPKI.get()
    }

    func policy(pins: [SPKIPin]? = nil) throws -> TrustPolicy {
        TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([try pki.certificate("root")]),
                                       pins: try pins.map { try PinSet(pins: $0) })],
                    defaultAnchors: nil)
    }

    /// One call to the server at `port`, or the error the client got.
    func call(port: Int, policy: TrustPolicy, identity: TLSIdentity?,
              clientOutcomes: NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>) async throws -> Result<[UInt8], RPCError> {
        let transport = try HTTP2ClientTransport.Posix(
            target: .ipv4(address: "127.0.0.1", port: port),
            transportSecurity: try .pinnedTLS(policy: policy, host: "localhost", port: port, identity: identity) { outcome in
                clientOutcomes.withLockedValue { $0.append(outcome) }
            })
        return try await withGRPCClient(transport: transport) { client in
            do {
                var options = CallOptions.defaults
                options.timeout = .seconds(60)
                // A refused handshake fails the call at once instead of waiting for a connection.
                options.waitForReady = false
                let answer = try await client.unary(request: ClientRequest(message: [1, 2, 3]), descriptor: ReverseService.method,
                                                    serializer: RawBytes(), deserializer: RawBytes(), options: options) { response in
                    try response.message
                }
                return .success(answer)
            } catch let error as RPCError {
                return .failure(error)
            }
        }
    }

    @Test("the right client is answered; without a certificate, or from another CA, it is refused; the client refuses a server no pin matches")
    func mutualTLS() async throws {
        let server = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0),
            transportSecurity: try .pinnedTLS(
                identity: try pki.identity("leaf"),
                clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")]))) { outcome in
                    outcomes.withLockedValue { $0.append(outcome) }
                })
        try await withGRPCServer(transport: server, services: [ReverseService()]) { grpcServer in
            let address = try #require(try await grpcServer.listeningAddress?.ipv4)
            let clientOutcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])

            let served = try await call(port: address.port, policy: try policy(), identity: try pki.identity("client"), clientOutcomes: clientOutcomes)
            #expect(try served.get() == [3, 2, 1])
            guard case .success(let evaluation)? = outcomes.withLockedValue({ $0.first }) else {
                Issue.record("\(outcomes.withLockedValue { $0 })"); return
            }
            #expect(evaluation.validatedChain.first == (try pki.certificate("client")))
            guard case .success(let serverEvaluation)? = clientOutcomes.withLockedValue({ $0.first }) else {
                Issue.record("\(clientOutcomes.withLockedValue { $0 })"); return
            }
            #expect(serverEvaluation.validatedChain.first == (try pki.certificate("leaf")))

            // No client certificate, and one from another CA: refused in the handshake.
            let anonymous = try await call(port: address.port, policy: try policy(), identity: nil, clientOutcomes: clientOutcomes)
            #expect(throws: RPCError.self) { try anonymous.get() }
            let stranger = try await call(port: address.port, policy: try policy(), identity: try PEMFiles.identity(certificatePath: pki.path("abe-client.pem"), keyPath: pki.path("abe-client.key")),
                                          clientOutcomes: clientOutcomes)
            #expect(throws: RPCError.self) { try stranger.get() }
            #expect(outcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { error.reason == .untrustedAnchor } else { false } } })

            // The client pinned to other keys refuses the server, whatever the server accepts.
            let pinnedOutcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
            let pinned = try await call(port: address.port, policy: try policy(pins: [try pki.pin("backup", isKey: true), try pki.pin("abe")]),
                                        identity: try pki.identity("client"), clientOutcomes: pinnedOutcomes)
            #expect(throws: RPCError.self) { try pinned.get() }
            #expect(pinnedOutcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { error.reason == .noPinMatched } else { false } } },
                    "\(pinnedOutcomes.withLockedValue { $0 })")
        }
    }
}
