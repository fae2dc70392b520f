import Foundation
import Cipher

/// Finding and destroying every file in the data directory that can hold key material besides
/// the live files: temporaries of interrupted atomic writes (`.sf-*.tmp`, a complete state or key
/// file once written), superseded state files (`.superseded-*`) and whatever an interrupted
/// crypto-erase left in `.erasing/` (a file being overwritten, or the empty, randomly renamed file
/// of the shredder's rename steps).
///
/// Every file is destroyed from inside `.erasing/`: it is first renamed there (atomically, so the
/// name it had is gone at once), then crypto-erased, so the shredder's random renames happen in
/// that directory and nowhere else. Everything in `.erasing/` is abandoned by definition.
///
/// All of this runs with the vault's flock held: every writer of the data directory holds it while
/// its temporary file exists, so under the lock every temporary is abandoned.
extension CryptoManager {
    static let erasingDirectoryName = ".erasing"
    var erasingPath: String { directory + "/" + Self.erasingDirectoryName }

    /// Whether `name` (an entry of the data directory) is a leftover that may hold key material.
    static func isLeftover(_ name: String) -> Bool {
        name.hasPrefix(".superseded-") || (name.hasPrefix(".sf-") && name.hasSuffix(".tmp"))
    }

    /// The entry (device, inode) of each live file, which leftovers sharing an inode must not destroy.
    func liveInodes() -> [VaultFiles.Entry] {
        [statePath, alwaysKeyPath, erasedMarkerPath, directory + "/" + AttemptRecord.fileName].compactMap(VaultFiles.entry)
    }

    /// Destroys every leftover in the data directory and everything in `.erasing/`.
    /// Call with the file lock held.
    /// - Throws: ``VaultError/io(_:)`` naming what could not be destroyed (it was unlinked).
    func destroyLeftovers() throws {
        let live = liveInodes()
        var failures: [String] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names.sorted() where Self.isLeftover(name) {
            do { try destroyFile(directory + "/" + name, live: live) } catch { failures.append("\(error)") }
        }
        if let erasing = VaultFiles.entry(erasingPath) {
            if erasing.kind == .directory {
                let inside = (try? FileManager.default.contentsOfDirectory(atPath: erasingPath)) ?? []
                for name in inside.sorted() {
                    do { try destroyFile(erasingPath + "/" + name, live: live) } catch { failures.append("\(error)") }
                }
                rmdir(erasingPath)
            } else {
                unlink(erasingPath)
            }
            try? SecureFile.syncDirectory(directory)
        }
        if !failures.isEmpty { throw VaultError.io(failures.joined(separator: "; ")) }
    }

    /// Destroys one file that may hold key material: a name sharing a live file's inode is only
    /// unlinked; anything that is not a regular file, or has other hard links, is unlinked (it
    /// cannot be overwritten without touching the other names); a regular file is renamed into
    /// `.erasing/` and crypto-erased there. Call with the file lock held.
    ///
    /// With `live` nil, `path` is itself a live file being destroyed (erase): it goes straight to
    /// crypto-erase (which refuses, and then unlinks, a file with other hard links).
    func destroyFile(_ path: String, live: [VaultFiles.Entry]?) throws {
        guard let entry = VaultFiles.entry(path) else { return }
        if entry.kind == .directory {
            throw VaultError.io("\(path) is a directory where the vault expects a file; remove it by hand")
        }
        let isLive = live?.contains { $0.isSameFile(as: entry) } ?? false
        if isLive || entry.kind != .regular || (live != nil && entry.links > 1) {
            guard unlink(path) == 0 || errno == ENOENT else {
                throw VaultError.io("unlink \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        var target = path
        if SecureFile.directoryOf(path) != erasingPath {
            try ensureErasingDirectory()
            target = erasingPath + "/" + (try SecureRandom.string(length: 16, alphabet: SecureRandom.alphanumeric))
            guard rename(path, target) == 0 else {
                throw VaultError.io("rename \(path) into \(erasingPath): \(String(cString: strerror(errno)))")
            }
            try SecureFile.syncDirectory(erasingPath)
            try SecureFile.syncDirectory(SecureFile.directoryOf(path))
            testHooks.step?("moved \(SecureFile.directoryOf(path) == directory ? String(path.dropFirst(directory.count + 1)) : path)")
        }
        try Erasure.destroy([target])
        if target != path { rmdir(erasingPath) }
        testHooks.step?("destroyed")
    }

    private func ensureErasingDirectory() throws {
        if let erasing = VaultFiles.entry(erasingPath) {
            if erasing.kind == .directory {
                try SecureFile.checkPrivate(erasingPath, isDirectory: true)
                return
            }
            unlink(erasingPath)
        }
        guard mkdir(erasingPath, 0o700) == 0 || errno == EEXIST else {
            throw VaultError.io("mkdir \(erasingPath): \(String(cString: strerror(errno)))")
        }
        try SecureFile.checkPrivate(erasingPath, isDirectory: true)
        try SecureFile.syncDirectory(directory)
    }
}
