import Foundation
import TestSupport
import Testing
import X509

/// The command line with TLS keys resident in a software TPM: `tls issue --key tpm`, `tls serve`
/// checked by openssl s_client, mutual TLS with `tls fetch`, `tls keys`, and a TPM that stops
/// answering. The TCTI is given to each child process in its environment.
@Suite("TLS with keys in the TPM (command line)")
struct TPMTLSTests {
    struct Fixture {
        let tpm: SoftwareTPM
        let directory: TemporaryDirectory
        let home: String
        let cli: String
        let openssl: String
        let environment: [String: String]

        init?() throws {
            directory = try TemporaryDirectory(prefix: "sf-tpm-tls")
            guard let tpm = try SoftwareTPM.orSkip(root: try directory.directory("tpm")) else { return nil }
            self.tpm = tpm
            home = try directory.directory("home")
            cli = try BuiltProducts.executable("securefoundation")
            openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
            environment = ["XDG_CONFIG_HOME": directory.path("config"), "TPM2TOOLS_TCTI": tpm.tcti]
        }

        var storeOptions: [String] { ["--home", home, "--device-key", directory.path("device.key")] }

        func run(_ arguments: [String]) throws -> ChildProcess.Result {
            try ChildProcess.run(cli, arguments + storeOptions, environment: environment, timeout: .seconds(120))
        }

        func serve(_ extra: [String]) throws -> ChildProcess.Running {
            try ChildProcess.start(cli, ["tls", "serve", "--port", "0"] + extra + storeOptions, environment: environment)
        }

        func port(_ server: ChildProcess.Running) throws -> String {
            let line = try #require(server.waitForLine(startingWith: "listening on ", timeout: .seconds(60)),
                                    "the server did not start: \(String(decoding: server.stderr, as: UTF8.self))")
            return String(try #require(line.split(separator: ":").last?.split(separator: "/").first))
        }

        func sClient(_ port: String) throws -> ChildProcess.Result {
            try ChildProcess.run(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost",
                                           "-CAfile", directory.path("home-ca.pem"), "-verify_return_error", "-tls1_3", "-ign_eof"],
                                 stdin: .text("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), timeout: .seconds(60))
        }

        /// A device CA, a server identity (key in the TPM) and a client identity (key in the TPM, bound to PCR 23).
        func issue() throws {
            #expect(try run(["tls", "ca", "init", "--accessibility", "always"]).status == 0)
            let ca = try run(["tls", "export", "ca", "-o", directory.path("home-ca.pem")])
            #expect(ca.status == 0, "\(ca.errorText)")
            let server = try run(["tls", "issue", "localhost", "--server", "--key", "tpm", "--accessibility", "always"])
            #expect(server.status == 0, "\(server.errorText)")
            #expect(server.errorText.contains("the key stays in the TPM (tpm:name="), "\(server.errorText)")
            let client = try run(["tls", "issue", "client-1", "--client", "--key", "tpm:pcrs=23", "--accessibility", "always"])
            #expect(client.status == 0, "\(client.errorText)")
        }
    }

    @Test("openssl s_client verifies tls serve with its key in the TPM (TLS 1.3); tls fetch does mutual TLS with a TPM client key; tls keys shows where")
    func serveFetchAndList() throws {
        guard let fixture = try Fixture() else { return }
        defer { fixture.tpm.stop() }
        try fixture.issue()

        let server = try fixture.serve(["--identity", "localhost", "--max-connections", "1"])
        defer { server.kill() }
        let handshake = try fixture.sClient(try fixture.port(server))
        #expect(handshake.status == 0, "\(handshake.errorText)")
        #expect(handshake.text.contains("Verify return code: 0 (ok)"))
        #expect(handshake.text.contains("TLSv1.3"))
        #expect(handshake.text.contains("hello from securefoundation"))
        #expect(try server.wait(timeout: .seconds(60)).status == 0)

        // Mutual TLS: both keys in the TPM, the client's bound to PCR 23.
        let mutual = try fixture.serve(["--identity", "localhost", "--client-ca", fixture.directory.path("home-ca.pem"), "--max-connections", "1"])
        defer { mutual.kill() }
        let port = try fixture.port(mutual)
        let fetched = try fixture.run(["tls", "fetch", "https://localhost:\(port)/", "--ca", fixture.directory.path("home-ca.pem"),
                                       "--connect-to", "127.0.0.1", "--identity", "client-1"])
        #expect(fetched.status == 0, "\(fetched.errorText)")
        #expect(fetched.text.contains("client: CN=client-1"), "\(fetched.text)")
        #expect(try mutual.wait(timeout: .seconds(60)).status == 0)

        // The client key's PCR moves: the client's identity no longer signs, and says why.
        #expect(try fixture.tpm.tool("tpm2_pcrextend", ["23:sha256=" + String(repeating: "cd", count: 32)]) == 0)
        let again = try fixture.serve(["--identity", "localhost", "--client-ca", fixture.directory.path("home-ca.pem"), "--max-connections", "1"])
        defer { again.kill() }
        let refused = try fixture.run(["tls", "fetch", "https://localhost:\(try fixture.port(again))/", "--ca", fixture.directory.path("home-ca.pem"),
                                       "--connect-to", "127.0.0.1", "--identity", "client-1"])
        #expect(refused.status != 0)

        // --key tpm with a PCR out of range, or with -o: refused before the TPM is used.
        let badPCR = try fixture.run(["tls", "issue", "x", "--key", "tpm:pcrs=24"])
        #expect(badPCR.status == 64)
        #expect(badPCR.errorText.contains("PCRs are 0-23"), "\(badPCR.errorText)")
        let withOutput = try fixture.run(["tls", "issue", "x", "--key", "tpm", "-o", fixture.directory.path("x.pem")])
        #expect(withOutput.status == 64)
        #expect(withOutput.errorText.contains("-o does not go with --key tpm"), "\(withOutput.errorText)")

        // tls keys: where each key is, never its bytes.
        let keys = try fixture.run(["tls", "keys"])
        #expect(keys.status == 0, "\(keys.errorText)")
        let lines = keys.text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("tpm\tidentity\tlocalhost\talways\ttpm:name=") && !$0.contains("pcrs=") }, "\(keys.text)")
        #expect(lines.contains { $0.hasPrefix("tpm\tidentity\tclient-1\talways\ttpm:name=") && $0.hasSuffix(";pcrs=23") }, "\(keys.text)")
    }

    @Test("the TPM stopped: the handshake fails with the TPM's error, nothing falls back to software; a new server does not start")
    func tpmStopped() throws {
        guard let fixture = try Fixture() else { return }
        defer { fixture.tpm.stop() }
        try fixture.issue()
        let server = try fixture.serve(["--identity", "localhost"])
        defer { server.kill() }
        let port = try fixture.port(server)
        #expect(try fixture.sClient(port).status == 0)
        fixture.tpm.stop()
        let failed = try fixture.sClient(port)
        #expect(failed.status != 0)
        #expect(!failed.text.contains("hello from securefoundation"))
        // The server's log is on standard error: give it a moment to be written.
        _ = server.waitForOutput(timeout: .seconds(2)) { _ in false }
        let log = String(decoding: server.stderr, as: UTF8.self)
        #expect(log.contains("the TPM does not answer through the TCTI \(fixture.tpm.tcti)"), "\(log)")
        server.kill()

        let next = try fixture.run(["tls", "serve", "--port", "0", "--identity", "localhost"])
        #expect(next.status == 74, "\(next.errorText)")
        #expect(next.errorText.contains("the TPM does not answer"), "\(next.errorText)")
    }
}
