import Cipher
import Foundation
import TestSupport
import Testing

/// The PKCS #11 device-key provider through the command line: a vault made with it opens only
/// where the token is (and with its PIN), and migrates to and from the key file.
@Suite("The device key wrapped by a PKCS #11 token")
struct DeviceKeyTokenTests {
    final class Setup: @unchecked Sendable {
        let hsm: SoftHSM
        let directory: TemporaryDirectory
        let cli: String
        var root: String { directory.path }
        let passcodeFile: String
        /// The agent's runtime directory (short: a socket path has at most 107 bytes).
        var runtime = ""
        let uri = "pkcs11:token=device;object=device-key"

        init() throws {
            hsm = try SoftHSM()
            try hsm.makeToken("device")
            try hsm.tool("device", ["--keygen", "--key-type", "GENERIC:32", "--label", "device-key", "--id", "10", "--sensitive"])
            directory = try TemporaryDirectory(prefix: "sf-token-device-key")
            passcodeFile = try directory.file("passcode", "1234-abcd\n")
            cli = try BuiltProducts.executable("securefoundation")
        }

        var home: [String] { ["--home", root + "/home", "--device-key", root + "/device.key"] }
        var provider: [String] { ["--pkcs11-module", SoftHSM.module, "--pkcs11-uri", uri] }

        func run(_ arguments: [String], pin: String? = SoftHSM.pin, agent: Bool = false,
                 stdin: ChildProcess.Input = .nullDevice) throws -> ChildProcess.Result {
            var environment = hsm.environment
            environment["XDG_CONFIG_HOME"] = root + "/config"
            if !runtime.isEmpty { environment["XDG_RUNTIME_DIR"] = runtime }
            environment["SECUREFOUNDATION_AGENT"] = agent ? "" : "off"
            // An empty value stands for "not set" in a child's environment here.
            environment["SECUREFOUNDATION_TOKEN_PIN"] = pin ?? ""
            return try ChildProcess.run(cli, arguments, stdin: stdin, environment: environment, timeout: .seconds(120))
        }

        var find: [String] { ["keychain", "find-generic-password", "-s", "db", "-a", "app", "-w"] + home }
    }

    @Test("a vault made with the pkcs11 provider opens only with the token and its PIN")
    func tokenOnly() throws {
        guard SoftHSM.available() else { return }
        let setup = try Setup()
        let made = try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--device-key-provider", "pkcs11"] + setup.provider + setup.home)
        #expect(made.status == 0, "\(made.errorText)")
        #expect(access(setup.root + "/device.key", F_OK) != 0, "no key file is written")
        let wrapped = try #require(try? Data(contentsOf: URL(fileURLWithPath: setup.root + "/home/device-key.pkcs11")))
        #expect(wrapped.starts(with: Array("SFPKCS11".utf8) + [1]) && wrapped.count == 9 + 32 + 12 + 32 + 16)
        let add = try setup.run(["keychain", "add-generic-password", "-s", "db", "-a", "app", "-w", "-", "--accessibility", "alwaysThisDeviceOnly"]
                                + setup.home, stdin: .text("s3cret"))
        #expect(add.status == 0, "\(add.errorText)")
        #expect(try setup.run(setup.find).text == "s3cret\n")
        #expect(try setup.run(["vault", "status"] + setup.home).text.contains("device key: pkcs11 \(setup.uri)"))

        // A wrong PIN is a wrong secret (3), as for `tls serve`; no PIN is a usage error (64),
        // said once, with advice that fits (no --pin-file here, no prompt).
        let wrong = try setup.run(setup.find, pin: "0000")
        #expect(wrong.status == 3, "\(wrong.errorText)")
        // `vault unlock` checks the device key too: a right passcode with a wrong PIN is not
        // "unlocked" (exit 3, saying the passcode was right).
        let unlockWrongPIN = try setup.run(["vault", "unlock", "--passcode-file", setup.passcodeFile] + setup.home, pin: "0000")
        #expect(unlockWrongPIN.status == 3, "\(unlockWrongPIN.text) \(unlockWrongPIN.errorText)")
        #expect(!unlockWrongPIN.text.contains("unlocked") && unlockWrongPIN.errorText.contains("the passcode is right"), "\(unlockWrongPIN.errorText)")
        #expect(try setup.run(["vault", "unlock", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        #expect(wrong.errorText.contains("CKR_PIN_INCORRECT"), "\(wrong.errorText)")
        let none = try setup.run(setup.find, pin: nil)
        #expect(none.status == 64, "\(none.errorText)")
        #expect(none.errorText.contains("SECUREFOUNDATION_TOKEN_PIN"), "\(none.errorText)")
        #expect(none.errorText.components(separatedBy: "cannot be read").count == 2, "\(none.errorText)")
        #expect(!none.errorText.contains("--pin-file") && !none.errorText.contains("at the prompt"), "\(none.errorText)")

        // The disk without the token: the token's storage moved away.
        try FileManager.default.moveItem(atPath: setup.hsm.tokens, toPath: setup.hsm.tokens + ".away")
        let stolen = try setup.run(setup.find)
        #expect(stolen.status != 0)
        #expect(stolen.errorText.contains("the PKCS #11 token cannot unwrap the device key"), "\(stolen.errorText)")
        #expect(!stolen.text.contains("s3cret"))
        try FileManager.default.moveItem(atPath: setup.hsm.tokens + ".away", toPath: setup.hsm.tokens)
        #expect(try setup.run(setup.find).text == "s3cret\n")

        // Rotation: a new device key wrapped by the token replaces the old one; items still open.
        let before = try Data(contentsOf: URL(fileURLWithPath: setup.root + "/home/device-key.pkcs11"))
        let rotated = try setup.run(["vault", "rotate-device-key", "--passcode-file", setup.passcodeFile] + setup.home)
        #expect(rotated.status == 0, "\(rotated.errorText)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: setup.root + "/home/device-key.pkcs11")) != before)
        #expect(try setup.run(setup.find).text == "s3cret\n")

        // A module planted in the data directory is refused when migrating.
        let planted = setup.root + "/home/module.so"
        try FileManager.default.copyItem(atPath: SoftHSM.resolvedModule, toPath: planted)
        let refused = try setup.run(["vault", "migrate-device-key", "--to", "pkcs11", "--pkcs11-module", planted, "--pkcs11-uri", setup.uri,
                                     "--pkcs11-wrapped", setup.root + "/other.pkcs11"] + setup.home)
        #expect(refused.status != 0)
        #expect(refused.errorText.contains("inside the data directory"), "\(refused.errorText)")
    }

    @Test("migrate-device-key moves the same key from the file to the token and back")
    func migrate() throws {
        guard SoftHSM.available() else { return }
        let setup = try Setup()
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        let add = try setup.run(["keychain", "add-generic-password", "-s", "db", "-a", "app", "-w", "-", "--accessibility", "alwaysThisDeviceOnly"]
                                + setup.home, stdin: .text("s3cret"))
        #expect(add.status == 0, "\(add.errorText)")
        let original = try Data(contentsOf: URL(fileURLWithPath: setup.root + "/device.key"))

        // Spelled `--provider pkcs11 --uri …` (the same options as `--to pkcs11 --pkcs11-uri …`).
        let toToken = try setup.run(["vault", "migrate-device-key", "--provider", "pkcs11", "--pkcs11-module", SoftHSM.module,
                                     "--uri", setup.uri] + setup.home)
        #expect(toToken.status == 0, "\(toToken.errorText)")
        #expect(toToken.text.contains("same key; nothing re-encrypted"))
        #expect(unlink(setup.root + "/device.key") == 0)
        #expect(try setup.run(setup.find).text == "s3cret\n")

        let back = try setup.run(["vault", "migrate-device-key", "--to", "file"] + setup.home)
        #expect(back.status == 0, "\(back.errorText)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: setup.root + "/device.key")) == original)
        // The token is no longer needed.
        try FileManager.default.removeItem(atPath: setup.hsm.tokens)
        let found = try setup.run(setup.find, pin: nil)
        #expect(found.status == 0, "\(found.errorText)")
        #expect(found.text == "s3cret\n")
    }

    @Test("the unlock agent holds the token PIN `agent unlock --token-pin-file` gives it; no PIN in a file or the environment of the service")
    func agentHoldsThePIN() throws {
        guard SoftHSM.available() else { return }
        let setup = try Setup()
        var template = Array("/tmp/sf-run-XXXXXX".utf8CString)
        setup.runtime = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: setup.runtime) }
        let agentHome = ["--home", setup.root + "/home"]
        let made = try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--device-key-provider", "pkcs11"] + setup.provider + setup.home)
        #expect(made.status == 0, "\(made.errorText)")
        let add = try setup.run(["keychain", "add-generic-password", "-s", "db", "-a", "app", "-w", "-", "--accessibility", "whenUnlockedThisDeviceOnly",
                                 "--passcode-file", setup.passcodeFile] + setup.home, stdin: .text("s3cret"))
        #expect(add.status == 0, "\(add.errorText)")
        // The agent starts without the PIN in its environment.
        let start = try setup.run(["agent", "start"] + setup.home, pin: nil)
        #expect(start.status == 0, "\(start.errorText) \(start.text)")
        defer { _ = try? setup.run(["agent", "stop"] + agentHome, pin: nil) }
        let noPIN = try setup.run(["agent", "unlock", "--passcode-file", setup.passcodeFile] + agentHome, pin: nil)
        let findThroughAgent = try setup.run(setup.find, pin: nil, agent: true)
        #expect(findThroughAgent.status != 0 && !findThroughAgent.text.contains("s3cret"),
                "without the PIN the agent (unlock: \(noPIN.status) \(noPIN.errorText)) gave the device-bound key: \(findThroughAgent.text)")

        let wrongFile = try setup.directory.file("wrong-pin", "0000\n")
        _ = try setup.run(["agent", "lock"] + agentHome, pin: nil)
        let wrong = try setup.run(["agent", "unlock", "--token-pin-file", wrongFile, "--passcode-file", setup.passcodeFile] + agentHome, pin: nil)
        #expect(wrong.status == 3, "\(wrong.errorText)")
        #expect(wrong.errorText.contains("CKR_PIN_INCORRECT"), "\(wrong.errorText)")

        let pinFile = try setup.directory.file("pin", SoftHSM.pin + "\n")
        let unlocked = try setup.run(["agent", "unlock", "--token-pin-file", pinFile, "--passcode-file", setup.passcodeFile] + agentHome, pin: nil)
        #expect(unlocked.status == 0, "\(unlocked.errorText)")
        let found = try setup.run(setup.find, pin: nil, agent: true)
        #expect(found.status == 0, "\(found.errorText) / \(findThroughAgent.errorText)")
        #expect(found.text == "s3cret\n")
        // The token removed (its storage moved away): the agent notices at the next request,
        // as `tls serve` does with a key in a token, instead of serving the key it read before.
        try FileManager.default.moveItem(atPath: setup.hsm.tokens, toPath: setup.hsm.tokens + ".away")
        let removed = try setup.run(setup.find, pin: nil, agent: true)
        #expect(removed.status != 0 && !removed.text.contains("s3cret"), "served after the token was removed: \(removed.text)")
        try FileManager.default.moveItem(atPath: setup.hsm.tokens + ".away", toPath: setup.hsm.tokens)
        // Put back: the module in the agent may not see the token again (SoftHSM2 does not);
        // restarting and unlocking the agent does.
        _ = try setup.run(["agent", "stop"] + agentHome, pin: nil)
        #expect(try setup.run(["agent", "start"] + setup.home, pin: nil).status == 0)
        #expect(try setup.run(["agent", "unlock", "--token-pin-file", pinFile, "--passcode-file", setup.passcodeFile] + agentHome, pin: nil).status == 0)
        let back = try setup.run(setup.find, pin: nil, agent: true)
        #expect(back.status == 0 && back.text == "s3cret\n", "\(back.errorText)")
        // Without the agent the same process has no PIN.
        let alone = try setup.run(setup.find, pin: nil)
        #expect(alone.status != 0 && alone.errorText.contains("agent unlock --token-pin"), "\(alone.errorText)")
        let both = try setup.run(["agent", "unlock", "--token-pin", "--token-pin-file", pinFile] + agentHome, pin: nil)
        #expect(both.status == 64, "\(both.errorText)")
    }
}
