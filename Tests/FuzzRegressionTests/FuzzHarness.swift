// The entry points the fuzz targets (Fuzz/, one libFuzzer executable per parser) call with each
// input, and that `FuzzRegressionTests` replays over the saved cases. Fuzz/Sources/FuzzHarness
// links this file and the other FuzzHarness+*.swift files, so both see the same code. An entry point may
// throw any typed error for hostile input; it must not crash, hang or allocate without bound,
// and the invariants it checks with `precondition` (a round trip, one error for every damaged
// legacy blob) are part of what is fuzzed.

import Foundation
import Age
import Cipher
import Vault
import Keychain
import Migration

public enum FuzzHarness {
    /// The fuzz targets, by name (the name of each target's corpus and regression folder).
    public static let targets: [String: @Sendable ([UInt8]) -> Void] = [
        "age": age,
        "armor": armor,
        "agePayload": agePayload,
        "sealed": sealed,
        "legacyPlist": legacyPlist,
        "legacyCipher": legacyCipher,
        "vaultState": vaultState,
        "keychainDB": keychainDB,
    ].merging(tlsTargets) { first, _ in first }
        .merging(peerTargets) { first, _ in first }
        .merging(storeTargets) { first, _ in first }

    /// Starting inputs a target cannot get from files in the repository (written by the fuzz
    /// executables when FUZZ_WRITE_SEEDS names a directory; see scripts/fuzz).
    public static func seeds(for target: String) -> [[UInt8]] {
        switch target {
        case "agePayload":
            return [[0, 0, 16, 0, 0, 0, 0, 0] + Array("hello".utf8), [1, 0, 5, 1, 0, 1, 0, 2] + Array("chunks".utf8),
                    [2, 255, 255, 0, 0, 0, 40, 1], [0, 0, 0, 1, 0, 0, 3, 5]]
        case "sealed":
            guard let sealingKey else { return [] }
            return [0, 1, 100].compactMap { try? Sealed.seal([UInt8](repeating: 7, count: $0), with: sealingKey, context: Array("fuzz".utf8)) }
        case "legacyPlist":
            let shapes: [Any] = [["org.mitre.imas.crypto-manager": ["salt": Data(repeating: 1, count: 32), "security-questions": Data([0xC7, 0xC1])],
                                  "mail": ["alice": Data("pw".utf8), "bob": "text"]],
                                 ["s": ["a": 42]], ["s": "not a dictionary"], [1, 2]]
            var result: [[UInt8]] = []
            for shape in shapes {
                for format in [PropertyListSerialization.PropertyListFormat.binary, .xml] {
                    if let data = try? PropertyListSerialization.data(fromPropertyList: shape, format: format, options: 0) { result.append(Array(data)) }
                }
            }
            return result
        case "legacyCipher":
            return [[UInt8](repeating: 0, count: 32), [UInt8](repeating: 0x41, count: 64), [0] + [UInt8](repeating: 0x10, count: 48),
                    [1] + Array("{\"salt\":1}".utf8)]
        case "vaultState":
            return vaultStateSeeds()
        case "keychainDB":
            return [[], [0, 0, 0x00], [0, 100, 0xFF, 0, 28, 0x01]]
        case "shareWire":
            return shareWireSeeds()
        case "enrolment":
            return enrolmentSeeds()
        case "agentFrame":
            return agentFrameSeeds()
        case "embeddedSecrets":
            return embeddedSecretsSeeds()
        case "protectedKeys":
            return protectedKeysSeeds()
        case "deviceKey":
            return deviceKeySeeds()
        default:
            return tlsSeeds(for: target)
        }
    }

    /// Writes ``seeds(for:)`` as files `seed-N` into `directory`.
    public static func writeSeeds(for target: String, to directory: String) {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (index, seed) in seeds(for: target).enumerated() {
            try? Data(seed).write(to: URL(fileURLWithPath: (directory as NSString).appendingPathComponent("seed-\(index)")))
        }
        // The keychain template's two files, for making whole-file cases with sqlite3.
        if target == "keychainDB", let templateDirectory = ProcessInfo.processInfo.environment["FUZZ_KEYCHAIN_TEMPLATE"] {
            try? Data(keychainTemplate.database).write(to: URL(fileURLWithPath: templateDirectory + "/keychain.sqlite"))
            try? Data(keychainTemplate.log).write(to: URL(fileURLWithPath: templateDirectory + "/keychain.sqlite-wal"))
        }
    }

    // MARK: age

    /// The X25519 identities of the age test kit, so that its vectors reach the payload.
    static let identities: [any AgeIdentity] = {
        var result: [any AgeIdentity] = [PlainStanzaIdentity()]
        for text in ["AGE-SECRET-KEY-1EGTZVFFV20835NWYV6270LXYVK2VKNX2MMDKWYKLMGR48UAWX40Q2P2LM0",
                     "AGE-SECRET-KEY-143WN7DCXU4G8R5AXQSSYD9AEPYDNT3HXSLWSPK36CDU6E8M59SSSAGZ3KG"] {
            if let identity = try? X25519Identity(text) { result.append(identity) }
        }
        return result
    }()

    /// A whole binary age file: header, stanzas, MAC, payload.
    @Sendable public static func age(_ data: [UInt8]) {
        var plaintext = (try? Age.decrypt(data, identities: identities, armor: .none)) ?? []
        for i in plaintext.indices { plaintext[i] = 0 }
    }

    /// An armored age file (the ASCII armor first, then the binary file inside).
    @Sendable public static func armor(_ data: [UInt8]) {
        _ = try? Age.decrypt(data, identities: identities, armor: .required)
    }

    /// The payload (STREAM chunks), structure-aware: the input chooses a plaintext and one
    /// change to a valid file encrypted from it (truncate, flip a bit, insert or drop bytes,
    /// armor or not). An unchanged file must decrypt to its plaintext; a changed one must decrypt
    /// to the same plaintext (a change the format ignores, none exists in the payload) or fail.
    @Sendable public static func agePayload(_ data: [UInt8]) {
        guard data.count >= 8 else { return }
        let control = Array(data[0..<8])
        let seed = Array(data[8...])
        // Up to three chunks and a bit (64 KiB each), from the seed repeated.
        let length = (Int(control[0]) << 16 | Int(control[1]) << 8 | Int(control[2])) % (3 * 65536 + 300)
        var plaintext = [UInt8](repeating: 0, count: length)
        if !seed.isEmpty { for i in plaintext.indices { plaintext[i] = seed[i % seed.count] &+ UInt8(truncatingIfNeeded: i / seed.count) } }
        let armored = control[3] & 1 == 1
        guard let original = try? Age.encrypt(plaintext, recipients: [PlainStanzaRecipient()], armor: armored) else { return }
        var file = original
        let position = (Int(control[4]) << 16 | Int(control[5]) << 8 | Int(control[6])) % max(file.count, 1)
        switch control[7] % 6 {
        case 1: file.removeSubrange(position...)                                  // truncated
        case 2: file[position] ^= 1 << (control[7] >> 5)                         // one bit flipped
        case 3: file.insert(control[6], at: position)                              // a byte inserted
        case 4: file.remove(at: position)                                          // a byte dropped
        case 5: file += seed.prefix(64)                                             // trailing bytes
        default: break                                                             // unchanged
        }
        let changed = file != original
        do {
            let opened = try Age.decrypt(file, identities: [PlainStanzaIdentity()], armor: armored ? .required : .none)
            precondition(opened == plaintext, changed ? "a changed age file decrypted to other bytes"
                                                      : "an age file did not decrypt to its plaintext")
        } catch {
            precondition(changed, "an unchanged age file was refused: \(error)")
        }
    }

    // MARK: Sealed data

    static let sealingKey: SealingKey? = try? SealingKey(key: SecretBytes(copying: [UInt8](repeating: 0x42, count: 32)))

    /// The sealed-data envelope (`SFSD`): header parsing, then opening under a fixed key. The
    /// passphrase mode stops after the parameters are checked (a KDF run per input is too slow
    /// to fuzz; the header and its parameter checks are what parse hostile bytes).
    @Sendable public static func sealed(_ data: [UInt8]) {
        guard let header = try? Sealed.parseHeader(data) else { return }
        switch header.keySource {
        case .key:
            if let sealingKey { _ = try? Sealed.open(data, with: sealingKey, context: Array("fuzz".utf8)) }
        case .passphrase(let parameters, _):
            _ = try? parameters.validate(ceiling: .standard)
        }
    }
}

extension FuzzHarness {
    // MARK: Legacy iMAS keychain file

    /// The legacy keychain parser (the size and nesting guard, then the property-list parser):
    /// the same function `importLegacyKeychain` and `migrate imas-data` read files with.
    @Sendable public static func legacyPlist(_ data: [UInt8]) {
        guard let contents = try? Keychain.parseLegacyKeychain(data, name: "fuzz") else { return }
        var accounts: [String: [UInt8]] = [:]
        for entry in contents.entries where entry.service == LegacyCryptoManager.service { accounts[entry.account] = entry.value }
        _ = try? LegacyCryptoManager(accounts: accounts)
    }

    // MARK: Legacy iMAS ciphertext

    static let legacyKey = SecretBytes(copying: [UInt8](repeating: 0x24, count: 32))

    /// The legacy decoder: the first byte chooses the rest as a blob under a fixed key (0), as
    /// the crypto manager's entries (1: wrapped keys and the XOR-obfuscated JSON questions), or
    /// as a blob cut or padded to whole blocks (2). A decoder error must be one of the typed
    /// errors, and every padding or checksum failure the same one.
    @Sendable public static func legacyCipher(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        let rest = Array(data.dropFirst())
        switch mode % 3 {
        case 0:
            do {
                let plaintext = try LegacyCipher.open(rest, key: legacyKey)
                plaintext.wipe()
            } catch {
                // Typed: MigrationError only.
                switch error {
                case .legacyDataRejected, .legacyFormat: break
                default: preconditionFailure("unexpected legacy decoder error \(error)")
                }
            }
        case 1:
            let accounts: [String: [UInt8]] = ["salt": Array(rest.prefix(8)), "shared-key.passcode": rest,
                                               "shared-key.security-answers": Array(rest.reversed()),
                                               "security-questions": rest.map { $0 ^ 0x9C }]
            guard let legacy = try? LegacyCryptoManager(accounts: accounts) else { return }
            _ = legacy.questions.count
        default:
            // Damaged padding and checksums of an otherwise valid blob: always the one error.
            guard rest.count >= 2 else { return }
            let blob = rest.count % 16 == 0 && rest.count >= 32 ? rest : Array((rest + [UInt8](repeating: 0, count: 48)).prefix(max(32, rest.count / 16 * 16)))
            if case .some(let error as MigrationError) = Result(catching: { try LegacyCipher.open(blob, key: legacyKey) }).failureValue {
                precondition(error == .legacyDataRejected || { if case .legacyFormat = error { return true } else { return false } }(),
                             "unexpected legacy decoder error \(error)")
            }
        }
    }

    // MARK: Files in a data directory (slow path: one file write and open per input)

    /// The process's scratch root (0700), which also holds the device key all inputs share;
    /// removed with everything in it when the process exits normally (libFuzzer and the test
    /// runner both end with `exit`).
    static let scratchRoot: String = {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("sf-fuzz-\(getpid())")
        atexit { try? FileManager.default.removeItem(atPath: FuzzHarness.scratchRoot) }
        return path
    }()

    /// Writes a file 0600 without the fsync of an atomic write (scratch files need no durability,
    /// and a sync per input would make the slow targets slower still).
    static func writeScratchFile(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { try SecureFile.writeAll(fd, $0, path: path) }
    }

    /// A private scratch directory for one input, removed afterwards.
    static func withScratch(_ body: (String) throws -> Void) {
        let root = scratchRoot
        let dir = (root as NSString).appendingPathComponent(UUID().uuidString)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard (try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                         attributes: [.posixPermissions: 0o700])) != nil else { return }
        _ = chmod(root, 0o700)
        try? body(dir)
    }

    /// The vault's state file (`vault.state`): written from the input, then read through every
    /// accessor that parses it without running the passcode KDF.
    @Sendable public static func vaultState(_ data: [UInt8]) {
        withScratch { dir in
            let home = dir + "/home"
            try SecureFile.ensurePrivateDirectory(home)
            try writeScratchFile(data, to: home + "/vault.state")
            let manager = try CryptoManager(directory: home, deviceKeyProvider: FileDeviceKeyProvider(path: scratchRoot + "/device.key"),
                                            attemptPolicy: .unlimited)
            _ = try? manager.isSetUp
            _ = try? manager.questions
            _ = try? manager.hasPasscode
            _ = try? manager.hasSecurityQuestions
            _ = try? manager.answerThreshold
            _ = try? manager.storedEraseAfter
        }
    }

    static func vaultStateSeeds() -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        withScratch { dir in
            let manager = try CryptoManager(directory: dir + "/home", deviceKeyProvider: FileDeviceKeyProvider(path: dir + "/device.key"),
                                            attemptPolicy: .unlimited)
            try manager.setUp(passcode: SecretBytes(utf8: "1234"), questions: ["a?", "b?"], answers: ["x", "y"], threshold: 1)
            seeds.append(try SecureFile.read(dir + "/home/vault.state"))
        }
        return seeds
    }

    /// A keychain database with a few items of several classes, made once per process: the
    /// database file and its write-ahead log (the keychain checkpoints in the background, so the
    /// items may still be in the log).
    static let keychainTemplate: (database: [UInt8], log: [UInt8]) = {
        var files: (database: [UInt8], log: [UInt8]) = ([], [])
        withScratch { dir in
            let source = try StaticKeySource(masterKey: SecretBytes(copying: [UInt8](repeating: 0x33, count: 32)))
            let keychain = try Keychain(directory: dir, keySource: source)
            try keychain.setPassword("alice-pw", forService: "mail", account: "alice")
            try keychain.add(SecretBytes(utf8: "token"), for: .internet(server: "example.com", account: "bob", networkProtocol: "https",
                                                                        port: 443, path: "/"),
                             accessibility: .afterFirstUnlock, label: "label", comment: "comment")
            try keychain.add(SecretBytes(utf8: "device"), for: .generic(service: "s", account: "d"), accessibility: .alwaysThisDeviceOnly)
            try keychain.flush()
            files.database = try SecureFile.read(dir + "/keychain.sqlite")
            files.log = (try? SecureFile.read(dir + "/keychain.sqlite-wal")) ?? []
        }
        return files
    }()

    /// A hostile keychain database: the template (database and log) with the input's changes
    /// (3 bytes each: a 16-bit offset into the two files end to end, and a value), or the input
    /// itself as the whole database when it is a SQLite file. Opened with the template's key,
    /// then every item listed and read, so mistyped columns, broken records, bad ciphertexts and
    /// damaged log frames reach the row decoding.
    @Sendable public static func keychainDB(_ data: [UInt8]) {
        var database = keychainTemplate.database, log = keychainTemplate.log
        if data.starts(with: Array("SQLite format 3".utf8)) {
            database = data
            log = []
        } else if database.count + log.count > 0 {
            var index = 0
            while index + 3 <= data.count {
                let offset = (Int(data[index]) << 8 | Int(data[index + 1])) % (database.count + log.count)
                if offset < database.count { database[offset] = data[index + 2] } else { log[offset - database.count] = data[index + 2] }
                index += 3
            }
        }
        withScratch { dir in
            try writeScratchFile(database, to: dir + "/keychain.sqlite")
            if !log.isEmpty { try writeScratchFile(log, to: dir + "/keychain.sqlite-wal") }
            let source = try StaticKeySource(masterKey: SecretBytes(copying: [UInt8](repeating: 0x33, count: 32)))
            var configuration = Keychain.Configuration()
            configuration.busyTimeout = .zero
            let keychain = try Keychain(directory: dir, keySource: source, configuration: configuration)
            _ = try? keychain.accounts(forService: nil)
            _ = try? keychain.summaries()
            if let matches = try? keychain.copyMatching(KeychainQuery(itemClass: .genericPassword, limit: .all, returning: [.attributes, .data])) {
                matches.forEach { $0.data?.wipe() }
            }
            if let matches = try? keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, limit: .all, returning: [.attributes, .data])) {
                matches.forEach { $0.data?.wipe() }
            }
            _ = try? keychain.password(forService: "mail", account: "alice")
        }
    }
}

extension Result {
    var failureValue: Failure? { if case .failure(let error) = self { return error } else { return nil } }
}

/// A recipient whose stanza carries the file key in clear (`fuzz-plain`), so the payload fuzzer
/// can decrypt what it encrypted without a key agreement. Used only by the fuzz targets.
struct PlainStanzaRecipient: AgeRecipient {
    func wrap(fileKey: SecretBytes) throws -> [AgeStanza] {
        [AgeStanza(type: "fuzz-plain", arguments: [], body: fileKey.withUnsafeBytes { Array($0) })]
    }
}

struct PlainStanzaIdentity: AgeIdentity {
    func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? {
        guard let stanza = stanzas.first(where: { $0.type == "fuzz-plain" }), stanza.body.count == 16 else { return nil }
        return SecretBytes(copying: stanza.body)
    }
}
