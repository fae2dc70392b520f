import Foundation
import Testing
import X509
@testable import PinnedTLS

@Suite("Policy configuration file")
struct PolicyConfigurationTests {
    static let pinA = "sha256/" + Data(repeating: 1, count: 32).base64EncodedString()
    static let pinB = "sha256/" + Data(repeating: 2, count: 32).base64EncodedString()

    func message(_ json: String, environment: [String: String] = [:]) -> String? {
        do {
            _ = try PolicyConfiguration.parse(Data(json.utf8), name: "p.json", environment: environment)
            return nil
        } catch {
            guard case .invalidConfiguration(let text) = error else { return "\(error)" }
            return text
        }
    }

    @Test("A good configuration parses into a policy")
    func goodConfiguration() throws {
        let json = """
            {"version": 1, "defaultAnchors": {"system": true},
             "hosts": [{"pattern": "**.example.com", "pins": ["\(Self.pinA)", "\(Self.pinB)"],
                        "expires": "2030-01-01", "mode": "enforce"},
                       {"pattern": "report.example.com", "pins": ["\(Self.pinA)"], "mode": "report",
                        "anchors": {"system": true, "keychain": ["corp"]}}]}
            """
        let configuration = try PolicyConfiguration.parse(Data(json.utf8))
        let policy = try configuration.policy()
        #expect(policy.hosts.count == 2)
        #expect(policy.entry(for: "a.example.com")?.pins?.pins.count == 2)
        #expect(policy.entry(for: "report.example.com")?.pins?.mode == .report)
        #expect(policy.entry(for: "report.example.com")?.anchors.keychainLabels == ["corp"])
        #expect(policy.defaultAnchors?.system == true)
        #expect(configuration.entries[0].expires == ISO8601DateFormatter().date(from: "2030-01-01T00:00:00Z"))
    }

    @Test("Malformed JSON: a clear error")
    func malformed() {
        let text = message("{\"version\": 1, \"hosts\": [")
        #expect(text?.hasPrefix("p.json: not valid JSON") == true, "\(text ?? "")")
    }

    @Test("Unknown or missing version")
    func unknownVersion() {
        #expect(message("{\"version\": 2}") ==
            "p.json: version: unknown version 2; this parser reads version 1")
        #expect(message("{\"hosts\": []}") == "p.json: version: required (\"version\": 1)")
        #expect(message("{\"version\": \"1\"}") == "p.json: version: expected the number 1, found a string")
        #expect(message("{\"version\": true}") == "p.json: version: expected the number 1, found a boolean")
    }

    @Test("One pin while enforcing is refused; in report mode it is allowed")
    func onePinWhileEnforcing() {
        let text = message("{\"version\": 1, \"hosts\": [{\"pattern\": \"a.example\", \"pins\": [\"\(Self.pinA)\"]}]}")
        #expect(text == "p.json: hosts[0].pins: enforcing needs at least two pins (the live key and a backup key), found 1")
        #expect(message("{\"version\": 1, \"hosts\": [{\"pattern\": \"a.example\", \"mode\": \"report\", \"pins\": [\"\(Self.pinA)\"]}]}") == nil)
    }

    @Test("Bad base64 and a wrong length are refused with the pin's place")
    func badBase64() {
        let text = message("""
            {"version": 1, "hosts": [{"pattern": "a.example", "pins": ["\(Self.pinA)", "sha256/@@@", "sha256/AAAA"]}]}
            """)
        #expect(text?.contains("p.json: hosts[0].pins[1]: \"sha256/@@@\" is not a pin") == true)
        #expect(text?.contains("p.json: hosts[0].pins[2]: \"sha256/AAAA\" is not a pin") == true)
    }

    @Test("Unknown keys are named, at every level")
    func unknownKeys() {
        let text = message("""
            {"version": 1, "pinz": [], "hosts": [{"pattern": "a.example", "pin": [], "anchors": {"sytem": true}}]}
            """)
        #expect(text?.contains("p.json: top level: unknown key \"pinz\"") == true)
        #expect(text?.contains("p.json: hosts[0]: unknown key \"pin\"") == true)
        #expect(text?.contains("p.json: hosts[0].anchors: unknown key \"sytem\"") == true)
    }

    @Test("Other mistakes: bad pattern, mode, date, missing anchor file")
    func otherMistakes() {
        let text = message("""
            {"version": 1, "hosts": [{"pattern": "a.*.example", "mode": "warn", "expires": "soon",
             "anchors": {"files": ["/nonexistent/ca.pem"]}}]}
            """) ?? ""
        #expect(text.contains("hosts[0].pattern"))
        #expect(text.contains("hosts[0].mode: expected \"enforce\" or \"report\""))
        #expect(text.contains("hosts[0].expires: \"soon\" is not a date"))
        #expect(text.contains("hosts[0].anchors.files[0]"))
    }

    @Test("debugOverrides apply only when the environment variable is 1", .enabled(if: Tools.available))
    func debugOverrides() throws {
        let pki = try TestPKI.get()
        let json = """
            {"version": 1, "hosts": [{"pattern": "a.example", "anchors": {"system": true},
                                      "pins": ["\(Self.pinA)", "\(Self.pinB)"]}],
             "debugOverrides": {"anchors": {"files": ["abe.pem"]}, "overridePins": true}}
            """
        let plain = try PolicyConfiguration.parse(Data(json.utf8), baseDirectory: pki.directory)
        #expect(!plain.debugOverridesApplied)
        #expect(plain.entries[0].anchors.certificates.isEmpty)
        #expect(plain.entries[0].pins.count == 2)
        let other = try PolicyConfiguration.parse(
            Data(json.utf8), baseDirectory: pki.directory,
            environment: [PolicyConfiguration.debugEnvironmentVariable: "yes"])
        #expect(!other.debugOverridesApplied)
        let debug = try PolicyConfiguration.parse(
            Data(json.utf8), baseDirectory: pki.directory,
            environment: [PolicyConfiguration.debugEnvironmentVariable: "1"])
        #expect(debug.debugOverridesApplied)
        #expect(debug.entries[0].anchors.certificates == [try pki.certificate("abe")])
        #expect(debug.entries[0].pins.isEmpty)
    }
}
