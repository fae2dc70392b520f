import Foundation
import Testing
import Synchronization
import GRDB
import Cipher
import Vault
@testable import Keychain

/// A key source whose class keys rotate: generation N derives every class key from master N; the
/// blind-index key never changes. `failAfter` makes `classKey(for:)` throw after that many calls
/// (an interruption in the middle of a re-seal).
final class RotatingKeySource: ClassKeyRotatingSource, @unchecked Sendable {
    private let state = Mutex<(masters: [[UInt8]], calls: Int, failAfter: Int?)>(([], 0, nil))
    private let index: StaticKeySource

    init() throws {
        index = try StaticKeySource(masterKey: SecretBytes(copying: try SecureRandom.bytes(32)))
        let first = try SecureRandom.bytes(32)
        state.withLock { $0.masters = [first] }
    }

    func failAfter(_ calls: Int?) { state.withLock { $0.failAfter = calls; $0.calls = 0 } }

    /// Forgets every retired generation (what an old copy of the keys cannot give either).
    func dropRetired() { state.withLock { $0.masters = [$0.masters[0]] } }

    func key(_ master: [UInt8], _ accessibility: Accessibility) throws -> SecretBytes {
        try StaticKeySource(masterKey: SecretBytes(copying: master)).classKey(for: accessibility)
    }

    func classKey(for accessibility: Accessibility) throws -> SecretBytes {
        let master: [UInt8] = try state.withLock {
            $0.calls += 1
            if let limit = $0.failAfter, $0.calls > limit { throw KeychainError.keyUnavailable("interrupted") }
            return $0.masters[0]
        }
        return try key(master, accessibility)
    }

    func retiredClassKeys(for accessibility: Accessibility) throws -> [SecretBytes] {
        try state.withLock { Array($0.masters.dropFirst()) }.map { try key($0, accessibility) }
    }

    func rotateClassKeys() throws {
        let next = try SecureRandom.bytes(32)
        state.withLock { $0.masters.insert(next, at: 0) }
    }

    func blindIndexKey() throws -> SecretBytes { try index.blindIndexKey() }
}

@Suite struct ClassKeyRotationKeychainTests {
    private func open(_ dir: TemporaryDirectory, _ source: any KeychainKeySource) throws -> Keychain {
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(5)
        return try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
    }

    /// The key ids named by the sealed records in the file, one per row.
    private func rowsSealed(_ keychain: Keychain) throws -> [String] {
        try keychain.flush()
        let db = try DatabaseQueue(path: keychain.path)
        defer { try? db.close() }
        let records = try db.read { db in try Data.fetchAll(db, sql: "SELECT sealed FROM keychain_items") }
        return try records.map { record in
            guard case .key(let id) = try Sealed.parseHeader(Array(record)).keySource else { return "passphrase" }
            return Encoding.hex(id)
        }
    }

    @Test func rotationReSealsEveryItemUnderTheNewKeys() throws {
        let dir = try TemporaryDirectory()
        let source = try RotatingKeySource()
        let keychain = try open(dir, source)
        for accessibility in Accessibility.allValues {
            try keychain.add(SecretBytes(utf8: "value \(accessibility.name)"), for: .generic(service: "s", account: accessibility.name),
                             accessibility: accessibility, label: "label")
        }
        try keychain.add(SecretBytes(utf8: "web"), for: .internet(server: "example.org", account: "me"), accessibility: .whenUnlocked)
        try keychain.flush()
        let before = Set(try rowsSealed(keychain))
        #expect(before.count == 6)

        #expect(try keychain.rotateClassKeys() == Keychain.ResealReport(resealed: 7, unreadable: []))
        let after = Set(try rowsSealed(keychain))
        #expect(after.count == 6)
        #expect(after.isDisjoint(with: before))
        // Nothing left for a second run.
        #expect(try keychain.resealUnderCurrentClassKeys().resealed == 0)

        // Only the new generation is needed now: without the retired keys everything reads.
        source.dropRetired()
        let reopened = try open(dir, source)
        for accessibility in Accessibility.allValues {
            #expect(text(try reopened.passwordData(forService: "s", account: accessibility.name)) == "value \(accessibility.name)")
        }
        let web = try reopened.copyMatching(KeychainQuery(itemClass: .internetPassword, server: "example.org", limit: .all, returning: [.data, .attributes]))
        #expect(web.count == 1 && web.first?.data.map(text) == "web")
        #expect(try reopened.copyMatching(KeychainQuery(service: "s", account: "always", returning: .attributes)).first?.attributes?.label == "label")
    }

    /// Rotated at the source, not yet re-sealed (a run killed between the two, or keys rotated
    /// by another process): old items open with the retired keys, new ones with the new keys.
    @Test func itemsStayReadableBetweenRotationAndReseal() throws {
        let dir = try TemporaryDirectory()
        let source = try RotatingKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("old", forService: "s", account: "old")
        try keychain.flush()
        #expect(try keychain.password(forService: "s", account: "old") == "old")   // caches the always key
        try source.rotateClassKeys()
        // This keychain still holds the old always key: a new item is sealed under it or the new one,
        // and both open; so does an item sealed by another keychain under the new key.
        let other = try open(dir, source)
        try other.setPassword("new", forService: "s", account: "new")
        try other.flush()
        #expect(try keychain.password(forService: "s", account: "new") == "new")
        #expect(try keychain.password(forService: "s", account: "old") == "old")
        #expect(try other.password(forService: "s", account: "old") == "old")
        #expect(try other.resealUnderCurrentClassKeys().resealed == 1)
        source.dropRetired()
        #expect(try open(dir, source).password(forService: "s", account: "old") == "old")
    }

    /// A re-seal interrupted after its first transaction leaves every item readable, and a
    /// second call finishes it.
    @Test func anInterruptedResealIsFinishedLater() throws {
        let dir = try TemporaryDirectory()
        let source = try RotatingKeySource()
        let keychain = try open(dir, source)
        let total = Keychain.resealBatchSize * 2 + 50
        for index in 0..<total {
            try keychain.add(SecretBytes(utf8: "v\(index)"), for: .generic(service: "bulk", account: "a\(index)"), accessibility: .whenUnlocked)
        }
        try keychain.flush()
        try source.rotateClassKeys()
        // The source fails part-way through the second batch (a few key requests per row).
        source.failAfter(Keychain.resealBatchSize * 4)
        #expect(throws: KeychainError.self) { try keychain.resealUnderCurrentClassKeys() }
        source.failAfter(nil)
        let partial = try rowsSealed(keychain)
        let counts = Dictionary(grouping: partial, by: { $0 }).mapValues(\.count)
        #expect(counts.count == 2, "old and new generation side by side: \(counts)")
        let newID = try Encoding.hex(SealingKey(key: source.classKey(for: .whenUnlocked)).id)
        let done = counts[newID] ?? 0
        #expect(done > 0 && done < total && done % Keychain.resealBatchSize == 0, "\(counts)")
        let reopened = try open(dir, source)
        for index in stride(from: 0, to: total, by: 37) {
            #expect(text(try reopened.passwordData(forService: "bulk", account: "a\(index)")) == "v\(index)")
        }
        #expect(try reopened.resealUnderCurrentClassKeys().resealed == total - done)
        #expect(Set(try rowsSealed(reopened)).count == 1)
    }

    /// A damaged row does not stop a rotation: it is reported and left alone, and every other
    /// item is re-sealed each time, so repeated rotations never strand a readable item.
    @Test func aDamagedRowIsReportedAndTheRestReSealed() throws {
        let dir = try TemporaryDirectory()
        let source = try RotatingKeySource()
        let keychain = try open(dir, source)
        try keychain.add(SecretBytes(utf8: "damaged"), for: .generic(service: "a", account: "x"), accessibility: .always)
        try keychain.close()
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        let damagedID = try db.write { db -> Data in
            try db.execute(sql: "UPDATE keychain_items SET row_mac = NULL")
            return try Data.fetchOne(db, sql: "SELECT item_id FROM keychain_items") ?? Data()
        }
        try db.close()
        let reopened = try open(dir, source)
        try reopened.add(SecretBytes(utf8: "healthy"), for: .generic(service: "b", account: "y"), accessibility: .whenUnlocked)
        for round in 0..<18 {
            let report = try reopened.rotateClassKeys()
            #expect(report.resealed == 1 && report.unreadable == [Encoding.hex(Array(damagedID))], "round \(round): \(report)")
        }
        source.dropRetired()
        #expect(try open(dir, source).securePassword(forService: "b", account: "y") == "healthy")
    }

    /// A process that keeps a keychain open follows a rotation made elsewhere within a second:
    /// what it writes afterwards is sealed under the new key.
    @Test func aKeptKeyIsReplacedAfterARotationElsewhere() throws {
        let dir = try TemporaryDirectory()
        let source = try RotatingKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("before", forService: "s", account: "before")
        #expect(try keychain.password(forService: "s", account: "before") == "before")
        try source.rotateClassKeys()
        Thread.sleep(forTimeInterval: Double(Keychain.classKeyRecheckInterval) / 1e9 + 0.2)
        try keychain.setPassword("after", forService: "s", account: "after")
        try keychain.flush()
        source.dropRetired()
        #expect(try open(dir, source).password(forService: "s", account: "after") == "after")
    }

    @Test func aSourceThatCannotRotateIsRefused() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        guard case .invalidArgument? = keychainError({ _ = try keychain.rotateClassKeys() }) else {
            Issue.record("a static source cannot rotate"); return
        }
    }

    /// Through the vault: after `rotateClassKeys`, an old copy of `vault.state` and
    /// `always.key` with the old passcode opens none of the re-sealed items.
    @Test func anOldVaultStateOpensNothingAfterRotation() throws {
        let dir = try TemporaryDirectory()
        let vault = dir.sub("vault")
        let device = FileDeviceKeyProvider(path: dir.sub("device.key"))
        let manager = try CryptoManager(directory: vault, deviceKeyProvider: device, policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        try manager.unlock(passcode: SecretBytes(utf8: "1234"))
        let keychain = try Keychain(manager: manager)
        try keychain.add(SecretBytes(utf8: "wu"), for: .generic(service: "s", account: "wu"), accessibility: .whenUnlocked)
        try keychain.add(SecretBytes(utf8: "afu"), for: .generic(service: "s", account: "afu"), accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.setPassword("always", forService: "s", account: "always")
        try keychain.flush()
        let oldState = try Data(contentsOf: URL(fileURLWithPath: vault + "/vault.state"))
        let oldAlways = try Data(contentsOf: URL(fileURLWithPath: vault + "/always.key"))

        #expect(try keychain.rotateClassKeys().resealed == 3)
        #expect(try keychain.securePassword(forService: "s", account: "wu") == "wu")
        #expect(try keychain.password(forService: "s", account: "always") == "always")
        try keychain.close()
        manager.lock()

        // The attacker's copy: the old state and always key beside the current keychain.
        let stale = dir.sub("stale")
        try FileManager.default.createDirectory(atPath: stale, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        for (name, data) in [("vault.state", oldState), ("always.key", oldAlways)] {
            _ = FileManager.default.createFile(atPath: stale + "/" + name, contents: data, attributes: [.posixPermissions: 0o600])
        }
        try FileManager.default.copyItem(atPath: vault + "/keychain.sqlite", toPath: stale + "/keychain.sqlite")
        // Beside the device key, the rollback anchor refuses the older state at unlock.
        let anchored = try CryptoManager(directory: stale, deviceKeyProvider: device, policy: .minimum, attemptPolicy: .unlimited)
        do {
            try anchored.unlock(passcode: SecretBytes(utf8: "1234"))
            Issue.record("the state of before the rotation was unlocked beside the anchor")
        } catch VaultError.rolledBack {
        }
        // Without the anchor (the copy and the device key taken to another machine), the
        // re-sealed items still open with none of the old keys.
        let key = try SecretBytes(copying: SecureFile.read(dir.sub("device.key")))
        let oldManager = try CryptoManager(directory: stale, deviceKeyProvider: StaticDeviceKeyProvider(key: key), policy: .minimum,
                                           attemptPolicy: .unlimited)
        try oldManager.unlock(passcode: SecretBytes(utf8: "1234"))
        let old = try Keychain(manager: oldManager)
        for account in ["wu", "afu", "always"] {
            let error = keychainError { _ = try old.passwordData(forService: "s", account: account) }
            #expect(error?.isCorrupted == true, "\(account): \(String(describing: error))")
        }

        // The real vault still opens everything.
        let current = try CryptoManager(directory: vault, deviceKeyProvider: device, policy: .minimum, attemptPolicy: .unlimited)
        try current.unlock(passcode: SecretBytes(utf8: "1234"))
        let reopened = try Keychain(manager: current)
        #expect(text(try reopened.passwordData(forService: "s", account: "afu")) == "afu")
        #expect(try reopened.securePassword(forService: "s", account: "wu") == "wu")
    }
}
