import Foundation
import TestSupport
import Testing

/// A root CA, an intermediate, a server leaf for localhost, a client leaf, and Honest Abe's CA
/// and leaf, made by the real openssl in a scratch directory.
final class TLSCLIPKI: @unchecked Sendable {
    let scratch: ScratchDirectory
    var dir: String { scratch.path }

    static let available = CLIRunner.which("openssl") != nil

    init() throws {
        scratch = try ScratchDirectory()
        let config = """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = placeholder
            [v3_ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [v3_leaf]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth, clientAuth
            subjectAltName = ${ENV::SAN}

            """
        try config.write(toFile: dir + "/openssl.cnf", atomically: true, encoding: .utf8)
        var serial = 1
        func sh(_ command: String) throws {
            let result = try CLIRunner.runTool("/bin/sh", ["-c", "cd '\(dir)' && " + command])
            guard result.status == 0 else { throw CLITestFailure("\(command): \(result.stderr)") }
        }
        func key(_ name: String) throws {
            try sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \(name).key 2>/dev/null")
        }
        func root(_ name: String, _ subject: String) throws {
            try key(name)
            try sh("SAN=DNS:x openssl req -x509 -new -key \(name).key -subj '\(subject)' -days 3650 -config openssl.cnf -extensions v3_ca -out \(name).pem")
        }
        func issue(_ name: String, _ subject: String, by issuer: String, ext: String, san: String = "DNS:x") throws {
            try key(name)
            serial += 1
            try sh("SAN=\(san) openssl req -new -key \(name).key -subj '\(subject)' -config openssl.cnf -out \(name).csr")
            try sh("SAN=\(san) openssl x509 -req -in \(name).csr -CA \(issuer).pem -CAkey \(issuer).key -set_serial \(serial) -days 30 -extfile openssl.cnf -extensions \(ext) -out \(name).pem 2>/dev/null")
        }
        try root("root", "/CN=CLI Test Root")
        try issue("inter", "/CN=CLI Test Intermediate", by: "root", ext: "v3_ca")
        try issue("leaf", "/CN=localhost", by: "inter", ext: "v3_leaf", san: "DNS:localhost,IP:127.0.0.1")
        try issue("client", "/CN=device-1", by: "inter", ext: "v3_leaf")
        try root("abe", "/CN=Honest Abe Root CA")
        try issue("abe-leaf", "/CN=localhost", by: "abe", ext: "v3_leaf", san: "DNS:localhost,IP:127.0.0.1")
        try key("backup")
        try sh("cat leaf.pem inter.pem > leaf-chain.pem && cat client.pem inter.pem > client-chain.pem")
    }

    func opensslPin(_ name: String, key: Bool = false) throws -> String {
        let source = key ? "openssl pkey -in \(name).key -pubout" : "openssl x509 -in \(name).pem -pubkey -noout"
        let result = try CLIRunner.runTool(
            "/bin/sh", ["-c", "cd '\(dir)' && \(source) | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"])
        return "sha256/" + result.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

struct CLITestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A background process whose output is collected; killed by `stop()`.
final class BackgroundProcess: @unchecked Sendable {
    let process: ChildProcess.Running

    init(_ executable: String, _ arguments: [String], directory: String) throws {
        process = try ChildProcess.start(executable, arguments, stdin: .pipe, directory: directory)
    }

    /// Standard output, then standard error, so far.
    var output: String { String(decoding: process.stdout + process.stderr, as: UTF8.self) }

    /// Waits (at most 10 s) for a line starting with `prefix`; returns the port after its last colon.
    func port(afterLine prefix: String) throws -> Int {
        if let line = process.waitForLine(startingWith: prefix, timeout: .seconds(10)) {
            let digits = line.split(separator: ":").last.map { $0.filter(\.isNumber) } ?? ""
            if let port = Int(digits) { return port }
        }
        stop()
        throw CLITestFailure("no \(prefix) line: \(output)")
    }

    /// Waits (at most 10 s) for the process to exit by itself.
    func waitForExit() -> Int32? {
        (try? process.wait(timeout: .seconds(10)))?.status
    }

    /// SIGKILL: a child spawned from a thread that blocks signals ignores SIGTERM.
    func stop() {
        process.kill()
        _ = try? process.wait(timeout: .seconds(30))
    }
}

@Suite("tls commands", .enabled(if: TLSCLIPKI.available, "needs openssl (apt-get install openssl)"))
struct TLSCLITests {
    let pki: TLSCLIPKI

    init() throws {
        pki = try TLSCLIPKI()
    }

    func sServer(_ cert: String, _ key: String, chain: [String] = ["-cert_chain", "inter.pem"]) throws -> BackgroundProcess {
        let server = try BackgroundProcess(
            try #require(CLIRunner.which("openssl")),
            ["s_server", "-accept", "127.0.0.1:0", "-www", "-cert", cert, "-key", key] + chain, directory: pki.dir)
        return server
    }

    @Test("tls pin FILE prints openssl's pins, one line per certificate")
    func pinFile() throws {
        let leafPin = try pki.opensslPin("leaf"), interPin = try pki.opensslPin("inter")
        let result = try CLIRunner.run(["tls", "pin", pki.dir + "/leaf-chain.pem"])
        #expect(result.status == 0)
        #expect(result.text == "0: \(leafPin)  CN=localhost\n1: \(interPin)  CN=CLI Test Intermediate\n")
    }

    @Test("tls pin HOST:PORT reads the chain from openssl s_server")
    func pinServer() throws {
        let server = try sServer("leaf.pem", "leaf.key")
        defer { server.stop() }
        let port = try server.port(afterLine: "ACCEPT")
        let leafPin = try pki.opensslPin("leaf")
        let result = try CLIRunner.run(["tls", "pin", "127.0.0.1:\(port)", "--servername", "localhost"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.text.contains("0: \(leafPin)  CN=localhost"))
    }

    @Test("tls pin with neither a file nor HOST:PORT is a usage error")
    func pinUsage() throws {
        let result = try CLIRunner.run(["tls", "pin", pki.dir + "/missing"])
        #expect(result.status == 64)
    }

    @Test("tls lint: ok, one pin while enforcing, expired pins, unknown keys, bad version")
    func lint() throws {
        let a = try pki.opensslPin("leaf"), b = try pki.opensslPin("backup", key: true)
        func runLint(_ json: String, _ extra: [String] = []) throws -> CLIRunner.Result {
            let file = pki.dir + "/policy-\(UUID().uuidString).json"
            try json.write(toFile: file, atomically: true, encoding: .utf8)
            return try CLIRunner.run(["tls", "lint", file] + extra)
        }
        let good = try runLint("""
            {"version": 1, "hosts": [{"pattern": "localhost", "anchors": {"files": ["root.pem"]}, "pins": ["\(a)", "\(b)"], "expires": "2099-01-01"}]}
            """)
        #expect(good.status == 0, "\(good.text)")
        #expect(good.text.hasSuffix("ok (1 host entries)\n"))
        let onePin = try runLint("""
            {"version": 1, "hosts": [{"pattern": "localhost", "pins": ["\(a)"]}]}
            """)
        #expect(onePin.status == 1)
        #expect(onePin.text.contains("hosts[0].pins: enforcing needs at least two pins"))
        let expired = try runLint("""
            {"version": 1, "hosts": [{"pattern": "localhost", "pins": ["\(a)", "\(b)"], "expires": "2020-01-01"}]}
            """)
        #expect(expired.status == 1)
        #expect(expired.text.contains("the pins expired on 2020-01-01"))
        let unknown = try runLint("{\"version\": 1, \"hostz\": []}")
        #expect(unknown.status == 1)
        #expect(unknown.text.contains("unknown key \"hostz\""))
        let version = try runLint("{\"version\": 7}")
        #expect(version.status == 1)
        #expect(version.text.contains("unknown version 7"))
    }

    @Test("tls lint --live: pins absent from the live chain are errors")
    func lintLive() throws {
        let server = try sServer("leaf.pem", "leaf.key")
        defer { server.stop() }
        let port = try server.port(afterLine: "ACCEPT")
        let stale = "sha256/" + Data(repeating: 5, count: 32).base64EncodedString()
        let file = pki.dir + "/live.json"
        let backupPin = try pki.opensslPin("backup", key: true), leafPin = try pki.opensslPin("leaf")
        let interPin = try pki.opensslPin("inter")
        try """
            {"version": 1, "hosts": [{"pattern": "localhost", "pins": ["\(stale)", "\(backupPin)"]}]}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try CLIRunner.run(["tls", "lint", file, "--live", "--address", "127.0.0.1", "--port", String(port)])
        #expect(result.status == 1)
        #expect(result.text.contains("no pin matches the chain localhost:\(port) presents"))
        #expect(result.text.contains(leafPin))
        try """
            {"version": 1, "hosts": [{"pattern": "localhost", "pins": ["\(interPin)", "\(backupPin)"]}]}
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let fixed = try CLIRunner.run(["tls", "lint", file, "--live", "--address", "127.0.0.1", "--port", String(port)])
        #expect(fixed.status == 0, "\(fixed.text)")
    }

    @Test("tls fetch: accepted with the right CA, refused (exit 60, pins listed) for Honest Abe")
    func fetch() throws {
        let good = try sServer("leaf.pem", "leaf.key")
        defer { good.stop() }
        let goodPort = try good.port(afterLine: "ACCEPT")
        let ok = try CLIRunner.run(["tls", "fetch", "https://localhost:\(goodPort)/", "--ca", pki.dir + "/root.pem",
                                    "--connect-to", "127.0.0.1", "--timeout", "30"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.text.contains("s_server"))
        let abe = try sServer("abe-leaf.pem", "abe-leaf.key", chain: [])
        defer { abe.stop() }
        let abePort = try abe.port(afterLine: "ACCEPT")
        let abePin = try pki.opensslPin("abe-leaf")
        let refused = try CLIRunner.run(["tls", "fetch", "https://localhost:\(abePort)/", "--ca", pki.dir + "/root.pem",
                                         "--connect-to", "127.0.0.1", "--timeout", "30"])
        #expect(refused.status == 60)
        #expect(refused.stderr.contains("the chain does not lead to a trusted anchor"))
        #expect(refused.stderr.contains(abePin))
        #expect(refused.stdout.isEmpty)
    }

    @Test("tls fetch of several URLs: one kept-alive connection to Python's HTTP/1.1 server, the bodies in order")
    func fetchKeepsTheConnection() throws {
        let python = try #require(CLIRunner.which("python3"))
        // Python's own HTTP/1.1 server behind its ssl module: each answer says which client port
        // (which connection) it came on.
        let script = """
            import http.server, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_GET(self):
                    body = ("%s on %d\\n" % (self.path, self.client_address[1])).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain("leaf-chain.pem", "leaf.key")
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print("PORT:%d" % server.server_address[1], flush=True)
            server.serve_forever()
            """
        try script.write(toFile: pki.dir + "/keepalive.py", atomically: true, encoding: .utf8)
        let server = try BackgroundProcess(python, ["keepalive.py"], directory: pki.dir)
        defer { server.stop() }
        let port = try server.port(afterLine: "PORT:")
        let base = "https://localhost:\(port)"
        let result = try CLIRunner.run(["tls", "fetch", base + "/a", base + "/b", base + "/c", "--ca", "root.pem",
                                        "--connect-to", "127.0.0.1", "--timeout", "30", "-v"], directory: pki.dir)
        #expect(result.status == 0, "\(result.stderr)")
        let lines: [[String]] = result.text.split(separator: "\n").map { line in line.split(separator: " ").map(String.init) }
        let paths: [String] = lines.compactMap { $0.first }
        let clientPorts: Set<String> = Set(lines.compactMap { $0.last })
        #expect(paths == ["/a", "/b", "/c"], "\(result.text)")
        // All three on the same client port: one connection, one handshake.
        #expect(clientPorts.count == 1, "\(result.text)")
        #expect(result.stderr.contains("3 requests on 1 connection"), "\(result.stderr)")
    }

    @Test("tls serve with --client-ca, and tls fetch with and without a client certificate")
    func serveMutualTLS() throws {
        let server = try BackgroundProcess(
            CLIRunner.executable,
            ["tls", "serve", "--cert", "leaf-chain.pem", "--key", "leaf.key", "--client-ca", "root.pem",
             "--port", "0", "--max-connections", "1"], directory: pki.dir)
        defer { server.stop() }
        let port = try server.port(afterLine: "listening on")
        let url = "https://localhost:\(port)/"
        let anonymous = try CLIRunner.run(["tls", "fetch", url, "--ca", "root.pem", "--connect-to", "127.0.0.1",
                                           "--timeout", "30"], directory: pki.dir)
        #expect(anonymous.status != 0)
        let authenticated = try CLIRunner.run(
            ["tls", "fetch", url, "--ca", "root.pem", "--cert", "client-chain.pem", "--key", "client.key",
             "--connect-to", "127.0.0.1", "--timeout", "30"], directory: pki.dir)
        #expect(authenticated.status == 0, "\(authenticated.stderr)")
        #expect(authenticated.text == "hello from securefoundation\nclient: CN=device-1\n")
        #expect(server.waitForExit() == 0)
        #expect(server.output.contains("refused"))
    }
}
