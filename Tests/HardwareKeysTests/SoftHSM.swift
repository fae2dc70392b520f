import Foundation
import TestSupport
import Testing

/// SoftHSM2 (a PKCS #11 token in files) for the tests: a token directory of its own under a
/// temporary directory, its configuration file (SOFTHSM2_CONF), tokens made with
/// softhsm2-util and keys with pkcs11-tool (opensc).
final class SoftHSM: @unchecked Sendable {
    static let module = "/usr/lib/softhsm/libsofthsm2.so"
    static let pin = "1234"
    /// The module file itself (Debian's path is a symbolic link).
    static var resolvedModule: String { (try? FileManager.default.destinationOfSymbolicLink(atPath: module)).map {
        $0.hasPrefix("/") ? $0 : URL(fileURLWithPath: module).deletingLastPathComponent().appendingPathComponent($0).standardizedFileURL.path
    } ?? module }

    /// Whether SoftHSM2 and pkcs11-tool are installed; prints why a test is skipped when not.
    static func available() -> Bool {
        guard FileManager.default.fileExists(atPath: module), ChildProcess.which("softhsm2-util") != nil,
              ChildProcess.which("pkcs11-tool") != nil
        else {
            print("skipping: needs SoftHSM2 and pkcs11-tool (Debian: softhsm2 opensc)")
            return false
        }
        return true
    }

    let directory: TemporaryDirectory
    let tokens: String
    let configuration: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "sf-softhsm")
        tokens = try directory.directory("tokens")
        configuration = try directory.file("softhsm2.conf", "directories.tokendir = \(tokens)\nobjectstore.backend = file\nlog.level = ERROR\n")
    }

    var environment: [String: String] { ["SOFTHSM2_CONF": configuration] }

    /// Makes a token labelled `label` (user PIN ``pin``).
    func makeToken(_ label: String) throws {
        let result = try ChildProcess.run(try #require(ChildProcess.which("softhsm2-util")),
                                          ["--init-token", "--free", "--label", label, "--so-pin", "0000", "--pin", Self.pin],
                                          environment: environment, timeout: .seconds(60))
        try #require(result.status == 0, "softhsm2-util --init-token: \(result.errorText)")
    }

    /// Runs pkcs11-tool on the token `token`, logged in.
    @discardableResult
    func tool(_ token: String, _ arguments: [String], login: Bool = true) throws -> ChildProcess.Result {
        let result = try ChildProcess.run(try #require(ChildProcess.which("pkcs11-tool")),
                                          ["--module", Self.module, "--token-label", token]
                                            + (login ? ["--login", "--pin", Self.pin] : []) + arguments,
                                          environment: environment, timeout: .seconds(60))
        try #require(result.status == 0, "pkcs11-tool \(arguments): \(result.errorText)")
        return result
    }

    /// Generates a key pair in the token (never extractable).
    func generate(_ token: String, keyType: String = "EC:prime256v1", label: String, id: String) throws {
        try tool(token, ["--keypairgen", "--key-type", keyType, "--label", label, "--id", id, "--usage-sign"])
    }

    /// Imports a private key (PKCS #8 PEM, marked sensitive) and its public key (SPKI DER).
    func importKey(_ token: String, privatePEM: String, publicDER: [UInt8], label: String, id: String) throws {
        let key = try directory.file("import-\(label).pem", privatePEM)
        let pub = try directory.file("import-\(label).pub.der", publicDER)
        defer { unlink(key) }
        try tool(token, ["--write-object", key, "--type", "privkey", "--id", id, "--label", label, "--sensitive", "--usage-sign"])
        try tool(token, ["--write-object", pub, "--type", "pubkey", "--id", id, "--label", label])
    }
}
