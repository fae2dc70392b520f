import Foundation
import Cipher
import Crypto

/// Where the device key comes from.
///
/// The device key is a random 32-byte key stored apart from the vault's data directory. Keys of
/// the thisDeviceOnly classes also depend on it, so a data directory copied to another machine
/// without the device key opens nothing marked thisDeviceOnly. Other sources (systemd
/// credentials, the kernel keyring, a TPM) can conform to this protocol.
public protocol DeviceKeyProvider: Sendable {
    /// Returns the 32-byte device key, creating it if the source does that.
    /// - Throws: ``VaultError/deviceKey(_:)`` or ``VaultError/insecurePermissions(path:reason:fix:)``.
    /// - Returns: The device key (the caller wipes it).
    func deviceKey() throws -> SecretBytes

    /// Whether the key comes from hardware that can be removed at any time (a PKCS #11 token):
    /// the vault then reads it again at every use instead of keeping it. False by default.
    var isOnRemovableHardware: Bool { get }
}

extension DeviceKeyProvider {
    /// False: the key's source stays (a file, a credential, a TPM).
    public var isOnRemovableHardware: Bool { false }
}

/// The default device-key source: 32 random bytes in a 0600 file inside a 0700 directory,
/// `$XDG_CONFIG_HOME/securefoundation/device.key`, else `~/.config/securefoundation/device.key`,
/// created on first use.
public struct FileDeviceKeyProvider: DeviceKeyProvider {
    /// The device-key file.
    public let path: String

    /// - Parameter path: The key file, or nil for the default location.
    public init(path: String? = nil) {
        self.path = VaultPaths.absolute(path ?? FileDeviceKeyProvider.defaultPath())
    }

    /// `$XDG_CONFIG_HOME/securefoundation/device.key`, else `~/.config/securefoundation/device.key`.
    /// - Parameter environment: The environment to read `$XDG_CONFIG_HOME` and `$HOME` from.
    /// - Returns: The key file's path.
    package static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return config + "/securefoundation/device.key"
        }
        return VaultPaths.homeDirectory(environment) + "/.config/securefoundation/device.key"
    }

    /// Reads the key file, creating it (and its directory) with a new random key if it does not exist.
    /// - Returns: The 32-byte device key.
    /// - Throws: ``VaultError/insecurePermissions(path:reason:fix:)`` for a file or directory others can reach,
    ///   ``VaultError/deviceKey(_:)`` for a file that is not 32 bytes or cannot be written.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            do {
                try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(path))
                if access(path, F_OK) != 0 {
                    try KeyFile.createExclusively(path: path, key: SecretBytes.random(count: 32))
                }
                return try KeyFile.read(path: path, what: "device key")
            } catch let error as VaultError {
                throw error
            } catch {
                let wrapped = VaultError.wrap(error)
                if case .insecurePermissions = wrapped { throw wrapped }
                throw VaultError.deviceKey("\(path): \(wrapped)")
            }
        }
    }
}

/// A device key held in memory, for tests and for callers with their own key source.
public struct StaticDeviceKeyProvider: DeviceKeyProvider {
    private let key: SecretBytes
    /// - Parameter key: 32 bytes; the provider hands out copies.
    public init(key: SecretBytes) { self.key = key }
    /// A copy of the key.
    /// - Returns: The copy (the caller wipes it).
    /// - Throws: ``VaultError/deviceKey(_:)`` when the key is not 32 bytes.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        guard key.count == 32 else { throw VaultError.deviceKey("the device key is \(key.count) bytes, not 32") }
        return key.copy()
    }
}

/// Raw 32-byte key files.
enum KeyFile {
    /// Creates `path` holding `key` unless it exists (then the existing file wins): the key is
    /// written to a temporary file, synced, and hard-linked into place, so two processes racing
    /// end up with one key.
    static func createExclusively(path: String, key: SecretBytes) throws {
        defer { key.wipe() }
        let directory = SecureFile.directoryOf(path)
        let (fd, temporary) = try SecureFile.makeTemporaryFile(in: directory)
        defer { unlink(temporary) }
        do {
            try key.withUnsafeBytes { try SecureFile.writeAll(fd, $0, path: temporary) }
            do { try FileCalls.sync(fd) } catch { throw SecureFile.Failure(error, path: temporary) }
        } catch {
            close(fd)
            throw error
        }
        close(fd)
        do {
            try FileCalls.hardLink(temporary, path)
        } catch where error.code != EEXIST {
            throw SecureFile.Failure(error, path: path)
        } catch {}
        try SecureFile.syncDirectory(directory)
    }

    /// Reads a 32-byte key file after checking it is private.
    static func read(path: String, what: String) throws -> SecretBytes {
        try SecureFile.checkPrivate(path, isDirectory: false)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        let raw = try SecretBytes(readingFrom: fd, maxLength: 64, trimNewline: false, name: path)
        guard raw.count == 32 else {
            raw.wipe()
            throw VaultError.corrupted("the \(what) file \(path) holds \(raw.count) bytes, not 32")
        }
        return raw
    }
}

/// Default locations.
public enum VaultPaths {
    /// 16 hex digits of SHA-256 of `directory` made absolute: the name one data directory gives
    /// to what is kept per vault outside it (the agent's socket, the keyring entry of its device key).
    /// - Parameter directory: A vault's data directory.
    /// - Returns: The digest, in hex.
    public static func digest(of directory: String) -> String { DataDirectory.digest(of: directory) }

    /// The vault's data directory: `$SECUREFOUNDATION_HOME`, else `$XDG_DATA_HOME/securefoundation`,
    /// else `~/.local/share/securefoundation` (Cipher's `DataDirectory`).
    /// - Parameter environment: The environment to read the variables and `$HOME` from.
    /// - Returns: The directory's path.
    package static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        DataDirectory.defaultDirectory(environment: environment)
    }

    /// `path` made absolute against the current directory, without trailing slashes.
    /// - Parameter path: A relative or absolute path.
    /// - Returns: The absolute path.
    package static func absolute(_ path: String) -> String { DataDirectory.absolute(path) }

    static func homeDirectory(_ environment: [String: String]) -> String { DataDirectory.homeDirectory(environment) }
}

/// `always.key`: the always-class keys. Layout 1 is exactly 32 bytes (one key, as created on
/// first use). Layout 2, written by ``CryptoManager/rotateClassKeys()``, is
/// `"SFAK" ‖ 0x02 ‖ count (1, 1…17) ‖ count × key (32)`, current key first, then the retired
/// ones, newest first.
enum AlwaysKeyFile {
    static let magic: [UInt8] = Array("SFAK".utf8)
    static let maximumKeys = 1 + VaultSecrets.maximumRetiredClassMasters

    static func read(path: String) throws -> [SecretBytes] {
        try SecureFile.checkPrivate(path, isDirectory: false)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        let limit = 6 + 32 * maximumKeys
        let raw = try SecretBytes(readingFrom: fd, maxLength: limit + 1, trimNewline: false, name: path)
        defer { raw.wipe() }
        return try parse(raw, path: path)
    }

    static func parse(_ raw: SecretBytes, path: String) throws -> [SecretBytes] {
        try raw.withUnsafeBytes { bytes in
            if bytes.count == 32 {
                return [SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }]
            }
            guard bytes.count >= 6, Array(bytes[0..<4]) == magic, bytes[4] == 2 else {
                throw VaultError.corrupted("the always-class key file \(path) holds \(bytes.count) bytes that are neither one key nor a key list")
            }
            let count = Int(bytes[5])
            guard (1...maximumKeys).contains(count), bytes.count == 6 + 32 * count else {
                throw VaultError.corrupted("the always-class key file \(path) is truncated or malformed")
            }
            return (0..<count).map { index in
                let start = 6 + 32 * index
                return SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 32])) }
            }
        }
    }

    static func encode(_ keys: [SecretBytes]) throws -> SecretBytes {
        guard (1...maximumKeys).contains(keys.count), keys.allSatisfy({ $0.count == 32 }) else {
            throw VaultError.invalidArgument("an always-class key list of \(keys.count) keys")
        }
        return SecretBytes(count: 6 + 32 * keys.count) { target in
            for (index, byte) in magic.enumerated() { target[index] = byte }
            target[4] = 2
            target[5] = UInt8(keys.count)
            for (index, key) in keys.enumerated() {
                key.withUnsafeBytes { (target.baseAddress! + 6 + 32 * index).copyMemory(from: $0.baseAddress!, byteCount: 32) }
            }
        }
    }
}
