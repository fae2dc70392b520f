import Foundation
import TestSupport
import Testing

/// `tls serve --identity` and `tls fetch --identity` with identities issued by the device CA in
/// the keychain, and a policy whose anchors are certificates kept in the keychain.
@Suite("tls with keychain identities")
struct TLSKeychainCLITests {
    /// Starts `securefoundation tls serve …` and returns the process and its port.
    static func serve(_ arguments: [String], environment: [String: String]) throws -> (ChildProcess.Running, Int) {
        let started = try CLIRunner.startServer(["tls", "serve"] + arguments, environment: environment)
        return (started.process, started.port)
    }

    @Test("an identity issued in the keychain serves; a client identity and keychain anchors are used by fetch")
    func keychainIdentitiesServeAndFetch() throws {
        let scratch = try ScratchDirectory()
        let passcode = try scratch.file("passcode.txt", Array("2468\n".utf8))
        let common = ["--home", scratch.path + "/home", "--device-key", scratch.path + "/device.key"]
        let environment = ["XDG_CONFIG_HOME": scratch.path + "/config", "SECUREFOUNDATION_AGENT": "off"]
        func run(_ arguments: [String], unlocked: Bool = true) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + common + (unlocked ? ["--passcode-file", passcode] : []), environment: environment)
        }
        #expect(try run(["vault", "init"]).status == 0)
        #expect(try run(["tls", "ca", "init", "--common-name", "Test devices CA"]).status == 0)
        let issued = try run(["tls", "issue", "localhost", "--server"])
        #expect(issued.status == 0, "\(issued.stderr)")
        let client = try run(["tls", "issue", "device-1"])
        #expect(client.status == 0, "\(client.stderr)")
        let exported = try run(["tls", "export", "ca"], unlocked: false)
        #expect(exported.status == 0, "\(exported.stderr)")
        let root = try scratch.file("root.pem", exported.stdout)

        // The server's key is whenUnlocked: without the passcode it cannot start.
        let locked = try CLIRunner.run(["tls", "serve", "--identity", "localhost", "--port", "0", "--max-connections", "1"] + common,
                                       environment: environment)
        #expect(locked.status != 0)

        let (server, port) = try Self.serve(["--identity", "localhost", "--client-ca", root, "--port", "0",
                                             "--max-connections", "2", "--passcode-file", passcode] + common,
                                            environment: environment)
        // SIGKILL: a child of the test process may inherit a blocked SIGTERM.
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }

        // Mutual TLS: the client identity from the keychain, the server checked against the exported root.
        let fetched = try run(["tls", "fetch", "https://localhost:\(port)/", "--ca", root, "--identity", "device-1",
                               "--connect-to", "127.0.0.1", "--timeout", "20"])
        #expect(fetched.status == 0, "\(fetched.stderr)server: \(String(decoding: server.stderr, as: UTF8.self))")
        #expect(fetched.text.contains("client: CN=device-1"))

        // A policy whose anchors are the CA certificate kept in the keychain under "ca".
        let policy = try scratch.file("policy.json", Array("""
            {"version": 1, "hosts": [{"pattern": "localhost", "anchors": {"system": false, "keychain": ["ca"]}}]}
            """.utf8))
        let byPolicy = try run(["tls", "fetch", "https://localhost:\(port)/", "--policy", policy, "--identity", "device-1",
                                "--connect-to", "127.0.0.1", "--timeout", "20"])
        #expect(byPolicy.status == 0, "\(byPolicy.stderr)server: \(String(decoding: server.stderr, as: UTF8.self))")
        #expect(byPolicy.text.contains("client: CN=device-1"))
        #expect(try server.wait(timeout: .seconds(120)).status == 0)

        // A server policy: client certificates must lead to its defaultAnchors (here the CA
        // certificate kept in the keychain). A client without its identity is refused.
        let clients = try scratch.file("clients.json", Array("""
            {"version": 1, "defaultAnchors": {"system": false, "keychain": ["ca"]}, "hosts": []}
            """.utf8))
        let (policed, policedPort) = try Self.serve(["--identity", "localhost", "--policy", clients, "--port", "0",
                                                     "--max-connections", "1", "--passcode-file", passcode] + common,
                                                    environment: environment)
        defer { if policed.isRunning { kill(policed.processIdentifier, SIGKILL) } }
        let anonymous = try run(["tls", "fetch", "https://localhost:\(policedPort)/", "--ca", root,
                                 "--connect-to", "127.0.0.1", "--timeout", "20"], unlocked: false)
        #expect(anonymous.status != 0)
        let member = try run(["tls", "fetch", "https://localhost:\(policedPort)/", "--ca", root, "--identity", "device-1",
                              "--connect-to", "127.0.0.1", "--timeout", "20"])
        #expect(member.status == 0, "\(member.stderr)server: \(String(decoding: policed.stderr, as: UTF8.self))")
        #expect(member.text.contains("client: CN=device-1"))
        try policed.wait(timeout: .seconds(120))
        let noAnchors = try scratch.file("none.json", Array("""
            {"version": 1, "hosts": [{"pattern": "localhost", "anchors": {"system": true}}]}
            """.utf8))
        let refused = try run(["tls", "serve", "--identity", "localhost", "--policy", noAnchors, "--port", "0"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("has no defaultAnchors"))
    }
}
