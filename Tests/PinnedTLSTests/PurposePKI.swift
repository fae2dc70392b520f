import Foundation
import TestSupport
import X509
@testable import PinnedTLS

/// Certificates made by the real `openssl` for the address-spelling and key-purpose tests: a
/// root, and leaves for `localhost`, `127.0.0.1` and `::1` that differ only in their extended
/// key usage. Private keys live only in the temporary directory.
final class PurposePKI: Sendable {
    let directory: String
    private let scratch: TemporaryDirectory

    /// Leaf name → the `extendedKeyUsage` value it carries (nil: no extension).
    static let leaves: [(name: String, usage: String?)] = [
        ("server", "serverAuth"),
        ("client", "clientAuth"),
        ("codesign", "codeSigning"),
        ("both", "serverAuth, clientAuth"),
        ("noeku", nil),
        ("anyeku", "anyExtendedKeyUsage"),
        ("critical-client", "critical, clientAuth"),
    ]

    static let shared: Result<PurposePKI, TestFailure> = {
        do { return .success(try PurposePKI()) } catch let error as TestFailure { return .failure(error) } catch {
            return .failure(TestFailure("\(error)"))
        }
    }()

    static func get() throws -> PurposePKI { try shared.get() }

    private init() throws {
        guard let openssl = Tools.openssl else { throw TestFailure("openssl is not installed") }
        scratch = try TemporaryDirectory.forProcess(prefix: "pinnedtls-purpose")
        let base = scratch.path
        directory = base
        func ossl(_ arguments: [String]) throws {
            let result = try Tools.run(openssl, arguments, directory: base)
            guard result.status == 0 else {
                throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
            }
        }
        func key(_ name: String) throws {
            try ossl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(name).key"])
        }
        try key("root")
        try ossl(["req", "-x509", "-new", "-key", "root.key", "-subj", "/CN=Purpose Test Root", "-days", "30",
                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                  "-out", "root.pem"])
        for (index, leaf) in Self.leaves.enumerated() {
            try key(leaf.name)
            var extensions = """
                basicConstraints = critical, CA:FALSE
                keyUsage = critical, digitalSignature
                subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

                """
            if let usage = leaf.usage { extensions += "extendedKeyUsage = \(usage)\n" }
            try extensions.write(toFile: base + "/\(leaf.name).ext", atomically: true, encoding: .utf8)
            try ossl(["req", "-new", "-key", "\(leaf.name).key", "-subj", "/CN=\(leaf.name)", "-out", "\(leaf.name).csr"])
            try ossl(["x509", "-req", "-in", "\(leaf.name).csr", "-CA", "root.pem", "-CAkey", "root.key",
                      "-set_serial", String(100 + index), "-days", "30", "-extfile", "\(leaf.name).ext",
                      "-out", "\(leaf.name).pem"])
        }
        try key("backup")
        try key("other")
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func certificate(_ name: String) throws -> Certificate {
        try PEMFiles.certificates(atPath: path("\(name).pem"))[0]
    }

    func identity(_ name: String) throws -> TLSIdentity {
        try PEMFiles.identity(certificatePath: path("\(name).pem"), keyPath: path("\(name).key"))
    }

    /// The pin of a bare key file, as openssl computes it.
    func keyPin(_ name: String) throws -> SPKIPin {
        let result = try Tools.run("/bin/sh", ["-c",
            "openssl pkey -in '\(path(name + ".key"))' -pubout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"])
        guard result.status == 0, let pin = SPKIPin("sha256/" + result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw TestFailure("openssl pin of \(name): \(result.stderr)") }
        return pin
    }
}

/// `openssl s_server -www` with one of ``PurposePKI``'s leaves, listening on `address` (an IPv4
/// or bracketed IPv6 loopback address) at a port it picks; killed by ``stop()``.
final class PurposeServer: @unchecked Sendable {
    let process: ChildProcess.Running
    let port: Int

    init(_ pki: PurposePKI, leaf: String, address: String = "127.0.0.1", extra: [String] = []) throws {
        guard let openssl = Tools.openssl else { throw TestFailure("openssl is not installed") }
        process = try ChildProcess.start(
            openssl, ["s_server", "-accept", "\(address):0", "-www", "-cert", "\(leaf).pem", "-key", "\(leaf).key"] + extra,
            stdin: .pipe, directory: pki.directory)
        guard let line = process.waitForLine(startingWith: "ACCEPT", timeout: .seconds(5)),
              let portText = line.split(separator: ":").last, let found = Int(portText) else {
            process.kill()
            throw TestFailure("s_server did not start: \(String(decoding: process.stderr, as: UTF8.self))")
        }
        port = found
    }

    func stop() {
        process.kill()
        _ = try? process.wait(timeout: .seconds(30))
    }
}
