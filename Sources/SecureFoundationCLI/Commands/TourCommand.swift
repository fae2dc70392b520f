import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `securefoundation tour`: the whole system, end to end, in a fresh temporary home.
struct TourCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tour",
        abstract: "Run every part of SecureFoundation end to end and say what each step proves.",
        discussion: """
        Sets up a vault (passcode and three security questions, any two of which unlock it), \
        stores plain and secure keychain items, locks and unlocks, seals a Codable value, \
        encrypts a file in the age format (and lets the real `age` open it when it is on the \
        PATH), shreds the plaintext, rotates the application key, writes a protected file while \
        locked and upgrades it after an unlock, and finally crypto-erases everything. It uses the interactive KDF policy and finishes in a few seconds.

        Without --home it works in a new temporary directory that it removes at the end. The \
        exit status is 0 only if every step did what it claims.

        Example:
          swift run securefoundation tour
        """
    )

    @Option(name: .customLong("home"), help: ArgumentHelp("Work in this new or empty directory instead of a new temporary one; what the tour creates there is removed at the end.", valueName: "dir"))
    var home: String?

    @Flag(name: .customLong("keep"), help: "Keep the temporary directory at the end, for inspection.")
    var keep = false

    func run() throws {
        var tour = Tour(home: home, keep: keep)
        do {
            try tour.run()
        } catch {
            tour.cleanUp()
            CLI.warn("securefoundation tour: FAILED: \(CLI.describe(error))")
            throw ExitCode(1)
        }
        tour.cleanUp()
        if !tour.leftovers.isEmpty {
            CLI.warn("securefoundation tour: FAILED: files left behind: \(tour.leftovers.joined(separator: ", "))")
            throw ExitCode(1)
        }
        print("\nAll \(tour.step) steps did what they claim (\(String(format: "%.1f", tour.elapsed)) s).")
    }
}

/// A step that did not do what it claims.
struct TourFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct Tour {
    let root: String
    let ownsRoot: Bool
    let keep: Bool
    var step = 0
    var leftovers: [String] = []
    /// Set when --home was refused: nothing was created, so nothing is removed.
    var refusedHome = false
    let start = Date()
    var elapsed: Double { Date().timeIntervalSince(start) }

    var dataDirectory: String { root + "/data" }
    var deviceKeyPath: String { root + "/config/device.key" }
    var filesDirectory: String { root + "/files" }

    init(home: String?, keep: Bool) {
        if let home {
            root = home
            ownsRoot = false
        } else {
            root = FileManager.default.temporaryDirectory.path + "/securefoundation-tour-" + UUID().uuidString.prefix(8).lowercased()
            ownsRoot = true
        }
        self.keep = keep
    }

    mutating func say(_ title: String) {
        step += 1
        print("\n\(step). \(title)")
    }

    func proves(_ text: String) { print("   ✓ \(text)") }
    func note(_ text: String) { print("   · \(text)") }

    func expect(_ condition: Bool, _ failure: @autoclosure () -> String) throws {
        if !condition { throw TourFailure(failure()) }
    }

    /// Runs `body`, which must throw an error matching `check`; returns that error's text.
    func expectFailure(_ what: String, _ body: () throws -> Void, check: (any Error) -> Bool) throws -> String {
        do {
            try body()
        } catch {
            guard check(error) else { throw TourFailure("\(what) failed with an unexpected error: \(error)") }
            return "\(error)"
        }
        throw TourFailure("\(what) succeeded but should have been refused")
    }

    mutating func run() throws {
        if !ownsRoot, let existing = try? FileManager.default.contentsOfDirectory(atPath: root), !existing.isEmpty {
            refusedHome = true
            throw TourFailure("\(root) is not empty; give --home a new or empty directory (the tour removes what it creates)")
        }
        print("SecureFoundation tour in \(root)")
        try SecureFile.ensurePrivateDirectory(root)
        try SecureFile.ensurePrivateDirectory(root + "/config")
        try SecureFile.ensurePrivateDirectory(filesDirectory)

        // 1. Vault
        say("Set up the crypto manager: a passcode and three security questions, any 2 of 3 unlock")
        let manager = try CryptoManager(directory: dataDirectory,
                                        deviceKeyProvider: FileDeviceKeyProvider(path: deviceKeyPath),
                                        policy: .interactive)
        let passcode = SecretBytes(utf8: "correct horse battery staple")
        let questions = ["Name of your first pet?", "City where you were born?", "Your first teacher's name?"]
        try manager.storeTemporaryPasscode(passcode)
        try manager.storeTemporarySecurityQuestions(questions, answers: [SecretBytes(utf8: "Rex"), SecretBytes(utf8: "Lyon"), SecretBytes(utf8: "Mrs Dupont")], threshold: 2)
        try manager.finalize()
        try expect(manager.isUnlocked && (try manager.hasPasscode) && (try manager.hasSecurityQuestions), "the vault is not set up and unlocked after finalize")
        try expect(try manager.questions == questions, "the questions do not read back")
        proves("application key (256 random bits) wrapped under scrypt(passcode) and under each 2-of-3 answer subset")
        let questionCount = try manager.questions.count
        proves("questions readable before unlock (\(questionCount)), files 0600 in a 0700 directory")

        // 2. Keychain
        say("Store a plain and a secure keychain item, then lock")
        let keychain = try Keychain(manager: manager)
        try keychain.setPassword("smtp-password-42", forService: "mail.example.com", account: "alice")
        try keychain.setSecurePasswordData(SecretBytes(utf8: "api-token-7f3a"), forService: "api.example.com", account: "deploy-bot")
        try keychain.flush()
        proves("items written in one coalesced transaction; flush() returned once durable")
        let database = try SecureFile.read(dataDirectory + "/keychain.sqlite", maxLength: 1 << 30)
        let wal = (try? SecureFile.read(dataDirectory + "/keychain.sqlite-wal", maxLength: 1 << 30)) ?? []
        for needle in ["mail.example.com", "alice", "smtp-password-42", "api-token-7f3a", "deploy-bot"] {
            try expect(!contains(database + wal, Array(needle.utf8)), "the database file contains \"\(needle)\" in clear")
        }
        proves("the database file holds no service, account or password in clear (blind indexes + sealed values)")
        manager.lock()
        try expect(!manager.isUnlocked, "lock() did not lock")
        let refusal = try expectFailure("reading the secure item while locked", {
            _ = try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot")
        }, check: { error in
            if case KeychainError.interactionNotAllowed(_, .locked) = error { return true }
            return false
        })
        proves("locked: the secure item is refused with the typed reason: \(refusal)")
        try expect(try keychain.password(forService: "mail.example.com", account: "alice") == "smtp-password-42",
                   "the plain (.always) item is not readable while locked")
        proves("the plain item (accessibility .always) still reads while locked")

        // 3. Unlock with answers
        say("Unlock with two of the three answers, written carelessly")
        try manager.unlock(answers: [SecretBytes(utf8: "  rex "), SecretBytes(utf8: ""), SecretBytes(utf8: "MRS   dupont")])
        try expect(manager.isUnlocked, "unlock(answers:) did not unlock")
        let token = try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot")
        try expect(token == SecretBytes(utf8: "api-token-7f3a"), "the secure item reads back wrong")
        proves("answers normalized (NFKC, case-folded, spaces collapsed); 2 of 3 suffice; the secure item reads back")

        // 4. Seal a Codable value
        say("Seal a Codable value with the application key")
        let card = Card(holder: "Ada Lovelace", number: "4111 1111 1111 1111", expires: Date(timeIntervalSince1970: 1_900_000_000))
        let sealedCard = try manager.encrypt(value: card, context: Array("cards".utf8))
        let header = try Sealed.parseHeader(sealedCard)
        try expect(try manager.decrypt(Card.self, from: sealedCard, context: Array("cards".utf8)) == card, "the value does not open")
        _ = try expectFailure("opening with another context", {
            _ = try manager.decrypt(Card.self, from: sealedCard, context: Array("other".utf8))
        }, check: { _ in true })
        if case .key(let id) = header.keySource { note("sealed-data envelope, \(header.algorithm.name), key id \(Encoding.hex(id)), \(sealedCard.count) bytes") }
        proves("the value round-trips; the same bytes under another context are refused")

        // 5. age
        say("Encrypt a file to an X25519 recipient and to a passphrase (age v1), and decrypt both")
        let plaintextPath = filesDirectory + "/report.txt"
        let plaintext = Array(String(repeating: "Quarterly figures, confidential. ", count: 4000).utf8)
        try SecureFile.writeAtomically(plaintext, to: plaintextPath)
        let identity = X25519Identity.generate()
        let identityPath = root + "/config/identity.txt"
        try identity.encoded.withUnsafeBytes { bytes in
            try SecureFile.writeAtomically(Array("# tour identity\n".utf8) + Array(bytes) + [0x0A], to: identityPath)
        }
        let toKey = filesDirectory + "/report.txt.age"
        try Age.encryptFile(at: plaintextPath, to: toKey, recipients: [identity.recipient], armor: false)
        let agePassphrase = SecretBytes(utf8: "tour passphrase")
        let toPassphrase = filesDirectory + "/report.txt.pw.age"
        try Age.encryptFile(at: plaintextPath, to: toPassphrase, recipients: [ScryptRecipient(passphrase: agePassphrase, policy: .interactive)], armor: true)
        let back1 = filesDirectory + "/back1.txt", back2 = filesDirectory + "/back2.txt"
        try Age.decryptFile(at: toKey, to: back1, identities: [identity])
        try Age.decryptFile(at: toPassphrase, to: back2, identities: [ScryptIdentity(passphrase: agePassphrase)])
        try expect(try SecureFile.read(back1) == plaintext && SecureFile.read(back2) == plaintext, "a decrypted file differs")
        proves("\(plaintext.count) bytes → age (X25519) and armored age (scrypt); both decrypt to the same bytes")
        if let age = which("age") {
            let result = try runTool(age, ["-d", "-i", identityPath, toKey])
            try expect(result.status == 0 && result.output == plaintext, "`age -d` could not open our file: \(result.error)")
            proves("`\(age) -d` opens our file: the format is interoperable")
        } else {
            note("`age` is not on the PATH: skipping the interop check (apt-get install age)")
        }
        for path in [back1, back2, toPassphrase] { unlink(path) }

        // 6. Shred
        say("Shred the plaintext")
        let reports = try FileShredder.shred(plaintextPath, options: ShredOptions(passes: 1, remove: true, verify: true))
        try expect(!FileManager.default.fileExists(atPath: plaintextPath), "the plaintext is still there")
        for report in reports {
            note(report.description)
            for warning in report.warnings { note("warning: \(warning)") }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: filesDirectory)
        try expect(!names.contains(where: { $0.hasPrefix("report.txt") && !$0.hasSuffix(".age") }), "a name of the plaintext remains")
        proves("overwritten (verified), renamed, unlinked; the report says how far the overwrite can be trusted")

        // 7. Rotate
        say("Rotate the application key")
        let oldKeyID = try manager.keyID ?? []
        // Re-wrapping needs every secret that wraps the key: the passcode and all three answers.
        let newKeyID = try manager.rotateKey(passcode: passcode, answers: [SecretBytes(utf8: "Rex"), SecretBytes(utf8: "Lyon"), SecretBytes(utf8: "Mrs Dupont")])
        try expect(newKeyID != oldKeyID, "rotation did not change the key id")
        try expect(try manager.decrypt(Card.self, from: sealedCard, context: Array("cards".utf8)) == card, "old data does not open after rotation")
        let resealed = try manager.encrypt(value: card, context: Array("cards".utf8))
        if case .key(let id) = try Sealed.parseHeader(resealed).keySource { try expect(id == newKeyID, "new data is not sealed under the new key") }
        try expect(try keychain.securePasswordData(forService: "api.example.com", account: "deploy-bot") == token, "keychain items do not survive rotation")
        proves("key id \(Encoding.hex(oldKeyID)) → \(Encoding.hex(newKeyID)); old data still opens; nothing re-encrypted; keychain intact")

        try protectedFilesStep(manager: manager, passcode: passcode)
        try protectedDatabaseStep(manager: manager, passcode: passcode)
        try sharingStep()
        try agentStep(passcode: passcode)
        try hardwareKeyStep()

        // 9. Erase
        say("Crypto-erase everything")
        try keychain.flush()
        try manager.erase()
        try expect(!manager.isUnlocked, "the manager is still unlocked after erase")
        _ = try expectFailure("unlocking an erased vault", { try manager.unlock(passcode: passcode) }, check: { _ in true })
        _ = try expectFailure("opening old sealed data", { _ = try manager.decrypt(Card.self, from: sealedCard, context: Array("cards".utf8)) }, check: { _ in true })
        // A fresh process's view: a new manager and keychain on the same directory.
        let dataDirectory = self.dataDirectory, deviceKeyPath = self.deviceKeyPath
        func reopen() throws -> Keychain {
            try Keychain(manager: CryptoManager(directory: dataDirectory, deviceKeyProvider: FileDeviceKeyProvider(path: deviceKeyPath), policy: .interactive))
        }
        let secureRefusal = try expectFailure("reading the secure item", { _ = try reopen().securePasswordData(forService: "api.example.com", account: "deploy-bot") }, check: { _ in true })
        let plainRefusal = try expectFailure("reading the plain item", { _ = try reopen().password(forService: "mail.example.com", account: "alice") }, check: { _ in true })
        note("secure item: \(secureRefusal)")
        note("plain item: \(plainRefusal)")
        proves("wrapped keys and the always-class key destroyed: nothing opens any more, plain or secure")
        passcode.wipe()
        agePassphrase.wipe()
    }

    /// Removes what the tour created (the whole directory when it made it).
    mutating func cleanUp() {
        guard !refusedHome else { return }
        guard !keep else { print("kept \(root)"); return }
        let fileManager = FileManager.default
        if ownsRoot {
            try? fileManager.removeItem(atPath: root)
            if fileManager.fileExists(atPath: root) { leftovers.append(root) }
        } else {
            for name in ["data", "config", "files"] { try? fileManager.removeItem(atPath: root + "/" + name) }
            leftovers += ((try? fileManager.contentsOfDirectory(atPath: root)) ?? []).filter { ["data", "config", "files"].contains($0) }
        }
    }

    struct Card: Codable, Equatable {
        var holder: String
        var number: String
        var expires: Date
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first && Array(haystack[index..<index + needle.count]) == needle { return true }
            index += 1
        }
        return false
    }

    func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    func runTool(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: [UInt8], error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, [UInt8](data), String(decoding: errorData, as: UTF8.self))
    }
}
