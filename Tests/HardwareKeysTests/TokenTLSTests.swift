import Crypto
import Foundation
import SwiftASN1
import TestSupport
import Testing
import X509

/// A certificate authority made in the test, and a leaf for a public key (the token's).
struct TestPKI {
    let authorityKey = P256.Signing.PrivateKey()
    let authority: Certificate

    init() throws {
        let name = try DistinguishedName { CommonName("Token test CA") }
        let now = Date()
        authority = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(authorityKey.publicKey),
            notValidBefore: now - 3600, notValidAfter: now + 86_400, issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(authorityKey))
    }

    func leaf(for publicKey: Certificate.PublicKey) throws -> Certificate {
        let now = Date()
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKey,
            notValidBefore: now - 3600, notValidAfter: now + 86_400, issuer: authority.subject,
            subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            issuerPrivateKey: .init(authorityKey))
    }

    static func pem(_ certificates: [Certificate]) throws -> String {
        try certificates.map { try $0.serializeAsPEM().pemString + "\n" }.joined()
    }
}

/// The command line's TLS server with its key in SoftHSM2, each test with a token directory of
/// its own: openssl s_client verifies it, pkcs11-tool shows the key private and not
/// extractable, the server's memory does not hold the key, and a token taken away makes the
/// handshake fail with the token's error (nothing falls back to a software key).
@Suite("TLS with the server key in a PKCS #11 token")
struct TokenTLSTests {
    struct Server {
        let hsm: SoftHSM
        let home: String
        let pinFile: String
        let key: P256.Signing.PrivateKey
        let directory: TemporaryDirectory
        let cli: String
        let openssl: String

        /// A token `web` holding an imported software key (so the test knows its scalar), the
        /// CA and the leaf certificate as PEM files.
        init() throws {
            hsm = try SoftHSM()
            try hsm.makeToken("web")
            key = P256.Signing.PrivateKey()
            try hsm.importKey("web", privatePEM: key.pemRepresentation, publicDER: Array(key.publicKey.derRepresentation),
                              label: "tls", id: "01")
            directory = try TemporaryDirectory(prefix: "sf-token-tls")
            home = try directory.directory("home")
            pinFile = try directory.file("pin", SoftHSM.pin + "\n")
            let pki = try TestPKI()
            _ = try directory.file("ca.pem", TestPKI.pem([pki.authority]))
            _ = try directory.file("chain.pem", TestPKI.pem([pki.leaf(for: .init(key.publicKey)), pki.authority]))
            cli = try BuiltProducts.executable("securefoundation")
            openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
        }

        func serve(_ extra: [String] = [], uri: String = "pkcs11:token=web;object=tls;id=%01") throws -> ChildProcess.Running {
            try ChildProcess.start(cli, ["tls", "serve", "--home", home, "--cert", directory.path("chain.pem"), "--key", uri,
                                         "--module", SoftHSM.module, "--pin-file", pinFile, "--port", "0"] + extra,
                                   environment: hsm.environment)
        }

        func port(_ server: ChildProcess.Running) throws -> String {
            let line = try #require(server.waitForLine(startingWith: "listening on ", timeout: .seconds(60)),
                                    "the server did not start: \(String(decoding: server.stderr, as: UTF8.self))")
            return String(try #require(line.split(separator: ":").last?.split(separator: "/").first))
        }

        func sClient(_ port: String) throws -> ChildProcess.Result {
            try ChildProcess.run(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost",
                                           "-CAfile", directory.path("ca.pem"), "-verify_return_error", "-tls1_3", "-ign_eof"],
                                 stdin: .text("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), timeout: .seconds(60))
        }
    }

    @Test("openssl s_client verifies our server's certificate; the handshake is signed in the token; the key is not in the server's memory")
    func handshake() throws {
        guard SoftHSM.available() else { return }
        let fixture = try Server()
        let server = try fixture.serve(["--max-connections", "3"])
        defer { server.kill() }
        let port = try fixture.port(server)
        let first = try fixture.sClient(port)
        #expect(first.status == 0, "\(first.errorText)")
        #expect(first.text.contains("Verify return code: 0 (ok)"))
        #expect(first.text.contains("hello from securefoundation"))
        #expect(first.text.contains("TLSv1.3"))

        // The server's memory after a handshake: no 16-byte window of the private scalar.
        let scalar = Array(fixture.key.rawRepresentation)
        #expect(scalar.count == 32)
        // Big-endian as encoded, and little-endian as BoringSSL's and OpenSSL's BIGNUM limbs hold it.
        let forms = [("private scalar", scalar), ("private scalar, little-endian", Array(scalar.reversed()))]
        let hits = try MemoryScan.scan(pid: server.processIdentifier, for: forms)
        #expect(hits.isEmpty, "the token key's scalar is in the server's memory: \(hits)")

        // The control: the same key served from a PEM file is found by the same scan.
        let pem = try fixture.directory.file("server.key", fixture.key.pemRepresentation)
        let software = try ChildProcess.start(fixture.cli, ["tls", "serve", "--home", fixture.home, "--cert", fixture.directory.path("chain.pem"),
                                                           "--key", pem, "--port", "0", "--max-connections", "3"])
        defer { software.kill() }
        let softwarePort = try fixture.port(software)
        #expect(try fixture.sClient(softwarePort).status == 0)
        #expect(!(try MemoryScan.scan(pid: software.processIdentifier, for: forms)).isEmpty,
                "the scan did not find the key of a server that holds it in memory")

        // The key on the token: private, sensitive, not extractable.
        let listing = try fixture.hsm.tool("web", ["--list-objects", "--type", "privkey"]).text
        let access = try #require(listing.split(separator: "\n").first { $0.contains("Access:") })
        let flags = access.split(separator: ":", maxSplits: 1)[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(flags.contains("sensitive"), "\(listing)")
        #expect(!flags.contains("extractable"), "\(listing)")
        #expect(listing.contains("Private Key Object; EC"))
        // Private (CKA_PRIVATE): without logging in, the token does not even list it.
        let anonymous = try fixture.hsm.tool("web", ["--list-objects"], login: false).text
        #expect(!anonymous.contains("Private Key Object"), "\(anonymous)")
        #expect(anonymous.contains("Public Key Object"), "\(anonymous)")
    }

    @Test("a token taken away fails the handshake with the token's error; a new server names the missing token")
    func tokenGone() throws {
        guard SoftHSM.available() else { return }
        let fixture = try Server()
        let server = try fixture.serve()
        defer { server.kill() }
        let port = try fixture.port(server)
        #expect(try fixture.sClient(port).status == 0)
        try FileManager.default.removeItem(atPath: fixture.hsm.tokens)
        var refused = false
        for _ in 0..<3 {
            if try fixture.sClient(port).status != 0 { refused = true; break }
        }
        #expect(refused, "the server still completed handshakes without its token")
        _ = server.waitForOutput(timeout: .seconds(1)) { _ in false }
        let log = String(decoding: server.stderr, as: UTF8.self)
        #expect(log.contains("the token key failed: C_"), "\(log)")
        #expect(log.contains("CKR_"), "\(log)")
        server.kill()

        let again = try fixture.serve()
        let result = try again.wait(timeout: .seconds(60))
        // SoftHSM2 without its token directory fails C_Initialize; a token module would report
        // no token. Either way the server does not start, and says which call failed and why.
        #expect(result.status == 1)
        #expect(result.errorText.contains("C_Initialize failed: CKR_GENERAL_ERROR") || result.errorText.contains("no token matches token=web"),
                "\(result.errorText)")
    }

    @Test("a wrong PIN is reported as CKR_PIN_INCORRECT; a module in the data directory and a PIN in the URI are refused")
    func refusals() throws {
        guard SoftHSM.available() else { return }
        let fixture = try Server()
        let wrong = try fixture.directory.file("wrong-pin", "0000\n")
        var result = try ChildProcess.run(fixture.cli, ["tls", "serve", "--home", fixture.home, "--cert", fixture.directory.path("chain.pem"),
                                                         "--key", "pkcs11:token=web;object=tls", "--module", SoftHSM.module,
                                                         "--pin-file", wrong, "--port", "0"],
                                          environment: fixture.hsm.environment, timeout: .seconds(60))
        #expect(result.status == 3, "the wrong-secret status of docs/CLI.md")
        #expect(result.errorText.contains("C_Login failed: CKR_PIN_INCORRECT: the PIN is wrong"), "\(result.errorText)")

        let planted = fixture.home + "/libsofthsm2.so"
        try FileManager.default.copyItem(atPath: SoftHSM.resolvedModule, toPath: planted)
        result = try ChildProcess.run(fixture.cli, ["tls", "serve", "--home", fixture.home, "--cert", fixture.directory.path("chain.pem"),
                                                     "--key", "pkcs11:token=web;object=tls", "--module", planted,
                                                     "--pin-file", fixture.pinFile, "--port", "0"],
                                      environment: fixture.hsm.environment, timeout: .seconds(60))
        #expect(result.status == 74)
        #expect(result.errorText.contains("inside the data directory"), "\(result.errorText)")
        result = try ChildProcess.run(fixture.cli, ["tls", "serve", "--home", fixture.home, "--cert", fixture.directory.path("chain.pem"),
                                                     "--key", "pkcs11:token=web;object=tls?module-path=\(planted)",
                                                     "--pin-file", fixture.pinFile, "--port", "0"],
                                      environment: fixture.hsm.environment, timeout: .seconds(60))
        #expect(result.errorText.contains("inside the data directory"), "\(result.errorText)")

        result = try ChildProcess.run(fixture.cli, ["tls", "serve", "--home", fixture.home, "--cert", fixture.directory.path("chain.pem"),
                                                     "--key", "pkcs11:token=web;object=tls?pin-value=1234", "--module", SoftHSM.module,
                                                     "--port", "0"],
                                      environment: fixture.hsm.environment, timeout: .seconds(60))
        #expect(result.status == 64)
        #expect(result.errorText.contains("pin-value is refused"), "\(result.errorText)")
    }

    @Test("tls issue certifies token keys; tls serve --identity and tls fetch sign with them (mutual TLS, both keys in the token)")
    func issueAndMutualTLS() throws {
        guard SoftHSM.available() else { return }
        let fixture = try Server()
        try fixture.hsm.generate("web", label: "client", id: "02")
        let environment = fixture.hsm.environment.merging(["XDG_CONFIG_HOME": fixture.directory.path("config")]) { $1 }
        func run(_ arguments: [String]) throws -> ChildProcess.Result {
            try ChildProcess.run(fixture.cli, arguments + ["--home", fixture.home, "--device-key", fixture.directory.path("device.key")],
                                 environment: environment, timeout: .seconds(120))
        }
        let token = ["--module", SoftHSM.module, "--pin-file", fixture.pinFile]
        #expect(try run(["tls", "ca", "init", "--accessibility", "always"]).status == 0)
        let ca = try run(["tls", "export", "ca", "-o", fixture.directory.path("home-ca.pem")])
        #expect(ca.status == 0, "\(ca.errorText)")
        let server = try run(["tls", "issue", "localhost", "--server", "--key", "pkcs11:token=web;object=tls", "-o", fixture.directory.path("srv.pem")] + token)
        #expect(server.status == 0, "\(server.errorText)")
        let client = try run(["tls", "issue", "client-1", "--client", "--key", "pkcs11:token=web;id=%02", "-o", fixture.directory.path("cli.pem")] + token)
        #expect(client.status == 0, "\(client.errorText)")
        // The server's certificate certifies the token's key.
        let issued = try String(contentsOfFile: fixture.directory.path("srv.pem"), encoding: .utf8)
        let first = try #require(issued.components(separatedBy: "-----END CERTIFICATE-----").first) + "-----END CERTIFICATE-----"
        #expect(try Certificate(pemEncoded: first).publicKey == Certificate.PublicKey(fixture.key.publicKey))
        // A key that is not in the token is not certified.
        let missing = try run(["tls", "issue", "nobody", "--key", "pkcs11:token=web;object=nobody", "-o", fixture.directory.path("x.pem")] + token)
        #expect(missing.status == 44)
        #expect(missing.errorText.contains("no private key on the token matches object=nobody"), "\(missing.errorText)")

        let serve = try ChildProcess.start(fixture.cli, ["tls", "serve", "--identity", "localhost", "--key", "pkcs11:token=web;object=tls",
                                                         "--client-ca", fixture.directory.path("home-ca.pem"), "--port", "0", "--max-connections", "1",
                                                         "--home", fixture.home, "--device-key", fixture.directory.path("device.key")] + token,
                                           environment: environment)
        defer { serve.kill() }
        let port = try fixture.port(serve)
        let fetched = try run(["tls", "fetch", "https://localhost:\(port)/", "--ca", fixture.directory.path("home-ca.pem"),
                               "--connect-to", "127.0.0.1", "--cert", fixture.directory.path("cli.pem"), "--key", "pkcs11:token=web;id=%02"] + token)
        #expect(fetched.status == 0, "\(fetched.errorText)")
        #expect(fetched.text.contains("client: CN=client-1"), "\(fetched.text)")
        #expect(try serve.wait(timeout: .seconds(60)).status == 0)
    }

    @Test("tls keys lists the token's keys by URI with their flags, never their bytes")
    func keys() throws {
        guard SoftHSM.available() else { return }
        let fixture = try Server()
        let result = try ChildProcess.run(fixture.cli, ["tls", "keys", "--home", fixture.home, "--module", SoftHSM.module,
                                                         "--pin-file", fixture.pinFile, "--pkcs11-only"],
                                          environment: fixture.hsm.environment, timeout: .seconds(60))
        #expect(result.status == 0, "\(result.errorText)")
        #expect(result.text == "pkcs11\tEC\tpkcs11:token=web;object=tls;id=%01;type=private\tsensitive,not-extractable\n")
    }
}

/// Reads the writable memory of a process through /proc/PID/maps and /proc/PID/mem.
enum MemoryScan {
    static func scan(pid: Int32, for secrets: [(name: String, bytes: [UInt8])]) throws -> [String] {
        let mapsHandle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps"))
        defer { try? mapsHandle.close() }
        let maps = String(decoding: try mapsHandle.readToEnd() ?? Data(), as: UTF8.self)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        try #require(fd >= 0, "cannot open /proc/\(pid)/mem")
        defer { close(fd) }
        var hits: [String] = []
        var scanned = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("rw") else { continue }
            let name = fields.count >= 6 ? String(fields[5]) : "[anonymous]"
            if name == "[vvar]" || name == "[vsyscall]" { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else { continue }
            let length = Int(end - start)
            var region = [UInt8](repeating: 0, count: length)
            let got = region.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, length, off_t(Int64(bitPattern: start))) }
            guard got > 0 else { continue }
            scanned += got
            for secret in secrets where contains(Array(region[0..<got]), secret.bytes) {
                hits.append("\(secret.name) in \(name)")
            }
        }
        #expect(scanned > 1 << 20, "the scan read \(scanned) bytes")
        return hits
    }

    /// Whether any 16-byte window of `secret` is in `memory`.
    static func contains(_ memory: [UInt8], _ secret: [UInt8]) -> Bool {
        guard memory.count >= 16, secret.count >= 16 else { return false }
        let windows = (0...(secret.count - 16)).map { Array(secret[$0..<$0 + 16]) }
        var byFirst: [UInt8: [[UInt8]]] = [:]
        for window in windows { byFirst[window[0], default: []].append(window) }
        return memory.withUnsafeBufferPointer { haystack in
            for start in 0...(haystack.count - 16) {
                guard let candidates = byFirst[haystack[start]] else { continue }
                for window in candidates where window.withUnsafeBufferPointer({ needle in
                    memcmp(haystack.baseAddress! + start, needle.baseAddress!, 16) == 0
                }) {
                    return true
                }
            }
            return false
        }
    }
}
