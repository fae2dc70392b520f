import Cipher
import Foundation
import TestSupport
import Keychain
import Testing
import Vault
import X509
@testable import PinnedTLS

/// The shared private temporary directory (0700), removed when the value goes away.
typealias IdentityScratch = TemporaryDirectory

extension TemporaryDirectory {
    func sub(_ name: String) -> String { path(name) }

    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String { try file(name, bytes) }

    func read(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: sub(name))))
    }

    /// A keychain in this directory under a fixed master key (no lock state).
    func keychain(master: [UInt8] = Array(repeating: 7, count: 32)) throws -> Keychain {
        try Keychain(directory: sub("keychain"), keySource: StaticKeySource(masterKey: SecretBytes(copying: master)))
    }
}

/// The real `openssl` command, for making inputs and checking outputs.
enum IdentityOpenSSL {
    static let path: String? = ChildProcess.which("openssl")

    static var available: Bool { path != nil }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs openssl in `directory` (at most 60 s).
    @discardableResult
    static func run(_ arguments: [String], in directory: String) throws -> Result {
        let result = try ChildProcess.run(try #require(path, "openssl is not installed"), arguments, directory: directory)
        return Result(status: result.status, stdout: result.text, stderr: result.errorText)
    }

    /// Runs openssl and requires success.
    @discardableResult
    static func require(_ arguments: [String], in directory: String) throws -> Result {
        let result = try run(arguments, in: directory)
        #expect(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.stderr)")
        if result.status != 0 { throw Failed(message: result.stderr) }
        return result
    }

    struct Failed: Error { var message: String }

    /// A self-signed P-256 certificate and its key: `key.pem` (PKCS#8) and `cert.pem`, with `prefix`.
    static func selfSigned(_ prefix: String, in directory: String, key: String = "ec", subject: String = "/CN=test.example") throws {
        var arguments = ["req", "-x509", "-nodes", "-days", "30", "-subj", subject, "-keyout", "\(prefix)key.pem", "-out", "\(prefix)cert.pem"]
        switch key {
        case "ec": arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        case "ec384": arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"]
        default: arguments += ["-newkey", key]
        }
        try require(arguments, in: directory)
    }
}

/// The error a throwing call threw, as an `IdentityError`.
func identityError(_ body: () throws -> Void) -> IdentityError? {
    do { try body(); return nil } catch let error as IdentityError { return error } catch {
        Issue.record("expected an IdentityError, got \(error)")
        return nil
    }
}
