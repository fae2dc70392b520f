import Foundation
import Cipher
import Age
import Vault
import Keychain
import ProtectedFiles

/// Backups of a vault's home that restore on another machine (docs/RECOVERY.md): one age file,
/// encrypted to the recipients the caller chooses (X25519, post-quantum, SSH, plugin recipients
/// such as a hardware token, or a passphrase), holding what is needed to open again every item,
/// protected file and database of the classes without `ThisDeviceOnly`. Its contents are
/// authenticated under the vault's own keys as well, so a file made by someone who knows only
/// a recipient (anyone can encrypt to a public key) is refused at restore.
///
/// What goes in (docs/FORMATS.md, "Backup"): `vault.state` (the wrappings under the passcode,
/// the answers and the recovery key), `always.key`, the protected-file key table without its
/// thisDeviceOnly entries, and a consistent copy of every keychain of the home without its
/// thisDeviceOnly rows, each row's class binding checked first; files the caller names
/// (protected files and databases, which live at the user's paths). What stays: the device key
/// and every thisDeviceOnly item or key pair (named in the manifest), and keys held in hardware.
public enum Backup {
    /// What a backup holds, for a report (`--json`).
    public struct Report: Sendable, Codable {
        /// The vault's id (32 lower-case hex digits).
        public var vaultID: String
        /// The files inside: `home` files by their name in the home, `path` files by their path.
        public var entries: [Entry]
        /// ThisDeviceOnly items and key pairs left out, by name and class.
        public var leftBehind: [LeftBehind]
        /// What else stays on the device (the device key's provider, keys in hardware).
        public var stayOnDevice: [String]
        /// Keychain rows left out because their class binding did not verify (damaged or planted).
        public var damaged: [String]
        /// The plaintext bytes written (before encryption).
        public var bytes: UInt64

        /// One file of the backup.
        public struct Entry: Sendable, Codable, Equatable {
            /// `home` or `path`.
            public var kind: String
            /// The name in the home, or the absolute path.
            public var name: String
            /// Its size in bytes.
            public var size: UInt64
        }

        /// One thing left behind.
        public struct LeftBehind: Sendable, Codable, Equatable {
            /// Its name (an item's service and account, a protected-file class).
            public var name: String
            /// Its class.
            public var `class`: String
        }
    }

    /// Writes a backup of `manager`'s home.
    ///
    /// Needs the vault's whenUnlocked class key (the vault unlocked, or an unlock agent holding
    /// it unlocked) and its device key (to check every keychain row and to name the
    /// thisDeviceOnly items). Applications keep running: each keychain is copied from one
    /// snapshot through SQLite's backup API. A change of `vault.state` while the backup runs (a
    /// passcode change, a rotation) makes it fail, so that it never holds a state and keys of
    /// different moments: run it again.
    ///
    /// - Parameters:
    ///   - manager: The vault.
    ///   - recipients: Who can open the backup (age recipients; an ``ScryptRecipient`` alone for a passphrase).
    ///   - armor: Write ASCII armor.
    ///   - includePaths: Files to include (absolute or relative to the working directory): protected
    ///     files and databases. A database whose `-key` record lies beside it brings it along; a
    ///     database with a non-empty `-wal` (open, or not closed cleanly) is refused.
    ///   - progress: Called with the plaintext bytes written so far and the total expected.
    ///   - sink: Receives the encrypted bytes.
    /// - Returns: What the backup holds.
    /// - Throws: ``BackupError``, ``VaultError`` (locked: the class key is unavailable),
    ///   ``KeychainError``, ``ProtectedFileError``, ``AgeError``, and what `sink` throws.
    public static func write(manager: CryptoManager, recipients: [any AgeRecipient], armor: Bool = false, includePaths: [String] = [],
                             progress: ((UInt64, UInt64) -> Void)? = nil,
                             sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws -> Report {
        let home = manager.directory
        let classKey = try manager.classKey(for: .whenUnlocked)
        let macKey = BackupArchive.macKey(classKey: classKey)
        classKey.wipe()
        defer { macKey.wipe() }
        guard let vaultID = try manager.vaultID else { throw manager.isErased ? VaultError.erased : VaultError.notSetUp }

        // The home's files, read before anything is written.
        let statePath = home + "/vault.state"
        let state = try readPrivate(statePath)
        var homeFiles: [(name: String, bytes: [UInt8])] = [("vault.state", state)]
        // always.key is a key in the clear: zeroed once written.
        defer { for index in homeFiles.indices { for byte in homeFiles[index].bytes.indices { homeFiles[index].bytes[byte] = 0 } } }
        if access(home + "/always.key", F_OK) == 0 { homeFiles.append(("always.key", try readPrivate(home + "/always.key"))) }
        var leftBehind: [BackupManifest.LeftBehind] = []
        if let table = try ProtectedFilesDeviceKeyDependent(manager: manager).backupCopy() {
            homeFiles.append(("protected-files.keys", table.bytes))
            leftBehind += table.leftBehind.map { BackupManifest.LeftBehind(name: $0, class: "protected-file key pair") }
        }
        var damaged: [String] = []
        let indexKey = try manager.deviceSubkey(purpose: "keychain blind index v1")
        defer { indexKey.wipe() }
        for keychain in KeychainDeviceKeyDependent.keychains(in: home) {
            let copy = try keychain.backupCopy(indexKey: indexKey) { accessibility in
                guard let current = try? manager.classKey(for: accessibility) else { return [] }
                return [current] + ((try? manager.retiredClassKeys(for: accessibility)) ?? [])
            }
            let name = String(keychain.path.dropFirst(home.count + 1))
            homeFiles.append((name, copy.bytes))
            leftBehind += copy.leftBehind.map { BackupManifest.LeftBehind(name: "\(name): \($0.name)", class: $0.accessibility) }
            damaged += copy.damaged.map { "\(name): \($0)" }
        }

        // Included files: opened now, sizes fixed.
        var included: [(path: String, fd: Int32, size: UInt64)] = []
        defer { for file in included { close(file.fd) } }
        for path in try expandIncluded(includePaths) {
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw BackupError.io("cannot open \(path): \(String(cString: strerror(errno)))") }
            guard let status = try? FileCalls.status(fd), status.isRegularFile else {
                close(fd)
                throw BackupError.invalidArgument("\(path) is not a regular file; name files (a protected database's file brings its -key record along)")
            }
            included.append((path, fd, UInt64(status.size)))
        }

        var stayOnDevice: [String] = []
        if let record = try? DeviceKeyRecord.load(directory: home, filePath: nil) {
            stayOnDevice.append("the device key (\(record.summary)): a restore binds the vault to the new machine's")
        } else {
            stayOnDevice.append("the device key: a restore binds the vault to the new machine's")
        }
        let manifest = BackupManifest(created: UInt64(max(0, Date().timeIntervalSince1970)), vaultID: vaultID,
                                      entries: homeFiles.map { .init(kind: "home", name: $0.name, size: UInt64($0.bytes.count)) }
                                          + included.map { .init(kind: "path", name: $0.path, size: $0.size) },
                                      leftBehind: leftBehind, stayOnDevice: stayOnDevice, damaged: damaged)
        let manifestBytes = try CanonicalEncoding.encode(manifest)
        let total = UInt64(manifestBytes.count) + manifest.entries.reduce(0) { $0 + $1.size }

        let encryptor = try AgeEncryptor(recipients: recipients, armor: armor, sink: sink)
        var writer = try BackupArchiveWriter { try encryptor.update($0) }
        try writer.header(kind: BackupArchive.manifestKind, name: "manifest.json", size: UInt64(manifestBytes.count))
        try writer.put(Array(manifestBytes))
        for file in homeFiles {
            try writer.header(kind: BackupArchive.homeFileKind, name: file.name, size: UInt64(file.bytes.count))
            try writer.put(file.bytes)
            progress?(writer.written, total)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for file in included {
            try writer.header(kind: BackupArchive.pathKind, name: file.path, size: file.size)
            var left = file.size
            while left > 0 {
                let want = Int(min(UInt64(buffer.count), left))
                let n = buffer.withUnsafeMutableBytes { read(file.fd, $0.baseAddress, want) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw BackupError.io("\(file.path) changed while it was read (it is shorter than when the backup began): stop its writers, then back up again") }
                try buffer.withUnsafeBytes { try writer.put(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                left -= UInt64(n)
                progress?(writer.written, total)
            }
        }
        for index in buffer.indices { buffer[index] = 0 }
        // The state must be the one copied at the start: the MAC key and every copy belong to it.
        guard (try? readPrivate(statePath)) == state else {
            throw BackupError.io("the vault changed while it was backed up (a passcode change, a key rotation…): back up again")
        }
        try writer.finish(macKey: macKey)
        try encryptor.finish()
        return Report(vaultID: Encoding.hex(Array(vaultID)), entries: manifest.entries.map { .init(kind: $0.kind, name: $0.name, size: $0.size) },
                      leftBehind: leftBehind.map { .init(name: $0.name, class: $0.class) }, stayOnDevice: stayOnDevice, damaged: damaged,
                      bytes: writer.written)
    }

    /// Writes a backup to `path` atomically (0600): ``write(manager:recipients:armor:includePaths:progress:sink:)``
    /// into a temporary file renamed into place once complete, so an interrupted backup leaves
    /// no file (a device or FIFO is written in place).
    /// - Parameters:
    ///   - manager: The vault.
    ///   - recipients: Who can open the backup.
    ///   - path: The backup file.
    ///   - armor: Write ASCII armor.
    ///   - includePaths: Files to include.
    ///   - progress: Called with the bytes written so far and the total.
    /// - Returns: What the backup holds.
    /// - Throws: As ``write(manager:recipients:armor:includePaths:progress:sink:)``, and the output's I/O errors.
    public static func write(manager: CryptoManager, recipients: [any AgeRecipient], toFile path: String, armor: Bool = false,
                             includePaths: [String] = [], progress: ((UInt64, UInt64) -> Void)? = nil) throws -> Report {
        var report: Report?
        _ = try SecureFile.writeOutput(to: path) { fd in
            report = try write(manager: manager, recipients: recipients, armor: armor, includePaths: includePaths, progress: progress) { bytes in
                try SecureFile.writeAll(fd, bytes, path: path)
            }
        }
        guard let report else { throw BackupError.io("no backup was written to \(path)") }
        return report
    }

    /// The paths to include, absolute, each protected database followed by its `-key` record.
    static func expandIncluded(_ paths: [String]) throws -> [String] {
        var result: [String] = []
        for given in paths {
            let path = VaultPaths.absolute(given)
            guard BackupArchive.isIncludedPath(path) else { throw BackupError.invalidArgument("\(given) is not a plain path (no . or .. components)") }
            if let wal = try? FileCalls.linkStatus(path + "-wal"), wal.size > 0 {
                throw BackupError.invalidArgument("\(path) is a database that is open, or was not closed cleanly (its -wal holds pages not yet in the file): close it (every `db` command closes it), then back up")
            }
            if !result.contains(path) { result.append(path) }
            if (try? FileCalls.linkStatus(path + "-key"))?.isRegularFile == true, !result.contains(path + "-key") { result.append(path + "-key") }
        }
        return result
    }

    static func readPrivate(_ path: String) throws -> [UInt8] {
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
            return try SecureFile.read(path, maxLength: 256 << 20)
        } catch let failure {
            throw BackupError.io("\(failure)")
        }
    }
}
