import Foundation
import Crypto
import Cipher
import CPlatform
import Shredder
import Age
import Vault

extension Backup {
    /// How a restore treats what is already there.
    public struct RestoreOptions: Sendable {
        /// Replace a home that holds a vault (of the same vault only), atomically. The home's
        /// other files (received shares, sealed device-key files…) are kept.
        public var replace = false
        /// Put the included paths under this directory (their absolute paths appended) instead
        /// of at their own paths.
        public var pathsRoot: String?
        /// Do not restore the included paths.
        public var skipPaths = false
        /// The device-key file of this machine (nil: the default, created when missing).
        public var deviceKeyFile: String?
        /// Where a new device key is kept (nil: the file, or the provider recorded beside it).
        package var installation: DeviceKeyInstallation?
        /// Restore a vault that this machine's configuration directory already anchors into a
        /// home that does not hold it (the home it lived in is gone). Without it that is refused:
        /// a second copy would raise the anchor the first one is checked against.
        public var takeOver = false
        /// Called with each step's name (fault-injection tests stop the process there).
        public var step: (@Sendable (String) throws -> Void)?

        /// Default options: into an empty or new home, paths at their own places.
        public init() {}
    }

    /// What a restore did.
    public struct RestoreReport: Sendable, Codable {
        /// The vault's id (32 lower-case hex digits).
        public var vaultID: String
        /// The home restored.
        public var home: String
        /// The home's files restored.
        public var homeFiles: [String]
        /// The included files, where they were written.
        public var paths: [String]
        /// What the backup says stayed on the machine it was made on (thisDeviceOnly items and
        /// key pairs, by name and class), and what this restore's re-binding removed.
        public var leftBehind: [Report.LeftBehind]
        /// What else stayed on that machine (its device key, keys in hardware).
        public var stayOnDevice: [String]
        /// Items and key pairs re-bound to this machine's device key.
        public var rebound: Int
        /// Items of the class `always` re-bound without a class binding check. Their rows were
        /// checked when the backup was made and are authenticated under the vault's keys, but the
        /// keychain file is written into the home before the re-binding reads it back, so this
        /// lists them as a re-binding of a data directory does (``DeviceKeyRebindResult/unverified``).
        public var unverified: [String]
        /// This machine's device key (its check value, 32 hex digits).
        public var deviceCheck: String
        /// Whether a vault was replaced.
        public var replaced: Bool
    }

    /// Restores a backup into `home`, binding the vault to this machine's device key.
    ///
    /// Nothing reaches `home` before the whole backup is read and authenticated: it is written
    /// into a new directory beside `home` (`.NAME.restore-RANDOM`, 0700), checked under the
    /// vault's keys (which `credential` opens), then put in place with one `rename` (an empty or
    /// missing home) or one atomic exchange (`replace`: the home's files that are not the
    /// vault's are kept, by hard links). A kill at any moment leaves the old home or the restored
    /// one; the staging directory it leaves is removed by the next restore beside it. Then the
    /// vault is re-bound to this machine's device key (``DeviceKeyRebinding``), with the rollback
    /// anchor raised past the restored state: restoring an older backup on purpose is a
    /// restore, while a file rolled back behind the vault's back is still refused. If that last
    /// step fails, the home is restored and `vault rebind-device-key` finishes it.
    ///
    /// - Parameters:
    ///   - fd: The backup, read to its end.
    ///   - identities: Identities or a passphrase that open the backup (age).
    ///   - home: The vault's data directory to restore into.
    ///   - credential: The vault's passcode, answers or recovery key, as they were when the backup was made.
    ///   - options: Replacing, where the included paths go, this machine's device key.
    /// - Returns: What was restored and left behind.
    /// - Throws: ``AgeError`` (no identity matches: status 3; damaged: 2), ``BackupError``,
    ///   ``VaultError`` (a wrong credential is a failed attempt), and the re-binding's errors.
    public static func restore(from fd: Int32, identities: [any AgeIdentity], home given: String, credential: VaultCredential,
                               options: RestoreOptions = RestoreOptions()) throws -> RestoreReport {
        let home = VaultPaths.absolute(given)
        let parent = SecureFile.directoryOf(home)
        let base = (home as NSString).lastPathComponent
        guard !base.isEmpty, base != "/", base != ".", base != ".." else { throw BackupError.invalidArgument("\(given) cannot be a vault's home") }
        if access(parent, F_OK) != 0 {
            do { try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
                throw BackupError.io("cannot create \(parent): \(error)")
            }
        }
        removeStaleStaging(parent: parent, base: base)
        let existing = try homeState(home)
        if existing.hasFiles && !options.replace {
            throw BackupError.exists("\(home) holds files already: restore into an empty or new directory, or give --replace to replace the vault in it (atomically; its other files are kept)")
        }

        let trusted = DeviceKeyRecord.trustedDirectory(filePath: VaultPaths.absolute(options.deviceKeyFile ?? FileDeviceKeyProvider.defaultPath()))

        let staging = parent + "/." + base + ".restore-" + (try SecureRandom.string(length: 12, alphabet: SecureRandom.alphanumeric))
        guard mkdir(staging, 0o700) == 0 else { throw BackupError.io("cannot create \(staging): \(String(cString: strerror(errno)))") }
        let lock = open(staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard lock >= 0, FileCalls.tryLockExclusive(lock) else {
            if lock >= 0 { close(lock) }
            throw BackupError.io("cannot lock \(staging)")
        }
        var stagingLive = true
        defer {
            if stagingLive { destroyTree(staging) }
            close(lock)
        }

        // 1. Read, decrypt and stage every record.
        let staged = try stage(from: fd, identities: identities, into: staging, existingVaultID: existing.vaultID,
                               freeSpaceOf: parent) { manifest throws in
            // Before the files are written: a vault this machine anchors, restored into a home that does not hold it.
            if existing.vaultID != manifest.vaultID, !options.takeOver,
               access(RollbackAnchor(directory: trusted, vaultID: manifest.vaultID).path, F_OK) == 0 {
                throw BackupError.exists("this machine already holds vault \(Encoding.hex(Array(manifest.vaultID))) in another home (its rollback anchor is in \(trusted)): restore over that home with --replace, or, if that home is gone, give --take-over (the anchor moves to this home, and a copy elsewhere is then refused as rolled back)")
            }
        }
        try options.step?("staged")
        // The staged files must be the bytes the stream carried (whose MAC is checked below).
        for (name, digest) in staged.homeDigests {
            let bytes: [UInt8]
            do { bytes = try SecureFile.read(staging + "/" + name, maxLength: 1 << 40) } catch { throw BackupError.io("cannot read back \(staging)/\(name): \(error)") }
            guard Array(SHA256.hash(data: bytes)) == digest else { throw BackupError.io("\(staging)/\(name) changed while the backup was restored; restore again") }
        }

        // 2. Authenticate the whole under the vault's keys, opened with the credential. The staged
        // state is opened without unlocking anything: no key of it is kept before the MAC holds.
        let device = try SecretBytes.random(count: 32)
        defer { device.wipe() }
        let check = try CryptoManager(directory: staging, deviceKeyProvider: StaticDeviceKeyProvider(key: device))
        guard try check.vaultID == staged.manifest.vaultID else {
            throw BackupError.damaged("its vault.state is of another vault than its manifest names")
        }
        var stateDigest: [UInt8] = []
        let classKey = try check.whenUnlockedKey(opening: credential, stateDigest: &stateDigest)
        let macKey = BackupArchive.macKey(classKey: classKey)
        classKey.wipe()
        let expected = HMACSHA256.mac(staged.digest, key: macKey)
        macKey.wipe()
        guard ConstantTime.equals(expected, staged.mac) else {
            throw BackupError.damaged("its contents do not authenticate under its vault's keys: it was altered, or made by someone who can encrypt to your recipients but does not hold the vault")
        }
        unlink(staging + "/attempts")
        // Pinned for the re-binding after the rename: the table the stream carried, or none.
        let tableDigest = staged.homeDigests["protected-files.keys"]
        try options.step?("authenticated")

        // 3. The included paths, each atomically (checked first: nothing is written when one is refused).
        var placed: [String] = []
        if !options.skipPaths {
            let targets = staged.paths.map { entry in (from: entry.staged, to: options.pathsRoot.map { VaultPaths.absolute($0) + entry.path } ?? entry.path) }
            for target in targets {
                guard let status = try? FileCalls.linkStatus(target.to) else { continue }
                guard status.isRegularFile else { throw BackupError.exists("\(target.to) exists and is not a regular file; nothing was restored") }
                guard options.replace else { throw BackupError.exists("\(target.to) exists: give --replace to replace it, --paths-to DIR to restore the paths elsewhere, or --skip-paths; nothing was restored") }
            }
            for target in targets {
                try place(target.from, at: target.to)
                placed.append(target.to)
                try options.step?("path placed")
            }
        }
        for path in staged.paths where access(path.staged, F_OK) == 0 { unlink(path.staged) }
        rmdir(staging + "/.paths")

        // 4. Into place: a rename, or an atomic exchange keeping the home's other files.
        if existing.hasFiles {
            try carryOver(from: home, to: staging)
            try options.step?("carried over")
            let code = sf_rename_exchange(staging, home)
            guard code == 0 else { throw BackupError.io("cannot exchange \(staging) and \(home): \(String(cString: strerror(code)))") }
        } else {
            if existing.exists { rmdir(home) }
            guard rename(staging, home) == 0 else { throw BackupError.io("cannot move \(staging) to \(home): \(String(cString: strerror(errno)))") }
            stagingLive = false
        }
        _ = try? SecureFile.syncDirectory(parent)
        try options.step?("in place")
        if existing.hasFiles { destroyTree(staging); stagingLive = false }

        // 5. Bound to this machine's device key, the anchor raised past the restored state.
        let manager = try CryptoManager(directory: home, deviceKeyProvider: try DeviceKeyRotation.provider(directory: home, filePath: options.deviceKeyFile))
        let report: DeviceKeyRebinding.Report
        do {
            // The state and the key table must be the ones authenticated above: the home is
            // writable again since the rename.
            report = try DeviceKeyRebinding.rebind(manager: manager, credential: credential, filePath: options.deviceKeyFile,
                                                   installation: options.installation,
                                                   dependents: DeviceKeyRebinding.dependents(of: manager, restoring: true, tableDigest: tableDigest ?? []),
                                                   restoring: true, expectedState: stateDigest, step: { try options.step?($0) })
        } catch {
            throw BackupError.io("\(home) is restored, but binding it to this machine's device key failed: \(error). Run the same `backup restore` again with --replace (or `securefoundation vault rebind-device-key --home \(home)` where this machine has no rollback anchor of the vault)")
        }
        manager.lock()
        let manifest = staged.manifest
        let removed = report.leftBehind.map { Report.LeftBehind(name: $0, class: "removed by the re-binding") }
        return RestoreReport(vaultID: Encoding.hex(Array(manifest.vaultID)), home: home,
                             homeFiles: manifest.entries.filter { $0.kind == "home" }.map(\.name), paths: placed,
                             leftBehind: manifest.leftBehind.map { .init(name: $0.name, class: $0.class) } + removed,
                             stayOnDevice: manifest.stayOnDevice, rebound: report.dependents.reduce(0) { $0 + $1.rebound },
                             unverified: report.unverified, deviceCheck: Encoding.hex(Array(report.newCheck)), replaced: existing.hasFiles)
    }

    /// What a restore read from the backup.
    struct Staged {
        var manifest: BackupManifest
        var paths: [(path: String, staged: String)]
        /// SHA-256 of each home file as the stream carried it.
        var homeDigests: [String: [UInt8]]
        var digest: [UInt8]
        var mac: [UInt8]
    }

    /// Decrypts the backup from `fd` and writes its files into `staging`, checking every record
    /// against the manifest.
    static func stage(from fd: Int32, identities: [any AgeIdentity], into staging: String, existingVaultID: Data?,
                      freeSpaceOf parent: String, checkManifest: @escaping (BackupManifest) throws -> Void) throws -> Staged {
        var manifestBytes: [UInt8] = []
        var homeDigests: [String: [UInt8]] = [:]
        var hasher: SHA256?
        var manifest: BackupManifest?
        var index = 0
        var current: Int32 = -1
        var currentPath = ""
        var paths: [(path: String, staged: String)] = []
        defer { if current >= 0 { close(current) } }
        let reader = BackupArchiveReader { event in
            switch event {
            case let .start(kind, name, size):
                guard let manifest else {
                    guard kind == BackupArchive.manifestKind, name == "manifest.json", size <= BackupArchive.maximumManifest else {
                        throw BackupError.damaged("it does not start with its manifest")
                    }
                    return
                }
                guard index < manifest.entries.count else { throw BackupError.damaged("it holds more records than its manifest lists") }
                let entry = manifest.entries[index]
                let expectedKind = entry.kind == "home" ? BackupArchive.homeFileKind : BackupArchive.pathKind
                guard kind == expectedKind, Array(name.utf8) == Array(entry.name.utf8), size == entry.size else {
                    throw BackupError.damaged("record \(index + 1) is not the one its manifest lists")
                }
                if entry.kind == "home" {
                    hasher = SHA256()
                    currentPath = staging + "/" + entry.name
                    if entry.name.contains("/") {
                        let directory = SecureFile.directoryOf(currentPath)
                        if access(directory, F_OK) != 0, mkdir(directory, 0o700) != 0 {
                            throw BackupError.io("cannot create \(directory): \(String(cString: strerror(errno)))")
                        }
                    }
                } else {
                    if access(staging + "/.paths", F_OK) != 0, mkdir(staging + "/.paths", 0o700) != 0 {
                        throw BackupError.io("cannot create \(staging)/.paths: \(String(cString: strerror(errno)))")
                    }
                    currentPath = staging + "/.paths/\(index)"
                    paths.append((entry.name, currentPath))
                }
                current = open(currentPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard current >= 0 else { throw BackupError.io("cannot create \(currentPath): \(String(cString: strerror(errno)))") }
            case .content(let bytes):
                if manifest == nil {
                    manifestBytes += bytes
                } else {
                    hasher?.update(bufferPointer: bytes)
                    try SecureFile.writeAll(current, bytes, path: currentPath)
                }
            case .end:
                if manifest == nil {
                    let decoded: BackupManifest
                    do { decoded = try CanonicalEncoding.decode(BackupManifest.self, from: manifestBytes) } catch {
                        throw BackupError.damaged("its manifest does not parse: \(error)")
                    }
                    try decoded.check()
                    // Room for every file it lists, before any is written (a hostile stream must
                    // not fill the disk before its MAC is checked).
                    var space = statvfs()
                    var total: UInt64 = 0
                    for entry in decoded.entries {
                        let (sum, overflow) = total.addingReportingOverflow(entry.size)
                        guard !overflow else { throw BackupError.damaged("its manifest lists sizes beyond any disk") }
                        total = sum
                    }
                    guard statvfs(parent, &space) == 0 else { throw BackupError.io("cannot tell the free space beside the home (\(parent)): \(String(cString: strerror(errno)))") }
                    let free = UInt64(space.f_bavail).multipliedReportingOverflow(by: UInt64(space.f_frsize))
                    if !free.overflow, total > free.partialValue {
                        throw BackupError.io("the backup lists \(total) bytes, more than the \(free.partialValue) free beside the home: free some space")
                    }
                    if let existingVaultID, existingVaultID != decoded.vaultID {
                        throw BackupError.otherVault("the backup is of vault \(Encoding.hex(Array(decoded.vaultID))), and the home holds vault \(Encoding.hex(Array(existingVaultID))): restore it into another directory, or erase that vault first (`securefoundation vault erase --yes`)")
                    }
                    try checkManifest(decoded)
                    manifest = decoded
                    return
                }
                try FileCalls.sync(current)
                close(current)
                current = -1
                if let done = hasher, let manifest { homeDigests[manifest.entries[index].name] = Array(done.finalize()) }
                hasher = nil
                index += 1
            }
        }
        let decryptor = AgeDecryptor(identities: identities) { try reader.feed($0) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw BackupError.io("cannot read the backup: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try decryptor.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        try decryptor.finish()
        try reader.finish()
        guard let manifest, index == manifest.entries.count, let digest = reader.digest, let mac = reader.mac else {
            throw BackupError.damaged("it ends before every file its manifest lists")
        }
        _ = try? SecureFile.syncDirectory(staging)
        return Staged(manifest: manifest, paths: paths, homeDigests: homeDigests, digest: digest, mac: mac)
    }

    /// Whether `home` exists, holds files, and which vault.
    static func homeState(_ home: String) throws -> (exists: Bool, hasFiles: Bool, vaultID: Data?) {
        guard let status = try? FileCalls.linkStatus(home) else { return (false, false, nil) }
        guard status.kind == .directory else { throw BackupError.exists("\(home) exists and is not a directory") }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []
        guard !names.isEmpty else { return (true, false, nil) }
        let vaultID = try? CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: SecretBytes(count: 0) { _ in })).vaultID
        return (true, true, vaultID ?? nil)
    }

    /// Names of the old home that are the vault's own (replaced by the restore, never carried over).
    static func isVaultFile(_ name: String) -> Bool {
        let own: Set<String> = ["vault.state", "always.key", "protected-files.keys", "protected-files.lock", "attempts", "erased", "vault.lock",
                                "keychain.sqlite", "keychain.sqlite-wal", "keychain.sqlite-shm", ".erasing"]
        return own.contains(name) || name.hasPrefix(".sf-") || name.hasPrefix(".superseded-")
    }

    /// Hard-links the old home's other files into the staged one (directories made anew,
    /// symbolic links copied), so the exchange keeps them; names the restore brings win.
    static func carryOver(from home: String, to staging: String, top: Bool = true) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []
        for name in names {
            if top && isVaultFile(name) { continue }
            if !top && (name == "keychain.sqlite" || name == "keychain.sqlite-wal" || name == "keychain.sqlite-shm") { continue }
            let from = home + "/" + name, to = staging + "/" + name
            guard let status = try? FileCalls.linkStatus(from) else { continue }
            switch status.kind {
            case .directory:
                if access(to, F_OK) != 0, mkdir(to, mode_t(status.permissions & 0o700)) != 0 {
                    throw BackupError.io("cannot create \(to): \(String(cString: strerror(errno)))")
                }
                try carryOver(from: from, to: to, top: false)
            case .symbolicLink:
                guard access(to, F_OK) != 0, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: from) else { continue }
                guard symlink(target, to) == 0 else { throw BackupError.io("cannot copy the link \(from): \(String(cString: strerror(errno)))") }
            case .regular:
                if (try? FileCalls.linkStatus(to)) != nil { continue }
                do { try FileCalls.hardLink(from, to) } catch {
                    throw BackupError.io("cannot keep \(from) (a hard link into the restored home failed: \(String(cString: strerror(error.code)))); nothing was replaced")
                }
            default:
                continue
            }
        }
    }

    /// Moves a staged file to `path` (a rename, or a copy replaced atomically across file systems).
    static func place(_ staged: String, at path: String) throws {
        let directory = SecureFile.directoryOf(path)
        if access(directory, F_OK) != 0 {
            do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
                throw BackupError.io("cannot create \(directory): \(error)")
            }
        }
        if rename(staged, path) == 0 {
            _ = try? SecureFile.syncDirectory(directory)
            return
        }
        guard errno == EXDEV else { throw BackupError.io("cannot write \(path): \(String(cString: strerror(errno)))") }
        let source = open(staged, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw BackupError.io("cannot read \(staged): \(String(cString: strerror(errno)))") }
        defer { close(source) }
        try SecureFile.replaceAtomically(path) { target in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw BackupError.io("cannot read \(staged): \(String(cString: strerror(errno)))") }
                if n == 0 { break }
                try buffer.withUnsafeBytes { try SecureFile.writeAll(target, UnsafeRawBufferPointer(rebasing: $0[0..<n]), path: path) }
            }
        }
        unlink(staged)
    }

    /// Removes a staging directory (or a replaced home): files with one name are crypto-erased,
    /// files with other names (carried over into the restored home) only unlinked. The walk goes
    /// through directory descriptors (`O_NOFOLLOW`), and each file is named through its
    /// directory's descriptor (`/proc/self/fd/N/NAME`), so a directory swapped for a symbolic link
    /// meanwhile is never followed.
    static func destroyTree(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        destroyContents(of: fd, path: path)
        close(fd)
        rmdir(path)
    }

    /// The names in the directory open as `directory` (listed through a duplicate of it).
    static func names(in directory: Int32) -> [String] {
        let copy = dup(directory)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return []
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func destroyContents(of directory: Int32, path: String) {
        // Files are named through the directory's descriptor where /proc is mounted, else by path.
        let base = access("/proc/self/fd/\(directory)", F_OK) == 0 ? "/proc/self/fd/\(directory)" : path
        var erase: [String] = []
        for name in names(in: directory) {
            guard let status = try? FileCalls.linkStatus(in: directory, name) else { continue }
            switch status.kind {
            case .directory:
                if let child = try? FileCalls.open(in: directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) {
                    destroyContents(of: child, path: path + "/" + name)
                    close(child)
                }
                try? FileCalls.unlink(in: directory, name, isDirectory: true)
            case .regular where status.links == 1: erase.append(name)
            default: try? FileCalls.unlink(in: directory, name)
            }
        }
        if !erase.isEmpty { _ = try? CryptoErase.destroy(keyFiles: erase.map { base + "/" + $0 }) }
        // Whatever the shredder refused is unlinked all the same.
        for name in erase { try? FileCalls.unlink(in: directory, name) }
    }

    /// Removes the staging directories of restores that died (`.NAME.restore-*` beside the home
    /// that no process holds locked).
    static func removeStaleStaging(parent: String, base: String) {
        let prefix = "." + base + ".restore-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(prefix) {
            let path = parent + "/" + name
            guard (try? FileCalls.linkStatus(path))?.kind == .directory else { continue }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard FileCalls.tryLockExclusive(fd) else { continue }
            destroyTree(path)
        }
    }
}

/// HMAC-SHA256 over bytes under a key in locked memory.
enum HMACSHA256 {
    static func mac(_ bytes: [UInt8], key: SecretBytes) -> [UInt8] {
        Array(Crypto.HMAC<Crypto.SHA256>.authenticationCode(for: bytes, using: key.symmetricKey))
    }
}
