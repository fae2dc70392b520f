import Foundation
import Crypto
import Cipher
import Vault

/// Everything a backup or a restore can fail with.
public enum BackupError: Error, Sendable, CustomStringConvertible {
    /// The backup is damaged, truncated, or does not authenticate under its vault's keys.
    case damaged(String)
    /// The backup is of another vault than the home it would replace.
    case otherVault(String)
    /// The home (or a path to restore) exists and replacing it was not asked for.
    case exists(String)
    /// An argument is not acceptable (a path, an option).
    case invalidArgument(String)
    /// A file cannot be read or written.
    case io(String)

    /// A message that says what went wrong and what to do.
    public var description: String {
        switch self {
        case .damaged(let why): return "the backup is damaged or was altered: \(why)"
        case .otherVault(let why): return why
        case .exists(let why): return why
        case .invalidArgument(let why): return "invalid argument: \(why)"
        case .io(let why): return why
        }
    }
}

/// The plaintext of a backup (inside the age encryption), docs/FORMATS.md "Backup":
/// `"SFBACKUP" ‖ 0x01`, then records `kind (1) ‖ name length (2) ‖ name ‖ size (8) ‖ content`,
/// the manifest first and an end record last whose content is
/// HMAC-SHA256(backup key, SHA-256(every byte before that content)).
enum BackupArchive {
    static let magic = Array("SFBACKUP".utf8) + [0x01]
    /// Record kinds.
    static let manifestKind: UInt8 = 0x01
    static let homeFileKind: UInt8 = 0x02
    static let pathKind: UInt8 = 0x03
    static let endKind: UInt8 = 0x7F
    static let maximumManifest: UInt64 = 4 << 20
    static let maximumName = 4096

    /// The key of the end record's MAC: HKDF-SHA256(the vault's current whenUnlocked class key,
    /// info "securefoundation backup v1 mac").
    static func macKey(classKey: SecretBytes) -> SecretBytes {
        KeyDerivation.hkdf(classKey, info: "securefoundation backup v1 mac")
    }

    /// The names a home file may have in a backup: `vault.state`, `always.key`,
    /// `protected-files.keys`, `keychain.sqlite` and `DIR/keychain.sqlite` (DIR of letters,
    /// digits, `._-`, not starting with a dot).
    static func isHomeName(_ name: String) -> Bool {
        if ["vault.state", "always.key", "protected-files.keys", "keychain.sqlite"].contains(name) { return true }
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == "keychain.sqlite", let first = parts[0].first, first != ".", parts[0].count <= 64 else { return false }
        return parts[0].utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    /// An included path's name: absolute, no `.` or `..` component, no empty component, no NUL.
    static func isIncludedPath(_ name: String) -> Bool {
        guard name.hasPrefix("/"), name.count > 1, !name.utf8.contains(0) else { return false }
        return name.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }
}

/// The manifest: the first record, canonical JSON.
struct BackupManifest: Codable, Equatable {
    static let formatName = "securefoundation-backup"
    static let currentVersion = 1

    struct Entry: Codable, Equatable {
        /// `home` or `path`.
        var kind: String
        var name: String
        var size: UInt64
    }

    struct LeftBehind: Codable, Equatable {
        var name: String
        var `class`: String
    }

    var format = BackupManifest.formatName
    var version = BackupManifest.currentVersion
    /// Seconds since 1970.
    var created: UInt64
    var vaultID: Data
    var entries: [Entry]
    /// ThisDeviceOnly items and keys, by name and class: they stay on the machine.
    var leftBehind: [LeftBehind]
    /// Keys held in hardware or by the machine (the device key's provider), which stay too.
    var stayOnDevice: [String]
    /// Keychain rows left out because their class binding did not verify.
    var damaged: [String]

    func check() throws(BackupError) {
        guard format == BackupManifest.formatName, version == BackupManifest.currentVersion else {
            throw BackupError.damaged("its manifest is of format \(format.prefix(64).debugDescription) version \(version); this version reads \(BackupManifest.formatName) version \(BackupManifest.currentVersion)")
        }
        guard vaultID.count == 16 else { throw BackupError.damaged("its manifest names no valid vault id") }
        guard entries.first == Entry(kind: "home", name: "vault.state", size: entries.first?.size ?? 0) else {
            throw BackupError.damaged("its manifest does not list vault.state first")
        }
        var seen = Set<String>()
        for entry in entries {
            switch entry.kind {
            case "home": guard BackupArchive.isHomeName(entry.name) else { throw BackupError.damaged("its manifest names a home file \(entry.name.prefix(80).debugDescription) that no backup holds") }
            case "path": guard BackupArchive.isIncludedPath(entry.name) else { throw BackupError.damaged("its manifest names a path \(entry.name.prefix(80).debugDescription) that is not absolute and plain") }
            default: throw BackupError.damaged("its manifest names an entry of kind \(entry.kind.prefix(20).debugDescription)")
            }
            guard seen.insert(entry.kind + ":" + entry.name).inserted else { throw BackupError.damaged("its manifest names \(entry.name.prefix(80).debugDescription) twice") }
        }
    }
}

/// Writes the archive's bytes to `sink`, hashing them for the end record.
struct BackupArchiveWriter {
    private var hash = SHA256()
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private(set) var written: UInt64 = 0

    init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        self.sink = sink
        try put(BackupArchive.magic)
    }

    mutating func put(_ bytes: UnsafeRawBufferPointer) throws {
        hash.update(bufferPointer: bytes)
        written += UInt64(bytes.count)
        try sink(bytes)
    }

    mutating func put(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try put($0) }
    }

    mutating func header(kind: UInt8, name: String, size: UInt64) throws {
        let nameBytes = Array(name.utf8)
        var header = ByteWriter()
        header.byte(kind)
        header.byte(UInt8(nameBytes.count >> 8))
        header.byte(UInt8(nameBytes.count & 0xFF))
        header.raw(nameBytes)
        header.uint64(size)
        try put(header.bytes)
    }

    /// Writes the end record: its header, then the MAC of everything before the MAC.
    mutating func finish(macKey: SecretBytes) throws {
        try header(kind: BackupArchive.endKind, name: "", size: 32)
        let digest = Array(hash.finalize())
        let mac = Array(HMAC<SHA256>.authenticationCode(for: digest, using: macKey.symmetricKey))
        try mac.withUnsafeBytes { try sink($0) }
        written += 32
    }
}

/// Reads the archive from the decrypted stream, handing each record's content on as it comes.
/// Every length is checked before anything is kept; bytes after the end record are refused.
final class BackupArchiveReader {
    enum Event {
        /// A record starts (its content follows through `content`).
        case start(kind: UInt8, name: String, size: UInt64)
        /// Part of the current record's content.
        case content(UnsafeRawBufferPointer)
        /// The current record's content ended.
        case end
    }

    private enum State { case magic, header, content(remaining: UInt64), mac, done }
    private var state = State.magic
    private var pending: [UInt8] = []
    private var hash = SHA256()
    private(set) var digest: [UInt8]?
    private(set) var mac: [UInt8]?
    private var records = 0
    private let handle: (Event) throws -> Void

    init(handle: @escaping (Event) throws -> Void) { self.handle = handle }

    var isComplete: Bool { if case .done = state { return true } else { return false } }

    func feed(_ input: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < input.count {
            switch state {
            case .magic:
                let take = min(BackupArchive.magic.count - pending.count, input.count - offset)
                pending += input[offset..<offset + take]
                hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: input[offset..<offset + take]))
                offset += take
                if pending.count == BackupArchive.magic.count {
                    guard pending == BackupArchive.magic else {
                        throw BackupError.damaged("it is not a SecureFoundation backup (or of a newer version): its plaintext does not start with SFBACKUP 1")
                    }
                    pending = []
                    state = .header
                }
            case .header:
                // kind (1) ‖ name length (2) ‖ name ‖ size (8): gather it whole.
                let needed: Int
                if pending.count < 3 { needed = 3 - pending.count } else {
                    let nameLength = Int(pending[1]) << 8 | Int(pending[2])
                    guard nameLength <= BackupArchive.maximumName else { throw BackupError.damaged("a record name of \(nameLength) bytes") }
                    needed = 3 + nameLength + 8 - pending.count
                }
                let take = min(needed, input.count - offset)
                pending += input[offset..<offset + take]
                hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: input[offset..<offset + take]))
                offset += take
                guard pending.count >= 3 else { continue }
                let nameLength = Int(pending[1]) << 8 | Int(pending[2])
                guard pending.count == 3 + nameLength + 8 else { continue }
                let kind = pending[0]
                guard let name = String(validating: pending[3..<3 + nameLength], as: UTF8.self) else {
                    throw BackupError.damaged("a record name is not UTF-8")
                }
                var size: UInt64 = 0
                for byte in pending[(3 + nameLength)...] { size = size << 8 | UInt64(byte) }
                pending = []
                records += 1
                if kind == BackupArchive.endKind {
                    guard name.isEmpty, size == 32 else { throw BackupError.damaged("its end record is malformed") }
                    digest = Array(hash.finalize())
                    state = .mac
                    continue
                }
                try handle(.start(kind: kind, name: name, size: size))
                if size == 0 { try handle(.end) }
                state = size == 0 ? .header : .content(remaining: size)
            case .content(let remaining):
                let take = Int(min(remaining, UInt64(input.count - offset)))
                let part = UnsafeRawBufferPointer(rebasing: input[offset..<offset + take])
                hash.update(bufferPointer: part)
                try handle(.content(part))
                offset += take
                if remaining == UInt64(take) {
                    try handle(.end)
                    state = .header
                } else {
                    state = .content(remaining: remaining - UInt64(take))
                }
            case .mac:
                let take = min(32 - pending.count, input.count - offset)
                pending += input[offset..<offset + take]
                offset += take
                if pending.count == 32 {
                    mac = pending
                    pending = []
                    state = .done
                }
            case .done:
                throw BackupError.damaged("bytes follow its end record")
            }
        }
    }

    /// Checks that the stream ended exactly after the end record.
    func finish() throws {
        guard isComplete else { throw BackupError.damaged("it ends before its end record (truncated)") }
    }
}
