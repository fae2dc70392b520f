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
@Suite("gRPC: a client over the NIO transport under the policy",
       .enabled(if: Tools.available, "needs openssl"), .onOwnThreads)
struct GRPCTests {
    let pki: TestPKI
    init() throws {
        pki = try TestPKI.get()
    }

    func policy(pins: [SPKIPin]? = nil) throws -> TrustPolicy {
        TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([try pki.certificate("root")]),
                                       pins: try pins.map { try PinSet(pins: $0) })],
                    defaultAnchors: nil)
    }

    /// One call to the server at `port`, or the error the client got.
    func call(port: Int, policy: TrustPolicy, host: String = "localhost", identity: TLSIdentity?,
              clientOutcomes: NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>) async throws -> Result<[UInt8], RPCError> {
        let transport = try HTTP2ClientTransport.Posix(
            target: .ipv4(address: "127.0.0.1", port: port),
            transportSecurity: try .pinnedTLS(policy: policy, host: host, port: port, identity: identity) { outcome in
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

    @Test("the client answers through a server its policy accepts, and refuses one no pin matches or with another name")
    func clientUnderPolicy() async throws {
        // The server: grpc-swift's own TLS (no client certificates asked for).
        let server = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0),
            transportSecurity: .tls(.defaults(certificateChain: [.file(path: pki.path("leaf-chain.pem"), format: .pem)],
                                              privateKey: .file(path: pki.path("leaf.key"), format: .pem))))
        try await withGRPCServer(transport: server, services: [ReverseService()]) { grpcServer in
            let address = try #require(try await grpcServer.listeningAddress?.ipv4)
            let outcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
            let served = try await call(port: address.port, policy: try policy(), identity: try pki.identity("client"), clientOutcomes: outcomes)
            #expect(try served.get() == [3, 2, 1])
            guard case .success(let evaluation)? = outcomes.withLockedValue({ $0.first }) else {
                Issue.record("\(outcomes.withLockedValue { $0 })"); return
            }
            #expect(evaluation.validatedChain.first == (try pki.certificate("leaf")))
            #expect(evaluation.validatedChain.last == (try pki.certificate("root")))

            // Pinned to other keys: refused before any call reaches the server.
            let pinnedOutcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
            let pinned = try await call(port: address.port, policy: try policy(pins: [try pki.pin("backup", isKey: true), try pki.pin("abe")]),
                                        identity: nil, clientOutcomes: pinnedOutcomes)
            #expect(throws: RPCError.self) { try pinned.get() }
            #expect(pinnedOutcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { error.reason == .noPinMatched } else { false } } },
                    "\(pinnedOutcomes.withLockedValue { $0 })")

            // Another name than the certificate's: refused.
            let misnamedOutcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
            let misnamed = try await call(port: address.port, policy: TrustPolicy(defaultAnchors: .only([try pki.certificate("root")])),
                                          host: "wrong.example", identity: nil, clientOutcomes: misnamedOutcomes)
            #expect(throws: RPCError.self) { try misnamed.get() }
            #expect(misnamedOutcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { error.reason == .hostnameMismatch } else { false } } },
                    "\(misnamedOutcomes.withLockedValue { $0 })")
        }
    }
}
