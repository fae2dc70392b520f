// The entry points of stored secrets: the embedded-secrets blob (EmbeddedSecrets), the
// protected-files key table (ProtectedFiles, `protected-files.keys`, formats 1 to 3), and the
// device-key records, the device key file and the device-key rotation journal (Vault). Linked
// into the fuzz package as Fuzz/Sources/FuzzHarness, like FuzzHarness.swift; public API only.

import Foundation
import Crypto
import Cipher
import Vault
import ProtectedFiles
import EmbeddedSecrets

extension FuzzHarness {
    /// The targets of this file, merged into ``targets``.
    static let storeTargets: [String: @Sendable ([UInt8]) -> Void] = [
        "embeddedSecrets": embeddedSecrets,
        "protectedKeys": protectedKeys,
        "deviceKey": deviceKey,
    ]

    /// Makes what a target of this file or FuzzHarness+Peers.swift builds once per process (a
    /// vault set up, an agent started) before the first input, so that the first input's time
    /// (libFuzzer's one-second limit) is its own. Called by the fuzz executables at start.
    public static func prepare(for target: String) {
        switch target {
        case "agentFrame":
            _ = fakeAgentSocket
            _ = realAgent
        case "protectedKeys": _ = protectedVault
        case "deviceKey": _ = deviceKeyTemplate
        default: break
        }
    }

    // MARK: Embedded secrets

    static let embeddedBuildKey = SecretBytes(copying: (0..<32).map { UInt8($0) &* 7 &+ 3 })
    static let embeddedShare = "fuzz-run-time-share-0123456789"
    static let embeddedEnvironment = ["FUZZ_SHARE": embeddedShare]
    /// The secrets the seeds hold, by name and type.
    static let embeddedNames: [(String, EmbeddedSecretType)] = [("api-key", .string), ("port", .int), ("debug", .bool), ("blob", .data)]

    /// The build key as the generated code hands it over: shares of four big-endian words.
    static func embeddedShares() -> [@Sendable () -> [UInt64]] {
        let words: [UInt64] = embeddedBuildKey.withUnsafeBytes { bytes in
            (0..<4).map { index in (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[index * 8 + $1]) } }
        }
        return [{ words }]
    }

    /// The tags a blob ends with, made with the fixed build key (and the run-time share when
    /// the flags ask for one), as the generator computes them (docs/FORMATS.md, "Embedded secrets").
    static func embeddedTags(body: [UInt8]) -> [UInt8] {
        guard body.count >= 26 else { return [] }
        let salt = Array(body[10..<26])
        let withShare = body[5] & SealedSecretsFormat.flagRuntimeShare != 0
        let material = withShare ? SecretBytes(copying: embeddedBuildKey.withUnsafeBytes { Array($0) } + Array(embeddedShare.utf8)) : embeddedBuildKey
        let master = KeyDerivation.hkdf(material, salt: salt, info: withShare ? "SFES v1 master with run-time share" : "SFES v1 master")
        let checkKey = KeyDerivation.hkdf(master, salt: salt, info: "SFES v1 check")
        let integrityKey = KeyDerivation.hkdf(embeddedBuildKey, salt: salt, info: "SFES v1 integrity")
        defer {
            [master, checkKey, integrityKey].forEach { $0.wipe() }
            if withShare { material.wipe() }
        }
        let check = Array(HMAC<SHA256>.authenticationCode(for: body, using: checkKey.symmetricKey))
        return check + Array(HMAC<SHA256>.authenticationCode(for: body + check, using: integrityKey.symmetricKey))
    }

    /// The sealed blob the generated code decodes. The first byte: even, the rest is the whole
    /// blob; odd, the rest is the blob's body and the harness appends the tags under the fixed
    /// key, so that changed records reach the record decoding and decryption. Then the keyless
    /// readers, the format's `open` and the run-time reader (base64, shares) for each name.
    @Sendable public static func embeddedSecrets(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        var blob = Array(data.dropFirst())
        if mode % 2 == 1 { blob += embeddedTags(body: blob) }
        _ = SealedSecretsFormat.needsRuntimeShare(blob)
        _ = SealedSecretsFormat.manifestVersion(blob)
        for (name, type) in embeddedNames {
            let value = try? SealedSecretsFormat.open(blob, name: name, type: type, buildKey: embeddedBuildKey,
                                                      runtimeShare: { SecretBytes(utf8: embeddedShare) })
            value?.wipe()
        }
        let reader = EmbeddedSecretsReader(blob: Encoding.base64(blob), shares: embeddedShares(), runtimeShare: .environment("FUZZ_SHARE"),
                                           namespace: "Fuzz", environment: embeddedEnvironment)
        _ = try? reader.string("api-key")
        _ = try? reader.int("port")
        _ = try? reader.bool("debug")
        (try? reader.optionalSecretBytes("blob"))?.wipe()
        _ = try? reader.optionalString("missing")
    }

    static func embeddedSecretsSeeds() -> [[UInt8]] {
        let entries = [SealedSecretsFormat.Entry(name: "api-key", type: .string, value: SecretBytes(utf8: "sk-live-123")),
                       SealedSecretsFormat.Entry(name: "port", type: .int, value: SecretBytes(utf8: "8443")),
                       SealedSecretsFormat.Entry(name: "debug", type: .bool, value: SecretBytes(utf8: "true")),
                       SealedSecretsFormat.Entry(name: "blob", type: .data, value: SecretBytes(copying: [0, 1, 2, 255]))]
        var seeds: [[UInt8]] = []
        for share in [nil, SecretBytes(utf8: embeddedShare)] {
            for chosen in [entries, [entries[0]], []] {
                guard let blob = try? SealedSecretsFormat.seal(chosen, manifestVersion: 3, buildKey: embeddedBuildKey, runtimeShare: share)
                else { continue }
                seeds.append([0] + blob)
                seeds.append([1] + blob.dropLast(2 * SealedSecretsFormat.macLength))
            }
        }
        return seeds
    }

    // MARK: Homes made once per process

    /// The regular files under `root`, by path relative to it.
    static func snapshot(_ root: String) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        guard let names = try? FileManager.default.subpathsOfDirectory(atPath: root) else { return files }
        for name in names.prefix(1000) {
            let path = root + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                  let bytes = try? SecureFile.read(path, maxLength: 1 << 20) else { continue }
            files[name] = bytes
        }
        return files
    }

    /// Puts `root` back as `snapshot` found it: the same bytes in every file it had, no other file.
    static func restore(_ root: String, _ snapshot: [String: [UInt8]]) {
        for name in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] where snapshot[name] == nil {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
                unlink(root + "/" + name)
            }
        }
        for (name, bytes) in snapshot { try? writeScratchFile(bytes, to: root + "/" + name) }
    }

    /// A vault set up once per process (the cheapest KDF) in `home`, with its device key in
    /// `config`, unlocked.
    static func makeVault(home: String, config: String) throws -> CryptoManager {
        try SecureFile.ensurePrivateDirectory(scratchRoot)
        try SecureFile.ensurePrivateDirectory(home)
        try SecureFile.ensurePrivateDirectory(config)
        let manager = try CryptoManager(directory: home, deviceKeyProvider: FileDeviceKeyProvider(path: config + "/device.key"),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        return manager
    }

    // MARK: Protected-files key table

    /// The classes, and the file of each the key-table vault holds.
    static let protectedClasses: [FileProtectionClass] = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none]

    /// A vault with one protected file of each class; its table, and both directories as they are then.
    static let protectedVault: (manager: CryptoManager, files: ProtectedFiles, home: [String: [UInt8]], config: [String: [UInt8]])? = {
        let home = scratchRoot + "/keys-home", config = scratchRoot + "/keys-config"
        guard let manager = try? makeVault(home: home, config: config) else { return nil }
        let files = ProtectedFiles(manager: manager)
        for (index, cls) in protectedClasses.enumerated() {
            guard (try? files.write(Array("file \(index)".utf8), to: home + "/file-\(index)", protection: cls)) != nil else { return nil }
        }
        return (manager, files, snapshot(home), snapshot(config))
    }()

    /// `protected-files.keys`: the key-table vault's directories put back as they were (the
    /// rollback anchor included), the input written as the table, then every file read through
    /// it, its retired pairs counted, and the completeUnlessOpen recipient asked for (which
    /// trusts the table's entry by its device MAC, and writes a table where none is usable).
    @Sendable public static func protectedKeys(_ data: [UInt8]) {
        // One input at a time (the tests run targets in parallel): the vault's directories are shared.
        protectedLock.withLock { protectedKeysInput(data) }
    }

    static let protectedLock = NSLock()

    private static func protectedKeysInput(_ data: [UInt8]) {
        guard let vault = protectedVault else { return }
        let home = vault.manager.directory, config = scratchRoot + "/keys-config"
        restore(home, vault.home)
        restore(config, vault.config)
        guard (try? writeScratchFile(data, to: home + "/protected-files.keys")) != nil else { return }
        for index in protectedClasses.indices {
            if var bytes = try? vault.files.read(at: home + "/file-\(index)") {
                precondition(bytes == Array("file \(index)".utf8), "a protected file read back other bytes")
                for i in bytes.indices { bytes[i] = 0 }
            }
        }
        _ = try? vault.files.retiredKeyPairCount
        _ = vault.files.readError(for: .complete)
        _ = try? vault.files.recipient(for: .completeUnlessOpen)
    }

    /// The table as the vault wrote it (format 3), and as formats 2 and 1 held it.
    static func protectedKeysSeeds() -> [[UInt8]] {
        guard let table = protectedVault?.home["protected-files.keys"] else { return [] }
        var seeds = [table]
        if var object = (try? JSONSerialization.jsonObject(with: Data(table))) as? [String: Any] {
            object["format"] = 2
            object.removeValue(forKey: "generation")
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) { seeds.append(Array(data)) }
            object["format"] = 1
            object.removeValue(forKey: "retired")
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) { seeds.append(Array(data)) }
        }
        return seeds
    }

    // MARK: Device-key records and the rotation journal

    /// A vault's `vault.state` (for its id), and the files a rotation stopped after staging its
    /// new key leaves beside the device key: the journal, the staged key, the record.
    static let deviceKeyTemplate: (state: [UInt8], vaultID: String, config: [String: [UInt8]])? = {
        let home = scratchRoot + "/device-home", config = scratchRoot + "/device-config"
        guard let manager = try? makeVault(home: home, config: config), let id = try? manager.vaultID,
              let state = try? SecureFile.read(home + "/vault.state") else { return nil }
        struct Stop: Error {}
        _ = try? DeviceKeyRotation.rotate(manager: manager, filePath: config + "/device.key", dependents: [],
                                          options: DeviceKeyRotation.Options(step: { if $0 == "staged" { throw Stop() } }))
        return (state, Encoding.hex(id), snapshot(config))
    }()

    /// The files of the device key, the first byte choosing which the rest is: the record
    /// beside the device key (0), the rotation journal (1), a record in the data directory (2,
    /// never used but read to say so), the device key file (3) or the staged new key (4). The
    /// vault's state is the template's; the readers are those the vault and `vault
    /// rotate-device-key` open it with. No provider is asked for its key (a record names
    /// external tools and files; only the key file is read).
    @Sendable public static func deviceKey(_ data: [UInt8]) {
        guard let mode = data.first, let template = deviceKeyTemplate else { return }
        let rest = Array(data.dropFirst())
        withScratch { dir in
            let home = dir + "/home", config = dir + "/config", vaults = config + "/vaults"
            try SecureFile.ensurePrivateDirectory(home)
            try SecureFile.ensurePrivateDirectory(config)
            try SecureFile.ensurePrivateDirectory(vaults)
            try writeScratchFile(template.state, to: home + "/vault.state")
            let keyFile = config + "/device.key"
            switch mode % 5 {
            case 0: try writeScratchFile(rest, to: vaults + "/" + template.vaultID + ".device-key.provider")
            case 1: try writeScratchFile(rest, to: vaults + "/" + template.vaultID + ".device-key.rotation")
            case 2: try writeScratchFile(rest, to: home + "/" + DeviceKeyRecord.fileName)
            case 3: try writeScratchFile(rest, to: keyFile)
            default:
                try writeScratchFile(rest, to: keyFile + DeviceKeyRotation.stagedSuffix)
                // With the journal that names it, as a rotation leaves them.
                if let journal = template.config["vaults/" + template.vaultID + ".device-key.rotation"],
                   let text = String(validating: journal, as: UTF8.self) {
                    try writeScratchFile(Array(text.replacingOccurrences(of: scratchRoot + "/device-config", with: config).utf8),
                                         to: vaults + "/" + template.vaultID + ".device-key.rotation")
                }
            }
            if let record = try? DeviceKeyRecord.load(directory: home, filePath: keyFile) {
                _ = record.summary
                _ = record.backingRecord().summary
            }
            _ = try? DeviceKeyRecord.loadLegacy(directory: home)
            _ = try? DeviceKeyRotation.pending(directory: home, filePath: keyFile)
            if let provider = try? DeviceKeyRotation.provider(directory: home, filePath: keyFile), mode % 5 >= 3 {
                (try? provider.deviceKey())?.wipe()
            }
            if mode % 5 >= 3 { (try? FileDeviceKeyProvider(path: keyFile + (mode % 5 == 4 ? DeviceKeyRotation.stagedSuffix : "")).deviceKey())?.wipe() }
        }
    }

    /// The template's files: its journal, staged key and key file as the rotation wrote them,
    /// and records of each provider as `vault init --device-key-provider` writes them.
    static func deviceKeySeeds() -> [[UInt8]] {
        guard let template = deviceKeyTemplate else { return [] }
        var seeds: [[UInt8]] = []
        let id = template.vaultID
        if let journal = template.config["vaults/\(id).device-key.rotation"] { seeds.append([1] + journal) }
        if let record = template.config["vaults/\(id).device-key.provider"] { seeds.append([0] + record) }
        if let key = template.config["device.key"] { seeds.append([3] + key) }
        if let staged = template.config["device.key" + DeviceKeyRotation.stagedSuffix] { seeds.append([4] + staged) }
        let check = Data(repeating: 0xC4, count: 16)
        let vaultID = (try? Encoding.fromHex(id)).map { Data($0) }
        var records = [DeviceKeyRecord(kind: .file, check: check),
                       DeviceKeyRecord(kind: .systemdCredential, name: "securefoundation-device-key", check: check),
                       DeviceKeyRecord(kind: .keyring, name: "sf-device", timeout: 300, backing: .systemdCredential,
                                       backingName: "securefoundation-device-key", check: check),
                       DeviceKeyRecord(kind: .tpm2, sealedPath: "/etc/securefoundation/device.tpm2", pcrs: [0, 7], check: check)]
        for index in records.indices { records[index].vaultID = vaultID }
        for record in records {
            if let bytes = try? CanonicalEncoding.encode(record) { seeds.append([0] + Array(bytes)) }
        }
        if let first = records.first, let bytes = try? CanonicalEncoding.encode(first) { seeds.append([2] + Array(bytes)) }
        return seeds
    }
}
