import Foundation
import Testing

/// `--json` (docs/CLI.md, "JSON output"): each command's object parsed, its fields checked, and
/// no secret in it.
@Suite("JSON output")
struct JSONOutputCLITests {
    /// A data directory, device key and passcode of one test (no unlock agent).
    final class Setup {
        let scratch: ScratchDirectory
        let pin: String
        static let passcode = "json-passcode-8642"
        init() throws {
            scratch = try ScratchDirectory()
            pin = try scratch.file("pin", Array((Self.passcode + "\n").utf8))
        }
        var home: [String] { ["--home", scratch.path + "/home", "--device-key", scratch.path + "/dk"] }

        func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + home, stdin: stdin,
                              environment: ["SECUREFOUNDATION_AGENT": "off", "XDG_CONFIG_HOME": scratch.path + "/config"])
        }
    }

    /// The one JSON object of `result`'s standard output (one line), with `"version": 1`.
    static func object(_ result: CLIRunner.Result, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        #expect(result.text.hasSuffix("}\n") && result.text.filter { $0 == "\n" }.count == 1, "\(result.text)", sourceLocation: sourceLocation)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any], sourceLocation: sourceLocation)
        #expect(object["version"] as? Int == 1, sourceLocation: sourceLocation)
        return object
    }

    @Test func vaultStatus() throws {
        let setup = try Setup()
        let missing = try Self.object(try setup.run(["vault", "status", "--json"]))
        #expect(missing["directoryExists"] as? Bool == false)
        #expect(missing["state"] as? String == "notSetUp")
        #expect(!FileManager.default.fileExists(atPath: setup.scratch.path + "/home"))

        let answers = try setup.scratch.file("answers", Array("Rex\nLyon\n".utf8))
        let created = try setup.run(["vault", "init", "--passcode-file", setup.pin, "--question", "First pet?",
                                     "--question", "Birth town?", "--answers-file", answers, "--threshold", "1", "--erase-after", "7"])
        #expect(created.status == 0, "\(created.stderr)")
        let wrong = try setup.scratch.file("wrong", Array("nope\n".utf8))
        #expect(try setup.run(["vault", "unlock", "--passcode-file", wrong]).status == 3)
        let result = try setup.run(["vault", "status", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let status = try Self.object(result)
        #expect(status["directoryExists"] as? Bool == true)
        #expect(status["directory"] as? String == setup.scratch.path + "/home")
        #expect(status["state"] as? String == "setUp")
        #expect(status["passcode"] as? Bool == true)
        #expect(status["questions"] as? [String] == ["First pet?", "Birth town?"])
        #expect(status["answerThreshold"] as? Int == 1)
        #expect(status["eraseAfter"] as? Int == 7)
        #expect(status["failedAttempts"] as? Int == 1)
        #expect(status["nextAttemptSeconds"] as? Int == 0)
        #expect((status["keyID"] as? String)?.count ?? 0 >= 16)
        #expect(status["deviceKey"] is String)
        for secret in [Setup.passcode, "Rex", "Lyon"] { #expect(!result.text.contains(secret)) }
    }

    @Test func keychainFindAndDump() throws {
        let setup = try Setup()
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.pin]).status == 0)
        let password = "pa\"ss\\word\u{1}é-9137"
        let added = try setup.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-",
                                   "--accessibility", "always", "-l", "Mail"], stdin: Array(password.utf8))
        #expect(added.status == 0, "\(added.stderr)")
        let locked = try setup.run(["keychain", "add-generic-password", "-s", "bank", "-a", "bob", "-w", "-",
                                    "--accessibility", "whenUnlocked", "--passcode-file", setup.pin], stdin: Array("bank-secret-5521".utf8))
        #expect(locked.status == 0, "\(locked.stderr)")

        let found = try setup.run(["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "--json"])
        #expect(found.status == 0, "\(found.stderr)")
        let object = try Self.object(found)
        #expect(object["password"] == nil)
        #expect((object["keychain"] as? String)?.hasSuffix("/keychain.sqlite") == true)
        let item = try #require(object["item"] as? [String: Any])
        #expect(item["class"] as? String == "genp")
        #expect(item["service"] as? String == "mail")
        #expect(item["account"] as? String == "alice")
        #expect(item["label"] as? String == "Mail")
        #expect(item["accessibility"] as? String == "always")
        #expect(item["available"] as? Bool == true)
        #expect((item["created"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
        #expect(!found.text.contains("word"))

        let withPassword = try setup.run(["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w", "--json"])
        #expect(withPassword.status == 0, "\(withPassword.stderr)")
        let both = try Self.object(withPassword)
        #expect(both["password"] as? String == password)
        #expect((both["item"] as? [String: Any])?["account"] as? String == "alice")

        let dump = try setup.run(["keychain", "dump-keychain", "--json"])
        #expect(dump.status == 0, "\(dump.stderr)")
        let listing = try Self.object(dump)
        let items = try #require(listing["items"] as? [[String: Any]])
        #expect(items.count == 2)
        #expect((listing["damaged"] as? [Any])?.isEmpty == true)
        let unavailable = items.filter { $0["available"] as? Bool == false }
        #expect(unavailable.count == 1)
        #expect(unavailable.first?["accessibility"] as? String == "whenUnlocked")
        #expect(unavailable.first?["account"] == nil)
        #expect(unavailable.first?["unavailableReason"] is String)
        let unlocked = try setup.run(["keychain", "dump-keychain", "--json", "--passcode-file", setup.pin])
        let all = try #require(try Self.object(unlocked)["items"] as? [[String: Any]])
        #expect(Set(all.compactMap { $0["account"] as? String }) == ["alice", "bob"])
        for text in [dump.text, unlocked.text] {
            #expect(!text.contains("word") && !text.contains("bank-secret") && !text.contains(Setup.passcode))
        }
    }

    @Test func protectStatus() throws {
        let setup = try Setup()
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.pin]).status == 0)
        let files = setup.scratch.path + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        let open = try setup.run(["protect", "write", "--class", "none", "-o", files + "/a.sf"], stdin: Array("plain-a-7731".utf8))
        #expect(open.status == 0, "\(open.stderr)")
        let complete = try setup.run(["protect", "write", "--class", "complete", "-o", files + "/b.sf", "--passcode-file", setup.pin],
                                     stdin: Array("plain-b-7731".utf8))
        #expect(complete.status == 0, "\(complete.stderr)")
        _ = try setup.scratch.file("files/c.txt", Array("not protected".utf8))
        let result = try setup.run(["protect", "status", files, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(try Self.object(result)["files"] as? [[String: Any]])
        #expect(report.map { $0["path"] as? String } == [files + "/a.sf", files + "/b.sf", files + "/c.txt"])
        #expect(report.map { $0["state"] as? String } == ["readable", "locked", "notProtected"])
        #expect(report.map { $0["class"] as? String } == ["none", "complete", nil])
        #expect(report[1]["reason"] is String)
        #expect(!result.text.contains("plain-") && !result.text.contains(Setup.passcode))
    }

    @Test func shareList() throws {
        let setup = try Setup()
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.pin]).status == 0)
        let created = try setup.run(["share", "init", "--new-group", "--name", "alpha", "--passcode-file", setup.pin])
        #expect(created.status == 0, "\(created.stderr)")
        let devices = try setup.run(["share", "list", "--devices", "--json"])
        #expect(devices.status == 0, "\(devices.stderr)")
        let list = try #require(try Self.object(devices)["devices"] as? [[String: Any]])
        #expect(list.count == 1)
        #expect(list.first?["name"] as? String == "alpha")
        #expect((list.first?["pin"] as? String)?.hasPrefix("sha256/") == true)
        #expect(list.first?["revoked"] as? Bool == false)

        let inbox = setup.scratch.path + "/home/share-inbox"
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        _ = try setup.scratch.file("home/share-inbox/report.pdf", [UInt8](repeating: 7, count: 1234))
        let files = try setup.run(["share", "list", "--json"])
        #expect(files.status == 0, "\(files.stderr)")
        let object = try Self.object(files)
        #expect(object["inbox"] as? String == inbox)
        let entries = try #require(object["files"] as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["name"] as? String == "report.pdf")
        #expect(entries.first?["size"] as? Int == 1234)
        #expect(!devices.text.contains(Setup.passcode) && !files.text.contains(Setup.passcode))
    }

    @Test(.enabled(if: CLIRunner.which("openssl") != nil, "needs openssl"))
    func tlsPin() throws {
        let scratch = try ScratchDirectory()
        let result = try CLIRunner.runTool("/bin/sh", ["-c", """
            cd '\(scratch.path)' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
              -keyout key.pem -subj '/CN=json.test' -days 2 -out cert.pem 2>/dev/null && \
            openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64
            """])
        #expect(result.status == 0, "\(result.stderr)")
        let expected = "sha256/" + result.text.trimmingCharacters(in: .whitespacesAndNewlines)
        let pin = try CLIRunner.run(["tls", "pin", scratch.path + "/cert.pem", "--json"])
        #expect(pin.status == 0, "\(pin.stderr)")
        let object = try Self.object(pin)
        #expect(object["source"] as? String == scratch.path + "/cert.pem")
        let certificates = try #require(object["certificates"] as? [[String: Any]])
        #expect(certificates.count == 1)
        #expect(certificates.first?["index"] as? Int == 0)
        #expect(certificates.first?["pin"] as? String == expected)
        #expect((certificates.first?["subject"] as? String)?.contains("json.test") == true)
        let key = try String(contentsOfFile: scratch.path + "/key.pem", encoding: .utf8)
        let body = key.split(separator: "\n").dropFirst().first.map(String.init) ?? "key"
        #expect(!pin.text.contains(body))
    }

    @Test func agentStatusWithoutAnAgent() throws {
        let setup = try Setup()
        // No agent: exit 7, and the answer as JSON on standard output for scripts.
        let none = try CLIRunner.run(["agent", "status", "--json", "--home", setup.scratch.path + "/home"])
        #expect(none.status == 7, "\(none.stderr)")
        let object = try Self.object(none)
        #expect(object["running"] as? Bool == false)
        #expect((object["socket"] as? String)?.hasSuffix(".sock") == true || object["socket"] is String, "\(object)")
    }

    @Test func hashDatabaseStatusAndTLSListings() throws {
        let setup = try Setup()
        let file = try setup.scratch.file("data", Array("abc".utf8))
        let hashed = try CLIRunner.run(["hash", "--json", file, setup.scratch.path + "/missing"])
        #expect(hashed.status == 1)
        let digests = try Self.object(hashed)
        #expect(digests["algorithm"] as? String == "sha256")
        let files = try #require(digests["files"] as? [[String: Any]])
        #expect(files.count == 2)
        #expect(files.first?["digest"] as? String == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(files.last?["path"] as? String == setup.scratch.path + "/missing" && files.last?["error"] is String)
        #expect(try CLIRunner.run(["hash", "--json", "--check", file]).status == 64)

        #expect(try setup.run(["vault", "init", "--passcode-file", setup.pin]).status == 0)
        let db = setup.scratch.path + "/app.db"
        #expect(try setup.run(["db", "create", db, "--class", "completeUnlessOpen"]).status == 0)
        let status = try Self.object(try setup.run(["db", "status", db, "--json"]))
        #expect(status["class"] as? String == "completeUnlessOpen")
        #expect((status["pages"] as? Int ?? 0) >= 1)
        #expect(status["walBytes"] is Int)
        #expect((status["salt"] as? String)?.count == 32)

        let empty = try Self.object(try setup.run(["tls", "list", "--json", "--passcode-file", setup.pin]))
        #expect((empty["items"] as? [Any])?.isEmpty == true)
        #expect(empty["unreadable"] as? Int == 0)
        #expect(try setup.run(["tls", "ca", "init", "--common-name", "Home CA", "--passcode-file", setup.pin]).status == 0)
        let listed = try Self.object(try setup.run(["tls", "list", "--json", "--passcode-file", setup.pin]))
        let items = try #require(listed["items"] as? [[String: Any]])
        #expect(!items.isEmpty && items.allSatisfy { $0["kind"] is String && $0["label"] is String && $0["accessibility"] is String }, "\(items)")
        let keys = try Self.object(try setup.run(["tls", "keys", "--json", "--passcode-file", setup.pin]))
        let entries = try #require(keys["keys"] as? [[String: Any]])
        #expect(!entries.isEmpty && entries.allSatisfy { $0["location"] as? String == "keychain" }, "\(entries)")
    }
}
