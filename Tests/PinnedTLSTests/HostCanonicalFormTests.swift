import Foundation
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// An IP address written another way is the same host: its entry, its pins, its reports.
@Suite("IP address literals in one canonical form", .onOwnThreads)
struct HostCanonicalFormTests {
    static let loopbackSpellings = ["::1", "[::1]", "0:0:0:0:0:0:0:1", "[0:0:0:0:0:0:0:1]", "0::1", "[0::1]", "::0:1",
                                    "[::0:1]", "0000::1", "[0000::1]", "0000:0000:0000:0000:0000:0000:0000:0001"]
    static let mappedSpellings = ["127.0.0.1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "::FFFF:7f00:1",
                                  "0:0:0:0:0:ffff:7f00:0001", "127.0.0.1."]

    @Test("Every spelling of ::1 is the pattern ::1 and matches it")
    func ipv6Spellings() throws {
        let pattern = try HostPattern("::1")
        #expect(pattern.description == "::1")
        for spelling in Self.loopbackSpellings {
            #expect(HostPattern.canonicalHost(spelling) == "::1", "\(spelling)")
            #expect(pattern.matches(spelling), "\(spelling)")
            #expect(try HostPattern(spelling) == pattern, "\(spelling)")
        }
        #expect(!pattern.matches("::2"))
        #expect(!pattern.matches("127.0.0.1"))
        #expect(try HostPattern("2001:DB8:0:0:0:0:0:1").description == "2001:db8::1")
    }

    @Test("An IPv4-mapped IPv6 address is its IPv4 address, both ways")
    func ipv4Mapped() throws {
        let pattern = try HostPattern("127.0.0.1")
        for spelling in Self.mappedSpellings {
            #expect(HostPattern.canonicalHost(spelling) == "127.0.0.1", "\(spelling)")
            #expect(pattern.matches(spelling), "\(spelling)")
        }
        #expect(try HostPattern("::ffff:127.0.0.1") == pattern)
        #expect(try HostPattern("[::ffff:127.0.0.1]").matches("127.0.0.1"))
        // Not mapped: the IPv4-compatible form and NAT64 are other addresses.
        #expect(!pattern.matches("::127.0.0.1"))
        #expect(!pattern.matches("64:ff9b::127.0.0.1"))
    }

    @Test("Zone ids: refused in a pattern, removed from a host")
    func zoneIDs() throws {
        #expect(throws: PinnedTLSError.self) { try HostPattern("fe80::1%eth0") }
        #expect(throws: PinnedTLSError.self) { try HostPattern("[fe80::1%lo]") }
        let pattern = try HostPattern("fe80::1")
        #expect(pattern.matches("fe80::1%eth0"))
        #expect(pattern.matches("[FE80:0::1%lo]"))
        #expect(HostPattern.canonicalHost("fe80::1%eth0") == "fe80::1")
    }

    @Test("Numeric hosts that are not dotted quads are refused in patterns and match nothing")
    func ambiguousNumbers() throws {
        let pattern = try HostPattern("127.0.0.1")
        for text in ["127.1", "2130706433", "0x7f.0.0.1", "127.000.000.001", "0177.0.0.1", "127.0.1", "1.2.3.4.5",
                     "host.123"] {
            #expect(throws: PinnedTLSError.self, "\(text)") { try HostPattern(text) }
            #expect(!pattern.matches(text), "\(text)")
        }
        #expect(HostPattern.canonicalHost("127.1") == nil)
        // Names with digits stay names.
        #expect(try HostPattern("1password.example").description == "1password.example")
        #expect(try HostPattern("*.0x10.example").description == "*.0x10.example")
        #expect(throws: PinnedTLSError.self) { try HostPattern("*.::1") }
        #expect(throws: PinnedTLSError.self) { try HostPattern("a:b") }
    }

    @Test("The pinned entry applies to every spelling; a configuration lists one address once")
    func policyEntry() throws {
        let pins = try PinSet(pins: [try #require(SPKIPin("sha256/" + Data(repeating: 1, count: 32).base64EncodedString())),
                                     try #require(SPKIPin("sha256/" + Data(repeating: 2, count: 32).base64EncodedString()))])
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("0::1"), pins: pins),
                                         HostPolicy(pattern: try HostPattern("::ffff:127.0.0.1"), pins: pins)])
        for spelling in Self.loopbackSpellings {
            #expect(policy.entry(for: spelling)?.pattern.description == "::1", "\(spelling)")
        }
        for spelling in Self.mappedSpellings {
            #expect(policy.entry(for: spelling)?.pattern.description == "127.0.0.1", "\(spelling)")
        }
    }
}

/// The same, end to end: a real `openssl s_server` on the IPv6 (or IPv4) loopback with a
/// certificate for the address whose key is not pinned.
@Suite("Pins of an IP address under every spelling, against openssl s_server",
       .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"), .onOwnThreads)
struct HostCanonicalFormConnectionTests {
    let pki: PurposePKI

    init() throws {
        pki = try PurposePKI.get()
    }

    /// `pattern` pinned (enforced) to two keys the server does not have; the default anchors
    /// would accept the server.
    func policy(_ pattern: String, pins: [SPKIPin]? = nil, reporter: PinReporter? = nil) throws -> TrustPolicy {
        let root = try pki.certificate("root")
        let pinSet = try PinSet(pins: pins ?? [pki.keyPin("backup"), pki.keyPin("other")])
        return TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern(pattern), anchors: .only([root]), pins: pinSet)],
                           defaultAnchors: .only([root]), reporter: reporter)
    }

    func reason(_ policy: TrustPolicy, host: String, serverName: String? = nil, port: Int) async -> TLSTrustError.Reason? {
        do {
            let connection = try await PinnedTLSClient(policy: policy)
                .connect(host: host, port: port, serverName: serverName, timeout: .seconds(30))
            _ = try await exchange(connection, "GET / HTTP/1.0\r\n\r\n")
            return nil
        } catch let error as TLSTrustError {
            return error.reason
        } catch {
            return .malformedCertificate("unexpected: \(error)")
        }
    }

    @Test("A server on [::1] with another key is refused under every spelling of ::1")
    func ipv6SpellingsRefused() async throws {
        let server = try PurposeServer(pki, leaf: "server", address: "[::1]")
        defer { server.stop() }
        let collector = ReportCollector()
        let policy = try policy("::1", reporter: collector.reporter())
        for spelling in HostCanonicalFormTests.loopbackSpellings where !spelling.hasPrefix("[") {
            let reason = await reason(policy, host: spelling, port: server.port)
            #expect(reason == .noPinMatched, "\(spelling)")
        }
        // The reports name the address in its one form (identical reports are rate-limited).
        #expect(!collector.reports.isEmpty)
        #expect(collector.reports.allSatisfy { $0.hostname == "::1" && $0.notedHostname == "::1" })
        // With the server's key pinned, every spelling connects: the refusals above are the pins'.
        let matching = try self.policy("::1", pins: [SPKIPin(certificate: pki.certificate("server")), pki.keyPin("backup")])
        for spelling in ["::1", "0:0:0:0:0:0:0:1", "0::1", "::0:1", "0000::1"] {
            #expect(await reason(matching, host: spelling, port: server.port) == nil, "\(spelling)")
        }
    }

    @Test("::ffff:127.0.0.1 is held to the pins of 127.0.0.1")
    func ipv4MappedRefused() async throws {
        let server = try PurposeServer(pki, leaf: "server")
        defer { server.stop() }
        let policy = try policy("127.0.0.1")
        #expect(await reason(policy, host: "127.0.0.1", port: server.port) == .noPinMatched)
        #expect(await reason(policy, host: "::ffff:127.0.0.1", port: server.port) == .noPinMatched)
        #expect(await reason(policy, host: "127.0.0.1", serverName: "::ffff:127.0.0.1", port: server.port) == .noPinMatched)
        #expect(await reason(policy, host: "127.0.0.1", serverName: "[::ffff:7f00:1]", port: server.port) == .noPinMatched)
    }

    @Test("A numeric host that is not a dotted quad is refused before connecting")
    func ambiguousNumberRefused() async throws {
        let policy = try policy("127.0.0.1")
        await #expect(throws: PinnedTLSError.self) {
            _ = try await PinnedTLSClient(policy: policy).connect(host: "127.1", port: 9, timeout: .seconds(5))
        }
    }
}
