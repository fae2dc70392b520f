import Foundation
import TestSupport
import Testing

/// One machine for the command line: a data directory with a vault (passcode in a file) and
/// a device key, and the environment its commands run in.
class CLIMachine {
    let scratch: TemporaryDirectory
    let passcode: String
    let cli: String
    let environment: [String: String]
    var common: [String] { ["--home", scratch.path("home"), "--device-key", scratch.path("device.key")] }
    var inbox: String { scratch.path("home") + "/share-inbox" }

    init(prefix: String, passcode text: String, environment extra: (TemporaryDirectory) throws -> [String: String]) throws {
        scratch = try TemporaryDirectory(prefix: prefix)
        passcode = try scratch.file("passcode.txt", text)
        cli = try BuiltProducts.executable("securefoundation")
        environment = try extra(scratch).merging(["XDG_CONFIG_HOME": scratch.path("config"), "SECUREFOUNDATION_AGENT": "off"]) { $1 }
        let created = try run(["vault", "init"], unlocked: true, extra: [])
        try #require(created.status == 0, "vault init: \(created.errorText)")
    }

    /// Runs a command of this machine (with the passcode when `unlocked`), `extra` appended.
    @discardableResult
    func run(_ arguments: [String], unlocked: Bool, extra: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run(cli, arguments + common + (unlocked ? ["--passcode-file", passcode] : []) + extra,
                             environment: environment, timeout: .seconds(300))
    }

    /// Starts a server of this machine and returns it with the port it printed.
    func start(_ arguments: [String]) throws -> (ChildProcess.Running, String) {
        let process = try ChildProcess.start(cli, arguments + common, environment: environment)
        guard let line = process.waitForLine(startingWith: "listening on ", timeout: .seconds(60)),
              let colon = line.lastIndex(of: ":") else {
            process.kill()
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "did not start: " + String(decoding: process.stderr, as: UTF8.self)])
        }
        return (process, String(line[line.index(after: colon)...].prefix(while: \.isNumber)))
    }

    func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }
}

/// A machine with the token directory of a SoftHSM2 of its own.
final class TokenMachine: CLIMachine {
    let hsm: SoftHSM
    var pinFile: String { scratch.path("pin") }
    var token: [String] { ["--module", SoftHSM.module, "--pin-file", pinFile] }

    init() throws {
        let hsm = try SoftHSM()
        self.hsm = hsm
        try super.init(prefix: "sf-token-machine", passcode: "2468\n") { scratch in
            _ = try scratch.file("pin", SoftHSM.pin + "\n")
            return hsm.environment
        }
    }

    @discardableResult
    func run(_ arguments: [String], unlocked: Bool = false, withToken: Bool = false) throws -> ChildProcess.Result {
        try run(arguments, unlocked: unlocked, extra: withToken ? token : [])
    }

    /// The token's private-key objects as pkcs11-tool lists them (logged in).
    func privateKeyFlags(_ tokenLabel: String, object: String) throws -> [String] {
        let listing = try hsm.tool(tokenLabel, ["--list-objects", "--type", "privkey", "--label", object]).text
        let access = try #require(listing.split(separator: "\n").first { $0.contains("Access:") }, "\(listing)")
        return access.split(separator: ":", maxSplits: 1)[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }
}

/// `tls ca init --key pkcs11:…` and the commands that sign with such an authority, and sharing
/// with a device key in a token: real processes, SoftHSM2, openssl.
@Suite("command line: device CA and sharing identity in a PKCS #11 token", .serialized)
struct TokenAuthorityCLITests {
    @Test("tls ca init --key: root, leaves and CRL signed in the token (openssl verifies), tls serve checked by s_client; the key private, sensitive, not extractable")
    func authorityInToken() throws {
        guard SoftHSM.available() else { return }
        let openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
        let machine = try TokenMachine()
        try machine.hsm.makeToken("ca")
        try machine.hsm.generate("ca", label: "root", id: "01")
        try machine.hsm.generate("ca", label: "web", id: "02")

        // A URI naming the module or the PIN source is refused: the record names the key only.
        let withModule = try machine.run(["tls", "ca", "init", "--key", "pkcs11:token=ca;object=root?module-path=\(SoftHSM.module)",
                                          "--pin-file", machine.pinFile])
        #expect(withModule.status == 64, "\(withModule.errorText)")
        #expect(withModule.errorText.contains("names the token and the key only"), "\(withModule.errorText)")

        // No passcode: the record holds no secret and is sealed under always.
        let created = try machine.run(["tls", "ca", "init", "--common-name", "Token devices CA", "--key", "pkcs11:token=ca;object=root"],
                                      withToken: true)
        #expect(created.status == 0, "\(created.errorText)")
        #expect(created.text.hasPrefix("label: ca\nsubject: CN=Token devices CA\n"), "\(created.text)")
        let flags = try machine.privateKeyFlags("ca", object: "root")
        #expect(flags.contains("sensitive") && flags.contains("never extractable") && !flags.contains("extractable"), "\(flags)")
        // Private (CKA_PRIVATE): without logging in, the token does not even list it.
        let anonymous = try machine.hsm.tool("ca", ["--list-objects"], login: false).text
        #expect(!anonymous.contains("Private Key Object"), "\(anonymous)")

        // tls keys: the authority's key is listed where it is, never as a keychain key.
        let keys = try machine.run(["tls", "keys"])
        #expect(keys.text.contains("keychain\tidentity\tca\talways\tkey at pkcs11:token=ca;object=root\n"), "\(keys.text)")

        let ca = machine.scratch.path("ca.pem")
        #expect(try machine.run(["tls", "export", "ca", "-o", ca]).status == 0)

        // Without the module the authority is not used (and nothing falls back to a software key).
        let noModule = try machine.run(["tls", "issue", "localhost", "--server"], unlocked: true)
        #expect(noModule.status == 64, "\(noModule.errorText)")
        #expect(noModule.errorText.contains("--module"), "\(noModule.errorText)")

        // A leaf whose key is in the token too, issued by the token CA.
        let leaf = machine.scratch.path("leaf.pem")
        let issued = try machine.run(["tls", "issue", "localhost", "--server", "--key", "pkcs11:token=ca;object=web", "-o", leaf],
                                     withToken: true)
        #expect(issued.status == 0, "\(issued.errorText)")
        let verified = try ChildProcess.run(openssl, ["verify", "-CAfile", ca, leaf])
        #expect(verified.status == 0 && verified.text.contains(": OK"), "\(verified.text)\(verified.errorText)")
        // A software leaf (key made here, sealed whenUnlocked) from the same authority.
        let software = try machine.run(["tls", "issue", "device-2.example", "--client"], unlocked: true, withToken: true)
        #expect(software.status == 0, "\(software.errorText)")

        // tls serve with the token leaf; openssl s_client verifies it against the token CA.
        let (server, port) = try machine.start(["tls", "serve", "--identity", "localhost", "--key", "pkcs11:token=ca;object=web",
                                                "--port", "0", "--max-connections", "1"] + machine.token)
        defer { server.kill() }
        let client = try ChildProcess.run(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost",
                                                    "-CAfile", ca, "-verify_return_error", "-ign_eof"],
                                          stdin: .text("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), timeout: .seconds(60))
        #expect(client.status == 0, "\(client.errorText)")
        #expect(client.text.contains("Verify return code: 0 (ok)"), "\(client.text)")
        server.kill()

        // Revocation list signed in the token; openssl checks its signature.
        let revoked = try machine.run(["tls", "revoke", "device-2.example"], withToken: true)
        #expect(revoked.status == 0, "\(revoked.errorText)")
        let crl = machine.scratch.path("crl.pem")
        let exported = try machine.run(["tls", "crl", "-o", crl], withToken: true)
        #expect(exported.status == 0, "\(exported.errorText)")
        let crlCheck = try ChildProcess.run(openssl, ["crl", "-in", crl, "-CAfile", ca, "-verify", "-noout", "-crlnumber"])
        #expect(crlCheck.status == 0, "\(crlCheck.errorText)")
        #expect((crlCheck.text + crlCheck.errorText).contains("verify OK"), "\(crlCheck.text)\(crlCheck.errorText)")
        #expect(crlCheck.text.contains("crlNumber=0x02"), "\(crlCheck.text)")

        // The token gone: tls issue, revoke and crl fail naming the module's return value;
        // nothing is stored (the listing is the same; the list, signed again once the token is
        // back, carries the next number and the same entries).
        let listed = try machine.run(["tls", "list"])
        let saved = machine.scratch.path("tokens-saved")
        try FileManager.default.copyItem(atPath: machine.hsm.tokens, toPath: saved)
        try FileManager.default.removeItem(atPath: machine.hsm.tokens)
        let pub = try machine.scratch.file("pub.pem", try ChildProcess.run(openssl, ["pkey", "-pubout"],
            stdin: .bytes(try ChildProcess.run(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]).stdout)).text)
        let gone = try machine.run(["tls", "issue", "three.example", "--public-key", pub, "-o", machine.scratch.path("three.pem")],
                                   withToken: true)
        #expect(gone.status != 0)
        #expect(gone.errorText.contains("CKR_"), "\(gone.errorText)")
        #expect(!FileManager.default.fileExists(atPath: machine.scratch.path("three.pem")))
        let goneRevoke = try machine.run(["tls", "revoke", "localhost"], withToken: true)
        #expect(goneRevoke.status != 0)
        #expect(goneRevoke.errorText.contains("CKR_"), "\(goneRevoke.errorText)")
        #expect(try machine.run(["tls", "list"]).text == listed.text)
        try FileManager.default.moveItem(atPath: saved, toPath: machine.hsm.tokens)
        let again = try machine.run(["tls", "crl", "-o", crl], withToken: true)
        #expect(again.status == 0, "\(again.errorText)")
        let text = try ChildProcess.run(openssl, ["crl", "-in", crl, "-noout", "-text"]).text
        #expect(text.contains("X509v3 CRL Number: \n                3\n"), "\(text)")
        #expect(text.components(separatedBy: "Serial Number:").count == 2, "\(text)")
    }

    @Test("sharing: a device whose key is in a token sends and receives over mutual TLS; with the token gone the connection fails cleanly")
    func sharingWithTokenKey() throws {
        guard SoftHSM.available() else { return }
        let alpha = try TokenMachine(), bravo = try TokenMachine()
        try bravo.hsm.makeToken("share")
        try bravo.hsm.generate("share", label: "device", id: "01")

        let created = try alpha.run(["share", "init", "--new-group", "--name", "alpha"], unlocked: true)
        #expect(created.status == 0, "\(created.errorText)")
        let invitation = alpha.scratch.path("invite.json")
        #expect(try alpha.run(["share", "invite", "-o", invitation], unlocked: true).status == 0)
        let request = bravo.scratch.path("request.json")
        let joined = try bravo.run(["share", "join", invitation, "--name", "bravo", "--key", "pkcs11:token=share;object=device",
                                    "-o", request], unlocked: true, withToken: true)
        #expect(joined.status == 0, "\(joined.errorText)")
        let certificate = alpha.scratch.path("bravo.pem")
        let approved = try alpha.run(["share", "approve", request, "-o", certificate], unlocked: true)
        #expect(approved.status == 0, "\(approved.errorText)")
        let completed = try bravo.run(["share", "join", "--certificate", certificate], unlocked: true, withToken: true)
        #expect(completed.status == 0, "\(completed.errorText)")
        #expect(completed.text.contains("device: bravo"))
        // No software key is kept for bravo: no pending key, the identity names the token key.
        let items = try bravo.run(["tls", "list"], unlocked: true).text
        #expect(!items.contains("share.pending"), "\(items)")

        // bravo (token key) sends to alpha: bravo's client certificate is signed in the token.
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let photo = try bravo.scratch.file("photo.jpg", bytes)
        let (alphaServer, alphaPort) = try alpha.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", alpha.passcode])
        defer { alphaServer.kill() }
        let sent = try bravo.run(["share", "send", photo, "--to", "127.0.0.1:\(alphaPort)", "--device", "alpha"],
                                 unlocked: true, withToken: true)
        #expect(sent.status == 0, "\(sent.errorText)")
        #expect(alpha.names(alpha.inbox) == ["photo.jpg"])
        // Without the module, bravo's key cannot be opened: no connection, nothing sent.
        let noModule = try bravo.run(["share", "send", photo, "--to", "127.0.0.1:\(alphaPort)"], unlocked: true)
        #expect(noModule.status != 0)
        #expect(noModule.errorText.contains("--module"), "\(noModule.errorText)")

        // alpha sends to bravo's server: bravo's server handshake is signed in the token.
        let (bravoServer, bravoPort) = try bravo.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", bravo.passcode]
                                                       + bravo.token)
        defer { bravoServer.kill() }
        let note = try alpha.scratch.file("note.txt", "to bravo\n")
        let toBravo = try alpha.run(["share", "send", note, "--to", "127.0.0.1:\(bravoPort)", "--device", "bravo"], unlocked: true)
        #expect(toBravo.status == 0, "\(toBravo.errorText)")
        #expect(bravo.names(bravo.inbox) == ["note.txt"])

        // The token gone: bravo's server cannot sign its handshake; alpha's send fails, nothing is stored.
        try FileManager.default.removeItem(atPath: bravo.hsm.tokens)
        var failed: ChildProcess.Result?
        for _ in 0..<3 {
            let attempt = try alpha.run(["share", "send", note, "--to", "127.0.0.1:\(bravoPort)", "--device", "bravo"], unlocked: true)
            if attempt.status != 0 { failed = attempt; break }
        }
        let failure = try #require(failed, "bravo's server still completed handshakes without its token")
        #expect(failure.status != 0 && failure.status < 128, "\(failure.errorText)")
        #expect(bravo.names(bravo.inbox) == ["note.txt"])
        // And bravo cannot connect at all: its key does not open.
        let goneSend = try bravo.run(["share", "send", photo, "--to", "127.0.0.1:\(alphaPort)"], unlocked: true, withToken: true)
        #expect(goneSend.status != 0)
        #expect(goneSend.errorText.contains("CKR_") || goneSend.errorText.contains("no token matches"), "\(goneSend.errorText)")
        #expect(alpha.names(alpha.inbox) == ["photo.jpg"])
    }

    @Test("share init --new-group --key and share join --connect --key: both devices' keys in tokens, enrolment and a transfer over loopback")
    func networkJoinWithTokenKeys() throws {
        guard SoftHSM.available() else { return }
        let alpha = try TokenMachine(), bravo = try TokenMachine()
        try alpha.hsm.makeToken("share")
        try alpha.hsm.generate("share", keyType: "EC:secp384r1", label: "device", id: "01")
        try bravo.hsm.makeToken("share")
        try bravo.hsm.generate("share", label: "device", id: "01")

        let created = try alpha.run(["share", "init", "--new-group", "--name", "alpha", "--key", "pkcs11:token=share;object=device"],
                                    unlocked: true, withToken: true)
        #expect(created.status == 0, "\(created.errorText)")
        let invitation = alpha.scratch.path("invite.json")
        // The inviter's server signs its handshake in alpha's token.
        let (inviter, port) = try alpha.start(["share", "invite", "-o", invitation, "--listen", "127.0.0.1:0", "--minutes", "5",
                                               "--passcode-file", alpha.passcode] + alpha.token)
        defer { inviter.kill() }
        let joined = try bravo.run(["share", "join", invitation, "--name", "bravo", "--connect", "127.0.0.1:\(port)",
                                    "--key", "pkcs11:token=share;object=device"], unlocked: true, withToken: true)
        #expect(joined.status == 0, "\(joined.errorText)")
        #expect(joined.text.hasPrefix("device: bravo\ndevice pin: sha256/"), "\(joined.text)")
        #expect(try inviter.wait(timeout: .seconds(120)).status == 0)

        let (server, serverPort) = try alpha.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", alpha.passcode]
                                                   + alpha.token)
        defer { server.kill() }
        let note = try bravo.scratch.file("note.txt", "joined with a token key\n")
        let sent = try bravo.run(["share", "send", note, "--to", "127.0.0.1:\(serverPort)", "--device", "alpha"],
                                 unlocked: true, withToken: true)
        #expect(sent.status == 0, "\(sent.errorText)")
        #expect(alpha.names(alpha.inbox) == ["note.txt"])
    }

    @Test("share init --new-group --key pkcs11:… --root-key pkcs11:…: the group root signs enrolments in the token (openssl verifies); without the module 64, the token gone fails; nothing written")
    func groupRootInToken() throws {
        guard SoftHSM.available() else { return }
        let openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
        let alpha = try TokenMachine(), bravo = try TokenMachine()
        try alpha.hsm.makeToken("share")
        try alpha.hsm.generate("share", label: "device", id: "01")
        try alpha.hsm.generate("share", keyType: "EC:secp384r1", label: "root", id: "02")

        let created = try alpha.run(["share", "init", "--new-group", "--name", "alpha", "--key", "pkcs11:token=share;object=device",
                                     "--root-key", "pkcs11:token=share;object=root"], unlocked: true, withToken: true)
        #expect(created.status == 0, "\(created.errorText)")
        let keys = try alpha.run(["tls", "keys"], unlocked: true).text
        #expect(keys.split(separator: "\n").contains { $0.contains("\tshare.ca\t") && $0.hasSuffix("pkcs11:token=share;object=root") }, "\(keys)")
        #expect(keys.split(separator: "\n").contains { $0.contains("\tshare.device\t") && $0.hasSuffix("pkcs11:token=share;object=device") },
                "\(keys)")
        #expect(!(try alpha.run(["tls", "list"], unlocked: true).text.contains("share.pending")))

        let invitation = alpha.scratch.path("invite.json")
        // alpha's device key is in the token too: every command that opens the membership needs it.
        let invited = try alpha.run(["share", "invite", "-o", invitation], unlocked: true, withToken: true)
        #expect(invited.status == 0, "\(invited.errorText)")
        let request = bravo.scratch.path("request.json")
        let joined = try bravo.run(["share", "join", invitation, "--name", "bravo", "-o", request], unlocked: true)
        #expect(joined.status == 0, "\(joined.errorText)")

        // Without the module the root's key is not opened: a usage error that names --module,
        // no certificate written (and nothing signed by a software key instead).
        let certificate = alpha.scratch.path("bravo.pem")
        let noModule = try alpha.run(["share", "approve", request, "-o", certificate], unlocked: true)
        #expect(noModule.status == 64, "\(noModule.errorText)")
        #expect(noModule.errorText.contains("--module"), "\(noModule.errorText)")
        #expect(!FileManager.default.fileExists(atPath: certificate))

        let approved = try alpha.run(["share", "approve", request, "-o", certificate], unlocked: true, withToken: true)
        #expect(approved.status == 0, "\(approved.errorText)")
        let root = alpha.scratch.path("root.pem")
        #expect(try alpha.run(["tls", "export", "share.ca", "-o", root]).status == 0)
        let verified = try ChildProcess.run(openssl, ["verify", "-CAfile", root, certificate])
        #expect(verified.status == 0 && verified.text.contains(": OK"), "\(verified.text)\(verified.errorText)")
        let completed = try bravo.run(["share", "join", "--certificate", certificate], unlocked: true)
        #expect(completed.status == 0, "\(completed.errorText)")

        // bravo sends to alpha, whose server handshake is signed by alpha's device key in the token.
        let (server, port) = try alpha.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", alpha.passcode] + alpha.token)
        defer { server.kill() }
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let photo = try bravo.scratch.file("photo.jpg", bytes)
        let sent = try bravo.run(["share", "send", photo, "--to", "127.0.0.1:\(port)", "--device", "alpha"], unlocked: true)
        #expect(sent.status == 0, "\(sent.errorText)")
        #expect(alpha.names(alpha.inbox) == ["photo.jpg"])

        // The token gone: the next approval fails with the token's error, no certificate written.
        let second = alpha.scratch.path("invite2.json")
        #expect(try alpha.run(["share", "invite", "-o", second], unlocked: true, withToken: true).status == 0)
        let charlie = try TokenMachine()
        let request2 = charlie.scratch.path("request.json")
        #expect(try charlie.run(["share", "join", second, "--name", "charlie", "-o", request2], unlocked: true).status == 0)
        server.kill()
        try FileManager.default.removeItem(atPath: alpha.hsm.tokens)
        let charlieCertificate = alpha.scratch.path("charlie.pem")
        let gone = try alpha.run(["share", "approve", request2, "-o", charlieCertificate], unlocked: true, withToken: true)
        #expect(gone.status != 0 && gone.status < 128, "\(gone.errorText)")
        #expect(gone.errorText.contains("CKR_") || gone.errorText.contains("no token matches"), "\(gone.errorText)")
        #expect(!FileManager.default.fileExists(atPath: charlieCertificate))
    }
}
