import Foundation
import Cipher

/// Which device-key provider a vault uses, recorded when the vault is created with a chosen
/// provider (`vault init --device-key-provider`) or migrated to one. A vault without a record
/// uses the device-key file, as before. Layout: docs/FORMATS.md, "device-key.provider".
///
/// The record is kept beside the device-key file, outside the data directory
/// (`vaults/VAULTID.device-key.provider` in the key file's directory, by default
/// `~/.config/securefoundation/vaults/`): whoever can write the data directory must not choose
/// where the device key is read from, since the check value vouches only for the key the record
/// itself names. Earlier versions kept it in the data directory (`HOME/device-key.provider`);
/// such a record is never used by itself: `adoptLegacy(directory:filePath:)` moves it out once
/// the user confirms it is theirs.
///
/// The record holds a check value (the first 16 bytes of HKDF-SHA256(device key, "securefoundation
/// device key check v1")), so a provider that yields another key (another machine's TPM, a
/// credential of another vault) is refused with a clear error instead of deriving keys that
/// open nothing.
public struct DeviceKeyRecord: Codable, Equatable, Sendable {
    /// The name of the record in the data directory, where versions 1 and 2 kept it (legacy).
    public static let fileName = "device-key.provider"
    /// The suffix of a record's name in the trusted directory (after the vault id in hex).
    static let trustedSuffix = ".device-key.provider"
    static let formatName = "securefoundation-device-key-provider"
    static let currentVersion = 3
    /// The credential name `vault init` and `migrate-device-key` use when none is given.
    public static let defaultCredentialName = "securefoundation-device-key"

    /// The provider kinds.
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// A 0600 file apart from the data directory (the default).
        case file
        /// `$CREDENTIALS_DIRECTORY/NAME` of a systemd unit (`LoadCredentialEncrypted=`), or the
        /// encrypted credential decrypted with `systemd-creds decrypt`.
        case systemdCredential = "systemd-credential"
        /// The kernel keyring (a cache with a timeout) in front of another provider.
        case keyring
        /// Sealed to a TPM 2.0 (in tpm2-tools' format), optionally bound to PCR values.
        case tpm2
        /// Wrapped under a key that stays in a PKCS #11 token (`PKCS11DeviceKeyProvider`, module HardwareDeviceKeys).
        case pkcs11
    }

    public var format: String = DeviceKeyRecord.formatName
    public var version: Int = DeviceKeyRecord.currentVersion
    public var kind: Kind
    /// file: the key file (nil: the default location or `--device-key`).
    public var path: String?
    /// systemd-credential: the credential's name; keyring: the key's description.
    public var name: String?
    /// systemd-credential: the encrypted credential file; tpm2: the sealed-object prefix
    /// (`PREFIX.pub`, `PREFIX.priv`).
    public var sealedPath: String?
    /// tpm2: the PCRs (SHA-256 bank) the key is bound to (empty: none).
    public var pcrs: [Int]?
    /// keyring: seconds the cached key lives.
    public var timeout: Int?
    /// keyring: the provider behind the cache.
    public var backing: Kind?
    /// keyring backed by a systemd credential: the credential's name (version 2; `name` is the
    /// keyring description).
    public var backingName: String?
    /// pkcs11: the module's absolute path.
    public var module: String?
    /// pkcs11: the `pkcs11:` URI of the token's secret key.
    public var uri: String?
    /// 16 bytes identifying the device key (not the key).
    public var check: Data
    /// The id of the vault the record belongs to (version 3; the record's name says it too).
    public var vaultID: Data?

    /// A record of the provider `kind` and its settings.
    /// - Parameters:
    ///   - kind: The provider.
    ///   - path: file: the key file.
    ///   - name: The credential's name, or the keyring description.
    ///   - sealedPath: tpm2 and pkcs11: the sealed or wrapped key's path.
    ///   - pcrs: tpm2: the PCRs the key is bound to.
    ///   - timeout: keyring: seconds the cached key lives.
    ///   - backing: keyring: the provider behind the cache.
    ///   - backingName: keyring backed by a systemd credential: the credential's name.
    ///   - module: pkcs11: the module's absolute path.
    ///   - uri: pkcs11: the token's secret key's URI.
    ///   - check: 16 bytes identifying the device key (not the key).
    public init(kind: Kind, path: String? = nil, name: String? = nil, sealedPath: String? = nil, pcrs: [Int]? = nil,
                timeout: Int? = nil, backing: Kind? = nil, backingName: String? = nil, module: String? = nil, uri: String? = nil,
                check: Data) {
        self.kind = kind
        self.path = path
        self.name = name
        self.sealedPath = sealedPath
        self.pcrs = pcrs
        self.timeout = timeout
        self.backing = backing
        self.backingName = backingName
        self.module = module
        self.uri = uri
        self.check = check
    }

    /// The check value of `key`.
    /// - Parameter key: The device key.
    /// - Returns: The value recorded to recognize the key without storing it.
    public static func checkValue(of key: SecretBytes) -> Data {
        let derived = KeyDerivation.hkdf(key, info: "securefoundation device key check v1")
        defer { derived.wipe() }
        return derived.withUnsafeBytes { Data($0.prefix(16)) }
    }

    /// The directory of trusted records: `vaults/` beside the device-key file (`filePath`, nil:
    /// the default `$XDG_CONFIG_HOME/securefoundation/device.key`).
    /// - Parameter filePath: The device-key file (nil: the default).
    /// - Returns: The directory's path.
    public static func trustedDirectory(filePath: String? = nil) -> String {
        SecureFile.directoryOf(VaultPaths.absolute(filePath ?? FileDeviceKeyProvider.defaultPath())) + "/vaults"
    }

    /// The trusted record of the vault `vaultID`.
    static func trustedPath(vaultID: Data, filePath: String?) -> String {
        trustedDirectory(filePath: filePath) + "/" + Encoding.hex(vaultID) + trustedSuffix
    }

    /// The id of the vault in the data directory `directory` (nil: no vault there).
    static func vaultID(ofHome directory: String) throws -> Data? {
        try VaultState.load(directory: directory)?.vaultID
    }

    /// The record of the vault in `directory`, read from the trusted directory beside the
    /// device-key file; nil when there is none (the vault uses the key file `filePath`).
    /// - Parameters:
    ///   - directory: The vault's data directory.
    ///   - filePath: The device-key file (nil: the default); its directory holds the records.
    /// - Returns: The record, or nil.
    /// - Throws: ``VaultError/deviceKey(_:)`` when only a record in the data directory exists
    ///   (written by an earlier version, or planted): it is not used until adopted;
    ///   ``VaultError/corrupted(_:)`` for a record that does not parse or names another vault.
    public static func load(directory: String, filePath: String? = nil) throws(VaultError) -> DeviceKeyRecord? {
        return try VaultError.call {
            guard let vaultID = try vaultID(ofHome: directory) else { return nil }
            let path = trustedPath(vaultID: vaultID, filePath: filePath)
            if let record = try readPrivateJSON(DeviceKeyRecord.self, at: path, what: "a device-key provider record", check: { record, path in
                try record.check(path: path)
                guard record.version >= 3, record.vaultID == vaultID else {
                    throw VaultError.corrupted("\(path) is not the device-key record of the vault in \(directory)")
                }
            }) {
                return record
            }
            if access(directory + "/" + fileName, F_OK) == 0 {
                throw VaultError.deviceKey(legacyRefusal(directory: directory))
            }
            return nil
        }
    }

    static func legacyRefusal(directory: String) -> String {
        "\(directory)/\(fileName) is a device-key provider record in the data directory, where anyone who can write the directory could have put it; it is not used. If you set up that provider (`vault init --device-key-provider` or `vault migrate-device-key` of an earlier version), move the record beside the device key with `securefoundation vault migrate-device-key --adopt`; otherwise delete it"
    }

    /// The record an earlier version kept in the data directory (`HOME/device-key.provider`),
    /// read and upgraded in memory; nil when there is none. Never used as it is: see
    /// `adoptLegacy(directory:filePath:)`.
    /// - Parameter directory: The vault's data directory.
    /// - Returns: The record, or nil.
    /// - Throws: ``VaultError/corrupted(_:)`` for a record that does not parse or is of version 3
    ///   or later; ``VaultError`` for a file others can reach or that cannot be read.
    public static func loadLegacy(directory: String) throws(VaultError) -> DeviceKeyRecord? {
        return try VaultError.call {
            try readPrivateJSON(DeviceKeyRecord.self, at: directory + "/" + fileName, what: "a device-key provider record") { record, path in
                try record.check(path: path)
                guard record.version <= 2 else { throw VaultError.corrupted("\(path): a version-\(record.version) record belongs beside the device key, not in the data directory") }
                record.upgrade()
            }
        }
    }

    /// Moves the record an earlier version kept in the data directory beside the device key
    /// (as version 3, bound to the vault's id) and removes it from the data directory. The
    /// caller has confirmed the record is the user's own: its content is not authenticated.
    /// - Parameters:
    ///   - directory: The vault's data directory.
    ///   - filePath: The device-key file (nil: the default).
    /// - Returns: The adopted record, or nil when the data directory holds none.
    /// - Throws: ``VaultError/deviceKey(_:)`` when the vault already has a record beside the
    ///   device key: a record in the data directory never replaces it (nothing is changed).
    package static func adoptLegacy(directory: String, filePath: String? = nil) throws(VaultError) -> DeviceKeyRecord? {
        return try VaultError.call {
            guard let legacy = try loadLegacy(directory: directory) else { return nil }
            if let vaultID = try vaultID(ofHome: directory), access(trustedPath(vaultID: vaultID, filePath: filePath), F_OK) == 0 {
                throw VaultError.deviceKey("the vault already has a device-key record beside the device key; \(directory)/\(fileName) does not replace it (it is not used: delete it)")
            }
            try legacy.save(directory: directory, filePath: filePath)
            return legacy
        }
    }

    /// Reads the private JSON file at `path` (at most 64 KiB), decodes it and lets `check`
    /// validate (and upgrade) it; nil when there is no file.
    /// - Throws: a ``VaultError`` as it is (`check`'s, or a file that is not private); anything
    ///   else as ``VaultError/corrupted(_:)`` saying that `path` is not `what`.
    static func readPrivateJSON<Value: Decodable>(_ type: Value.Type, at path: String, what: String,
                                                 check: (inout Value, String) throws -> Void) throws -> Value? {
        guard access(path, F_OK) == 0 else { return nil }
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
            let bytes = try SecureFile.read(path, maxLength: 64 * 1024)
            var value = try CanonicalEncoding.decode(Value.self, from: bytes)
            try check(&value, path)
            return value
        } catch let error as VaultError {
            throw error
        } catch {
            let wrapped = VaultError.wrap(error)
            if case .insecurePermissions = wrapped { throw wrapped }
            throw VaultError.corrupted("\(path) is not \(what): \(error)")
        }
    }

    func check(path: String) throws {
        guard format == Self.formatName else { throw VaultError.corrupted("\(path): unknown format \(format)") }
        guard (1...Self.currentVersion).contains(version) else {
            throw VaultError.corrupted("\(path): version \(version) is not supported by this version of SecureFoundation")
        }
        guard check.count == 16 else { throw VaultError.corrupted("\(path): the check value is \(check.count) bytes, not 16") }
        switch kind {
        case .file: break
        case .systemdCredential:
            guard let name, DeviceKeyRecord.validName(name) else { throw VaultError.corrupted("\(path): a systemd credential needs a name") }
        case .keyring:
            guard let name, !name.isEmpty, name.utf8.count <= 256, let timeout, timeout > 0,
                  let backing, backing != .keyring else {
                throw VaultError.corrupted("\(path): a keyring record needs a description, a timeout and another provider behind it")
            }
            if version >= 2, backing == .systemdCredential {
                guard let backingName, DeviceKeyRecord.validName(backingName) else {
                    throw VaultError.corrupted("\(path): a keyring in front of a systemd credential needs the credential's name")
                }
            }
        case .tpm2:
            guard sealedPath != nil, (pcrs ?? []).allSatisfy({ (0...23).contains($0) }) else {
                throw VaultError.corrupted("\(path): a TPM record needs the sealed object and PCRs 0-23")
            }
        case .pkcs11:
            guard sealedPath != nil, let module, module.hasPrefix("/"), let uri, uri.hasPrefix("pkcs11:"),
                  DeviceKeyHardware.registered(.pkcs11)?.accepts(self) ?? true else {
                throw VaultError.corrupted("\(path): a PKCS #11 record needs the wrapped key's file, the module's absolute path and a pkcs11: URI")
            }
        }
    }

    /// Reads a version-1 record as version 2. Version 1 kept a keyring's description in `name`
    /// and no name for a systemd credential behind it, so such a cache could not read its
    /// credential; the credential is taken to have the default name, as `vault init` gives it.
    mutating func upgrade() {
        guard version == 1 else { return }
        version = 2
        if kind == .keyring, backing == .systemdCredential, backingName == nil { backingName = Self.defaultCredentialName }
    }

    /// The record of the provider behind a keyring cache (`self` for the other kinds).
    /// - Returns: The backing provider's record.
    public func backingRecord() -> DeviceKeyRecord {
        guard kind == .keyring else { return self }
        var inner = self
        inner.kind = backing ?? .file
        inner.backing = nil
        inner.backingName = nil
        inner.timeout = nil
        inner.name = inner.kind == .systemdCredential ? backingName : nil
        return inner
    }

    /// Credential names as systemd accepts them: letters, digits, `_ - .`, at most 255 bytes.
    static func validName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && name != "." && name != ".."
            && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) && $0.isASCII || "_-.".unicodeScalars.contains($0) }
    }

    /// Writes the record (version 3, bound to the vault's id) atomically (0600) beside the
    /// device-key file, in its 0700 `vaults/` directory, and removes a record of an earlier
    /// version from the data directory.
    /// - Parameters:
    ///   - directory: The vault's data directory (the vault must be set up).
    ///   - filePath: The device-key file (nil: the default).
    /// - Throws: ``VaultError`` when the vault is not set up or a file cannot be written.
    public func save(directory: String, filePath: String? = nil) throws(VaultError) {
        try VaultError.call {
            guard let vaultID = try Self.vaultID(ofHome: directory) else { throw VaultError.notSetUp }
            var record = self
            record.version = Self.currentVersion
            record.vaultID = vaultID
            let trusted = Self.trustedDirectory(filePath: filePath)
            try SecureFile.ensurePrivateDirectory(trusted)
            try SecureFile.writeAtomically(try CanonicalEncoding.encode(record), to: Self.trustedPath(vaultID: vaultID, filePath: filePath))
            let legacy = directory + "/" + Self.fileName
            if access(legacy, F_OK) == 0 {
                unlink(legacy)
                try SecureFile.syncDirectory(directory)
            }
        }
    }

    /// The provider this record names; `filePath` is the key file of the file provider (and of a
    /// keyring backed by it) when the record does not name one.
    /// - Parameter filePath: The device-key file (nil: the default).
    /// - Returns: The provider.
    public func provider(filePath: String? = nil) -> any DeviceKeyProvider {
        CheckedDeviceKeyProvider(inner: uncheckedProvider(filePath: filePath), record: self,
                                 recordDirectory: Self.trustedDirectory(filePath: filePath))
    }

    func uncheckedProvider(filePath: String?) -> any DeviceKeyProvider {
        switch kind {
        case .file:
            return FileDeviceKeyProvider(path: path ?? filePath)
        case .systemdCredential:
            return SystemdCredentialDeviceKeyProvider(name: name ?? "", encryptedCredential: sealedPath)
        case .tpm2, .pkcs11:
            return HardwareDeviceKeyProvider(record: self)
        case .keyring:
            return KeyringDeviceKeyProvider(description: name ?? "", timeout: timeout ?? 600,
                                            backing: backingRecord().uncheckedProvider(filePath: filePath))
        }
    }

    /// A short text of what the record names, for status lines.
    public var summary: String {
        switch kind {
        case .file: return "file" + (path.map { " \($0)" } ?? "")
        case .systemdCredential: return "systemd-credential \(name ?? "")" + (sealedPath.map { " (encrypted: \($0))" } ?? "")
        case .tpm2: return "tpm2 \(sealedPath ?? "")" + ((pcrs ?? []).isEmpty ? "" : " (PCRs \((pcrs ?? []).map(String.init).joined(separator: ",")))")
        case .keyring: return "keyring \(name ?? "") (\(timeout ?? 0) s) in front of \(backingRecord().summary)"
        case .pkcs11: return "pkcs11 \(uri ?? "") (module \(module ?? ""); wrapped key: \(sealedPath ?? ""))"
        }
    }
}

/// A provider whose key must match a record's check value.
struct CheckedDeviceKeyProvider: DeviceKeyProvider {
    let inner: any DeviceKeyProvider
    let record: DeviceKeyRecord
    /// The trusted directory the record was read from (where the vault's rollback anchor lives),
    /// or nil.
    var recordDirectory: String? = nil

    /// The inner provider's.
    var isOnRemovableHardware: Bool { inner.isOnRemovableHardware }

    func deviceKey() throws -> SecretBytes {
        let check = record.check
        let accepts: (SecretBytes) -> Bool = { $0.count == 32 && DeviceKeyRecord.checkValue(of: $0) == check }
        // A keyring cache holding another key (an erased vault's, at the same home path) does
        // not hide the backing provider's key: the cache is asked to check what it holds.
        let key = try (inner as? KeyringDeviceKeyProvider)?.deviceKey(accepting: accepts) ?? inner.deviceKey()
        guard accepts(key) else {
            key.wipe()
            throw VaultError.deviceKey("the \(record.kind.rawValue) provider gave a device key that is not this vault's (its check value differs from \(DeviceKeyRecord.fileName)); this data directory was made on another machine, the credential or sealed key belongs to another vault, or the key source was replaced")
        }
        return key
    }
}

extension VaultError {
    package static func call<Result>(_ body: () throws -> Result) throws(VaultError) -> Result {
        do { return try body() } catch let error as VaultError { throw error } catch { throw VaultError.wrap(error) }
    }
}
