import Foundation
import TestSupport
import Testing

/// A machine whose keys are made in a software TPM: the TCTI reaches its commands through
/// `$TPM2TOOLS_TCTI`.
final class TPMMachine: CLIMachine {
    init(tpm: SoftwareTPM) throws {
        try super.init(prefix: "sf-tpm-machine", passcode: "1357\n") { _ in ["TPM2TOOLS_TCTI": tpm.tcti] }
    }

    @discardableResult
    func run(_ arguments: [String], unlocked: Bool = false) throws -> ChildProcess.Result {
        try run(arguments, unlocked: unlocked, extra: [])
    }
}

/// `tls ca init --key tpm` and the commands that sign with such an authority, and sharing with
/// the device keys and the group root's key made in the TPM: real processes, swtpm, openssl.
@Suite("command line: device CA and sharing keys in the TPM", .serialized)
struct TPMAuthorityCLITests {
    @Test("tls ca init --key tpm: root, leaf and CRL signed in the TPM (openssl verifies); tls keys shows where; the TPM stopped fails, nothing stored")
    func authorityInTPM() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-ca")
        guard let tpm = try SoftwareTPM.orSkip(root: try directory.directory("tpm")) else { return }
        defer { tpm.stop() }
        let openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
        let machine = try TPMMachine(tpm: tpm)

        let badPCR = try machine.run(["tls", "ca", "init", "--key", "tpm:pcrs=24"])
        #expect(badPCR.status == 64, "\(badPCR.errorText)")
        let created = try machine.run(["tls", "ca", "init", "--common-name", "TPM devices CA", "--key", "tpm"])
        #expect(created.status == 0, "\(created.errorText)")
        #expect(created.text.hasPrefix("label: ca\nsubject: CN=TPM devices CA\n"), "\(created.text)")
        let keys = try machine.run(["tls", "keys"])
        #expect(keys.text.split(separator: "\n").contains { $0.hasPrefix("tpm\tidentity\tca\talways\ttpm:name=") }, "\(keys.text)")

        let ca = machine.scratch.path("ca.pem")
        #expect(try machine.run(["tls", "export", "ca", "-o", ca]).status == 0)
        // A leaf for a key made here (sealed whenUnlocked), certified in the TPM.
        let issued = try machine.run(["tls", "issue", "device-2.example", "--client"], unlocked: true)
        #expect(issued.status == 0, "\(issued.errorText)")
        let leaf = machine.scratch.path("leaf.pem")
        #expect(try machine.run(["tls", "export", "device-2.example", "-o", leaf]).status == 0)
        let verified = try ChildProcess.run(openssl, ["verify", "-CAfile", ca, leaf])
        #expect(verified.status == 0 && verified.text.contains(": OK"), "\(verified.text)\(verified.errorText)")

        // A revocation list signed in the TPM; openssl checks its signature, and the leaf is revoked by it.
        let revoked = try machine.run(["tls", "revoke", "device-2.example"])
        #expect(revoked.status == 0, "\(revoked.errorText)")
        let crl = machine.scratch.path("crl.pem")
        let exported = try machine.run(["tls", "crl", "-o", crl])
        #expect(exported.status == 0, "\(exported.errorText)")
        let crlCheck = try ChildProcess.run(openssl, ["crl", "-in", crl, "-CAfile", ca, "-verify", "-noout"])
        #expect(crlCheck.status == 0 && (crlCheck.text + crlCheck.errorText).contains("verify OK"), "\(crlCheck.text)\(crlCheck.errorText)")
        let checked = try ChildProcess.run(openssl, ["verify", "-crl_check", "-CAfile", ca, "-CRLfile", crl, leaf])
        #expect(checked.status != 0 && (checked.text + checked.errorText).contains("certificate revoked"), "\(checked.text)\(checked.errorText)")

        // The TPM stopped: issuing fails with the TPM's error (no software fallback), nothing is stored.
        let listed = try machine.run(["tls", "list"])
        tpm.stop()
        let gone = try machine.run(["tls", "issue", "three.example", "--client"], unlocked: true)
        // HardwareKeyError.tpmUnreachable, carried by IdentityError.hardwareKey: 74 like any unreachable device.
        #expect(gone.status == 74, "\(gone.errorText)")
        #expect(gone.errorText.contains("TPM"), "\(gone.errorText)")
        let goneCRL = try machine.run(["tls", "crl", "-o", machine.scratch.path("crl2.pem")])
        #expect(goneCRL.status == 74, "\(goneCRL.errorText)")
        #expect(!FileManager.default.fileExists(atPath: machine.scratch.path("crl2.pem")))
        #expect(try machine.run(["tls", "list"]).text == listed.text)
    }

    @Test("share init --new-group --key tpm --root-key tpm, share join --key tpm: enrolment signed by the root in the TPM, a transfer each way")
    func sharingWithTPMKeys() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-share")
        guard let tpm = try SoftwareTPM.orSkip(root: try directory.directory("tpm")) else { return }
        defer { tpm.stop() }
        let openssl = try #require(ChildProcess.which("openssl"), "openssl is needed")
        let alpha = try TPMMachine(tpm: tpm), bravo = try TPMMachine(tpm: tpm)

        let rootWithoutGroup = try alpha.run(["share", "init", "--invitation", "x.json", "--name", "alpha", "--root-key", "tpm"], unlocked: true)
        #expect(rootWithoutGroup.status == 64, "\(rootWithoutGroup.errorText)")
        let created = try alpha.run(["share", "init", "--new-group", "--name", "alpha", "--key", "tpm", "--root-key", "tpm:pcrs=23"],
                                    unlocked: true)
        #expect(created.status == 0, "\(created.errorText)")
        // Both keys are TPM keys: the root (bound to PCR 23) and this device's.
        let keys = try alpha.run(["tls", "keys"], unlocked: true).text
        #expect(keys.split(separator: "\n").contains { $0.contains("\tshare.ca\t") && $0.contains("tpm:name=") && $0.hasSuffix(";pcrs=23") },
                "\(keys)")
        #expect(keys.split(separator: "\n").contains { $0.contains("\tshare.device\t") && $0.contains("tpm:name=") }, "\(keys)")

        let invitation = alpha.scratch.path("invite.json")
        #expect(try alpha.run(["share", "invite", "-o", invitation], unlocked: true).status == 0)
        let request = bravo.scratch.path("request.json")
        let joined = try bravo.run(["share", "join", invitation, "--name", "bravo", "--key", "tpm", "-o", request], unlocked: true)
        #expect(joined.status == 0, "\(joined.errorText)")
        let certificate = alpha.scratch.path("bravo.pem")
        let approved = try alpha.run(["share", "approve", request, "-o", certificate], unlocked: true)
        #expect(approved.status == 0, "\(approved.errorText)")
        let completed = try bravo.run(["share", "join", "--certificate", certificate], unlocked: true)
        #expect(completed.status == 0, "\(completed.errorText)")
        #expect(completed.text.contains("device: bravo"))
        let bravoKeys = try bravo.run(["tls", "keys"], unlocked: true).text
        #expect(bravoKeys.split(separator: "\n").contains { $0.contains("\tshare.device\t") && $0.contains("tpm:name=") }, "\(bravoKeys)")
        #expect(!bravoKeys.contains("share.pending"), "\(bravoKeys)")

        // bravo's certificate was signed by the root in the TPM: openssl checks it against the root.
        let root = alpha.scratch.path("root.pem")
        #expect(try alpha.run(["tls", "export", "share.ca", "-o", root]).status == 0)
        let verified = try ChildProcess.run(openssl, ["verify", "-CAfile", root, certificate])
        #expect(verified.status == 0 && verified.text.contains(": OK"), "\(verified.text)\(verified.errorText)")

        // bravo sends to alpha and alpha to bravo: each side's handshake is signed in the TPM.
        let photo = try bravo.scratch.file("photo.jpg", (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        let (alphaServer, alphaPort) = try alpha.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", alpha.passcode])
        defer { alphaServer.kill() }
        let sent = try bravo.run(["share", "send", photo, "--to", "127.0.0.1:\(alphaPort)", "--device", "alpha"], unlocked: true)
        #expect(sent.status == 0, "\(sent.errorText)")
        #expect(alpha.names(alpha.inbox) == ["photo.jpg"])
        let (bravoServer, bravoPort) = try bravo.start(["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", bravo.passcode])
        defer { bravoServer.kill() }
        let note = try alpha.scratch.file("note.txt", "to bravo\n")
        let toBravo = try alpha.run(["share", "send", note, "--to", "127.0.0.1:\(bravoPort)", "--device", "bravo"], unlocked: true)
        #expect(toBravo.status == 0, "\(toBravo.errorText)")
        #expect(bravo.names(bravo.inbox) == ["note.txt"])

        // The root is bound to PCR 23: once it is extended, the root no longer signs (a new
        // invitation's approval fails with the policy's error), and nothing falls back to software.
        #expect(try tpm.tool("tpm2_pcrextend", ["23:sha256=" + String(repeating: "ab", count: 32)]) == 0)
        let second = alpha.scratch.path("invite2.json")
        let invited = try alpha.run(["share", "invite", "-o", second], unlocked: true)
        #expect(invited.status == 0, "\(invited.errorText)")
        let charlie = try TPMMachine(tpm: tpm)
        let request2 = charlie.scratch.path("request.json")
        #expect(try charlie.run(["share", "join", second, "--name", "charlie", "-o", request2], unlocked: true).status == 0)
        let refused = try alpha.run(["share", "approve", request2, "-o", alpha.scratch.path("charlie.pem")], unlocked: true)
        #expect(refused.status != 0 && refused.status < 128, "\(refused.errorText)")
        #expect(refused.errorText.contains("PCR"), "\(refused.errorText)")
        #expect(!FileManager.default.fileExists(atPath: alpha.scratch.path("charlie.pem")))
    }
}
