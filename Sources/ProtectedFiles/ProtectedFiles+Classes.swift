import Foundation
import Cipher
import Age
import Vault

// Classes of protected files: reading a file's class, changing it (the header rewritten, the
// payload copied), and upgrading a directory.
extension ProtectedFiles {
    // MARK: Classes

    /// The class of a protected file, from its class stanza (no key needed). A file without
    /// one (written by another age tool to a class recipient) is matched against the class
    /// identities available now.
    /// - Parameter path: The protected file.
    /// - Returns: The file's class.
    /// - Throws: ``ProtectedFileError/notProtectedFile(path:reason:)`` and others.
    public func protection(ofItemAt path: String) throws(ProtectedFileError) -> FileProtectionClass {
        let opened = try Self.typed { try self.open(path) }
        close(opened.fd)
        return opened.cls
    }

    /// Whether a file of class `cls` can be read now (nil) or why not.
    /// - Parameter cls: The class.
    /// - Returns: nil when the class is readable now, else the error a read would throw.
    public func readError(for cls: FileProtectionClass) -> ProtectedFileError? {
        do {
            let entry = try table.entry(cls)
            guard let entry else {
                return .notProtectedFile(path: table.path, reason: "this vault has no \(cls.name) key pair")
            }
            _ = try table.openIdentity(entry, cls)
            return nil
        } catch let error as ProtectedFileError {
            return error
        } catch {
            return .io("\(error)")
        }
    }

    /// Changes the class of a protected file: the file key is unwrapped with the current class's
    /// identity and wrapped to the new class's recipient; only the header is rewritten, the
    /// payload is copied, and the file is replaced atomically. Needs the current class readable
    /// and the new class writable now.
    /// - Parameters:
    ///   - protection: The new class.
    ///   - path: The protected file.
    /// - Throws: ``ProtectedFileError``.
    public func setProtection(_ protection: FileProtectionClass, ofItemAt path: String) throws(ProtectedFileError) {
        _ = try Self.typed { try changeProtection(to: protection, ofItemAt: path, onlyFrom: nil) }
    }

    /// What ``changeProtection(to:ofItemAt:onlyFrom:)`` found and did.
    enum ChangeOutcome: Equatable {
        case changed
        /// The file already was of the class (perhaps changed by another run meanwhile).
        case alreadyInClass
        /// The file is of another class than `onlyFrom` (left alone).
        case otherClass(FileProtectionClass)
    }

    /// Changes the class of the file at `path` to `protection` while holding the file's lock
    /// (see ``openLocked(_:)``), so two runs changing the same file take turns: the second
    /// finds the file the first wrote and reports it as already in the class.
    func changeProtection(to protection: FileProtectionClass, ofItemAt path: String, onlyFrom: FileProtectionClass?) throws -> ChangeOutcome {
        let opened = try openLocked(path)
        defer { close(opened.fd) }
        if opened.cls == protection && opened.hasClassStanza { return .alreadyInClass }
        if let onlyFrom, opened.cls != onlyFrom { return .otherClass(opened.cls) }
        let identities = try identities(opened.cls, path: path)
        let recipient = try writableRecipient(protection)
        try replaceHeader(opened, path: path, identities: identities, recipient: recipient)
        return .changed
    }

    /// Opens `path` as ``open(_:)`` does and takes an exclusive `flock` on the file, which every
    /// header rewrite of this library holds until its replacement is renamed into place. Once
    /// the lock is held, `path` must still name the file opened, unchanged (another run may
    /// have replaced it while this one waited); otherwise the file now at `path` is opened and
    /// locked instead, up to 16 times.
    /// - Throws: ``ProtectedFileError/modifiedDuringChange(path:)`` when the file keeps changing.
    func openLocked(_ path: String) throws -> OpenedFile {
        for _ in 0..<16 {
            let opened = try open(path)
            switch Self.lockForChange(opened.fd) {
            case .locked, .unsupported:
                // Unsupported (a file system without flock): the stamp check before the rename
                // still keeps a replaced file from being overwritten.
                if let now = try? FileCalls.linkStatus(path), FileStamp(now) == opened.stamp { return opened }
                close(opened.fd)
            case .busy:
                close(opened.fd)
                throw ProtectedFileError.io("\(path) is locked by another process for longer than \(Int(Self.lockWait)) s (a class change or re-wrap of it, or another holder of a lock on it); nothing was changed: run the command again once it is released")
            }
        }
        throw ProtectedFileError.modifiedDuringChange(path: path)
    }

    /// How long ``openLocked(_:)`` waits for a file's lock.
    static let lockWait: Double = 30

    enum LockOutcome { case locked, busy, unsupported }

    /// Takes the exclusive lock of `fd`, polling for up to ``lockWait`` seconds (every 10 ms),
    /// so a holder that never lets go costs a bounded wait and a message, not a hang.
    static func lockForChange(_ fd: Int32) -> LockOutcome {
        let deadline = Date().addingTimeInterval(lockWait)
        while true {
            // Any failure but "busy" (ENOLCK, EOPNOTSUPP, ENOSYS, ...): no locking here.
            guard let locked = try? FileCalls.lockExclusive(fd, wait: false) else { return .unsupported }
            if locked { return .locked }
            guard Date() < deadline else { return .busy }
            usleep(10_000)
        }
    }

    /// Replaces the file at `path` (open as `opened`, locked by ``openLocked(_:)``) with a copy
    /// whose file key is unwrapped with `identities` and wrapped to `recipient`: header
    /// rewritten, nonce and payload copied.
    /// The copy is synced, then the file at `path` is checked to still be the one opened (device,
    /// inode, size, modification and change times), and only then renamed into place, so a file
    /// replaced or written meanwhile is never overwritten with the old contents.
    /// - Throws: ``ProtectedFileError/modifiedDuringChange(path:)`` when it was.
    func replaceHeader(_ opened: OpenedFile, path: String, identities: [any AgeIdentity], recipient: any AgeRecipient) throws {
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        try mapAge(path: path, opened.cls) {
            do {
                try SecureFile.replaceAtomically(path) { output in
                    try Age.rewrapHeader(from: opened.fd, to: output, identities: identities, recipients: [recipient])
                    // Synced here so that the window between the check and the rename is short.
                    do throws(SystemCallError) { try FileCalls.sync(output) } catch { throw SecureFile.Failure(error, path: path) }
                    testHooks.beforeReplace?(path)
                    guard let now = try? FileCalls.linkStatus(path), FileStamp(now) == opened.stamp else {
                        throw ProtectedFileError.modifiedDuringChange(path: path)
                    }
                }
            } catch let failure as SecureFile.Failure {
                throw ClassKeyTable.map(failure, path: path)
            }
        }
    }

    /// What ``upgradeItems(inDirectory:from:to:)`` did.
    public struct UpgradeReport: Sendable, Equatable {
        /// One file that could not be changed.
        public struct Failure: Sendable, Equatable {
            public var path: String
            public var error: ProtectedFileError
        }
        /// Files changed to the new class.
        public var changed: [String] = []
        /// Protected files already of the new class (including those another run changed
        /// while this one went through the tree).
        public var alreadyInClass: Int = 0
        /// Regular files left as they were (of a third class, or not protected files).
        public var skipped: Int = 0
        /// Files that could not be changed, or whose class could not be read (a damaged header).
        public var failures: [Failure] = []
    }

    /// Changes every protected file of class `from` in the tree under `directory` to class `to`
    /// (as `upgradeImagesInDir` in Apple's data-protection examples: files written as
    /// completeUnlessOpen while locked become complete once unlocked). Symbolic links are not
    /// followed; other files are left alone. A failure on one file does not stop the others.
    /// - Parameters:
    ///   - directory: The root of the tree.
    ///   - from: The class of the files to change.
    ///   - to: Their new class.
    /// - Returns: What was changed, left alone, and what failed.
    /// - Throws: ``ProtectedFileError`` when the directory cannot be read.
    public func upgradeItems(inDirectory directory: String, from: FileProtectionClass, to: FileProtectionClass) throws(ProtectedFileError) -> UpgradeReport {
        guard (try? FileCalls.linkStatus(directory))?.kind == .directory else {
            throw ProtectedFileError.invalidArgument("\(directory) is not a directory")
        }
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw ProtectedFileError.permission(path: directory, reason: "the directory cannot be read")
        }
        var report = UpgradeReport()
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let relative = enumerator.nextObject() as? String {
            let path = base + relative
            guard (try? FileCalls.linkStatus(path))?.isRegularFile == true else { continue }
            let name = (relative as NSString).lastPathComponent
            if name.hasPrefix(".sf-lk-") { continue }
            let cls: FileProtectionClass
            do {
                cls = try protection(ofItemAt: path)
            } catch {
                if case .notProtectedFile = error { report.skipped += 1 } else { report.failures.append(.init(path: path, error: error)) }
                continue
            }
            guard cls == from else {
                if cls == to { report.alreadyInClass += 1 } else { report.skipped += 1 }
                continue
            }
            do {
                switch try changeProtection(to: to, ofItemAt: path, onlyFrom: from) {
                case .changed: report.changed.append(path)
                case .alreadyInClass: report.alreadyInClass += 1
                case .otherClass: report.skipped += 1
                }
            } catch {
                report.failures.append(.init(path: path, error: .mapping(error)))
            }
        }
        return report
    }
}
