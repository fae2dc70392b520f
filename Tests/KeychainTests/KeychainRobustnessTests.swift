import Foundation
import TestSupport
import Testing
import GRDB
import Synchronization
import Cipher
import Vault
@testable import Keychain

/// A row with a value of the wrong SQLite type in any column is reported as a damaged item (the
/// process used to stop in GRDB's non-throwing decoder); the other items stay usable.
@Suite struct MistypedColumnTests {
    @Test(arguments: [
        "created = 'abc'", "accessibility = 'xyz'", "sealed = 12345", "modified = 'x'", "row_mac = NULL",
        "row_mac = x'00'", "accessibility = 300", "created = 1e999", "item_id = x'01'",
    ])
    func aMistypedColumnIsACorruptedItem(assignment: String) throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(5)
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        try keychain.setPassword("damaged", forService: "svc", account: "victim")
        try keychain.close()
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        let victim = try db.read { db in try Data.fetchAll(db, sql: "SELECT item_id FROM keychain_items") }
        #expect(victim.count == 1)
        try db.close()
        let second = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        try second.setPassword("fine", forService: "other", account: "bystander")
        try second.close()
        let writer = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try writer.write { db in
            try db.execute(sql: "UPDATE keychain_items SET \(assignment) WHERE item_id = ?", arguments: [victim.first])
            #expect(db.changesCount == 1)
        }
        try writer.close()
        let reopened = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let error = keychainError { _ = try reopened.password(forService: "svc", account: "victim") }
        if assignment.hasPrefix("item_id") {
            #expect(error?.isNotFound == true, "\(String(describing: error))")
        } else {
            #expect(error?.isCorrupted == true, "\(String(describing: error))")
        }
        #expect(try reopened.password(forService: "other", account: "bystander") == "fine")
        try reopened.setPassword("new", forService: "other", account: "new")
        try reopened.flush()
        #expect(try reopened.password(forService: "other", account: "new") == "new")
        // Deleting the damaged item's service reads ids only, so it works.
        if !assignment.hasPrefix("item_id") {
            #expect(try reopened.deleteAccounts(forService: "svc") == 1)
            try reopened.flush()
            #expect(try reopened.deleteAll() == 2)
        }
    }
}

@Suite struct UpsertTests {
    /// Two keychains on one file (as two processes) race: one deletes and re-adds the item, the
    /// other upserts it. An upsert never fails as a duplicate, and the last write wins.
    @Test func addOrUpdateNeverReportsADuplicate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(1)
        let first = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let second = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let key = ItemKey.generic(service: "race", account: "a")
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            for round in 0..<300 {
                do {
                    if worker == 0 {
                        try? first.deletePassword(forService: "race", account: "a")
                        try? first.add(SecretBytes(utf8: "added"), for: key, accessibility: .always)
                        try first.flush()
                    } else {
                        try second.addOrUpdate(SecretBytes(utf8: "upsert \(round)"), for: key, accessibility: .always, label: "L")
                        try second.flush()
                    }
                } catch {
                    errors.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0 })")
        try second.addOrUpdate(SecretBytes(utf8: "last"), for: key, accessibility: .afterFirstUnlock)
        try second.flush()
        #expect(try first.password(forService: "race", account: "a") == "last")
        // A nil label keeps the existing one.
        let attributes = try first.copyMatching(KeychainQuery(service: "race", account: "a", returning: .attributes)).first?.attributes
        #expect(attributes?.accessibility == .afterFirstUnlock)
    }

    /// Six processes add-or-update one item while two delete it, each flushing every operation:
    /// no upsert fails (a lookup-then-add would meet "duplicate item" when another process adds
    /// the item between the two). Bounded: 300 operations per process.
    @Test func eightProcessesUpsertAndDeleteOneItem() throws {
        guard let worker = workerOrSkip() else { return }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        try Keychain(directory: path, keySource: source).close()
        let processes = try (0..<8).map { index in
            try ChildProcess.start(worker, [index < 6 ? "upsert" : "delete", path, source.masterHex, "race", "item", "300"])
        }
        for process in processes {
            let result = try process.wait(timeout: .seconds(120))
            #expect(!result.signalled)
            #expect(result.status == 0, "\(result.errorText)")
        }
    }

    @Test func addOrUpdateKeepsLabelCommentAndCreationDate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source)
        let key = ItemKey.generic(service: "s", account: "a")
        try keychain.addOrUpdate(SecretBytes(utf8: "one"), for: key, label: "label", comment: "comment")
        try keychain.flush()
        let before = try #require(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes)
        try keychain.addOrUpdate(SecretBytes(utf8: "two"), for: key, accessibility: .whenUnlockedThisDeviceOnly)
        try keychain.flush()
        let after = try #require(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes)
        #expect(after.label == "label" && after.comment == "comment")
        #expect(after.accessibility == .whenUnlockedThisDeviceOnly)
        #expect(after.creationDate == before.creationDate)
        #expect(try keychain.securePassword(forService: "s", account: "a") == "two")
    }
}

/// Hostile legacy keychain files are refused before `PropertyListSerialization` sees them.
@Suite struct LegacyImportBoundsTests {
    /// A binary property list of `depth` arrays each holding the next (1-byte refs and offsets
    /// are not enough: 4 bytes each), the last one empty; `cycle` makes the last refer to the first.
    static func nestedBinaryPlist(depth: Int, cycle: Bool = false) -> [UInt8] {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for index in 0..<depth {
            offsets.append(bytes.count)
            if index == depth - 1 && !cycle {
                bytes.append(0xA0)
            } else {
                bytes.append(0xA1)
                let child = UInt32(index == depth - 1 ? 0 : index + 1)
                bytes += [UInt8(child >> 24), UInt8(child >> 16 & 0xFF), UInt8(child >> 8 & 0xFF), UInt8(child & 0xFF)]
            }
        }
        let table = bytes.count
        for offset in offsets {
            let value = UInt32(offset)
            bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
        func be64(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        bytes += [0, 0, 0, 0, 0, 0, 4, 4] + be64(depth) + be64(0) + be64(table)
        return bytes
    }

    private func refused(_ bytes: [UInt8], _ name: String) throws -> KeychainError? {
        let dir = try TemporaryDirectory()
        let file = dir.sub(name)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: try TestKeySource())
        return keychainError { _ = try keychain.importLegacyKeychain(at: file) }
    }

    @Test func deeplyNestedBinaryPlistIsRefused() throws {
        let error = try refused(Self.nestedBinaryPlist(depth: 200_000), "nested.bplist")
        guard case .legacyFormat(let detail)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(detail.contains("nests containers deeper than 3 levels"))
    }

    @Test func aReferenceCycleIsRefused() throws {
        let error = try refused(Self.nestedBinaryPlist(depth: 2, cycle: true), "cycle.bplist")
        guard case .legacyFormat? = error else { Issue.record("got \(String(describing: error))"); return }
    }

    @Test func deeplyNestedXMLIsRefused() throws {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">"
            + String(repeating: "<array>", count: 100_000) + String(repeating: "</array>", count: 100_000) + "</plist>\n"
        let error = try refused(Array(xml.utf8), "nested.plist")
        guard case .legacyFormat(let detail)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(detail.contains("nest deeper than 3 levels"))
    }

    /// Tag names followed by white space count as nesting (XML allows `<array\n>`).
    @Test func spacedXMLTagsAreCounted() throws {
        let xml = "<?xml version=\"1.0\"?><plist version=\"1.0\">" + String(repeating: "<array\n>", count: 5) + String(repeating: "</array\t>", count: 5) + "</plist>"
        guard case .legacyFormat(let detail)? = try refused(Array(xml.utf8), "spaced.plist") else { Issue.record("spaced tags passed"); return }
        #expect(detail.contains("nest deeper than 3 levels"))
    }

    /// A file that passes as binary but parses as OpenStep text (the parser's fallback) is refused.
    @Test func aBinaryLookalikeParsedAsTextIsRefused() throws {
        var bytes = Array("bplist00 = { alice = <414243>; }; /*".utf8)
        bytes += [UInt8](repeating: 0x20, count: 64)
        // A trailer whose offset table lies inside the comment, ending the comment with "*/".
        func be64(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        let table = 10
        bytes += [0, 0, 0, 0, 0, 0, 1, 1] + be64(1) + be64(0) + be64(table)
        bytes += Array("*/".utf8)
        let error = try refused(bytes, "lookalike")
        guard case .legacyFormat? = error else { Issue.record("got \(String(describing: error))"); return }
    }

    @Test func otherFormatsAreRefusedUnparsed() throws {
        let openStep = String(repeating: "(", count: 100_000) + String(repeating: ")", count: 100_000)
        guard case .legacyFormat(let detail)? = try refused(Array(openStep.utf8), "openstep") else {
            Issue.record("an OpenStep list must be refused"); return
        }
        #expect(detail.contains("neither a binary nor an XML property list"))
    }

    @Test func anOversizedFileIsRefusedUnread() throws {
        let dir = try TemporaryDirectory()
        let file = dir.sub("huge")
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect(truncate(file, off_t(LegacyPlistGuard.maximumSize + 1)) == 0)
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: try TestKeySource())
        guard case .legacyFormat(let detail)? = keychainError({ _ = try keychain.importLegacyKeychain(at: file) }) else {
            Issue.record("an oversized file must be refused"); return
        }
        #expect(detail.contains("larger than"))
    }

    @Test func bogusTrailersAreRefused() throws {
        var bytes = Self.nestedBinaryPlist(depth: 3)
        bytes[bytes.count - 1] = 0xFF   // offset table beyond the file
        guard case .legacyFormat? = try refused(bytes, "bad-trailer") else { Issue.record("bad trailer accepted"); return }
        var wide = Self.nestedBinaryPlist(depth: 3)
        wide[wide.count - 32 + 8] = 0x7F   // an absurd object count
        guard case .legacyFormat? = try refused(wide, "bad-count") else { Issue.record("bad count accepted"); return }
    }

    /// The legacy shapes still import: binary (Foundation's writer) and XML.
    @Test func wellFormedFilesStillImport() throws {
        let legacy: [String: [String: Data]] = ["mail": ["alice": Data("pw".utf8)], "other": [:]]
        for format in [PropertyListSerialization.PropertyListFormat.binary, .xml] {
            let dir = try TemporaryDirectory()
            let file = dir.sub("legacy")
            try PropertyListSerialization.data(fromPropertyList: legacy, format: format, options: 0).write(to: URL(fileURLWithPath: file))
            let keychain = try Keychain(directory: dir.sub("kc"), keySource: try TestKeySource())
            #expect(try keychain.importLegacyKeychain(at: file).imported == 1)
            #expect(try keychain.password(forService: "mail", account: "alice") == "pw")
        }
    }
}

/// A keychain on a small, full file system: every failure says the disk is full and names the
/// file; nothing acknowledged is lost, and the queued writes commit once space is freed.
@Suite struct DiskFullTests {
    /// Fills the file system of `directory` to `freePages` free pages with one file.
    static func fill(_ directory: String, leaving freePages: Int) {
        let filler = directory + "/filler"
        unlink(filler)
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return }
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        // Written in place (FileManager.createFile writes a temporary first, which does not fit).
        try? Data(count: max(0, free - freePages * Int(info.f_frsize))).write(to: URL(fileURLWithPath: filler))
    }

    @Test(arguments: [0, 1, 3])
    func aFullDiskIsReportedAsSuch(freePages: Int) throws {
        guard let disk = try SmallFileSystem(kilobytes: 512) else {
            print("skipping the disk-full keychain test: mounting a tmpfs is not permitted here (needs root)")
            return
        }
        let mountPoint = disk.path
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .seconds(60)   // commits only at flush
        let keychain = try Keychain(directory: mountPoint + "/kc", keySource: source, configuration: configuration)
        for index in 0..<10 { try keychain.setPassword("kept \(index)", forService: "s", account: "kept\(index)") }
        try keychain.flush()

        Self.fill(mountPoint, leaving: freePages)
        let big = String(repeating: "x", count: 6000)
        var failure: KeychainError?
        for round in 0..<40 where failure == nil {
            for index in 0..<8 { try keychain.setPassword(big, forService: "bulk", account: "r\(round)i\(index)") }
            do { try keychain.flush() } catch { failure = error }
        }
        guard case .diskFull(let path, _)? = failure else {
            Issue.record("expected diskFull, got \(String(describing: failure))"); return
        }
        #expect(path.hasPrefix(mountPoint + "/kc/keychain.sqlite"), "\(path)")
        #expect(failure.map { "\($0)" }?.hasPrefix("the disk is full: ") == true)
        // SQLite's "disk I/O error" of a shared-memory index that could not grow (extended code
        // 4874) is a full disk naming the -shm file while the file system is full.
        let database = mountPoint + "/kc/keychain.sqlite"
        let shm = KeychainSchema.map(DatabaseError(resultCode: ResultCode(rawValue: 4874), message: "disk I/O error"), path: database)
        guard case .diskFull(database + "-shm", _) = shm else { Issue.record("4874 on a full disk: \(shm)"); return }
        // Reads of committed items work, or say the disk is full; never a bare I/O error.
        do {
            #expect(try keychain.password(forService: "s", account: "kept3") == "kept 3")
        } catch {
            guard case .diskFull = error else { Issue.record("a read failed with \(error)"); return }
        }
        // Freed space: the queued writes commit and everything reads.
        unlink(mountPoint + "/filler")
        guard case .database = KeychainSchema.map(DatabaseError(resultCode: ResultCode(rawValue: 4874), message: "disk I/O error"), path: database) else {
            Issue.record("an I/O error with free space is not a full disk"); return
        }
        try keychain.flush()
        #expect(keychain.pendingWriteCount == 0)
        try keychain.close()
        let reopened = try Keychain(directory: mountPoint + "/kc", keySource: source)
        #expect(try reopened.password(forService: "s", account: "kept9") == "kept 9")
        #expect(try reopened.accounts(forService: "bulk").count % 8 == 0)
        try reopened.close()
    }

    /// On a full disk a fresh process can still read the keychain (SQLite cannot create its
    /// shared-memory index there), and every refused write says the disk is full and which file.
    @Test func fullDiskKeepsReadsAndNamesTheFileOnWrites() throws {
        guard let disk = try SmallFileSystem(kilobytes: 1024) else {
            print("skipped: cannot mount a small tmpfs (needs root on Linux)")
            return
        }
        let directory = (disk.path as NSString).appendingPathComponent("kc")
        let source = try TestKeySource()
        do {
            let keychain = try Keychain(directory: directory, keySource: source)
            for index in 0..<5 { try keychain.setPassword("value-\(index)", forService: "svc", account: "a\(index)") }
            try keychain.flush()
            try keychain.close()
        }
        disk.fill()
        defer { disk.unfill() }

        let keychain = try Keychain(directory: directory, keySource: source)
        #expect(try keychain.password(forService: "svc", account: "a3") == "value-3")
        #expect(try keychain.accounts(forService: "svc").count == 5)

        let big = String(repeating: "x", count: 4096)
        var refused = 0
        for index in 0..<22 {
            do {
                try keychain.setPassword(big, forService: "svc", account: "new-\(index)")
                try keychain.flush()
            } catch {
                guard case .diskFull(let path, _) = error else { Issue.record("a refused write says \(error)"); continue }
                refused += 1
                #expect(path.hasPrefix(keychain.path), "\(path)")
                #expect(KeychainError.diskFull(path: path, detail: "").description.hasPrefix("the disk is full: "))
            }
        }
        #expect(refused > 0)
        // Reads still work after the refused writes.
        #expect(try keychain.password(forService: "svc", account: "a0") == "value-0")
        try? keychain.close()

        // Space freed: writes work again.
        disk.unfill()
        let again = try Keychain(directory: directory, keySource: source)
        try again.setPassword("later", forService: "svc", account: "later")
        try again.flush()
        #expect(try again.password(forService: "svc", account: "later") == "later")
        try again.close()
    }

    /// Errors from the file helpers with ENOSPC name the file.
    @Test func noSpaceFromAFileOperationIsDiskFull() {
        let error = KeychainError.fromFile(SecureFile.Failure.system(operation: "write", path: "/x/keychain.sqlite", errno: ENOSPC), path: "/x")
        guard case let .diskFull(path, detail) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(path == "/x/keychain.sqlite")
        #expect(detail.contains("write failed"))
    }
}


