import Foundation
import Cipher
import Age
import Vault

// Key-pair rotation: new class key pairs, files re-wrapped to them, retired pairs destroyed.
extension ProtectedFiles {
    // MARK: Key-pair rotation

    /// What ``rewrapItems(inDirectories:)`` did.
    public struct RewrapReport: Sendable, Equatable {
        /// Files whose file key was wrapped to a retired key pair and now is wrapped to the
        /// current pair of their class.
        public var rewrapped: [String] = []
        /// Protected files already wrapped to the current key pair of their class.
        public var current: Int = 0
        /// Regular files that are not protected files.
        public var skipped: Int = 0
        /// Files no key pair of this vault opens (a damaged or altered header, a file of another
        /// vault): left as they are; destroying the retired pairs changes nothing for them.
        public var damaged: [UpgradeReport.Failure] = []
        /// Files wrapped to a retired key pair that could not be rewritten (permissions, I/O, a
        /// concurrent change): while any remain, the retired pairs are kept.
        public var failed: [UpgradeReport.Failure] = []

        /// - Parameters: see the properties.
        public init(rewrapped: [String] = [], current: Int = 0, skipped: Int = 0,
                    damaged: [UpgradeReport.Failure] = [], failed: [UpgradeReport.Failure] = []) {
            self.rewrapped = rewrapped
            self.current = current
            self.skipped = skipped
            self.damaged = damaged
            self.failed = failed
        }
    }

    /// What ``rotateKeyPairs(rewrapping:resume:)`` did.
    public struct KeyRotationReport: Sendable, Equatable {
        /// Classes given a new key pair (0 when resuming).
        public var rotated: Int
        /// The re-wrap of the directories.
        public var rewrap: RewrapReport
        /// Retired key pairs destroyed (0 when some file could not be re-wrapped).
        public var retiredDestroyed: Int
        /// Retired key pairs still kept (waiting for the files in ``RewrapReport/failed``).
        public var retiredKept: Int
    }

    /// The number of retired key pairs (replaced by ``rotateKeyPairs()`` and not yet destroyed).
    public var retiredKeyPairCount: Int {
        get throws(ProtectedFileError) { try Self.typed { try table.loadFile().retired.count } }
    }

    /// Gives every class that has a key pair a new X25519 key pair. The replaced pairs are
    /// retired: kept, sealed under the current class keys, so files still wrapped to them stay
    /// readable, until ``destroyRetiredKeyPairs()``. Needs the vault unlocked (and the device
    /// key for ThisDeviceOnly classes); nothing changes when a class key is missing.
    /// - Returns: The number of classes given a new pair.
    /// - Throws: ``ProtectedFileError``.
    @discardableResult
    public func rotateKeyPairs() throws(ProtectedFileError) -> Int {
        try Self.typed { try table.rotateKeyPairs() }
    }

    /// Re-wraps every protected file under `directories` (trees; symbolic links are not
    /// followed) whose file key is wrapped to a retired key pair: the file key is wrapped to
    /// the current pair of the file's class and only the header is rewritten (atomically, as a
    /// class change). Files already on the current pair are left alone, so an interrupted run
    /// is finished by running it again. A failure on one file does not stop the others.
    /// - Parameter directories: The trees to go through.
    /// - Returns: What was re-wrapped, left alone, and what failed.
    /// - Throws: ``ProtectedFileError`` when a directory cannot be read.
    public func rewrapItems(inDirectories directories: [String]) throws(ProtectedFileError) -> RewrapReport {
        var report = RewrapReport()
        let retired = try Self.typed { try table.loadFile().retired }
        for directory in directories {
            try Self.typed { try forEachRegularFile(in: directory) { path in
                let opened: OpenedFile
                do { opened = try openLocked(path) } catch ProtectedFileError.notProtectedFile {
                    report.skipped += 1
                    return
                } catch ProtectedFileError.modifiedDuringChange(let changed) {
                    // Kept changing while this run waited for it: not damaged, try again later.
                    report.failed.append(.init(path: path, error: .modifiedDuringChange(path: changed)))
                    return
                } catch let error as ProtectedFileError {
                    report.damaged.append(.init(path: path, error: error))
                    return
                }
                defer { close(opened.fd) }
                do {
                    let current = try identity(opened.cls, path: path)
                    do throws(AgeError) {
                        try opened.header.verify(identities: [current])
                        report.current += 1
                        return
                    } catch {
                        guard case .noMatchingIdentity = error else { throw error }
                    }
                    let old = retired.filter { $0.name == opened.cls.name }.compactMap { try? table.openIdentity($0, opened.cls, retired: true) }
                    do throws(AgeError) { try opened.header.verify(identities: old) } catch {
                        report.damaged.append(.init(path: path, error: Self.map(error, path: path, opened.cls)))
                        return
                    }
                    let recipient = ProtectionClassRecipient(cls: opened.cls, recipient: try table.trustedRecipient(opened.cls))
                    try replaceHeader(opened, path: path, identities: old, recipient: recipient)
                    report.rewrapped.append(path)
                } catch let error as AgeError {
                    report.damaged.append(.init(path: path, error: Self.map(error, path: path, opened.cls)))
                } catch let error as ProtectedFileError {
                    report.failed.append(.init(path: path, error: error))
                } catch {
                    report.failed.append(.init(path: path, error: .io("\(error)")))
                }
            } }
        }
        return report
    }

    /// Destroys the retired key pairs: they are removed from the key table and the table that
    /// held them is crypto-erased. Files still wrapped to them no longer open (except with an
    /// identity exported earlier).
    /// - Returns: The number destroyed.
    /// - Throws: ``ProtectedFileError`` when the key table cannot be read, written or erased.
    @discardableResult
    public func destroyRetiredKeyPairs() throws(ProtectedFileError) -> Int {
        try Self.typed { try table.destroyRetired() }
    }

    /// The whole rotation: new key pairs (unless `resume`, which finishes an interrupted
    /// run), every file under `directories` re-wrapped, then the retired pairs destroyed when
    /// no file wrapped to them failed. Give every directory holding protected files of this
    /// vault: files elsewhere still wrapped to a retired pair become unreadable once it is
    /// destroyed. Stop writers for the duration (a write that fetched the old recipient before
    /// the rotation could otherwise land after the re-wrap).
    ///
    /// Afterwards an old copy of the data directory (`protected-files.keys` with the state and
    /// `always.key`) and the passcode of that time open none of the re-wrapped files.
    /// - Parameters:
    ///   - directories: Every tree holding protected files of this vault.
    ///   - resume: Finish an interrupted rotation instead of making new pairs.
    /// - Returns: The classes rotated, the re-wrap's report, and the retired pairs destroyed and kept.
    /// - Throws: ``ProtectedFileError``.
    public func rotateKeyPairs(rewrapping directories: [String], resume: Bool = false) throws(ProtectedFileError) -> KeyRotationReport {
        let rotated = resume ? 0 : try rotateKeyPairs()
        let rewrap = try rewrapItems(inDirectories: directories)
        if rewrap.failed.isEmpty {
            let destroyed = try destroyRetiredKeyPairs()
            return KeyRotationReport(rotated: rotated, rewrap: rewrap, retiredDestroyed: destroyed, retiredKept: 0)
        }
        return KeyRotationReport(rotated: rotated, rewrap: rewrap, retiredDestroyed: 0, retiredKept: try retiredKeyPairCount)
    }

    /// Calls `body` with every regular file under `directory` (symbolic links are not
    /// followed; temporaries of atomic replacements are skipped).
    func forEachRegularFile(in directory: String, _ body: (String) throws -> Void) throws {
        guard (try? FileCalls.linkStatus(directory))?.kind == .directory else {
            throw ProtectedFileError.invalidArgument("\(directory) is not a directory")
        }
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw ProtectedFileError.permission(path: directory, reason: "the directory cannot be read")
        }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        while let relative = enumerator.nextObject() as? String {
            let path = base + relative
            guard (try? FileCalls.linkStatus(path))?.isRegularFile == true else { continue }
            if (relative as NSString).lastPathComponent.hasPrefix(".sf-lk-") { continue }
            try body(path)
        }
    }
}
