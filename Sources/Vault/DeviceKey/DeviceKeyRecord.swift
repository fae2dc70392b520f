import Foundation
import Cipher

/// Which device-key provider a vault uses, recorded in `device-key.provider` in the data
/// directory when the vault is created with a chosen provider (`vault init
/// --device-key-provider`) or migrated to one. A vault without the file uses the device-key
/// file, as before. Layout: docs/FORMATS.md, "device-key.provider".
///
/// The record holds a check value (the first 16 bytes of HKDF-SHA256(device key, "securefoundation
/// device key check v1")), so a provider that yields another key (another machine's TPM, a
/// credential of another vault) is refused with a clear error instead of deriving keys that
/// open nothing.
public struct DeviceKeyRecord: Codable, Equatable, Sendable {
    public static let fileName = "device-key.provider"
    static let formatName = "securefoundation-device-key-provider"
    static let currentVersion = 2
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
        /// Sealed to a TPM 2.0 with tpm2-tools, optionally bound to PCR values.
        case tpm2
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
    /// 16 bytes identifying the device key (not the key).
    public var check: Data

    public init(kind: Kind, path: String? = nil, name: String? = nil, sealedPath: String? = nil, pcrs: [Int]? = nil,
                timeout: Int? = nil, backing: Kind? = nil, backingName: String? = nil, check: Data) {
        self.kind = kind
        self.path = path
        self.name = name
        self.sealedPath = sealedPath
        self.pcrs = pcrs
        self.timeout = timeout
        self.backing = backing
        self.backingName = backingName
        self.check = check
    }

    /// The check value of `key`.
    public static func checkValue(of key: SecretBytes) -> Data {
        let derived = KeyDerivation.hkdf(key, info: "securefoundation device key check v1")
        defer { derived.wipe() }
        return derived.withUnsafeBytes { Data($0.prefix(16)) }
    }

    /// The record in `directory`, or nil when there is none (the vault uses the key file).
    public static func load(directory: String) throws -> DeviceKeyRecord? {
        try readPrivateJSON(DeviceKeyRecord.self, at: directory + "/" + fileName, what: "a device-key provider record") { record, path in
            try record.check(path: path)
            record.upgrade()
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
        guard version == Self.currentVersion || version == 1 else {
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
        }
    }

    /// Reads a version-1 record as version 2. Version 1 kept a keyring's description in `name`
    /// and no name for a systemd credential behind it, so such a cache could not read its
    /// credential; the credential is taken to have the default name, as `vault init` gives it.
    mutating func upgrade() {
        guard version == 1 else { return }
        version = Self.currentVersion
        if kind == .keyring, backing == .systemdCredential, backingName == nil { backingName = Self.defaultCredentialName }
    }

    /// The record of the provider behind a keyring cache (`self` for the other kinds).
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

    /// Writes the record atomically (0600).
    public func save(directory: String) throws {
        try VaultError.call { try SecureFile.writeAtomically(try CanonicalEncoding.encode(self), to: directory + "/" + Self.fileName) }
    }

    /// The provider this record names; `filePath` is the key file of the file provider (and of a
    /// keyring backed by it) when the record does not name one.
    public func provider(filePath: String? = nil) -> any DeviceKeyProvider {
        CheckedDeviceKeyProvider(inner: uncheckedProvider(filePath: filePath), record: self)
    }

    func uncheckedProvider(filePath: String?) -> any DeviceKeyProvider {
        switch kind {
        case .file:
            return FileDeviceKeyProvider(path: path ?? filePath)
        case .systemdCredential:
            return SystemdCredentialDeviceKeyProvider(name: name ?? "", encryptedCredential: sealedPath)
        case .tpm2:
            return TPM2DeviceKeyProvider(sealedPath: sealedPath ?? "", pcrs: pcrs ?? [])
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
        }
    }
}

/// A provider whose key must match a record's check value.
struct CheckedDeviceKeyProvider: DeviceKeyProvider {
    let inner: any DeviceKeyProvider
    let record: DeviceKeyRecord

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
    static func call<Result>(_ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as VaultError { throw error } catch { throw VaultError.wrap(error) }
    }
}
