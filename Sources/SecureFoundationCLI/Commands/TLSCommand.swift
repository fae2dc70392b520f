import AgeCommandLine
import ArgumentParser
import Foundation
import NIOCore
import PinnedTLS
import X509

/// `securefoundation tls …`: pins, policy lint, a test HTTPS server and an HTTPS client with
/// the application's own anchors and pins.
struct TLSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "TLS with the application's own anchors, certificate pinning and mutual TLS; keys, certificates and a certificate authority in the keychain.",
        discussion: """
        A policy file (JSON, see TLS.md in the documentation) lists, per host pattern, the anchors (system store, \
        certificate files, keychain labels), the pins (sha256/ over the DER SubjectPublicKeyInfo), \
        their expiry and the mode (enforce or report).

        """ + TLSIdentityCLI.exitStatus,
        subcommands: [TLSPinCommand.self, TLSLintCommand.self, TLSServeCommand.self, TLSFetchCommand.self]
            + TLSIdentityCLI.subcommands
    )
}

enum TLSCLI {
    /// `0: sha256/…  CN=…`, one line per certificate, as a refusal lists them.
    static func pinLines(_ chain: [Certificate]) -> String {
        chain.enumerated().map { index, certificate in
            let pin = (try? SPKIPin(certificate: certificate))?.description ?? "(key not encodable)"
            return "\(index): \(pin)  \(certificate.subject)"
        }.joined(separator: "\n")
    }

    /// Splits `host:port` or `[v6]:port`, the one parser of addresses the commands take
    /// (`tls probe`, `tls pin`, `share --listen/--connect/--to`). A port below `lowestPort`
    /// (1, or 0 where the system may choose one) or above 65535 is refused.
    static func hostAndPort(_ text: String, lowestPort: Int = 1) -> (String, Int)? {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (lowestPort...65535).contains(port) else { return nil }
        return (String(host), port)
    }

    static func identity(cert: String?, key: String?) throws -> TLSIdentity? {
        switch (cert, key) {
        case (nil, nil): return nil
        case let (cert?, key?): return try PEMFiles.identity(certificatePath: cert, keyPath: key)
        default: throw ValidationError("--cert and --key go together")
        }
    }


    /// Resolves a policy's `keychain` anchors from the certificates stored in the keychain, opening
    /// it only when a connection first needs them (a policy without keychain anchors never opens it).
    static func keychainAnchors(_ store: KeychainStoreOptions) -> ClosureAnchorSource {
        let opened = OpenedIdentityStore.shared(store)
        return ClosureAnchorSource { label in try opened.get().anchorCertificates(label: label) }
    }

    /// Reports `error` with the exit code of the one table (docs/CLI.md; the TLS rows follow curl's).
    static func fail(_ error: any Error) -> ExitCode { CLI.fail(error) }

    static func flushStdout() { fflush(nil) }
}

struct TLSPinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the sha256/ pin of each certificate in a PEM file or presented by a server.",
        usage: "securefoundation tls pin [options] (FILE | HOST:PORT)",
        discussion: """
        The pin is SHA-256 over the DER SubjectPublicKeyInfo, in base64, as openssl computes it:
          openssl x509 -pubkey -noout | openssl pkey -pubin -outform der \\
              | openssl dgst -sha256 -binary | base64
        A server's chain is read without trusting it: check the pins you copy.

        Exit status: 0 printed, 1 unreadable file, 7 no connection, 28 timeout, 64 usage.

        Examples:
          securefoundation tls pin ca.pem
          securefoundation tls pin example.com:443
        """
    )

    @Argument(help: "A PEM file, or HOST:PORT.")
    var source: String

    @Option(help: "The name sent as SNI when reading from a server (default: HOST).")
    var servername: String?

    @Option(help: "Seconds to wait for the server.")
    var timeout: Int = 10

    @Flag(name: .customLong("json"), help: "Print the pins as JSON (CLI.md in the documentation, \"JSON output\").")
    var json = false

    struct PinsJSON: Encodable {
        struct Entry: Encodable { var index: Int; var pin: String?; var subject: String }
        var version = JSONOutput.schemaVersion
        var source: String
        var certificates: [Entry]
    }

    func run() async throws {
        do {
            let chain: [Certificate]
            if FileManager.default.fileExists(atPath: source) {
                chain = try PEMFiles.certificates(atPath: source)
            } else if let target = TLSCLI.hostAndPort(source) {
                chain = try await ChainProbe.presentedChain(
                    host: target.0, port: target.1, serverName: servername, timeout: .seconds(Int64(max(1, timeout))))
            } else {
                throw ValidationError("\(source) is neither a file nor HOST:PORT")
            }
            if json {
                try JSONOutput.write(PinsJSON(source: source, certificates: chain.enumerated().map { index, certificate in
                    .init(index: index, pin: (try? SPKIPin(certificate: certificate))?.description, subject: "\(certificate.subject)")
                }))
            } else {
                print(TLSCLI.pinLines(chain))
            }
        } catch {
            throw TLSCLI.fail(error)
        }
    }
}

struct TLSLintCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Check a TLS policy file before it breaks production.",
        usage: "securefoundation tls lint [--live [--port PORT] [--address ADDRESS]] FILE",
        discussion: """
        Errors: malformed JSON, unknown version or keys, fewer than two pins while enforcing, bad \
        pins, expired pin sets, and with --live, pins absent from the chain a host presents. \
        Warnings: pins expiring within 30 days, no backup pin (every pin is in the live chain).

        Exit status: 0 no errors (warnings may be printed), 1 errors, 64 usage.

        Example:
          securefoundation tls lint policy.json --live
        """
    )

    @Argument(help: "The policy file.")
    var config: String

    @Flag(help: "Connect to each exact host and check that a pin matches its chain.")
    var live = false

    @Option(help: "The port for --live.")
    var port: Int = 443

    @Option(help: "Connect to this address for --live instead of resolving each host.")
    var address: String?

    @Option(help: "Seconds to wait for each host.")
    var timeout: Int = 10

    func run() async throws {
        let configuration: PolicyConfiguration
        do {
            configuration = try PolicyConfiguration.load(path: config, environment: [:])
        } catch {
            if case .invalidConfiguration(let text) = error {
                for line in text.split(separator: "\n") { print("error: \(line)") }
                throw ExitCode(1)
            }
            throw TLSCLI.fail(error)
        }
        var errors = 0
        let now = Date()
        let formatter = ISO8601DateFormatter()
        for (index, entry) in configuration.entries.enumerated() {
            let place = "\(config): hosts[\(index)] (\(entry.pattern))"
            if let expires = entry.expires, !entry.pins.isEmpty {
                if expires <= now {
                    print("error: \(place): the pins expired on \(formatter.string(from: expires)); only the anchors are checked")
                    errors += 1
                } else if expires.timeIntervalSince(now) < 30 * 86_400 {
                    print("warning: \(place): the pins expire on \(formatter.string(from: expires))")
                }
            }
            guard live, !entry.pins.isEmpty else { continue }
            guard entry.pattern.kind == .exact else {
                print("note: \(place): a wildcard pattern cannot be checked live")
                continue
            }
            do {
                let chain = try await ChainProbe.presentedChain(
                    host: address ?? entry.pattern.domain, port: port, serverName: entry.pattern.domain,
                    timeout: .seconds(Int64(max(1, timeout))))
                let presented = chain.compactMap { try? SPKIPin(certificate: $0) }
                if !entry.pins.contains(where: presented.contains) {
                    print("error: \(place): no pin matches the chain \(entry.pattern.domain):\(port) presents:")
                    print(TLSCLI.pinLines(chain).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
                    errors += 1
                } else if entry.pins.allSatisfy(presented.contains) {
                    print("warning: \(place): every pin is in the live chain; pin a backup key that is not in use")
                }
            } catch {
                print("error: \(place): \(error)")
                errors += 1
            }
        }
        if errors > 0 { throw ExitCode(1) }
        print("\(config): ok (\(configuration.entries.count) host entries)")
    }
}

struct TLSServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run an HTTPS test server, optionally requiring client certificates (mutual TLS).",
        discussion: """
        Answers every request with 200 and a short text naming the client's certificate. Prints \
        `listening on https://HOST:PORT/` once ready. Runs until interrupted, or until \
        --max-connections connections were served.

        Exit status: 0 stopped after --max-connections, 1 cannot listen, 64 usage.

        Examples:
          securefoundation tls serve --cert server-chain.pem --key server.key \\
              --client-ca ca.pem --port 8443
          securefoundation tls serve --identity my-server --passcode-file pin.txt \\
              --policy clients.json --port 8443
        """
    )

    @OptionGroup var identityOptions: TLSIdentityOptions

    @Option(help: "Require client certificates issued under the CA certificates in this PEM file.")
    var clientCa: String?

    @Option(help: "Require client certificates leading to this policy file's defaultAnchors (files and keychain labels).")
    var policy: String?

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The port (0: any free port).")
    var port: Int = 8443

    @Option(help: "Stop after serving this many connections.")
    var maxConnections: Int?

    func run() async throws {
        do {
            guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
            guard let identity = try identityOptions.resolved() else {
                throw ValidationError("give --identity LABEL, or --cert and --key")
            }
            if clientCa != nil && policy != nil { throw ValidationError("give --client-ca or --policy, not both") }
            var authentication: ClientAuthentication?
            if let clientCa {
                authentication = ClientAuthentication(anchors: .only(try PEMFiles.certificates(atPath: clientCa)))
            } else if let policy {
                // A server has no host to look up: its clients' certificates must lead to the
                // policy's default anchors (certificate files and certificates kept in the keychain).
                let configuration = try PolicyConfiguration.load(path: policy)
                guard let anchors = configuration.defaultAnchors else {
                    throw CLIFailure("\(policy) has no defaultAnchors: a server's policy names the anchors its clients' certificates must lead to there")
                }
                authentication = ClientAuthentication(anchors: anchors, anchorSource: TLSCLI.keychainAnchors(identityOptions.store))
            }
            // 30 s: a client may unlock its keychain for its anchors during the handshake.
            let server = try await PinnedTLSServer.bind(
                host: host, port: port, identity: identity, clientAuthentication: authentication,
                handshakeTimeout: .seconds(30))
            print("listening on https://\(host):\(server.port)/")
            TLSCLI.flushStdout()
            let served = ServedCounter()
            let limit = maxConnections
            // The handler only reads a request and writes an answer: it runs on the event loop.
            try await server.run(onRefused: { error in
                if error is TLSTrustError {
                    CLI.warn("securefoundation: refused: \(CLI.describe(error))")
                } else if case .hardware(let key) = identity.key, let failure = key.lastFailure {
                    // BoringSSL only says that the key failed; the token says why.
                    CLI.warn("securefoundation: handshake not completed: \(CLI.describe(error)); the token key failed: \(failure)")
                } else {
                    CLI.warn("securefoundation: handshake not completed: \(CLI.describe(error))")
                }
            }, handlersOnEventLoop: true) { connection in
                try await Self.answer(connection)
                if let limit, served.increment() >= limit { await server.close() }
            }
        } catch let error as ExitCode {
            throw error
        } catch {
            throw TLSCLI.fail(error)
        }
    }

    static func answer(_ connection: PinnedTLSServer.Connection) async throws {
        let who = connection.peerChain?.first.map { "\($0.subject)" } ?? "no client certificate"
        try await connection.channel.executeThenClose { inbound, outbound in
            var request: [UInt8] = []
            let end: [UInt8] = Array("\r\n\r\n".utf8)
            for try await buffer in inbound {
                // Only the new bytes (and the three before them) can complete the blank line.
                let searchFrom = max(0, request.count - 3)
                request.append(contentsOf: buffer.readableBytesView)
                if request.count > 65_536 { return }
                if request.count >= 4, request[searchFrom...].firstRange(of: end) != nil { break }
            }
            let body = "hello from securefoundation\nclient: \(who)\n"
            let response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
                + "Connection: close\r\n\r\n" + body
            try await outbound.write(ByteBuffer(string: response))
        }
    }
}

/// Where this side's certificate and key come from: `--identity LABEL` (the keychain, unlocked
/// with --passcode-file or a running agent) or `--cert` and `--key` (PEM files).
struct TLSIdentityOptions: ParsableArguments {
    @Option(help: "A certificate chain (PEM, leaf first): the server's, or the client's for servers that ask for one.")
    var cert: String?

    @Option(help: "The private key of --cert: a PEM file, or pkcs11:… (RFC 7512) for a key that stays in a token.")
    var key: String?

    @OptionGroup var hardware: HardwareKeyOptions

    @Option(help: "An identity stored in the keychain under this label (tls issue, tls import), instead of --cert and --key.")
    var identity: String?

    @OptionGroup var store: KeychainStoreOptions

    /// The identity given, or nil when none is.
    func resolved() throws -> TLSIdentity? {
        if let key, key.hasPrefix("pkcs11:") {
            // The certificates from --cert, or stored under --identity (tls issue --key pkcs11:…).
            let chain: [Certificate]
            switch (cert, identity) {
            case (let cert?, nil): chain = try PEMFiles.certificates(atPath: cert)
            case (nil, let label?): chain = try OpenedIdentityStore.shared(store).get().certificates(label: label)
            case (nil, nil): throw ValidationError("--key pkcs11:… needs --cert (the key's certificate chain, PEM) or --identity LABEL (its stored certificates)")
            default: throw ValidationError("give --cert or --identity with --key pkcs11:…, not both")
            }
            let tokenKey = try hardware.open(uri: key, dataDirectory: store.home.directory)
            guard let resolved = TLSIdentity(chain: chain, tokenKey: tokenKey) else {
                throw CLIFailure("the certificates given do not start with the certificate of the token key \(key)")
            }
            return resolved
        }
        guard hardware.module == nil, hardware.pinFile == nil, hardware.pinEnv == nil else {
            throw ValidationError("--module, --pin-file and --pin-env go with --key pkcs11:…")
        }
        guard let identity else { return try TLSCLI.identity(cert: cert, key: key) }
        guard cert == nil && key == nil else { throw ValidationError("give --identity or --cert and --key, not both") }
        // An identity whose key stays in the TPM is opened through --tcti (or $TPM2TOOLS_TCTI).
        return try OpenedIdentityStore.shared(store).get().identity(label: identity, tcti: hardware.tcti)
    }
}

/// An identity store opened at first use, then kept.
///
/// One per process: the identity (`--identity`) and the keychain anchors of a policy share it,
/// so the keychain is opened (and the vault unlocked) once, before the connection, not again
/// in the middle of a handshake while the peer's handshake timer runs.
final class OpenedIdentityStore: @unchecked Sendable {
    private static let sharedLock = NSLock()
    nonisolated(unsafe) private static var sharedStore: OpenedIdentityStore?

    /// The process's store (a command opens one keychain).
    static func shared(_ options: KeychainStoreOptions) -> OpenedIdentityStore {
        sharedLock.lock()
        defer { sharedLock.unlock() }
        if let sharedStore { return sharedStore }
        let store = OpenedIdentityStore(options)
        sharedStore = store
        return store
    }

    private let lock = NSLock()
    private let options: KeychainStoreOptions
    private var store: IdentityStore?
    init(_ options: KeychainStoreOptions) { self.options = options }
    func get() throws -> IdentityStore {
        lock.lock()
        defer { lock.unlock() }
        if let store { return store }
        let opened = IdentityStore(keychain: try options.open())
        store = opened
        return opened
    }
}

final class ServedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }
}

struct TLSFetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "GET or POST https:// URLs under a TLS policy, and print the response bodies.",
        discussion: """
        Without --policy or --ca, the system's root store is trusted. With --ca, only the \
        certificates in that file are. A refusal prints the host, the reason, and the pin of every \
        certificate the server presented.

        Several URLs are fetched in order, the bodies printed one after the other; requests to \
        one server share a kept-alive connection (one handshake, one policy check) unless the \
        server closes it.

        Exit status: 0 success, 22 HTTP status 400 or more, 60 server refused by the policy, \
        7 no connection, 28 timeout, 64 usage, 1 any other error.

        Examples:
          securefoundation tls fetch https://api.example.com/status \\
              --policy policy.json
          securefoundation tls fetch https://device.local:8443/ --ca ca.pem \\
              --cert me.pem --key me.key
          securefoundation tls fetch https://device.local:8443/ --ca ca.pem \\
              --identity my-device --passcode-file pin.txt
        """
    )

    @Argument(help: "The https:// URLs.")
    var urls: [String]

    @Option(help: "The policy file (JSON).")
    var policy: String?

    @Option(help: "Trust only the CA certificates in this PEM file (instead of --policy).")
    var ca: String?

    @OptionGroup var identityOptions: TLSIdentityOptions

    @Option(help: "POST this text as the body.")
    var data: String?

    @Option(help: "Connect to this address instead of the URL's host (the certificate is still checked against the host).")
    var connectTo: String?

    @Option(help: "Seconds for the whole exchange.")
    var timeout: Int = 30

    @Flag(name: .shortAndLong, help: "Print the server's validated chain and the policy's warnings on standard error.")
    var verbose = false

    func run() async throws {
        do {
            if policy != nil && ca != nil { throw ValidationError("give --policy or --ca, not both") }
            var trust = TrustPolicy()
            if let policy {
                // `keychain` anchors are the certificates stored under those labels.
                trust = try PolicyConfiguration.load(path: policy).policy(anchorSource: TLSCLI.keychainAnchors(identityOptions.store))
            } else if let ca {
                trust = TrustPolicy(defaultAnchors: .only(try PEMFiles.certificates(atPath: ca)))
            }
            guard !urls.isEmpty else { throw ValidationError("give at least one https:// URL") }
            let client = PinnedHTTPClient(
                client: try PinnedTLSClient(policy: trust, identity: try identityOptions.resolved()))
            defer { client.shutdown() }
            let wait = TimeAmount.seconds(Int64(max(1, timeout)))
            var failed = false
            for url in urls {
                let response: HTTPSResponse
                if let data {
                    let headers: [(String, String)] = [("Content-Type", "text/plain")]
                    let body: [UInt8] = Array(data.utf8)
                    response = try await client.execute(method: "POST", url: url, headers: headers, body: body,
                                                        connectTo: connectTo, timeout: wait)
                } else {
                    response = try await client.execute(method: "GET", url: url, connectTo: connectTo, timeout: wait)
                }
                if verbose {
                    CLI.warn("status: \(response.status)")
                    CLI.warn(TLSCLI.pinLines(response.peerChain))
                    for warning in response.warnings { CLI.warn("warning: \(warning)") }
                }
                try CLI.writeStdout(response.body)
                if response.status >= 400 {
                    CLI.warn("securefoundation: error: HTTP status \(response.status) from \(url)")
                    failed = true
                }
            }
            if verbose {
                let requests: String = urls.count == 1 ? "1 request" : "\(urls.count) requests"
                let connections: Int = client.connectionsOpened
                let opened: String = connections == 1 ? "1 connection" : "\(connections) connections"
                CLI.warn(requests + " on " + opened)
            }
            if failed { throw ExitCode(22) }
        } catch let error as ExitCode {
            throw error
        } catch {
            throw TLSCLI.fail(error)
        }
    }
}
