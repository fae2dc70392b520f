import Foundation
import Testing
import X509
@testable import PinnedTLS
import NIOConcurrencyHelpers

@Suite("Trust policy")
struct TrustPolicyTests {
    @Test("Host patterns: exact, *. one label, **. any depth including the domain")
    func hostPatterns() throws {
        let exact = try HostPattern("Example.COM.")
        #expect(exact.matches("example.com"))
        #expect(!exact.matches("www.example.com"))
        let one = try HostPattern("*.example.com")
        #expect(one.matches("www.example.com"))
        #expect(!one.matches("example.com"))
        #expect(!one.matches("a.b.example.com"))
        #expect(!one.matches("wwwexample.com"))
        let any = try HostPattern("**.example.com")
        #expect(any.matches("example.com"))
        #expect(any.matches("a.b.example.com"))
        #expect(!any.matches("badexample.com"))
        for bad in ["", "*.", "a.*.com", "*", "**", "a..b", "ex ample.com", "*.*.example.com"] {
            #expect(throws: PinnedTLSError.self) { try HostPattern(bad) }
        }
    }

    @Test("The most specific entry applies")
    func mostSpecificEntry() throws {
        let policy = TrustPolicy(hosts: [
            HostPolicy(pattern: try HostPattern("**.example.com")),
            HostPolicy(pattern: try HostPattern("*.example.com")),
            HostPolicy(pattern: try HostPattern("api.example.com")),
        ])
        #expect(policy.entry(for: "api.example.com")?.pattern.description == "api.example.com")
        #expect(policy.entry(for: "www.example.com")?.pattern.description == "*.example.com")
        #expect(policy.entry(for: "a.b.example.com")?.pattern.description == "**.example.com")
        #expect(policy.entry(for: "example.org") == nil)
    }

    @Test("An enforced pin set needs two distinct pins")
    func enforcedPinSetNeedsBackup() throws {
        let pin = try #require(SPKIPin("sha256/" + Data(repeating: 1, count: 32).base64EncodedString()))
        let other = try #require(SPKIPin("sha256/" + Data(repeating: 2, count: 32).base64EncodedString()))
        #expect(throws: PinnedTLSError.self) { try PinSet(pins: [pin]) }
        #expect(throws: PinnedTLSError.self) { try PinSet(pins: [pin, pin]) }
        #expect(try PinSet(pins: [pin, other]).pins.count == 2)
        #expect(try PinSet(pins: [pin], mode: .report).pins == [pin])
    }

    @Test("Identical reports are rate-limited; a different one passes")
    func reportRateLimit() {
        let delivered = NIOLockedValueBox(0)
        let reporter = PinReporter(minimumInterval: 60) { _ in delivered.withLockedValue { $0 += 1 } }
        var report = PinValidationReport(
            appBundleID: "a", appVersion: "1", appPlatform: "LINUX", hostname: "h", port: 443, notedHostname: "h",
            includeSubdomains: false, enforcePinning: true, validatedCertificateChain: [], dateTime: "t1",
            knownPins: [], validationResult: .failedNoMatchingPin, reason: "no-pin-matched", pinSetExpired: false)
        let start = Date(timeIntervalSince1970: 1_000_000)
        #expect(reporter.submit(report, now: start))
        report.dateTime = "t2"
        #expect(!reporter.submit(report, now: start.addingTimeInterval(30)))
        #expect(reporter.submit(report, now: start.addingTimeInterval(61)))
        report.port = 8443
        #expect(reporter.submit(report, now: start.addingTimeInterval(62)))
        #expect(delivered.withLockedValue { $0 } == 3)
    }

    @Test("Reports use TrustKit's field names")
    func reportFieldNames() throws {
        let report = PinValidationReport(
            appBundleID: "a", appVersion: "1", appPlatform: "LINUX", hostname: "h", port: 443, notedHostname: "h",
            includeSubdomains: true, enforcePinning: true, validatedCertificateChain: ["PEM"], dateTime: "t",
            knownPins: ["pin-sha256=\"x\""], validationResult: .failedNoMatchingPin, reason: "no-pin-matched",
            pinSetExpired: false)
        let object = try #require(
            JSONSerialization.jsonObject(with: Data(report.jsonLine().utf8)) as? [String: Any])
        for key in ["app-bundle-id", "app-version", "app-platform", "hostname", "port", "noted-hostname",
                    "include-subdomains", "enforce-pinning", "validated-certificate-chain", "date-time", "known-pins",
                    "validation-result"] {
            #expect(object[key] != nil, "missing \(key)")
        }
        #expect(object["validation-result"] as? Int == 1)
    }
}
