import Foundation
import Hummingbird
import HummingbirdTLS
import NIOConcurrencyHelpers
import NIOCore
import Testing
import TestSupport
@testable import PinnedTLS
import PinnedTLSHummingbird

/// A Hummingbird 2 application serving HTTPS with mutual TLS under a `ClientAuthentication`
/// (`TLSChannelConfiguration.pinned`), with curl as the independent client.
@Suite("Hummingbird: HTTPS with mutual TLS under the policy", .enabled(if: Tools.available && ChildProcess.which("curl") != nil, "needs openssl and curl"),
       .onOwnThreads)
struct HummingbirdTLSTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    @Test("curl with the client certificate gets the answer; without one, or with another CA's, the handshake is refused and the verdict says why")
    func mutualTLS() async throws {
        let curl = try #require(ChildProcess.which("curl"))
        let outcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])
        let router = Router()
        router.get("hello") { _, _ in "hello from hummingbird\n" }
        let configuration = try TLSChannelConfiguration.pinned(
            identity: try pki.identity("leaf"),
            clientAuthentication: ClientAuthentication(anchors: .only([try pki.certificate("root")]))
        ) { outcome in outcomes.withLockedValue { $0.append(outcome) } }
        // The port, once the server listens (however long a loaded machine takes to start it).
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, server: try .tls(.http1(), configuration: configuration),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                if let port = channel.localAddress?.port { portContinuation.yield(port) }
            })
        let running = Task {
            do { try await app.runService() } catch { print("the application ended: \(error)") }
            portContinuation.finish()
        }
        defer { running.cancel() }
        let serverPort: Int = try await withTimeout(300) {
            for await port in ports { return port }
            throw TestFailure("the application did not start")
        }

        func fetch(_ certificate: [String]) async throws -> ToolResult {
            try await Tools.runAsync(curl, ["-sS", "--max-time", "60", "--cacert", "root.pem",
                                            "--resolve", "localhost:\(serverPort):127.0.0.1", "https://localhost:\(serverPort)/hello"] + certificate,
                                     directory: pki.directory, seconds: 90)
        }
        let served = try await fetch(["--cert", "client-chain.pem", "--key", "client.key"])
        #expect(served.status == 0 && served.stdout == "hello from hummingbird\n", "\(served.stdout)\(served.stderr)")
        guard case .success(let evaluation)? = outcomes.withLockedValue({ $0.first }) else {
            Issue.record("\(outcomes.withLockedValue { $0 })"); return
        }
        #expect(evaluation.validatedChain.first == (try pki.certificate("client")))
        #expect(evaluation.validatedChain.last == (try pki.certificate("root")))

        let anonymous = try await fetch([])
        #expect(anonymous.status != 0 && !anonymous.stdout.contains("hello"), "\(anonymous.stdout)")
        let stranger = try await fetch(["--cert", "abe-client.pem", "--key", "abe-client.key"])
        #expect(stranger.status != 0 && !stranger.stdout.contains("hello"), "\(stranger.stdout)")
        #expect(outcomes.withLockedValue { $0.contains { if case .failure(let error) = $0 { return error.reason == .untrustedAnchor } else { return false } } },
                "\(outcomes.withLockedValue { $0 })")
    }
}
