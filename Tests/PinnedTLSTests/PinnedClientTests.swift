import Foundation
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// Our client against a real `openssl s_server` on loopback.
@Suite("Pinned TLS client against openssl s_server", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"), .onOwnThreads)
struct PinnedClientTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI.get()
    }

    /// A policy for `localhost` that trusts only the test root.
    func policy(pins: PinSet? = nil, reporter: PinReporter? = nil, clock: @escaping @Sendable () -> Date = { Date() })
        throws -> TrustPolicy
    {
        TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([try pki.certificate("root")]),
                               pins: pins)],
            defaultAnchors: nil, reporter: reporter, clock: clock)
    }

    func server(_ name: String) throws -> OpenSSLServer {
        // s_server sends only the first certificate of -cert; the intermediate goes in -cert_chain.
        let chain = name.hasPrefix("abe") ? [] : ["-cert_chain", "inter.pem"]
        return try OpenSSLServer(pki, ["-cert", "\(name).pem", "-key", "\(name).key"] + chain)
    }

    func refusal(_ policy: TrustPolicy, server name: String) async throws -> TLSTrustError {
        let server = try server(name)
        defer { server.stop() }
        let client = try PinnedTLSClient(policy: policy)
        do {
            _ = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                         timeout: .seconds(30))
        } catch let error as TLSTrustError {
            return error
        }
        throw TestFailure("the connection to \(name) was accepted")
    }

    func accept(_ policy: TrustPolicy, server name: String = "leaf") async throws -> (PinnedTLSConnection, String) {
        let server = try server(name)
        defer { server.stop() }
        let client = try PinnedTLSClient(policy: policy)
        let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                                  timeout: .seconds(30))
        let response = try await exchange(connection, "GET / HTTP/1.0\r\n\r\n")
        return (connection, response)
    }

    @Test("Pins computed here equal openssl's")
    func pinsEqualOpenSSL() throws {
        for name in ["root", "inter", "leaf", "abe", "abe-leaf", "expired"] {
            let ours = try SPKIPin(certificate: pki.certificate(name)).description
            let theirs = try pki.opensslPin(name)
            #expect(ours == theirs)
        }
    }

    @Test("A good chain with a matching pin connects; the validated chain ends at the root")
    func accepted() async throws {
        let pins = try PinSet(pins: [pki.pin("inter"), pki.pin("backup", isKey: true)])
        let (connection, response) = try await accept(try policy(pins: pins))
        #expect(response.contains("HTTP/1.0 200 ok"))
        #expect(connection.peerChain.count == 3)
        let root = try pki.certificate("root"), interPin = try pki.pin("inter")
        #expect(connection.peerChain.last == root)
        #expect(connection.evaluation.matchedPin == interPin)
        #expect(connection.evaluation.warnings.isEmpty)
    }

    @Test("TLS 1.2: a server limited to it is accepted, with the same checks")
    func tls12Accepted() async throws {
        let server = try OpenSSLServer(pki, ["-cert", "leaf.pem", "-key", "leaf.key", "-cert_chain", "inter.pem",
                                             "-tls1_2"])
        defer { server.stop() }
        let pins = try PinSet(pins: [pki.pin("inter"), pki.pin("backup", isKey: true)])
        let client = try PinnedTLSClient(policy: try policy(pins: pins))
        let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                                  timeout: .seconds(30))
        let response = try await exchange(connection, "GET / HTTP/1.0\r\n\r\n")
        #expect(response.contains("Protocol  : TLSv1.2"), "\(response.prefix(400))")
    }

    @Test("TLS 1.1 is refused")
    func tls11Refused() async throws {
        let server = try OpenSSLServer(pki, ["-cert", "leaf.pem", "-key", "leaf.key", "-cert_chain", "inter.pem",
                                             "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
        defer { server.stop() }
        let client = try PinnedTLSClient(policy: try policy())
        await #expect(throws: PinnedTLSError.self) {
            _ = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                         timeout: .seconds(30))
        }
    }

    @Test("A man in the middle with Honest Abe's certificate is refused")
    func manInTheMiddleRefused() async throws {
        let pins = try PinSet(pins: [pki.pin("inter"), pki.pin("backup", isKey: true)])
        let abePin = try pki.opensslPin("abe-leaf")
        let error = try await refusal(try policy(pins: pins), server: "abe-leaf")
        #expect(error.reason == .untrustedAnchor)
        #expect(error.host == "localhost")
        #expect(error.presentedPins.map(\.description) == [abePin])
    }

    @Test("A certificate for another name is refused")
    func hostnameMismatchRefused() async throws {
        let error = try await refusal(try policy(), server: "wrongname")
        #expect(error.reason == .hostnameMismatch)
    }

    @Test("An expired certificate is refused")
    func expiredRefused() async throws {
        let error = try await refusal(try policy(), server: "expired")
        #expect(error.reason == .expired)
    }

    @Test("No matching pin: refused; the error lists the chain's pins and a report is written")
    func noPinMatchedRefused() async throws {
        let collector = ReportCollector()
        let unrelated = try #require(SPKIPin("sha256/" + Data(repeating: 7, count: 32).base64EncodedString()))
        let pins = try PinSet(pins: [unrelated, pki.pin("backup", isKey: true)])
        let error = try await refusal(try policy(pins: pins, reporter: collector.reporter()), server: "leaf")
        #expect(error.reason == .noPinMatched)
        let leafPin = try pki.opensslPin("leaf"), interPin = try pki.opensslPin("inter")
        let expected = [leafPin, interPin]
        #expect(error.presentedPins.map(\.description) == expected)
        for pin in expected { #expect(error.description.contains(pin)) }
        let report = try #require(collector.reports.first)
        #expect(report.validationResult == .failedNoMatchingPin)
        #expect(report.enforcePinning)
        #expect(report.hostname == "localhost")
        #expect(report.validatedCertificateChain.count == 3)
    }

    @Test("The backup pin alone is enough")
    func backupPinAlone() async throws {
        let retired = try #require(SPKIPin("sha256/" + Data(repeating: 9, count: 32).base64EncodedString()))
        let leafPin = try pki.pin("leaf")
        let pins = try PinSet(pins: [retired, leafPin])
        let (connection, response) = try await accept(try policy(pins: pins))
        #expect(response.contains("200 ok"))
        #expect(connection.evaluation.matchedPin == leafPin)
    }

    @Test("An expired pin set: the anchors are still checked, the pins are not, a warning is reported")
    func expiredPinSet() async throws {
        let collector = ReportCollector()
        let unrelated = try #require(SPKIPin("sha256/" + Data(repeating: 7, count: 32).base64EncodedString()))
        let pins = try PinSet(pins: [unrelated, pki.pin("backup", isKey: true)],
                              expires: Date().addingTimeInterval(-86_400))
        let (connection, _) = try await accept(try policy(pins: pins, reporter: collector.reporter()))
        #expect(connection.evaluation.warnings.count == 1)
        let report = try #require(collector.reports.first)
        #expect(report.pinSetExpired)
        #expect(report.reason == "pin-set-expired")
        let error = try await refusal(try policy(pins: pins), server: "abe-leaf")
        #expect(error.reason == .untrustedAnchor)
    }

    @Test("Report mode connects and writes a report to the file sink")
    func reportMode() async throws {
        let file = pki.path("reports-\(UInt32.random(in: 0...UInt32.max))/pins.jsonl")
        let sink = try PinReportFileSink(path: file)
        let unrelated = try #require(SPKIPin("sha256/" + Data(repeating: 7, count: 32).base64EncodedString()))
        let pins = try PinSet(pins: [unrelated], mode: .report)
        let (connection, response) = try await accept(try policy(pins: pins, reporter: sink.reporter()))
        #expect(response.contains("200 ok"))
        #expect(connection.evaluation.matchedPin == nil)
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        let object = try #require(
            JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(object["enforce-pinning"] as? Bool == false)
        #expect(object["validation-result"] as? Int == 1)
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("A host no entry covers is refused when the policy has no default")
    func uncoveredHostRefused() async throws {
        let server = try server("leaf")
        defer { server.stop() }
        let policy = TrustPolicy(hosts: [], defaultAnchors: nil)
        await #expect(throws: TLSTrustError.self) {
            _ = try await PinnedTLSClient(policy: policy).connect(
                host: "127.0.0.1", port: server.port, serverName: "localhost", timeout: .seconds(30))
        }
    }

    @Test("A server that accepts the connection and never answers the handshake: a typed handshake timeout")
    func silentServerTimesOut() async throws {
        // A listening socket nobody accepts from: the kernel completes the TCP handshake, the
        // ClientHello is never answered.
        let listener = try #require(LoopbackSocket.listening())
        defer { withExtendedLifetime(listener) {} }
        let port = listener.port
        let client = try PinnedTLSClient(policy: try policy())
        do {
            _ = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost", timeout: .seconds(1))
            Issue.record("a server that never answered was accepted")
        } catch let error as PinnedTLSError {
            guard case .timedOut(let what, let seconds) = error else {
                Issue.record("expected a handshake timeout, got \(error)")
                return
            }
            #expect(what == "TLS handshake with 127.0.0.1:\(port)")
            #expect(seconds == 1)
        }
    }

    @Test("Nothing listening: a typed connection error")
    func nothingListening() async throws {
        let client = try PinnedTLSClient(policy: try policy())
        await #expect(throws: PinnedTLSError.self) {
            _ = try await client.connect(host: "127.0.0.1", port: 1, serverName: "localhost", timeout: .seconds(2))
        }
    }
}
