import Foundation
import Testing

/// `securefoundation tls ca init`, `issue`, `list`, `import`, `export`, `delete`: exit codes and outputs.
@Suite("tls identity commands")
struct TLSIdentityCLITests {
    final class Home {
        let scratch: ScratchDirectory
        let passcode: String
        init() throws {
            scratch = try ScratchDirectory()
            passcode = try scratch.file("passcode.txt", Array("2468\n".utf8))
        }
        var path: String { scratch.path }

        func run(_ arguments: [String], stdin: [UInt8] = [], unlocked: Bool = false) throws -> CLIRunner.Result {
            var all = arguments + ["--home", path + "/home", "--device-key", path + "/device.key"]
            if unlocked { all += ["--passcode-file", passcode] }
            return try CLIRunner.run(all, stdin: stdin, environment: ["XDG_CONFIG_HOME": path + "/config"], directory: path)
        }

        func initVault() throws {
            let result = try CLIRunner.run(["vault", "init", "--passcode-file", passcode, "--home", path + "/home",
                                            "--device-key", path + "/device.key"],
                                           environment: ["XDG_CONFIG_HOME": path + "/config"])
            #expect(result.status == 0, "\(result.stderr)")
        }

        func read(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))) }
    }

    static let openssl = CLIRunner.which("openssl")

    @Test("ca init, issue, list, export, delete: outputs and exit codes; openssl verifies what was issued")
    func caIssueListExportDelete() throws {
        let home = try Home()
        try home.initVault()

        // Locked, nothing with a key can be made: 36, and the hint.
        let locked = try home.run(["tls", "ca", "init"])
        #expect(locked.status == 36)
        #expect(locked.stderr.contains("--passcode-file"))

        let created = try home.run(["tls", "ca", "init", "--common-name", "Test devices CA"], unlocked: true)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.text.hasPrefix("label: ca\nsubject: CN=Test devices CA\nissuer: CN=Test devices CA\nexpires: "))
        #expect(created.text.contains("\npin: sha256/"))
        let again = try home.run(["tls", "ca", "init"], unlocked: true)
        #expect(again.status == 45)
        #expect(again.stderr.contains("--replace"))

        let issued = try home.run(["tls", "issue", "device-1.example.com", "--name", "10.0.0.5", "--server"], unlocked: true)
        #expect(issued.status == 0, "\(issued.stderr)")
        #expect(issued.text.hasPrefix("label: device-1.example.com\nsubject: CN=device-1.example.com\nissuer: CN=Test devices CA\n"))
        let lockedIssue = try home.run(["tls", "issue", "device-2"])
        #expect(lockedIssue.status == 36)
        let badName = try home.run(["tls", "issue", "not a name"])
        #expect(badName.status == 1)
        #expect(badName.stderr.contains("invalid name"))
        let noCA = try home.run(["tls", "issue", "device-3", "--ca", "missing"])
        #expect(noCA.status == 44)

        // Listing: certificates show while locked, identities with the passcode.
        let listLocked = try home.run(["tls", "list"])
        #expect(listLocked.status == 0)
        #expect(listLocked.text.split(separator: "\n").map { $0.split(separator: "\t").prefix(3).joined(separator: " ") }
            == ["certificate ca always", "certificate device-1.example.com always"])
        #expect(listLocked.stderr.contains("2 keychain item(s) could not be read"))
        let list = try home.run(["tls", "list"], unlocked: true)
        #expect(list.text.split(separator: "\n").map { $0.split(separator: "\t").prefix(3).joined(separator: " ") }
            == ["certificate ca always", "identity ca whenUnlocked",
                "certificate device-1.example.com always", "identity device-1.example.com whenUnlocked"])
        #expect(list.text.contains("CN=device-1.example.com, expires "))

        // Export works locked (certificates are always-class), to stdout and to -o.
        let exported = try home.run(["tls", "export", "ca"])
        #expect(exported.status == 0)
        #expect(exported.text.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(try home.run(["tls", "export", "device-1.example.com", "-o", "chain.pem"]).status == 0)
        #expect(try home.read("chain.pem").count > 0)
        #expect(try home.run(["tls", "export", "nothing"]).status == 44)

        if let openssl = Self.openssl {
            try Data(exported.stdout).write(to: URL(fileURLWithPath: home.path + "/ca.pem"))
            let verify = try CLIRunner.runTool(openssl, ["verify", "-CAfile", home.path + "/ca.pem", "-purpose", "sslserver",
                                                         "-verify_ip", "10.0.0.5", home.path + "/chain.pem"])
            #expect(verify.status == 0, "\(verify.stderr)")
        }

        let deleted = try home.run(["tls", "delete", "device-1.example.com"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stderr.contains("deleted 2 item(s)"))
        #expect(try home.run(["tls", "delete", "device-1.example.com"]).status == 44)
        #expect(try home.run(["tls", "delete", "ca", "--kind", "bogus"]).status == 64)
    }

    @Test("Certificates for a CSR and a public key from another device; import of PKCS#12 and PEM; wrong password is 3",
          .enabled(if: TLSIdentityCLITests.openssl != nil, "openssl is not installed"))
    func requestsAndImports() throws {
        let openssl = try #require(Self.openssl)
        // No vault here: the root and the identities are stored under the always class (the
        // whenUnlocked path is the other test's).
        let home = try Home()
        let created = try home.run(["tls", "ca", "init", "--accessibility", "always"])
        #expect(created.status == 0, "\(created.stderr)")
        let dir = home.path

        _ = try CLIRunner.runTool(openssl, ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                            "-keyout", dir + "/dev.key", "-subj", "/CN=dev-9", "-out", dir + "/dev.csr"])
        let fromCSR = try home.run(["tls", "issue", "dev-9", "--client", "--csr", "dev.csr", "-o", "dev-9.pem"])
        #expect(fromCSR.status == 0, "\(fromCSR.stderr)")
        _ = try CLIRunner.runTool(openssl, ["pkey", "-in", dir + "/dev.key", "-pubout", "-out", dir + "/dev.pub"])
        let fromKey = try home.run(["tls", "issue", "dev-10", "--public-key", "dev.pub"])
        #expect(fromKey.status == 0, "\(fromKey.stderr)")
        #expect(fromKey.text.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(try home.run(["tls", "export", "ca", "-o", "ca.pem"]).status == 0)
        let verify = try CLIRunner.runTool(openssl, ["verify", "-CAfile", dir + "/ca.pem", "-purpose", "sslclient", dir + "/dev-9.pem"])
        #expect(verify.status == 0, "\(verify.stderr)")
        let garbage = try home.run(["tls", "issue", "dev-11", "--csr", "passcode.txt"])
        #expect(garbage.status == 1)
        #expect(garbage.stderr.contains("certificate signing request"))

        // A PKCS#12 and a PEM key+chain made by openssl.
        _ = try CLIRunner.runTool(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                                            "-subj", "/CN=imported", "-keyout", dir + "/srv.key", "-out", dir + "/srv.pem"])
        _ = try CLIRunner.runTool(openssl, ["pkcs12", "-export", "-inkey", dir + "/srv.key", "-in", dir + "/srv.pem",
                                            "-passout", "pass:pw", "-out", dir + "/srv.p12"])
        _ = try home.scratch.file("pw.txt", Array("pw\n".utf8))
        _ = try home.scratch.file("bad.txt", Array("nope\n".utf8))
        let wrong = try home.run(["tls", "import", "srv", "--pkcs12", "srv.p12", "--password-file", "bad.txt"])
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("password"))
        let p12 = try home.run(["tls", "import", "srv", "--pkcs12", "srv.p12", "--password-file", "pw.txt",
                                  "--accessibility", "always"])
        #expect(p12.status == 0, "\(p12.stderr)")
        #expect(p12.text.hasPrefix("label: srv\nsubject: CN=imported\n"))
        let exported = try home.run(["tls", "export", "srv"])
        #expect(exported.stdout == (try home.read("srv.pem")))
        let pem = try home.run(["tls", "import", "srv2", "--key", "srv.key", "--chain", "srv.pem", "--accessibility", "always"])
        #expect(pem.status == 0, "\(pem.stderr)")
        let lockedImport = try home.run(["tls", "import", "srv3", "--key", "srv.key", "--chain", "srv.pem"])
        #expect(lockedImport.status == 36)   // whenUnlocked by default, and no vault to unlock
        let mismatch = try home.run(["tls", "import", "srv4", "--key", "dev.key", "--chain", "srv.pem"])
        #expect(mismatch.status == 1)
        #expect(mismatch.stderr.contains("does not belong to the certificate"))
        let anchors = try home.run(["tls", "import", "anchors", "--certificates", "srv.pem"])
        #expect(anchors.status == 0, "\(anchors.stderr)")
        let usage = try home.run(["tls", "import", "x", "--key", "srv.key"])
        #expect(usage.status == 64)
    }
}
