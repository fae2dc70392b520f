import Foundation
import TestSupport
import X509
@testable import PinnedTLS
import NIOConcurrencyHelpers

/// A program's outcome.
struct ToolResult: Sendable {
    let status: Int32
    let stdout: String
    let stderr: String
}

enum Tools {
    static let openssl = ChildProcess.which("openssl")
    static var available: Bool { openssl != nil }

    /// Runs a program to completion (killed after `seconds`).
    static func run(
        _ program: String, _ arguments: [String], stdin: String = "", directory: String? = nil,
        environment: [String: String] = [:], seconds: Int = 20
    ) throws -> ToolResult {
        let result = try ChildProcess.run(program, arguments, stdin: .text(stdin), environment: environment,
                                          directory: directory, timeout: .seconds(seconds))
        return ToolResult(status: result.status, stdout: result.text, stderr: result.errorText)
    }

    /// ``run(_:_:stdin:directory:environment:seconds:)`` off the cooperative thread pool.
    static func runAsync(
        _ program: String, _ arguments: [String], stdin: String = "", directory: String? = nil, seconds: Int = 20
    ) async throws -> ToolResult {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    continuation.resume(returning: try run(program, arguments, stdin: stdin, directory: directory,
                                                           seconds: seconds))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Certificates made by the real `openssl` in a temporary directory: a root CA, an
/// intermediate, leaves (good, expired, wrong name, client), and another CA, "Honest Abe".
/// Private keys live only there.
final class TestPKI: Sendable {
    let directory: String
    private let scratch: TemporaryDirectory

    static let shared: Result<TestPKI, TestFailure> = {
        do { return .success(try TestPKI()) } catch let error as TestFailure { return .failure(error) } catch {
            return .failure(TestFailure("\(error)"))
        }
    }()

    static func get() throws -> TestPKI { try shared.get() }

    private static let config = """
        [req]
        distinguished_name = dn
        prompt = no
        [dn]
        CN = placeholder
        [ca]
        default_ca = testca
        [testca]
        dir = .
        database = ./index.txt
        new_certs_dir = .
        serial = ./serial
        default_md = sha256
        policy = policy_any
        unique_subject = no
        [policy_any]
        commonName = supplied
        [v3_root]
        basicConstraints = critical, CA:TRUE
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash
        [v3_inter]
        basicConstraints = critical, CA:TRUE, pathlen:0
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        [v3_leaf]
        basicConstraints = critical, CA:FALSE
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth, clientAuth
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        subjectAltName = ${ENV::SAN}

        """

    private init() throws {
        guard let openssl = Tools.openssl else {
            throw TestFailure("openssl is not installed")
        }
        scratch = try TemporaryDirectory.forProcess(prefix: "pinnedtls-pki")
        let base = scratch.path
        directory = base
        try Self.config.write(toFile: base + "/openssl.cnf", atomically: true, encoding: .utf8)
        try "".write(toFile: base + "/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: base + "/serial", atomically: true, encoding: .utf8)

        func ossl(_ arguments: [String], san: String = "DNS:unused") throws {
            let result = try Tools.run(openssl, arguments, directory: base, environment: ["SAN": san])
            guard result.status == 0 else {
                throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
            }
        }
        func key(_ name: String) throws {
            try ossl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(name).key"])
        }
        func root(_ name: String, _ subject: String) throws {
            try key(name)
            try ossl(["req", "-x509", "-new", "-key", "\(name).key", "-subj", subject, "-days", "3650",
                      "-config", "openssl.cnf", "-extensions", "v3_root", "-out", "\(name).pem"])
        }
        var serial = 1
        func issue(_ name: String, _ subject: String, by issuer: String, extensions: String, san: String = "DNS:unused") throws {
            try key(name)
            serial += 1
            try ossl(["req", "-new", "-key", "\(name).key", "-subj", subject, "-config", "openssl.cnf",
                      "-out", "\(name).csr"])
            try ossl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(issuer).pem", "-CAkey", "\(issuer).key",
                      "-set_serial", String(serial), "-days", "365", "-extfile", "openssl.cnf",
                      "-extensions", extensions, "-out", "\(name).pem"], san: san)
        }
        try root("root", "/CN=SecureFoundation Test Root")
        try issue("inter", "/CN=SecureFoundation Test Intermediate", by: "root", extensions: "v3_inter")
        try issue("leaf", "/CN=localhost", by: "inter", extensions: "v3_leaf", san: "DNS:localhost,IP:127.0.0.1")
        try issue("wrongname", "/CN=wrong.example", by: "inter", extensions: "v3_leaf", san: "DNS:wrong.example")
        try issue("client", "/CN=device-1", by: "inter", extensions: "v3_leaf", san: "DNS:device-1")
        try key("expired")
        try ossl(["req", "-new", "-key", "expired.key", "-subj", "/CN=localhost", "-config", "openssl.cnf",
                  "-out", "expired.csr"])
        try ossl(["ca", "-batch", "-config", "openssl.cnf", "-cert", "inter.pem", "-keyfile", "inter.key",
                  "-in", "expired.csr", "-out", "expired.pem", "-startdate", "20200101000000Z",
                  "-enddate", "20210101000000Z", "-extensions", "v3_leaf", "-notext"], san: "DNS:localhost")
        try root("abe", "/CN=Honest Abe Root CA")
        try issue("abe-leaf", "/CN=localhost", by: "abe", extensions: "v3_leaf", san: "DNS:localhost,IP:127.0.0.1")
        try issue("abe-client", "/CN=device-1", by: "abe", extensions: "v3_leaf", san: "DNS:device-1")
        try key("backup")
        // Chains as servers send them: leaf, then the intermediate.
        let inter = try String(contentsOfFile: base + "/inter.pem", encoding: .utf8)
        for name in ["leaf", "wrongname", "client", "expired"] {
            let leaf = try String(contentsOfFile: base + "/\(name).pem", encoding: .utf8)
            try (leaf + inter).write(toFile: base + "/\(name)-chain.pem", atomically: true, encoding: .utf8)
        }
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func certificate(_ name: String) throws -> Certificate {
        try PEMFiles.certificates(atPath: path("\(name).pem"))[0]
    }

    func identity(_ name: String) throws -> TLSIdentity {
        try PEMFiles.identity(certificatePath: path("\(name)-chain.pem"), keyPath: path("\(name).key"))
    }

    /// The pin of a certificate's key (or of a bare key file), as openssl computes it.
    func opensslPin(_ name: String, isKey: Bool = false) throws -> String {
        let source = isKey
            ? "openssl pkey -in '\(path(name + ".key"))' -pubout"
            : "openssl x509 -in '\(path(name + ".pem"))' -pubkey -noout"
        let result = try Tools.run(
            "/bin/sh", ["-c", "\(source) | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"])
        guard result.status == 0 else { throw TestFailure("openssl pin of \(name): \(result.stderr)") }
        return "sha256/" + result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func pin(_ name: String, isKey: Bool = false) throws -> SPKIPin {
        guard let pin = SPKIPin(try opensslPin(name, isKey: isKey)) else { throw TestFailure("bad pin for \(name)") }
        return pin
    }
}

/// A real `openssl s_server` on a loopback port it picks itself; killed by ``stop()``.
final class OpenSSLServer: @unchecked Sendable {
    let process: ChildProcess.Running
    let port: Int

    /// Starts `openssl s_server -www` with `arguments` (certificate, key...); waits (at most 5 s)
    /// for its `ACCEPT` line.
    init(_ pki: TestPKI, _ arguments: [String]) throws {
        guard let openssl = Tools.openssl else { throw TestFailure("openssl is not installed") }
        process = try ChildProcess.start(openssl, ["s_server", "-accept", "127.0.0.1:0", "-www"] + arguments,
                                         stdin: .pipe, directory: pki.directory)
        guard let line = process.waitForLine(startingWith: "ACCEPT", timeout: .seconds(5)),
              let portText = line.split(separator: ":").last, let found = Int(portText) else {
            process.kill()
            throw TestFailure("s_server did not start: \(String(decoding: process.stderr, as: UTF8.self))\(String(decoding: process.stdout, as: UTF8.self))")
        }
        port = found
    }

    /// SIGKILL: a child spawned from a thread that blocks signals inherits the blocked mask
    /// and would ignore SIGTERM.
    func stop() {
        process.kill()
        _ = try? process.wait(timeout: .seconds(30))
    }
}

/// Runs `body`, failing with a test failure after `seconds`.
func withTimeout<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
            throw TestFailure("timed out after \(seconds) s")
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TestFailure("no result") }
        return first
    }
}

/// Sends `request` on the connection and reads until the peer closes (bounded).
func exchange(_ connection: PinnedTLSConnection, _ request: String, seconds: Double = 60) async throws -> String {
    let channel = connection.channel
    return try await withTimeout(seconds) {
        try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(.init(string: request))
            var text = ""
            for try await var buffer in inbound {
                text += buffer.readString(length: buffer.readableBytes) ?? ""
                if text.utf8.count > 1 << 20 { break }
            }
            return text
        }
    }
}

/// Collects reports handed to a reporter.
final class ReportCollector: Sendable {
    private let box = NIOLockedValueBox<[PinValidationReport]>([])
    var reports: [PinValidationReport] { box.withLockedValue { $0 } }
    func reporter() -> PinReporter {
        PinReporter { [box] report in box.withLockedValue { $0.append(report) } }
    }
}
