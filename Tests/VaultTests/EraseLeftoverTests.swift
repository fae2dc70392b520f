import Foundation
import TestSupport
import Synchronization
import Testing
import Cipher
@testable import Vault

/// What an interrupted writer or an interrupted erase leaves in the data directory, and proof that
/// erase (or the next open) leaves nothing that unlocks.
@Suite("Erase and leftovers")
struct EraseLeftoverTests {
    /// Copies of the data directory taken at named steps (what a kill -9 at that moment leaves,
    /// page cache included).
    final class Snapshots: @unchecked Sendable {
        let root: String
        private let lock = NSLock()
        private(set) var taken: [(label: String, path: String)] = []

        init(root: String) { self.root = root }

        func take(_ home: String, label: String) {
            lock.withLock {
                let target = root + "/snapshot-\(taken.count)"
                EraseLeftoverTests.copyTree(home, to: target)
                taken.append((label, target))
            }
        }
    }

    static func copyTree(_ source: String, to target: String) {
        mkdir(target, 0o700)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? [] {
            var info = stat()
            guard lstat(source + "/" + name, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: copyTree(source + "/" + name, to: target + "/" + name)
            case S_IFREG:
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: source + "/" + name))) ?? Data()
                _ = FileManager.default.createFile(atPath: target + "/" + name, contents: bytes, attributes: [.posixPermissions: 0o600])
            default: break
            }
        }
    }

    /// Every regular file under `directory`, recursively.
    static func files(under directory: String) -> [String] { FileTree.regularFiles(under: directory) }

    /// Whether `file`, put as `vault.state` into a fresh home, unlocks with one of `passcodes`.
    static func unlocks(_ file: String, passcodes: [String], scratch: String) throws -> Bool {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        guard !bytes.isEmpty else { return false }
        let home = scratch + "/probe-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: home) }
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = FileManager.default.createFile(atPath: home + "/vault.state", contents: bytes, attributes: [.posixPermissions: 0o600])
        // No device key: the probe asks whether the file's keys open, not whose device it is.
        struct NoDeviceKey: DeviceKeyProvider {
            func deviceKey() throws -> SecretBytes { throw VaultError.deviceKey("none in the probe") }
        }
        let manager = try CryptoManager(directory: home, deviceKeyProvider: NoDeviceKey(), attemptPolicy: .unlimited)
        for passcode in passcodes {
            if (try? manager.unlock(passcode: secret(passcode))) != nil { return true }
        }
        return false
    }

    static func plantTemporary(copying path: String, into home: String) throws -> String {
        let name = ".sf-" + (try SecureRandom.string(length: 16, alphabet: SecureRandom.alphanumeric)) + ".tmp"
        try SecureFile.writeAtomically(try SecureFile.read(path), to: home + "/" + name)
        return name
    }

    @Test func eraseDestroysTemporariesSupersededCopiesAndInterruptedErasures() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"))
        _ = try manager.classKey(for: .always)
        // A change-passcode killed after its temporary was written: a complete state in `.sf-*.tmp`
        // (planted after the next commit, which would crypto-erase it first).
        let oldState = fixture.root + "/old.state"
        try SecureFile.writeAtomically(try SecureFile.read(fixture.statePath), to: oldState)
        try manager.updatePasscode(current: secret("old pin"), new: secret("new pin"))
        let temporary = try Self.plantTemporary(copying: oldState, into: fixture.home)
        // A commit killed before its superseded copy was destroyed, and an erase killed during
        // the shredder's overwrite and rename steps.
        try SecureFile.writeAtomically(try SecureFile.read(fixture.home + "/" + temporary), to: fixture.home + "/.superseded-AAAAAAAAAAAA")
        #expect(mkdir(fixture.home + "/.erasing", 0o700) == 0)
        try SecureFile.writeAtomically(try SecureFile.read(fixture.statePath), to: fixture.home + "/.erasing/0sszU9bCZNcB")
        try SecureFile.writeAtomically([UInt8](), to: fixture.home + "/.erasing/N")
        #expect(try Self.unlocks(fixture.home + "/" + temporary, passcodes: ["old pin"], scratch: fixture.root),
                "the planted temporary is a working copy")

        try manager.erase()

        let left = Self.files(under: fixture.home)
        #expect(left == [fixture.home + "/vault.lock"])
        for file in left {
            #expect(try !Self.unlocks(file, passcodes: ["old pin", "new pin"], scratch: fixture.root), "\(file) unlocks")
        }
        #expect(try !manager.isSetUp)
    }

    /// A writer killed after the open leaves a temporary; the next commit crypto-erases it before
    /// writing (the atomic write would otherwise just unlink it).
    @Test func aCommitDestroysLeftoversFirst() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"))
        let temporary = try Self.plantTemporary(copying: fixture.statePath, into: fixture.home)
        let steps = Mutex<[String]>([])
        manager.hooks.withLock { hooks in hooks.step = { label in steps.withLock { $0.append(label) } } }
        try manager.updatePasscode(current: secret("old pin"), new: secret("new pin"))
        manager.hooks.withLock { $0.step = nil }
        #expect(steps.withLock { $0 }.contains("moved \(temporary)"), "\(steps.withLock { $0 })")
        #expect(access(fixture.home + "/" + temporary, F_OK) != 0)
    }

    @Test func openDestroysLeftoversButKeepsTheLiveFiles() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let always = try manager.classKey(for: .always)
        // A temporary hard-linked to always.key (killed between link and unlink) must not be shredded.
        let linked = fixture.home + "/.sf-BBBBBBBBBBBBBBBB.tmp"
        #expect(link(fixture.home + "/always.key", linked) == 0)
        let temporary = try Self.plantTemporary(copying: fixture.statePath, into: fixture.home)
        _ = try fixture.manager()
        let names = try FileManager.default.contentsOfDirectory(atPath: fixture.home).sorted()
        #expect(names == ["always.key", "attempts", "vault.lock", "vault.state"], "left: \(names), planted \(temporary)")
        #expect(try manager.classKey(for: .always) == always)
        manager.lock()
        try manager.unlock(passcode: secret("pin"))
    }

    @Test func eraseInterruptedAtEveryStepLeavesNothingThatUnlocksOnceRunAgain() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("old pin"), questions: sampleQuestions, answers: sampleAnswers, threshold: 2)
        _ = try manager.classKey(for: .always)
        _ = try Self.plantTemporary(copying: fixture.statePath, into: fixture.home)
        let snapshots = Snapshots(root: fixture.root)
        let home = fixture.home
        manager.hooks.withLock { $0.step = { label in snapshots.take(home, label: label) } }
        try manager.updatePasscode(current: secret("old pin"), new: secret("new pin"))
        try manager.erase()
        manager.hooks.withLock { $0.step = nil }
        let labels = snapshots.taken.map(\.label)
        // change-passcode: committed, superseded moved and destroyed; erase: the temporary, the
        // state and always.key each moved and destroyed, and the steps between.
        #expect(labels.filter { $0.hasPrefix("moved") }.count >= 4, "\(labels)")
        #expect(labels.contains("moved vault.state") && labels.contains("moved always.key"), "\(labels)")
        var unlockedBefore = 0
        for (label, snapshot) in snapshots.taken {
            let names = try FileManager.default.contentsOfDirectory(atPath: snapshot)
            for name in names {
                let known = ["vault.state", "vault.lock", "always.key", "attempts", ".erasing"].contains(name) || CryptoManager.isLeftover(name)
                #expect(known, "after \(label): \(name) is neither a live file nor a recognisable leftover")
            }
            for file in Self.files(under: snapshot) where try Self.unlocks(file, passcodes: ["old pin", "new pin"], scratch: fixture.root) {
                unlockedBefore += 1
            }
            // Run erase again, as after a kill: it finishes the job.
            let again = try CryptoManager(directory: snapshot, deviceKeyProvider: StaticDeviceKeyProvider(key: fixture.deviceKey),
                                          attemptPolicy: .unlimited)
            try again.erase()
            let left = Self.files(under: snapshot)
            #expect(left == [snapshot + "/vault.lock"], "after \(label): \(left)")
            for file in left {
                #expect(try !Self.unlocks(file, passcodes: ["old pin", "new pin"], scratch: fixture.root), "after \(label): \(file) unlocks")
            }
        }
        #expect(unlockedBefore > 0, "some snapshots held working copies before the second erase")
        #expect(Self.files(under: fixture.home) == [fixture.home + "/vault.lock"])
    }
}
