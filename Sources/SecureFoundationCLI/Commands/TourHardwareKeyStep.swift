import Foundation
import HardwareKeys
import NIOCore
import PinnedTLS
import SecureFoundation
import X509

extension Tour {
    /// A TLS server whose private key stays in a PKCS #11 token (SoftHSM2, a token kept in files
    /// under the tour's directory): the key is generated in the token, certified by a device CA,
    /// and every handshake signature is made by the token. Skipped with a message where SoftHSM2
    /// or pkcs11-tool is not installed.
    mutating func hardwareKeyStep() throws {
        say("Hardware keys: a TLS server whose private key never leaves a PKCS #11 token")
        let module = "/usr/lib/softhsm/libsofthsm2.so"
        guard FileManager.default.fileExists(atPath: module), let util = which("softhsm2-util"), let tool = which("pkcs11-tool") else {
            note("SoftHSM2 or pkcs11-tool is not installed: skipping (Debian: apt-get install softhsm2 opensc)")
            return
        }
        // A throw-away token under the tour's directory; its PIN is fixed and given to the token
        // tools as an argument, which a real token's PIN never is (--pin-file, docs/HARDWARE-KEYS.md).
        let directory = root + "/config/softhsm"
        try SecureFile.ensurePrivateDirectory(directory)
        try SecureFile.ensurePrivateDirectory(directory + "/tokens")
        let configuration = directory + "/softhsm2.conf"
        try SecureFile.writeAtomically(Array("directories.tokendir = \(directory)/tokens\nobjectstore.backend = file\nlog.level = ERROR\n".utf8),
                                       to: configuration)
        let environment = ["SOFTHSM2_CONF": configuration]
        // The module reads its configuration when this process loads it (below), not before.
        setenv("SOFTHSM2_CONF", configuration, 1)
        let pin = "4711"
        let made = try runTool(util, ["--init-token", "--free", "--label", "tour", "--so-pin", "0000", "--pin", pin], environment: environment)
        try expect(made.status == 0, "softhsm2-util --init-token failed: \(made.error)")
        let generated = try runTool(tool, ["--module", module, "--token-label", "tour", "--login", "--pin", pin, "--keypairgen",
                                           "--key-type", "EC:prime256v1", "--label", "web", "--id", "01", "--usage-sign"],
                                    environment: environment)
        try expect(generated.status == 0, "pkcs11-tool --keypairgen failed: \(generated.error)")

        let uri = try PKCS11URI("pkcs11:token=tour;object=web;type=private")
        let key = try PKCS11PrivateKey(uri: uri, modulePath: module, refusing: [dataDirectory], pin: .secret(SecretBytes(utf8: pin)))
        let loaded = try PKCS11Module.load(path: module, refusing: [dataDirectory])
        let listed = try loaded.keys(matching: uri, pin: .secret(SecretBytes(utf8: pin)))
        try expect(listed.count == 1 && listed[0].sensitive == true && listed[0].extractable == false,
                   "the token's key is not listed as sensitive and not extractable: \(listed)")
        note("\(listed[0].uri): \(listed[0].keyType), sensitive, not extractable")

        // A device CA (in memory here; `tls ca init` keeps it in the keychain) certifies the
        // token's public key, read from the token.
        let authority = try CertificateAuthority.createRoot(commonName: "Tour device CA")
        let leaf = try authority.issue(publicKey: key.publicKey, names: ["localhost"], usage: [.server])
        guard let identity = TLSIdentity(chain: [leaf, authority.certificate], tokenKey: key) else {
            throw TourFailure("the certificate does not match the token's key")
        }
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([authority.certificate]))])
        let tokens = directory + "/tokens"
        let answers = try Tour.blocking { () async throws -> (String, String) in
            let server = try await PinnedTLSServer.bind(identity: identity, handshakeTimeout: .seconds(30))
            let serving = Task.detached {
                try await server.run { connection in
                    try await connection.channel.executeThenClose { _, outbound in
                        try await outbound.write(ByteBuffer(string: "signed by the token\n"))
                    }
                }
            }
            defer { serving.cancel() }
            func fetch() async throws -> String {
                let client = try PinnedTLSClient(policy: policy)
                let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost", timeout: .seconds(30))
                return try await connection.channel.executeThenClose { inbound, _ in
                    var text = ""
                    for try await var buffer in inbound {
                        text += buffer.readString(length: buffer.readableBytes) ?? ""
                        if text.contains("\n") || text.utf8.count > 1024 { break }
                    }
                    return text
                }
            }
            let first = try await fetch()
            // The token taken away: its files removed (a card pulled out, an HSM unreachable).
            try FileManager.default.removeItem(atPath: tokens)
            let second: String
            do {
                second = "answered: " + (try await fetch())
            } catch {
                second = "\(error)"
            }
            await server.close()
            return (first, second)
        }
        try expect(answers.0 == "signed by the token\n", "the handshake with the token's key did not complete: \(answers.0)")
        proves("TLS 1.3 handshake verified against the device CA; the signature came from the token, the key's bytes never entered this process")
        try expect(!answers.1.hasPrefix("answered"), "the server still answered with its token gone: \(answers.1)")
        let failure = key.lastFailure.map { "\($0)" } ?? "no failure recorded"
        try expect(failure.contains("CKR_"), "the token's failure was not reported: \(failure)")
        proves("token taken away: the next handshake fails (\(failure.split(separator: ":").prefix(2).joined(separator: ":"))), nothing signs with a software key")
    }
}
