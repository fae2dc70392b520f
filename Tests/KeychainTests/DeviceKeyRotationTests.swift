import Foundation
import Testing
import Crypto
import GRDB
import Cipher
import Vault
@testable import Keychain

/// `DeviceKeyRotation` with keychains: every item re-keyed (in batches, one transaction), the
/// old device key opening nothing afterwards, and an interruption at each step resumed.
@Suite struct DeviceKeyRotationTests {
    static let classes: [Accessibility] = [.whenUnlocked, .afterFirstUnlock, .always,
                                           .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly]

    struct Fixture {
        let dir: TemporaryDirectory
        var home: String { dir.sub("home") }
        var keyPath: String { dir.sub("device.key") }

        init() throws { dir = try TemporaryDirectory() }

        func manager(_ provider: (any DeviceKeyProvider)? = nil, home: String? = nil) throws -> CryptoManager {
            try CryptoManager(directory: home ?? self.home, deviceKeyProvider: provider ?? FileDeviceKeyProvider(path: keyPath),
                              policy: .minimum, attemptPolicy: .unlimited)
        }

        /// A vault with `count` items spread over the six classes, in the home's keychain.
        func populate(_ count: Int) throws -> CryptoManager {
            let manager = try manager()
            try manager.setUp(passcode: SecretBytes(utf8: "1234"))
            let keychain = try Keychain(manager: manager)
            for index in 0..<count {
                try keychain.add(SecretBytes(utf8: "secret \(index)"), for: .generic(service: "svc\(index % 7)", account: "acct\(index)"),
                                 accessibility: DeviceKeyRotationTests.classes[index % 6])
            }
            try keychain.flush()
            try keychain.close()
            return manager
        }

        func oldDeviceKey() throws -> SecretBytes { try SecretBytes(copying: SecureFile.read(keyPath)) }
    }

    static func value(_ keychain: Keychain, _ index: Int) throws -> String {
        let secret = try keychain.passwordData(forService: "svc\(index % 7)", account: "acct\(index)")
        defer { secret.wipe() }
        return text(secret)
    }

    static func sealedRecords(_ path: String) throws -> [[UInt8]] {
        let queue = try DatabaseQueue(path: path)
        return try queue.read { db in try Data.fetchAll(db, sql: "SELECT sealed FROM keychain_items").map { Array($0) } }
    }

    /// The b-tree pages of a SQLite file whose unused gap (between the cell pointers and the
    /// cell content) holds a run of 16 or more non-zero bytes: a leftover of a cell, not a
    /// stale 2-byte pointer. A freshly built page has zeros there.
    static func pagesWithBytesInTheirGap(_ path: String) throws -> [Int] {
        let bytes = try SecureFile.read(path, maxLength: 1 << 28)
        let field = Int(bytes[16]) << 8 | Int(bytes[17])
        let pageSize = field == 1 ? 65536 : field
        var found: [Int] = []
        for number in 0..<(bytes.count / pageSize) {
            let page = Array(bytes[(number * pageSize)..<((number + 1) * pageSize)])
            let base = number == 0 ? 100 : 0
            let kind = page[base]
            guard [2, 5, 10, 13].contains(kind) else { continue }
            let header = base + (kind == 2 || kind == 5 ? 12 : 8)
            let cells = Int(page[base + 3]) << 8 | Int(page[base + 4])
            let content = Int(page[base + 5]) << 8 | Int(page[base + 6])
            let gap = page[(header + 2 * cells)..<(content == 0 ? 65536 : content)]
            var run = 0
            for byte in gap {
                run = byte == 0 ? 0 : run + 1
                if run >= 16 { found.append(number + 1); break }
            }
        }
        return found
    }

    /// 600 items (three batches), every class: all readable under the new key; the old key,
    /// with a copy of the home from before, finds no item and opens no record of the rotated home.
    @Test func rotationReKeysEveryItemAndTheOldKeyOpensNothing() throws {
        let fixture = try Fixture()
        let count = 600
        let manager = try fixture.populate(count)
        let old = try fixture.oldDeviceKey()
        let before = fixture.dir.sub("before")
        try FileManager.default.copyItem(atPath: fixture.home, toPath: before)
        let oldRecords = try Self.sealedRecords(fixture.home + "/keychain.sqlite")
        #expect(oldRecords.count == count)

        let report = try DeviceKeyRotation.rotate(manager: manager, filePath: fixture.keyPath,
                                                  dependents: KeychainDeviceKeyDependent.keychains(in: fixture.home))
        #expect(report.dependents.map(\.rekeyed) == [count])
        #expect(report.dependents.first?.unreadable == [])
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath) == nil)
        let new = try fixture.oldDeviceKey()
        #expect(new != old)
        #expect(DeviceKeyRecord.checkValue(of: new) == report.newCheck)
        #expect(access(fixture.keyPath + ".retired", F_OK) != 0 && access(fixture.keyPath + ".rotating", F_OK) != 0)

        // The rotated home opens with the new key: every item, by name.
        let reopened = try fixture.manager()
        try reopened.unlock(passcode: SecretBytes(utf8: "1234"))
        let keychain = try Keychain(manager: reopened)
        for index in 0..<count { #expect(try Self.value(keychain, index) == "secret \(index)") }
        try keychain.close()

        // The attacker: the old device key, the home from before (its always.key, its vault
        // state and the passcode), and the rotated home.
        // The rotated vault.state names the new key: the old one does not even unlock it.
        let refused = try fixture.manager(StaticDeviceKeyProvider(key: old), home: fixture.home)
        #expect(throws: VaultError.self) { try refused.unlock(passcode: SecretBytes(utf8: "1234")) }
        // With the state of before (same passcode, same class keys), the old key's keys.
        let attacker = try fixture.manager(StaticDeviceKeyProvider(key: old), home: before)
        try attacker.unlock(passcode: SecretBytes(utf8: "1234"))
        let oldKeys = try attacker.deviceBoundKeys(deviceKey: old)
        guard case .keyUnavailable? = keychainError({ _ = try Keychain(directory: fixture.home, keySource: oldKeys) }) else {
            Issue.record("the rotated keychain must refuse the old device key's blind-index key"); return
        }
        defer { oldKeys.wipe() }
        let oldIndex = try oldKeys.blindIndexKey()
        let oldMAC = HMAC<SHA256>(key: oldIndex.symmetricKey)
        let queue = try DatabaseQueue(path: fixture.home + "/keychain.sqlite")
        let rows = try queue.read { db in
            try GRDB.Row.fetchAll(db, sql: KeychainSchema.selectRangeSQL, arguments: [Data(repeating: 0, count: 33), Data(repeating: 0xFF, count: 33)])
                .map { try KeychainSchema.row(from: $0) }
        }
        #expect(rows.count == count)
        let rotatedIDs = Set(rows.map(\.id))
        var opened = 0
        for index in 0..<count {
            // Index lookups with the old key: no id of any item.
            let key = ItemKey.generic(service: "svc\(index % 7)", account: "acct\(index)")
            let id = ItemID(itemClass: key.itemClass.rawValue,
                            group: ItemCodec.mac16(ItemCodec.serviceIndexInput(itemClass: key.itemClass, name: key.groupName), prototype: oldMAC),
                            name: ItemCodec.mac16(ItemCodec.nameIndexInput(key), prototype: oldMAC))
            #expect(!rotatedIDs.contains(id))
        }
        for row in rows where row.accessibility & 0x10 != 0 {
            // thisDeviceOnly records (always among them) under the old key's bound class keys: none opens.
            let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
            let sealing = try SealingKey(key: try oldKeys.classKeyCopy(for: accessibility))
            if (try? Sealed.open(row.sealed, with: sealing, context: ItemCodec.itemContext(accessibility: row.accessibility, id: row.id))) != nil { opened += 1 }
        }
        #expect(opened == 0)
        // Nor does the old key open the always-class items of the rotated home through the keychain.
        let oldSource = try attacker.deviceBoundKeys(deviceKey: old)
        guard case .keyUnavailable? = keychainError({ _ = try Keychain(directory: fixture.home, keySource: oldSource) }) else {
            Issue.record("the old device key's key source must be refused"); return
        }
        // The old records are gone from the file and its log (secure_delete, checkpoint).
        var bytes = try SecureFile.read(fixture.home + "/keychain.sqlite", maxLength: 1 << 28)
        bytes += (try? SecureFile.read(fixture.home + "/keychain.sqlite-wal", maxLength: 1 << 28)) ?? []
        let haystack = Data(bytes)
        let left = oldRecords.filter { haystack.range(of: Data($0.suffix(48))) != nil }.count
        #expect(left == 0, "\(left) old records still in the rotated file")
        // Nor in the unused gap of any page, where SQLite leaves the bytes of cells it moved
        // when it rebalances pages (secure_delete does not clear them; the rebuild does): that
        // is where old records survived the re-keying now and then.
        #expect(try Self.pagesWithBytesInTheirGap(fixture.home + "/keychain.sqlite") == [])
        // The copy from before still opens with the old key (it is the old data, as it was).
        let past = try fixture.manager(StaticDeviceKeyProvider(key: old), home: before)
        try past.unlock(passcode: SecretBytes(utf8: "1234"))
        #expect(try Self.value(try Keychain(manager: past), 5) == "secret 5")
    }

    struct Stop: Error {}

    /// A rotation stopped at each step (the keychain's second batch inside its transaction, after
    /// its commit, at the switch) leaves a home whose keychain opens with the old or the new key,
    /// a provider that says to resume, and a resume that finishes.
    @Test(arguments: ["keychain batch:2", "keychain committed:1", "switching:1", "moved:1"])
    func interruptedRotationResumes(_ point: String) throws {
        let fixture = try Fixture()
        let count = 700
        let manager = try fixture.populate(count)
        let old = try fixture.oldDeviceKey()
        let parts = point.split(separator: ":")
        let name = String(parts[0]), wanted = Int(parts[1]) ?? 1
        let seen = Counter()
        let options = DeviceKeyRotation.Options(step: { step in
            if step == name, seen.next() == wanted { throw Stop() }
        })
        #expect(throws: Stop.self) {
            _ = try DeviceKeyRotation.rotate(manager: manager, filePath: fixture.keyPath,
                                             dependents: KeychainDeviceKeyDependent.keychains(in: fixture.home), options: options)
        }
        let journal = try #require(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath))
        // The home's provider refuses with the way out.
        let provider = try DeviceKeyRotation.provider(directory: fixture.home, filePath: fixture.keyPath)
        #expect(throws: VaultError.self) { _ = try provider.deviceKey() }
        do { _ = try provider.deviceKey() } catch { #expect("\(error)".contains("rotate-device-key --resume")) }
        // The keychain opens with exactly one of the keys, every item in it.
        let stagedPath = access(fixture.keyPath + ".rotating", F_OK) == 0 ? fixture.keyPath + ".rotating" : fixture.keyPath
        let staged = try SecretBytes(copying: SecureFile.read(stagedPath))
        let stillOld = name == "keychain batch"
        let key = stillOld ? old : staged
        // vault.state names one key until the switch: the keychain is probed with each key's
        // device-bound keys directly.
        let probeKeys = try manager.deviceBoundKeys(deviceKey: key)
        let keychain = try Keychain(directory: fixture.home, keySource: probeKeys)
        #expect(try Self.value(keychain, 11) == "secret 11")
        #expect(try keychain.summaries().count == count)
        try keychain.close()
        let otherKeys = try manager.deviceBoundKeys(deviceKey: stillOld ? staged : old)
        guard case .keyUnavailable? = keychainError({ _ = try Keychain(directory: fixture.home, keySource: otherKeys) }) else {
            Issue.record("the keychain must be under one key only"); return
        }

        let resumed = try DeviceKeyRotation.resume(manager: manager, filePath: fixture.keyPath,
                                                   dependents: KeychainDeviceKeyDependent.keychains(in: fixture.home))
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath) == nil)
        if journal.phase == .rekeying {
            #expect(resumed.dependents.map { $0.rekeyed + $0.alreadyNew } == [count])
        }
        let reopened = try fixture.manager()
        try reopened.unlock(passcode: SecretBytes(utf8: "1234"))
        let after = try Keychain(manager: reopened)
        for index in stride(from: 0, to: count, by: 37) { #expect(try Self.value(after, index) == "secret \(index)") }
        #expect(try fixture.oldDeviceKey() != old)
        #expect(DeviceKeyRecord.checkValue(of: try fixture.oldDeviceKey()) == journal.newCheck)
    }

    /// A rotation needs every class key: a locked vault is refused before anything is stored.
    @Test func lockedVaultIsRefusedBeforeAnythingChanges() throws {
        let fixture = try Fixture()
        let manager = try fixture.populate(6)
        manager.lock()
        let locked = try fixture.manager()
        #expect(throws: VaultError.self) {
            _ = try DeviceKeyRotation.rotate(manager: locked, filePath: fixture.keyPath,
                                             dependents: KeychainDeviceKeyDependent.keychains(in: fixture.home))
        }
        #expect(access(fixture.keyPath + ".rotating", F_OK) != 0)
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath) == nil)
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.withLock { value += 1; return value } }
    }
}
