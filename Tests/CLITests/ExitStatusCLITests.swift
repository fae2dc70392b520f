import Foundation
import Testing

/// The one exit-status table (docs/CLI.md): each row through at least two commands where its
/// error arises, so a number means the same thing whichever command returns it.
@Suite("exit status table")
struct ExitStatusCLITests {
    /// A data directory, a device key and passcode files, for commands that take --home.
    final class Setup {
        let scratch: ScratchDirectory
        let pin: String
        let wrong: String
        init() throws {
            scratch = try ScratchDirectory()
            pin = try scratch.file("pin", Array("correct horse 12\n".utf8))
            wrong = try scratch.file("wrong", Array("wrong horse 12\n".utf8))
        }
        var home: [String] { ["--home", scratch.path + "/home", "--device-key", scratch.path + "/dk"] }

        /// Runs `securefoundation arguments… --home … --device-key …` (no unlock agent).
        func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + home, stdin: stdin, environment: ["SECUREFOUNDATION_AGENT": "off"])
        }

        func initVault(_ extra: [String] = []) throws {
            let result = try run(["vault", "init", "--passcode-file", pin] + extra)
            #expect(result.status == 0, "\(result.stderr)")
        }

        func find(_ passcode: String? = nil) throws -> CLIRunner.Result {
            try run(["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w"]
                    + (passcode.map { ["--passcode-file", $0] } ?? []))
        }
    }

    /// Flips one bit of the byte at `offset` from the end of the file.
    static func flip(_ path: String, fromEnd offset: Int) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[bytes.count - offset] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// One line, `securefoundation: error: …`, and no usage text.
    static func reportsOnlyTheError(_ result: CLIRunner.Result) -> Bool {
        result.stderr.hasPrefix("securefoundation: error: ") && result.stderr.filter { $0 == "\n" }.count == 1
            && !result.stderr.contains("USAGE") && !result.stderr.contains("Usage:")
    }

    @Test("2: damaged or tampered data, through open, decrypt and protect read")
    func damagedExits2() throws {
        let setup = try Setup()
        let scratch = setup.scratch
        let key = try scratch.file("key", (0..<32).map { UInt8($0) })
        #expect(try CLIRunner.run(["seal", "--key-file", key, "-o", scratch.path + "/sealed"], stdin: Array("hello".utf8)).status == 0)
        try Self.flip(scratch.path + "/sealed", fromEnd: 1)
        let opened = try CLIRunner.run(["open", "--key-file", key, scratch.path + "/sealed"])
        #expect(opened.status == 2, "\(opened.stderr)")
        #expect(opened.stdout.isEmpty)

        #expect(try CLIRunner.run(["keygen", "-o", scratch.path + "/id"]).status == 0)
        let recipient = try CLIRunner.run(["keygen", "-y", scratch.path + "/id"]).text.trimmingCharacters(in: .whitespacesAndNewlines)
        let age = scratch.path + "/f.age"
        #expect(try CLIRunner.run(["encrypt", "-r", recipient, "-o", age], stdin: Array("payload".utf8)).status == 0)
        try Self.flip(age, fromEnd: 1)
        let payload = try CLIRunner.run(["decrypt", "-i", scratch.path + "/id", age])
        #expect(payload.status == 2, "\(payload.stderr)")   // 5 before this release
        let garbage = try scratch.file("garbage.age", Array("age-encryption.org/v1\n-> X25519\n".utf8))
        #expect(try CLIRunner.run(["decrypt", "-i", scratch.path + "/id", garbage]).status == 2)

        try setup.initVault()
        let protected = scratch.path + "/p.sf"
        #expect(try setup.run(["protect", "write", "--class", "none", "-o", protected, "--passcode-file", setup.pin],
                              stdin: Array("data".utf8)).status == 0)
        try Self.flip(protected, fromEnd: 1)
        let read = try setup.run(["protect", "read", protected])
        #expect(read.status == 2, "\(read.stderr)")
    }

    @Test("3: wrong secret, through vault unlock, keychain, open and decrypt")
    func wrongSecretExits3() throws {
        let setup = try Setup()
        try setup.initVault()
        let vault = try setup.run(["vault", "unlock", "--passcode-file", setup.wrong])
        #expect(vault.status == 3, "\(vault.stderr)")
        let keychain = try setup.find(setup.wrong)
        #expect(keychain.status == 3, "\(keychain.stderr)")   // 1 before this release
        #expect(Self.reportsOnlyTheError(keychain))

        let scratch = setup.scratch
        #expect(try CLIRunner.run(["seal", "--passphrase-file", setup.pin, "-o", scratch.path + "/sealed"],
                                  stdin: Array("hello".utf8)).status == 0)
        #expect(try CLIRunner.run(["open", "--passphrase-file", setup.wrong, scratch.path + "/sealed"]).status == 3)

        #expect(try CLIRunner.run(["keygen", "-o", scratch.path + "/id"]).status == 0)
        #expect(try CLIRunner.run(["keygen", "-o", scratch.path + "/other"]).status == 0)
        let recipient = try CLIRunner.run(["keygen", "-y", scratch.path + "/id"]).text.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try CLIRunner.run(["encrypt", "-r", recipient, "-o", scratch.path + "/f.age"], stdin: Array("x".utf8)).status == 0)
        let decrypt = try CLIRunner.run(["decrypt", "-i", scratch.path + "/other", scratch.path + "/f.age"])
        #expect(decrypt.status == 3, "\(decrypt.stderr)")   // 4 before this release
    }

    @Test("4: too many attempts, through vault unlock, keychain and protect")
    func tooManyAttemptsExits4() throws {
        let setup = try Setup()
        try setup.initVault()
        // Attempts 1-5 fail with 3; the fifth sets a delay, so the sixth is refused with 4
        // whichever command makes it, without running the KDF.
        for attempt in 1...5 {
            let result = attempt % 2 == 0 ? try setup.find(setup.wrong) : try setup.run(["vault", "unlock", "--passcode-file", setup.wrong])
            #expect(result.status == 3, "attempt \(attempt): \(result.stderr)")
        }
        let vault = try setup.run(["vault", "unlock", "--passcode-file", setup.pin])
        #expect(vault.status == 4, "\(vault.stderr)")
        let keychain = try setup.find(setup.pin)
        #expect(keychain.status == 4, "\(keychain.stderr)")   // 1 before this release
        let protect = try setup.run(["protect", "read", setup.scratch.path + "/none.sf", "--passcode-file", setup.pin])
        #expect(protect.status == 4, "\(protect.stderr)")
    }

    @Test("5: no vault, after an explicit erase as after an automatic one, through vault unlock, keychain and protect")
    func noVaultExits5() throws {
        let explicit = try Setup()
        try explicit.initVault()
        #expect(try explicit.run(["vault", "erase", "--yes"]).status == 0)
        let unlock = try explicit.run(["vault", "unlock", "--passcode-file", explicit.pin])
        #expect(unlock.status == 5, "\(unlock.stderr)")   // 1 before this release
        #expect(try explicit.find(explicit.pin).status == 5)
        let protect = try explicit.run(["protect", "read", explicit.scratch.path + "/none.sf", "--passcode-file", explicit.pin])
        #expect(protect.status == 5, "\(protect.stderr)")

        let automatic = try Setup()
        try automatic.initVault(["--erase-after", "1"])
        #expect(try automatic.run(["vault", "unlock", "--passcode-file", automatic.wrong]).status == 5)
        #expect(try automatic.run(["vault", "unlock", "--passcode-file", automatic.pin]).status == 5)
        #expect(try automatic.find(automatic.pin).status == 5)
    }

    @Test("7: nothing answers, through agent status and tls fetch")
    func noConnectionExits7() throws {
        let scratch = try ScratchDirectory()
        let agent = try CLIRunner.run(["agent", "status", "--socket", scratch.path + "/no-agent.sock"])
        #expect(agent.status == 7, "\(agent.stderr)")
        // A port nothing listens on: bound, then closed.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        close(fd)
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let fetch = try CLIRunner.run(["tls", "fetch", "https://127.0.0.1:\(port)/", "--timeout", "30"])
        #expect(fetch.status == 7, "\(fetch.stderr)")
    }

    @Test("36: locked, through keychain and protect read (6 before this release)")
    func lockedExits36() throws {
        let setup = try Setup()
        try setup.initVault()
        let add = try setup.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-",
                                 "--passcode-file", setup.pin], stdin: Array("s3cret".utf8))
        #expect(add.status == 0, "\(add.stderr)")
        let keychain = try setup.find()
        #expect(keychain.status == 36, "\(keychain.stderr)")
        #expect(keychain.stderr.contains("--passcode-file"))
        let file = setup.scratch.path + "/c.sf"
        #expect(try setup.run(["protect", "write", "--class", "complete", "-o", file, "--passcode-file", setup.pin],
                              stdin: Array("data".utf8)).status == 0)
        let protect = try setup.run(["protect", "read", file])
        #expect(protect.status == 36, "\(protect.stderr)")
        #expect(protect.stderr.contains("--passcode-file"))
    }

    @Test("44: not found, through keychain find and delete and tls export")
    func notFoundExits44() throws {
        let setup = try Setup()
        // In a data directory without a vault or a keychain: 5, nothing created (ReportedDefectsCLITests).
        #expect(try setup.run(["keychain", "find-generic-password", "-s", "none", "-a", "none"]).status == 5)
        try setup.initVault()
        #expect(try setup.run(["keychain", "find-generic-password", "-s", "none", "-a", "none"]).status == 44)
        #expect(try setup.run(["keychain", "delete-generic-password", "-s", "none", "-a", "none"]).status == 44)
        let export = try setup.run(["tls", "export", "nothing"])
        #expect(export.status == 44, "\(export.stderr)")
    }

    @Test("45: exists already, through keychain add and vault init (1 before this release)")
    func existsExits45() throws {
        let setup = try Setup()
        try setup.initVault()
        let add = ["keychain", "add-generic-password", "-s", "s", "-a", "a", "-w", "x", "--accessibility", "always"]
        #expect(try setup.run(add).status == 0)
        #expect(try setup.run(add).status == 45)
        let again = try setup.run(["vault", "init", "--passcode-file", setup.pin])
        #expect(again.status == 45, "\(again.stderr)")
    }

    @Test("64: usage found while running, through keychain, protect and migrate, with the error only")
    func usageAtRunTimeExits64() throws {
        let setup = try Setup()
        let keychain = try setup.run(["keychain", "add-generic-password", "-s", "s", "-a", "a", "-w", "x", "--accessibility", "bogus"])
        #expect(keychain.status == 64)
        #expect(Self.reportsOnlyTheError(keychain), "\(keychain.stderr)")
        let protect = try setup.run(["protect", "write", "--class", "bogus"], stdin: Array("x".utf8))
        #expect(protect.status == 64)
        #expect(Self.reportsOnlyTheError(protect), "\(protect.stderr)")
        let migrate = try setup.run(["migrate", "imas-keychain", setup.scratch.path + "/none", "--accessibility", "bogus"])
        #expect(migrate.status == 64)
        #expect(Self.reportsOnlyTheError(migrate), "\(migrate.stderr)")
    }

    @Test("74: a file cannot be read or written, through open, decrypt and seal (1 before this release)")
    func ioExits74() throws {
        let scratch = try ScratchDirectory()
        let pass = try scratch.file("pass", Array("passphrase\n".utf8))
        let open = try CLIRunner.run(["open", "--passphrase-file", pass, scratch.path + "/missing"])
        #expect(open.status == 74, "\(open.stderr)")
        #expect(try CLIRunner.run(["keygen", "-o", scratch.path + "/id"]).status == 0)
        let decrypt = try CLIRunner.run(["decrypt", "-i", scratch.path + "/id", scratch.path + "/missing.age"])
        #expect(decrypt.status == 74, "\(decrypt.stderr)")
        let seal = try CLIRunner.run(["seal", "--passphrase-file", pass, "-o", scratch.path + "/missing/out"], stdin: Array("x".utf8))
        #expect(seal.status == 74, "\(seal.stderr)")
    }

    @Test("the table in docs/CLI.md is the one the program prints in --help")
    func documentedTableMatchesTheProgram() throws {
        let help = try CLIRunner.run(["--help"]).text
        let printed = Set(help.split(separator: "\n").compactMap { line -> Int? in
            let trimmed = line.drop { $0 == " " }
            guard let number = Int(trimmed.prefix { $0.isNumber }), trimmed.dropFirst(String(number).count).hasPrefix("  ") else { return nil }
            return number
        })
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/CLI.md"), encoding: .utf8)
        let documented = Set(doc.split(separator: "\n").compactMap { line -> Int? in
            guard line.hasPrefix("| ") else { return nil }
            return Int(line.dropFirst(2).prefix { $0.isNumber })
        })
        #expect(printed.count >= 15, "\(help)")
        #expect(printed == documented)
    }
}
