import Foundation
import TestSupport
import Testing

/// Certificates for `localhost`, `127.0.0.1` and `::1` that differ in their extended key usage,
/// made with `openssl req -x509 -addext` under one root.
final class PurposeCLIPKI: @unchecked Sendable {
    let scratch: ScratchDirectory
    var dir: String { scratch.path }

    init() throws {
        scratch = try ScratchDirectory()
        func sh(_ command: String) throws {
            let result = try CLIRunner.runTool("/bin/sh", ["-c", "cd '\(dir)' && " + command])
            guard result.status == 0 else { throw CLITestFailure("\(command): \(result.stderr)") }
        }
        func key(_ name: String) throws {
            try sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \(name).key 2>/dev/null")
        }
        try key("root")
        try sh("openssl req -x509 -new -key root.key -subj '/CN=Purpose CLI Root' -days 30 "
            + "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out root.pem")
        for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth"), ("codesign", "codeSigning")] {
            try key(name)
            try sh("openssl req -x509 -key \(name).key -CA root.pem -CAkey root.key -subj '/CN=\(name)' -days 30 "
                + "-addext basicConstraints=critical,CA:FALSE -addext keyUsage=critical,digitalSignature "
                + "-addext 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1' -addext extendedKeyUsage=\(usage) "
                + "-out \(name).pem")
        }
        try key("backup")
        try key("other")
    }

    func keyPin(_ name: String) throws -> String {
        let result = try CLIRunner.runTool(
            "/bin/sh", ["-c", "cd '\(dir)' && openssl pkey -in \(name).key -pubout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"])
        return "sha256/" + result.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

@Suite("tls commands: address spellings and key purposes",
       .enabled(if: TLSCLIPKI.available, "needs openssl (apt-get install openssl)"))
struct TLSHardeningCLITests {
    let pki: PurposeCLIPKI

    init() throws {
        pki = try PurposeCLIPKI()
    }

    func sServer(_ leaf: String, address: String = "127.0.0.1") throws -> (BackgroundProcess, Int) {
        let server = try BackgroundProcess(
            try #require(CLIRunner.which("openssl")),
            ["s_server", "-accept", "\(address):0", "-www", "-cert", "\(leaf).pem", "-key", "\(leaf).key"],
            directory: pki.dir)
        return (server, try server.port(afterLine: "ACCEPT"))
    }

    @Test("tls fetch: a policy pinning ::1 refuses the server (exit 60) under every spelling of the address")
    func ipv6Spellings() throws {
        let (server, port) = try sServer("server", address: "[::1]")
        defer { server.stop() }
        let policy = """
            {"version": 1, "defaultAnchors": {"files": ["root.pem"]},
             "hosts": [{"pattern": "::1", "anchors": {"files": ["root.pem"]},
                        "pins": ["\(try pki.keyPin("backup"))", "\(try pki.keyPin("other"))"]}]}
            """
        try policy.write(toFile: pki.dir + "/policy.json", atomically: true, encoding: .utf8)
        for spelling in ["::1", "0:0:0:0:0:0:0:1", "0::1", "::0:1", "0000::1"] {
            let result = try CLIRunner.run(["tls", "fetch", "https://[\(spelling)]:\(port)/", "--policy", "policy.json",
                                            "--timeout", "30"], directory: pki.dir)
            #expect(result.status == 60, "\(spelling): \(result.stderr)")
            #expect(result.stderr.contains("no key of the validated chain matches the host's pins"), "\(result.stderr)")
        }
    }

    @Test("tls fetch --ca: a server with a clientAuth-only or codeSigning-only certificate is refused (exit 60)")
    func serverPurpose() throws {
        for (leaf, expected) in [("client", Int32(60)), ("codesign", 60), ("server", 0)] {
            let (server, port) = try sServer(leaf)
            defer { server.stop() }
            let result = try CLIRunner.run(["tls", "fetch", "https://localhost:\(port)/", "--ca", "root.pem",
                                            "--connect-to", "127.0.0.1", "--timeout", "30"], directory: pki.dir)
            #expect(result.status == expected, "\(leaf): \(result.stderr)")
            if expected != 0 { #expect(result.stderr.contains("serverAuth"), "\(result.stderr)") }
        }
    }

    @Test("tls serve --client-ca: serverAuth-only and codeSigning-only client certificates are refused")
    func clientPurpose() throws {
        let server = try BackgroundProcess(
            CLIRunner.executable,
            ["tls", "serve", "--cert", "server.pem", "--key", "server.key", "--client-ca", "root.pem",
             "--port", "0", "--max-connections", "1"], directory: pki.dir)
        defer { server.stop() }
        let port = try server.port(afterLine: "listening on")
        let url = "https://localhost:\(port)/"
        for leaf in ["server", "codesign"] {
            let refused = try CLIRunner.run(["tls", "fetch", url, "--ca", "root.pem", "--cert", "\(leaf).pem", "--key",
                                             "\(leaf).key", "--connect-to", "127.0.0.1", "--timeout", "30"],
                                            directory: pki.dir)
            #expect(refused.status != 0, "\(leaf)")
        }
        let accepted = try CLIRunner.run(["tls", "fetch", url, "--ca", "root.pem", "--cert", "client.pem", "--key",
                                          "client.key", "--connect-to", "127.0.0.1", "--timeout", "30"],
                                         directory: pki.dir)
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(accepted.text == "hello from securefoundation\nclient: CN=client\n")
        #expect(server.waitForExit() == 0)
        #expect(server.output.contains("refused"))
        #expect(server.output.contains("clientAuth"), "\(server.output)")
    }
}
