import Foundation
import TestSupport
import Testing

/// `securefoundation tls revoke` and `tls crl`: exit codes, and what openssl makes of the list.
@Suite("tls revoke and tls crl", .enabled(if: TLSIdentityCLITests.openssl != nil, "needs openssl"))
struct TLSRevocationCLITests {
    typealias Home = TLSIdentityCLITests.Home

    /// The first PEM certificate of `file` written alone to `name`.
    static func leaf(_ home: Home, from file: String, to name: String) throws -> String {
        let text = String(decoding: try home.read(file), as: UTF8.self)
        let end = try #require(text.range(of: "-----END CERTIFICATE-----\n"))
        return try home.scratch.file(name, Array(text[..<end.upperBound].utf8))
    }

    static func openssl(_ home: Home, _ arguments: [String]) throws -> CLIRunner.Result {
        try CLIRunner.runTool(try #require(TLSIdentityCLITests.openssl), arguments)
    }

    @Test("revoke by label and by pin, idempotent; crl in PEM and DER; openssl crl lists the serials; openssl verify -crl_check agrees")
    func revokeAndExport() throws {
        let home = try Home()
        try home.initVault()
        #expect(try home.run(["tls", "ca", "init", "--common-name", "CRL test CA"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "issue", "device-1", "--client"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "issue", "device-2", "--client"], unlocked: true).status == 0)
        let third = try home.run(["tls", "issue", "device-3", "--client"], unlocked: true)
        #expect(third.status == 0)
        let pin = try #require(third.text.split(separator: "\n").first { $0.hasPrefix("pin: ") }?.dropFirst(5))
        #expect(try home.run(["tls", "export", "ca", "-o", "ca.pem"]).status == 0)
        var leaves: [String: String] = [:]
        for name in ["device-1", "device-2", "device-3"] {
            #expect(try home.run(["tls", "export", name, "-o", "\(name)-chain.pem"]).status == 0)
            leaves[name] = try Self.leaf(home, from: "\(name)-chain.pem", to: "\(name).pem")
        }
        let ca = home.path + "/ca.pem"

        // Before any revocation: an empty list, and every certificate verifies.
        let empty = try home.run(["tls", "crl", "-o", "empty.pem"], unlocked: true)
        #expect(empty.status == 0, "\(empty.stderr)")
        let emptyText = try Self.openssl(home, ["crl", "-in", home.path + "/empty.pem", "-noout", "-text"])
        #expect(emptyText.status == 0, "\(emptyText.stderr)")
        #expect(emptyText.text.contains("No Revoked Certificates"))
        #expect(emptyText.text.contains("Issuer: CN = CRL test CA") || emptyText.text.contains("Issuer: CN=CRL test CA"))

        // Exit statuses: unknown 44, locked 36, the root itself 1.
        #expect(try home.run(["tls", "revoke", "nobody"], unlocked: true).status == 44)
        #expect(try home.run(["tls", "revoke", "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="], unlocked: true).status == 44)
        let locked = try home.run(["tls", "revoke", "device-1"])
        #expect(locked.status == 36, "\(locked.stderr)")
        let root = try home.run(["tls", "revoke", "ca"], unlocked: true)
        #expect(root.status == 1)
        #expect(root.stderr.contains("cannot revoke"))
        #expect(try home.run(["tls", "crl"]).status == 36)

        let revoked = try home.run(["tls", "revoke", "device-1"], unlocked: true)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.text.hasPrefix("revoked: CN=device-1, serial "))
        #expect(revoked.text.contains("revocation list: number 2, 1 revoked"))
        let again = try home.run(["tls", "revoke", "device-1"], unlocked: true)
        #expect(again.status == 0)
        #expect(again.text.hasPrefix("already revoked: CN=device-1"))
        let byPin = try home.run(["tls", "revoke", String(pin)], unlocked: true)
        #expect(byPin.status == 0, "\(byPin.stderr)")
        #expect(byPin.text.hasPrefix("revoked: CN=device-3"))

        #expect(try home.run(["tls", "crl", "-o", "crl.pem"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "crl", "--der", "-o", "crl.der"], unlocked: true).status == 0)
        #expect(try home.read("crl.pem").starts(with: Array("-----BEGIN X509 CRL-----\n".utf8)))
        let text = try Self.openssl(home, ["crl", "-in", home.path + "/crl.pem", "-noout", "-text"])
        #expect(text.status == 0, "\(text.stderr)")
        let derText = try Self.openssl(home, ["crl", "-inform", "DER", "-in", home.path + "/crl.der", "-noout", "-text"])
        #expect(derText.status == 0, "\(derText.stderr)")
        #expect(derText.text.contains("X509v3 CRL Number"))
        for (name, listed) in [("device-1", true), ("device-2", false), ("device-3", true)] {
            let serial = try Self.openssl(home, ["x509", "-in", try #require(leaves[name]), "-noout", "-serial"])
            let hex = String(serial.text.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("serial=".count))
            #expect(hex.count == 40)
            #expect(text.text.contains("Serial Number: \(hex)") == listed, "\(name)")
            if name == "device-1" {
                // Printed as openssl prints a serial: every byte two digits, colons between.
                var pairs: [String] = []
                var rest = Substring(hex.lowercased())
                while !rest.isEmpty { pairs.append(String(rest.prefix(2))); rest = rest.dropFirst(2) }
                #expect(revoked.text.contains("serial \(pairs.joined(separator: ":"))\n"), "\(revoked.text)")
            }
            let verify = try Self.openssl(home, ["verify", "-crl_check", "-CAfile", ca, "-CRLfile", home.path + "/crl.pem",
                                                  try #require(leaves[name])])
            if listed {
                #expect(verify.status != 0)
                #expect((verify.text + verify.stderr).contains("certificate revoked"), "\(name)")
            } else {
                #expect(verify.status == 0, "\(verify.stderr)")
                #expect(verify.text.contains(": OK"))
            }
        }
        // The empty list made before: openssl still accepts device-1 against it (it is stale only by content).
        let old = try Self.openssl(home, ["verify", "-crl_check", "-CAfile", ca, "-CRLfile", home.path + "/empty.pem",
                                          try #require(leaves["device-1"])])
        #expect(old.status == 0)
    }

    @Test("tls serve and tls fetch with a policy's revocationList: refused after tls revoke and tls crl, without a restart")
    func servedAndFetchedUnderTheList() throws {
        let home = try Home()
        try home.initVault()
        let passcode = home.passcode
        let common = ["--home", home.path + "/home", "--device-key", home.path + "/device.key"]
        let environment = ["XDG_CONFIG_HOME": home.path + "/config", "SECUREFOUNDATION_AGENT": "off"]
        #expect(try home.run(["tls", "ca", "init"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "issue", "localhost", "--server"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "issue", "device-1", "--client"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "issue", "device-2", "--client"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "export", "ca", "-o", "ca.pem"]).status == 0)
        #expect(try home.run(["tls", "crl", "-o", "crl.pem"], unlocked: true).status == 0)
        let clients = try home.scratch.file("clients.json", Array("""
            {"version": 1, "defaultAnchors": {"files": ["ca.pem"], "revocationList": "crl.pem"}, "hosts": []}
            """.utf8))
        let hosts = try home.scratch.file("hosts.json", Array("""
            {"version": 1, "hosts": [{"pattern": "localhost", "anchors": {"files": ["ca.pem"], "revocationList": "crl.pem"}}]}
            """.utf8))
        let started = try CLIRunner.startServer(
            ["tls", "serve", "--identity", "localhost", "--policy", clients, "--port", "0", "--max-connections", "2",
             "--passcode-file", passcode] + common, environment: environment)
        let server = started.process
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        func fetch(_ identity: String, _ trust: [String]) throws -> CLIRunner.Result {
            try CLIRunner.run(["tls", "fetch", "https://localhost:\(started.port)/", "--identity", identity,
                               "--connect-to", "127.0.0.1", "--timeout", "20", "--passcode-file", passcode] + trust + common,
                              environment: environment)
        }
        let before = try fetch("device-1", ["--policy", hosts])
        #expect(before.status == 0, "\(before.stderr)")
        #expect(before.text.contains("client: CN=device-1"))

        // The server, still running, reads the new list at the next handshake.
        #expect(try home.run(["tls", "revoke", "device-1"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "crl", "-o", "crl.pem"], unlocked: true).status == 0)
        let after = try fetch("device-1", ["--ca", home.path + "/ca.pem"])
        #expect(after.status == 1, "\(after.stderr)")
        #expect(!after.text.contains("client: CN=device-1"))

        // The client refuses a revoked server: exit 60, the reason named.
        #expect(try home.run(["tls", "revoke", "localhost"], unlocked: true).status == 0)
        #expect(try home.run(["tls", "crl", "-o", "crl.pem"], unlocked: true).status == 0)
        let refused = try fetch("device-2", ["--policy", hosts])
        #expect(refused.status == 60, "\(refused.stderr)")
        #expect(refused.stderr.contains("revoked"))

        let valid = try fetch("device-2", ["--ca", home.path + "/ca.pem"])
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.text.contains("client: CN=device-2"))
        #expect(try server.wait(timeout: .seconds(120)).status == 0)
        // The server named the reason it refused device-1.
        let serverErrors = String(decoding: server.stderr, as: UTF8.self)
        #expect(serverErrors.contains("refused: a certificate of the chain is revoked by its CA's revocation list"), "\(serverErrors)")
        #expect(serverErrors.contains("CN=device-1"))
    }
}
