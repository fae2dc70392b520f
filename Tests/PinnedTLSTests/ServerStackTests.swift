import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import PinnedTLSHummingbird
import PinnedTLSVapor
import Testing
import TestSupport
import Vapor
import X509
@testable import PinnedTLS

/// The policy in the server stacks applications already run: a Hummingbird 2 and a Vapor 4
/// application serving HTTPS with mutual TLS, with curl as the independent client. Each server
/// runs inside the test's own task tree (child tasks keep the suite's threads), never on the
/// shared cooperative pool, which blocking tests elsewhere can hold for minutes.
@Suite("Server stacks: HTTPS with mutual TLS under the policy", .enabled(if: Tools.available && ChildProcess.which("curl") != nil, "needs openssl and curl"),
       .onOwnThreads)
struct ServerStackTests {
    let pki: TestPKI
    let outcomes = NIOLockedValueBox<[Result<TrustEvaluation, TLSTrustError>]>([])

    init() throws {
        pki = try TestPKI.get()
    }

    func record(_ outcome: Result<TrustEvaluation, TLSTrustError>) {
        outcomes.withLockedValue { $0.append(outcome) }
    }

    func refusals() -> [TLSTrustError.Reason] {
        outcomes.withLockedValue { $0.compactMap { if case .failure(let error) = $0 { return error.reason } else { return nil } } }
    }

    /// curl to `https://localhost:port/path`, trusting the test root, with `certificate` options.
    func fetch(port: Int, path: String, _ certificate: [String]) async throws -> ToolResult {
        let curl = try #require(ChildProcess.which("curl"))
        return try await Tools.runAsync(curl, ["-sS", "--max-time", "60", "--cacert", "root.pem",
                                               "--resolve", "localhost:\(port):127.0.0.1", "https://localhost:\(port)/\(path)"] + certificate,
                                        directory: pki.directory, seconds: 90)
    }

    /// The checks both stacks must pass: the right client is served and its validated chain
    /// reaches the handler; no certificate, another CA's certificate and a key no pin matches
    /// are refused in the handshake with the policy's reason.
    func expectMutualTLS(port: Int, pinnedPort: Int) async throws {
        let served = try await fetch(port: port, path: "whoami", ["--cert", "client-chain.pem", "--key", "client.key"])
        // The handler answers with the subjects of the chain it got, leaf first, anchor last.
        #expect(served.status == 0, "\(served.stderr)")
        #expect(served.stdout == "CN=device-1 < CN=SecureFoundation Test Intermediate < CN=SecureFoundation Test Root")
        guard case .success(let evaluation)? = outcomes.withLockedValue({ $0.first }) else {
            Issue.record("\(outcomes.withLockedValue { $0 })"); return
        }
        #expect(evaluation.validatedChain.first == (try pki.certificate("client")))

        let anonymous = try await fetch(port: port, path: "whoami", [])
        #expect(anonymous.status != 0 && !anonymous.stdout.contains("CN="), "\(anonymous.stdout)")
        let stranger = try await fetch(port: port, path: "whoami", ["--cert", "abe-client.pem", "--key", "abe-client.key"])
        #expect(stranger.status != 0 && !stranger.stdout.contains("CN="), "\(stranger.stdout)")
        #expect(refusals().contains(.untrustedAnchor), "\(refusals())")

        // The server pinned to another key: the trusted client is refused with the pin reason.
        let unpinned = try await fetch(port: pinnedPort, path: "whoami", ["--cert", "client-chain.pem", "--key", "client.key"])
        #expect(unpinned.status != 0 && !unpinned.stdout.contains("CN="), "\(unpinned.stdout)")
        #expect(refusals().contains(.noPinMatched), "\(refusals())")
    }

    /// The resumption attack: a session saved by a client that presented its certificate is
    /// offered again (TLS 1.3 ticket, TLS 1.2 session id) by a client that presents none.
    /// Returns the second run's output for each version.
    static func resumeWithoutCertificate(_ pki: TestPKI, port: Int, path: String = "/whoami",
                                         served: String = "CN=device-1") async throws -> [String: ToolResult] {
        let openssl = try #require(Tools.openssl)
        var resumed: [String: ToolResult] = [:]
        for version in ["-tls1_3", "-tls1_2"] {
            let session = pki.path("session\(version)-\(port).pem")
            let request = "GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            let first = try await Tools.runAsync(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", version, "-servername", "localhost",
                                                           "-CAfile", "root.pem", "-cert", "client.pem", "-key", "client.key",
                                                           "-cert_chain", "inter.pem", "-sess_out", session, "-ign_eof"],
                                                 stdin: request, directory: pki.directory, seconds: 60)
            // The session to steal: a client with its certificate, served.
            #expect(first.stdout.contains("New, TLS") && first.stdout.contains(served), "\(first.stdout)\(first.stderr)")
            resumed[version] = try await Tools.runAsync(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", version, "-servername", "localhost",
                                                                   "-CAfile", "root.pem", "-sess_in", session, "-ign_eof"],
                                                         stdin: request, directory: pki.directory, seconds: 60)
        }
        return resumed
    }

    func authentication(pinned: Bool) throws -> ClientAuthentication {
        ClientAuthentication(anchors: .only([try pki.certificate("root")]),
                             pins: pinned ? try PinSet(pins: [try pki.pin("backup", isKey: true), try pki.pin("abe", isKey: false)]) : nil)
    }

    static func describe(_ chain: [Certificate]) -> String {
        chain.map { "\($0.subject)" }.joined(separator: " < ")
    }

    @Test("Hummingbird: the right client gets its validated chain from the handler; others are refused in the handshake")
    func hummingbird() async throws {
        func application(pinned: Bool, ports: AsyncStream<Int>.Continuation) throws -> some ApplicationProtocol {
            let router = Hummingbird.Router(context: PinnedTLSRequestContext.self)
            router.get("whoami") { _, context in
                Self.describe(try await context.clientCertificateChain() ?? [])
            }
            return Hummingbird.Application(
                router: router,
                server: try .pinnedTLS(identity: try pki.identity("leaf"),
                                       clientAuthentication: try authentication(pinned: pinned),
                                       onOutcome: { record($0) }),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in
                    if let port = channel.localAddress?.port { ports.yield(port) }
                })
        }
        let (plainPorts, plainSink) = AsyncStream<Int>.makeStream()
        let (pinnedPorts, pinnedSink) = AsyncStream<Int>.makeStream()
        let plain = try application(pinned: false, ports: plainSink)
        let pinned = try application(pinned: true, ports: pinnedSink)
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Child tasks: they run on the suite's executor, and so do the servers' handlers.
            group.addTask { try await plain.run() }
            group.addTask { try await pinned.run() }
            defer { group.cancelAll() }
            // However long a loaded machine takes to start them, but not forever.
            let port = try await withTimeout(300) { await plainPorts.first { _ in true } }
            let pinnedPort = try await withTimeout(300) { await pinnedPorts.first { _ in true } }
            try await expectMutualTLS(port: try #require(port), pinnedPort: try #require(pinnedPort))
            // A saved session does not stand in for the certificate: never resumed, never served.
            for (version, resumed) in try await Self.resumeWithoutCertificate(pki, port: try #require(port)) {
                #expect(!resumed.stdout.contains("Reused"), "\(version): \(resumed.stdout)")
                #expect(!resumed.stdout.contains("CN="), "\(version): \(resumed.stdout)")
            }
        }
    }

    @Test("Vapor: the right client gets its validated chain as Request.peerCertificateChain; others are refused in the handshake")
    func vapor() async throws {
        // Vapor asserts that every application it made is shut down, whatever failed on the way.
        var started: [Vapor.Application] = []
        func application(pinned: Bool) async throws -> Int {
            let app = try await Vapor.Application.make(Environment(name: "testing", arguments: ["vapor"]))
            started.append(app)
            app.http.server.configuration.hostname = "127.0.0.1"
            app.http.server.configuration.port = 0
            try app.http.server.configuration.usePinnedTLS(
                identity: try pki.identity("leaf"), clientAuthentication: try authentication(pinned: pinned),
                onOutcome: { record($0) })
            app.get("whoami") { request -> String in
                Self.describe(request.peerCertificateChain.map { Array($0) } ?? [])
            }
            try await app.startup()
            return try #require(app.http.server.shared.localAddress?.port)
        }
        do {
            let port = try await application(pinned: false)
            let pinnedPort = try await application(pinned: true)
            try await expectMutualTLS(port: port, pinnedPort: pinnedPort)
        } catch {
            for app in started { try await app.asyncShutdown() }
            throw error
        }
        for app in started { try await app.asyncShutdown() }
    }
}
