import Foundation
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// TrustKit's two chain fields as they are meant: what the server served, and what validation
/// built (only when it succeeded).
@Suite("Pin reports: served and validated chains", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"))
struct PinReportChainTests {
    let pki: PurposePKI

    init() throws {
        pki = try PurposePKI.get()
    }

    func policy(anchor: String, reporter: PinReporter) throws -> TrustPolicy {
        let pins = try PinSet(pins: [pki.keyPin("backup"), pki.keyPin("other")])
        return TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"),
                                              anchors: .only([try pki.certificate(anchor)]), pins: pins)],
                           defaultAnchors: nil, reporter: reporter)
    }

    @Test("A refused, untrusted chain is reported as served, with no validated chain")
    func untrustedChain() async throws {
        let collector = ReportCollector()
        // The anchor is another leaf: the server's chain leads nowhere.
        let policy = try policy(anchor: "client", reporter: collector.reporter())
        let served = try pki.certificate("server")
        await #expect(throws: TLSTrustError.self) {
            _ = try await policy.evaluate(host: "localhost", port: 443, presented: [served])
        }
        let report = try #require(collector.reports.first)
        #expect(report.validationResult == .failedInvalidCertificateChain)
        #expect(report.validatedCertificateChain.isEmpty)
        #expect(report.servedCertificateChain == [try served.serializeAsPEM().pemString])
        let object = try #require(JSONSerialization.jsonObject(with: Data(report.jsonLine().utf8)) as? [String: Any])
        #expect((object["validated-certificate-chain"] as? [String]) == [])
        #expect((object["served-certificate-chain"] as? [String])?.count == 1)
    }

    @Test("A validated chain whose pins do not match is reported with both chains")
    func validatedChain() async throws {
        let collector = ReportCollector()
        let policy = try policy(anchor: "root", reporter: collector.reporter())
        let served = try pki.certificate("server"), root = try pki.certificate("root")
        await #expect(throws: TLSTrustError.self) {
            _ = try await policy.evaluate(host: "localhost", port: 443, presented: [served])
        }
        let report = try #require(collector.reports.first)
        #expect(report.validationResult == .failedNoMatchingPin)
        #expect(report.servedCertificateChain == [try served.serializeAsPEM().pemString])
        #expect(report.validatedCertificateChain == [try served.serializeAsPEM().pemString, try root.serializeAsPEM().pemString])
    }
}
