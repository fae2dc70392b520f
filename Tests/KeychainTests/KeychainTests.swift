import Foundation
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

/// A connection for a test's own reads and edits of a keychain file: it waits for a lock held
/// by another connection (a keychain still checkpointing) instead of failing with SQLITE_BUSY.
func inspectionQueue(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}

private func open(_ dir: TemporaryDirectory, _ source: TestKeySource, interval: Duration = .milliseconds(50),
                  marker: String? = nil) throws -> Keychain {
    var configuration = Keychain.Configuration()
    configuration.coalescingInterval = interval
    configuration.installMarkerPath = marker
    return try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
}

@Suite struct OriginalAPITests {
    @Test func passwordRoundTripAndDelete() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("hunter2", forService: "mail", account: "alice")
        try keychain.setPassword("", forService: "mail", account: "empty")
        #expect(try keychain.password(forService: "mail", account: "alice") == "hunter2")
        #expect(try keychain.password(forService: "mail", account: "empty") == "")
        try keychain.setPassword("changed", forService: "mail", account: "alice")
        #expect(try keychain.password(forService: "mail", account: "alice") == "changed")
        try keychain.setPasswordData([0xFF, 0x00, 0xFE], forService: "bin", account: "x")
        #expect(text(try keychain.passwordData(forService: "bin", account: "x")) == String(decoding: [0xFF, 0x00, 0xFE], as: UTF8.self))
        let notText = keychainError { _ = try keychain.password(forService: "bin", account: "x") }
        guard case .notUTF8? = notText else { Issue.record("expected notUTF8, got \(String(describing: notText))"); return }

        // Deleting one account keeps the service's other account (the old library removed both).
        try keychain.deletePassword(forService: "mail", account: "empty")
        #expect(try keychain.password(forService: "mail", account: "alice") == "changed")
        #expect(keychainError { _ = try keychain.password(forService: "mail", account: "empty") }?.isNotFound == true)
        #expect(keychainError { try keychain.deletePassword(forService: "mail", account: "empty") }?.isNotFound == true)
        try keychain.flush()
        let reopened = try open(dir, source)
        #expect(try reopened.password(forService: "mail", account: "alice") == "changed")
        #expect(try reopened.accounts(forService: "mail").map(\.account) == ["alice"])
    }

    @Test func serviceAndAllDeletes() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        for account in ["a", "b", "c"] { try keychain.setPassword(account, forService: "s1", account: account) }
        try keychain.setPassword("x", forService: "s2", account: "a")
        try keychain.flush()
        try keychain.setPassword("d", forService: "s1", account: "d") // pending, not flushed
        #expect(Set(try keychain.accounts(forService: "s1").map(\.account)) == ["a", "b", "c", "d"])
        #expect(try keychain.accounts().count == 5)
        #expect(try keychain.deleteAccounts(forService: "s1") == 4)
        #expect(try keychain.accounts(forService: "s1").isEmpty)
        #expect(try keychain.password(forService: "s2", account: "a") == "x")
        try keychain.flush()
        #expect(try keychain.deleteAll() == 1)
        try keychain.flush()
        #expect(try keychain.accounts().isEmpty)
    }

    /// Deletes in a service that has seen many checks use the set of its ids (no SQL per call);
    /// answers must stay exact for this keychain's own writes and for another connection's.
    @Test func deletesInABusyServiceStayExact() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        for index in 0..<200 { try keychain.setPassword("v\(index)", forService: "busy", account: "a\(index)") }
        try keychain.setPassword("other", forService: "quiet", account: "a0")
        try keychain.flush()
        // Enough deletes to load the service's ids; interleaved with pending and committed state.
        for index in 0..<100 { try keychain.deletePassword(forService: "busy", account: "a\(index)") }
        for index in 0..<100 {
            guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a\(index)") }) else {
                Issue.record("a pending delete must make the item absent"); return
            }
        }
        try keychain.flush()
        for index in [0, 50, 99] {
            guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a\(index)") }) else {
                Issue.record("a committed delete must make the item absent"); return
            }
        }
        guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "never") }) else {
            Issue.record("an account that never existed is not found"); return
        }
        // Re-added here, then deleted again.
        try keychain.setPassword("back", forService: "busy", account: "a5")
        try keychain.flush()
        try keychain.deletePassword(forService: "busy", account: "a5")
        try keychain.flush()

        // Another connection adds an item: it is found (a miss in the set is always looked up).
        let other = try open(dir, source)
        try other.setPassword("new", forService: "busy", account: "from-other")
        try other.flush()
        try keychain.deletePassword(forService: "busy", account: "from-other")
        try keychain.flush()
        #expect(throws: KeychainError.self) { _ = try other.password(forService: "busy", account: "from-other") }
        // Another connection deletes an item: once its commit is seen (at most 100 ms later),
        // a delete here reports it missing.
        try other.deletePassword(forService: "busy", account: "a150")
        try other.flush()
        Thread.sleep(forTimeInterval: 0.15)
        guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a150") }) else {
            Issue.record("an item deleted by another connection must be reported missing once its commit is seen"); return
        }
        try other.close()
        // Everything else is intact.
        #expect(try keychain.accounts(forService: "busy").count == 99)
        #expect(try keychain.password(forService: "busy", account: "a199") == "v199")
        #expect(try keychain.password(forService: "quiet", account: "a0") == "other")
        try keychain.close()
    }

    @Test func closeFlushesAndRefusesLaterUse() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .seconds(3600))
        try keychain.setPassword("v", forService: "s", account: "a")
        try keychain.close()
        guard case .database? = keychainError({ _ = try keychain.password(forService: "s", account: "a") }) else {
            Issue.record("a closed keychain must refuse reads"); return
        }
        guard case .database? = keychainError({ try keychain.setPassword("w", forService: "s", account: "a") }) else {
            Issue.record("a closed keychain must refuse writes"); return
        }
        #expect(try open(dir, source).password(forService: "s", account: "a") == "v")
    }

    @Test func codableValues() throws {
        struct Token: Codable, Equatable { var access: String; var expires: Date; var scopes: [String] }
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        let token = Token(access: "abc", expires: Date(timeIntervalSince1970: 1_700_000_000), scopes: ["r", "w"])
        try keychain.set(token, forService: "api", account: "me")
        #expect(try keychain.value(Token.self, forService: "api", account: "me") == token)
        let wrong = keychainError { _ = try keychain.value([Int].self, forService: "api", account: "me") }
        #expect(wrong?.isCorrupted == true)
    }
}

@Suite struct WriteCoalescingTests {
    @Test func readsSeePendingWritesAndFlushMakesThemVisibleToOthers() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let first = try open(dir, source, interval: .seconds(3600))
        let second = try open(dir, source, interval: .seconds(3600))
        try first.setPassword("one", forService: "s", account: "a")
        #expect(first.pendingWriteCount == 1)
        #expect(try first.password(forService: "s", account: "a") == "one")
        #expect(keychainError { _ = try second.password(forService: "s", account: "a") }?.isNotFound == true)
        try first.flush()
        #expect(first.pendingWriteCount == 0)
        #expect(try second.password(forService: "s", account: "a") == "one")
        // An update through one connection invalidates the other's read cache.
        try first.setPassword("two", forService: "s", account: "a")
        try first.flush()
        #expect(try second.password(forService: "s", account: "a") == "two")
        try first.deletePassword(forService: "s", account: "a")
        #expect(keychainError { _ = try first.password(forService: "s", account: "a") }?.isNotFound == true)
        #expect(try second.password(forService: "s", account: "a") == "two")
        try first.flush()
        #expect(keychainError { _ = try second.password(forService: "s", account: "a") }?.isNotFound == true)
    }

    @Test func backgroundWriterCommitsWithoutFlush() async throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .milliseconds(20))
        try keychain.setPassword("v", forService: "s", account: "a")
        for _ in 0..<200 where keychain.pendingWriteCount > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(keychain.pendingWriteCount == 0)
        let other = try open(dir, source)
        #expect(try other.password(forService: "s", account: "a") == "v")
    }

    @Test func droppedWithoutCloseStillCommitsAndCloses() async throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        for index in 0..<20 {
            // Released at once, with its write still pending: the scheduled commit keeps it alive.
            try open(dir, source, interval: .milliseconds(10)).setPassword("v\(index)", forService: "s", account: "a\(index)")
        }
        let keychain = try open(dir, source)
        for _ in 0..<300 where (try? keychain.password(forService: "s", account: "a19")) == nil { try await Task.sleep(for: .milliseconds(10)) }
        for index in 0..<20 { #expect(try keychain.password(forService: "s", account: "a\(index)") == "v\(index)") }
    }

    @Test func flushIsDurableAcrossReopen() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        do {
            let keychain = try open(dir, source, interval: .seconds(3600))
            for index in 0..<100 { try keychain.setPassword("p\(index)", forService: "svc", account: "a\(index)") }
            try keychain.flush()
        }
        let reopened = try open(dir, source)
        for index in 0..<100 { #expect(try reopened.password(forService: "svc", account: "a\(index)") == "p\(index)") }
    }

    @Test func threadsWritingAndReading() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .milliseconds(5))
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<300 {
                do {
                    try keychain.setPassword("t\(thread)-\(index)", forService: "thread\(thread)", account: "a\(index)")
                    if try keychain.password(forService: "thread\(thread)", account: "a\(index)") != "t\(thread)-\(index)" { failures.add() }
                    if index % 50 == 0 { try keychain.flush() }
                } catch {
                    failures.add()
                }
            }
        }
        try keychain.flush()
        #expect(failures.value == 0)
        let reopened = try open(dir, source)
        for thread in 0..<8 {
            #expect(try reopened.accounts(forService: "thread\(thread)").count == 300)
            #expect(try reopened.password(forService: "thread\(thread)", account: "a299") == "t\(thread)-299")
        }
    }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

@Suite struct ProcessTests {
    private func runWorkers(dir: String, source: TestKeySource, prefixes: [String], count: Int, flushEvery: Int) throws -> [Process] {
        guard let worker = workerPath() else { throw KeychainError.invalidArgument("KeychainWorker not built") }
        return try prefixes.map { prefix in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            process.arguments = ["write", dir, source.masterHex, prefix, String(count), String(flushEvery)]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
    }

    @Test func fourProcessesWriteOneKeychain() throws {
        guard workerPath() != nil else {
            print("skipped: the KeychainWorker helper is not built (run swift build --build-tests)")
            return
        }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        let prefixes = ["p0", "p1", "p2", "p3"]
        // The parent writes too, while the children run.
        let parent = try Keychain(directory: path, keySource: source)
        let processes = try runWorkers(dir: path, source: source, prefixes: prefixes, count: 400, flushEvery: 25)
        for index in 0..<200 { try parent.setPassword("parent-\(index)", forService: "parent", account: "a\(index)") }
        try parent.flush()
        for process in processes {
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        // The parent's connection sees the children's flushed writes.
        for prefix in prefixes {
            #expect(try parent.accounts(forService: prefix).count == 400)
            #expect(try parent.password(forService: prefix, account: "\(prefix)-399") == "\(prefix)-value-399")
        }
        #expect(try parent.accounts().count == 1800)
    }

    @Test func killDuringWritesLosesNothingFlushed() throws {
        guard let worker = workerPath() else {
            print("skipped: the KeychainWorker helper is not built (run swift build --build-tests)")
            return
        }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        for round in 0..<3 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            let prefix = "round\(round)"
            process.arguments = ["write", path, source.masterHex, prefix, "1000000", "7"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            // Read acknowledgements until a few arrived, then kill -9 mid-stream.
            var acknowledged = 0
            var buffer = Data()
            let target = 20 + round * 15
            while acknowledged < target * 7 {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer += chunk
                for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") where line.hasPrefix("ack ") {
                    acknowledged = max(acknowledged, Int(line.dropFirst(4)) ?? 0)
                }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // Acknowledgements written before the kill, still in the pipe.
            let rest = pipe.fileHandleForReading.readDataToEndOfFile()
            for line in String(decoding: buffer + rest, as: UTF8.self).split(separator: "\n") where line.hasPrefix("ack ") {
                acknowledged = max(acknowledged, Int(line.dropFirst(4)) ?? 0)
            }
            #expect(acknowledged > 0)
            let keychain = try Keychain(directory: path, keySource: source)
            for index in 0..<acknowledged {
                #expect(try keychain.password(forService: prefix, account: "\(prefix)-\(index)") == "\(prefix)-value-\(index)")
            }
            // Nothing beyond what was written, and the file is sound.
            #expect(try keychain.accounts(forService: prefix).count >= acknowledged)
            let check = try DatabaseQueue(path: keychain.path).read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
            #expect(check == "ok")
        }
    }
}

@Suite struct ProtectionTests {
    @Test func lockedErrorsNameTheClassAndReason() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource(unlocked: false)
        let keychain = try open(dir, source)
        // Before the first unlock: afterFirstUnlock and whenUnlocked are unavailable, always works.
        let beforeFirst = keychainError { try keychain.set("v", forService: "s", account: "afu", accessibility: .afterFirstUnlock) }
        guard case .interactionNotAllowed(let a1, let r1)? = beforeFirst else { Issue.record("got \(String(describing: beforeFirst))"); return }
        #expect(a1 == .afterFirstUnlock && r1 == .noFirstUnlockYet)
        let locked = keychainError { try keychain.setSecurePasswordData(SecretBytes(utf8: "x"), forService: "s", account: "wu") }
        guard case .interactionNotAllowed(let a2, let r2)? = locked else { Issue.record("got \(String(describing: locked))"); return }
        #expect(a2 == .whenUnlocked && r2 == .locked)
        #expect(locked?.description.contains("whenUnlocked class key is unavailable") == true)
        try keychain.setPassword("open", forService: "s", account: "always")

        source.setUnlocked(true)
        try keychain.setSecurePassword("secret", forService: "s", account: "wu")
        try keychain.set("afu-value", forService: "s", account: "afu", accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.flush()
        source.setUnlocked(false)
        let read = keychainError { _ = try keychain.securePasswordData(forService: "s", account: "wu") }
        guard case .interactionNotAllowed(let a3, .locked)? = read else { Issue.record("got \(String(describing: read))"); return }
        #expect(a3 == .whenUnlocked)
        #expect(try keychain.value(String.self, forService: "s", account: "afu") == "afu-value")
        #expect(try keychain.password(forService: "s", account: "always") == "open")
        // Names of locked items cannot be listed; the summary says which class is unavailable.
        let summaries = try keychain.summaries()
        #expect(summaries.count == 3)
        #expect(summaries.filter { $0.attributes == nil }.map(\.accessibility) == [.whenUnlocked])
        source.setUnlocked(true)
        #expect(try keychain.securePassword(forService: "s", account: "wu") == "secret")
    }

    @Test func fileHoldsNoNameOrValue() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("PASSWORDNEEDLE", forService: "SERVICENEEDLE", account: "ACCOUNTNEEDLE")
        try keychain.setSecurePassword("SECUREVALUENEEDLE", forService: "SERVICENEEDLE", account: "SECOND")
        try keychain.add(SecretBytes(utf8: "NETVALUENEEDLE"), for: .internet(server: "SERVERNEEDLE.example", account: "NETACCOUNT",
                                                                             networkProtocol: "https", port: 8443, path: "/PATHNEEDLE"),
                         label: "LABELNEEDLE", comment: "COMMENTNEEDLE")
        try keychain.flush()
        let needles = ["PASSWORDNEEDLE", "SERVICENEEDLE", "ACCOUNTNEEDLE", "SECUREVALUENEEDLE", "SECOND", "NETVALUENEEDLE",
                       "SERVERNEEDLE", "NETACCOUNT", "PATHNEEDLE", "LABELNEEDLE", "COMMENTNEEDLE", "8443"]
        var scanned = 0
        for suffix in ["", "-wal"] {
            let path = keychain.path + suffix
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            scanned += bytes.count
            for needle in needles {
                #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) found in \(path)")
                #expect(bytes.range(of: Data(needle.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })) == nil)
            }
        }
        #expect(scanned > 0)
        // The WAL holds the data (not yet checkpointed), so the scan covered it.
        #expect(FileManager.default.fileExists(atPath: keychain.path + "-wal"))
    }

    @Test func filesArePrivate() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("v", forService: "s", account: "a")
        try keychain.flush()
        for (path, mode) in [(keychain.directory, 0o700), (keychain.path, 0o600), (keychain.path + "-wal", 0o600), (keychain.path + "-shm", 0o600)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(path)")
        }
    }

    @Test func refusesFileOpenToOthers() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path: String
        do { path = try open(dir, source).path }
        chmod(path, 0o644)
        let error = keychainError { _ = try open(dir, source) }
        guard case .insecurePermissions(let reported, _)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(reported == path)
    }

    @Test func wrongBlindIndexKeyIsRefused() throws {
        let dir = try TemporaryDirectory()
        _ = try open(dir, try TestKeySource())
        let error = keychainError { _ = try open(dir, try TestKeySource()) }
        guard case .keyUnavailable? = error else { Issue.record("got \(String(describing: error))"); return }
    }
}

@Suite struct TamperTests {
    private func setUp() throws -> (TemporaryDirectory, TestKeySource, String) {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("first-value", forService: "s", account: "one")
        try keychain.setPassword("second-value", forService: "s", account: "two")
        try keychain.flush()
        // Closed before the test edits the file, so its own connection never meets a busy lock.
        try keychain.close()
        return (dir, source, keychain.path)
    }

    private func rows(_ path: String) throws -> [(id: Data, sealed: Data)] {
        try inspectionQueue(path).read { db in
            try GRDB.Row.fetchAll(db, sql: "SELECT item_id, sealed FROM keychain_items ORDER BY item_id").map { ($0[0], $0[1]) }
        }
    }

    @Test func flippedByteAnywhereInTheRecordIsCorruption() throws {
        let (dir, source, path) = try setUp()
        let target = try rows(path)[0]
        // Header (magic, version, key id), nonce, ciphertext, tag.
        for position in [0, 4, 9, 20, 30, target.sealed.count / 2, target.sealed.count - 3] {
            var changed = target.sealed
            changed[position] ^= 0x01
            try inspectionQueue(path).write { db in
                try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [changed, target.id])
            }
            let keychain = try open(dir, source)
            let readError = keychainError { for account in ["one", "two"] { _ = try keychain.password(forService: "s", account: account) } }
            #expect(readError?.isCorrupted == true, "byte \(position): \(String(describing: readError))")
            let listError = keychainError { _ = try keychain.accounts(forService: "s") }
            #expect(listError?.isCorrupted == true, "byte \(position): \(String(describing: listError))")
            try keychain.close()
        }
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [target.sealed, target.id])
        }
        #expect(try open(dir, source).password(forService: "s", account: "one") == "first-value")
    }

    @Test func swappedRowsAreDetected() throws {
        let (dir, source, path) = try setUp()
        let all = try rows(path)
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [all[1].sealed, all[0].id])
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [all[0].sealed, all[1].id])
        }
        let keychain = try open(dir, source)
        for account in ["one", "two"] {
            let error = keychainError { _ = try keychain.password(forService: "s", account: account) }
            #expect(error?.isCorrupted == true, "\(account): \(String(describing: error))")
        }
        #expect(keychainError { _ = try keychain.accounts(forService: "s") }?.isCorrupted == true)
    }

    @Test func rowMovedToAnotherIdIsDetected() throws {
        let (dir, source, path) = try setUp()
        let all = try rows(path)
        // The row of "one" given a new id in the same service's range: it no longer opens there.
        var moved = all[0].id
        moved[moved.count - 1] ^= 0x01
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET item_id = ? WHERE item_id = ?", arguments: [moved, all[0].id])
        }
        let keychain = try open(dir, source)
        #expect(keychainError { _ = try keychain.accounts(forService: "s") }?.isCorrupted == true)
    }

    @Test func changedAccessibilityIsDetected() throws {
        let (dir, source, path) = try setUp()
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET accessibility = 2")
        }
        let keychain = try open(dir, source)
        #expect(keychainError { _ = try keychain.password(forService: "s", account: "one") }?.isCorrupted == true)
    }

    @Test func olderFormatIsRefusedUntouched() throws {
        let (dir, source, path) = try setUp()
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_meta SET value = 1 WHERE key = 'format'")
        }
        let before = try rows(path)
        let error = keychainError { _ = try open(dir, source) }
        guard case .corrupted(let message)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(message.contains("format 1"))
        #expect(try rows(path).map(\.sealed) == before.map(\.sealed))
    }

    @Test func garbageFileIsCorrupted() throws {
        let dir = try TemporaryDirectory()
        let kc = dir.sub("kc")
        try FileManager.default.createDirectory(atPath: kc, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let file = (kc as NSString).appendingPathComponent("keychain.sqlite")
        _ = FileManager.default.createFile(atPath: file, contents: Data(repeating: 0x41, count: 8192), attributes: [.posixPermissions: 0o600])
        let error = keychainError { _ = try open(dir, try TestKeySource()) }
        #expect(error?.isCorrupted == true, "\(String(describing: error))")
    }
}

@Suite struct QueryTests {
    @Test func addCopyUpdateDelete() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        let web = ItemKey.internet(server: "example.com", account: "bob", networkProtocol: "https", port: 443, path: "/")
        try keychain.add(SecretBytes(utf8: "web-secret"), for: web, accessibility: .afterFirstUnlock, label: "Example", comment: "c1")
        #expect(keychainError { try keychain.add(SecretBytes(utf8: "again"), for: web) }?.isDuplicate == true)
        try keychain.add(SecretBytes(utf8: "alt"), for: .internet(server: "example.com", account: "carol", networkProtocol: "ftp", port: 21, path: "/"))
        try keychain.add(SecretBytes(utf8: "g1"), for: .generic(service: "app", account: "u1"), accessibility: .alwaysThisDeviceOnly, label: "L")
        try keychain.add(SecretBytes(utf8: "g2"), for: .generic(service: "app", account: "u2"))

        // Match one, exact, data and attributes.
        let exact = try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, account: "bob", server: "example.com",
                                                            networkProtocol: "https", port: 443, path: "/", returning: [.data, .attributes]))
        #expect(exact.count == 1)
        #expect(text(try #require(exact[0].data)) == "web-secret")
        let attributes = try #require(exact[0].attributes)
        #expect(attributes.key == web && attributes.label == "Example" && attributes.comment == "c1")
        #expect(attributes.accessibility == .afterFirstUnlock)
        #expect(attributes.creationDate <= attributes.modificationDate)

        // Match all of a server, by protocol, by label.
        #expect(try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, server: "example.com", limit: .all)).count == 2)
        let ftp = try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, networkProtocol: "ftp", limit: .all, returning: .attributes))
        #expect(ftp.map { $0.attributes?.key.account } == ["carol"])
        #expect(ftp[0].data == nil)
        let labelled = try keychain.copyMatching(KeychainQuery(label: "L", limit: .all, returning: .attributes))
        #expect(labelled.map { $0.attributes?.key.account } == ["u1"])
        #expect(try keychain.copyMatching(KeychainQuery(service: "app", limit: .all)).count == 2)
        #expect(try keychain.copyMatching(KeychainQuery(service: "app", limit: .one)).count == 1)
        #expect(try keychain.copyMatching(KeychainQuery(accessibility: .alwaysThisDeviceOnly, limit: .all)).count == 1)
        #expect(keychainError { _ = try keychain.copyMatching(KeychainQuery(service: "nope")) }?.isNotFound == true)
        #expect(keychainError { _ = try keychain.copyMatching(KeychainQuery(service: "app", account: "u1", label: "other")) }?.isNotFound == true)

        // Update: label and data of one; accessibility of a service.
        try keychain.flush()
        #expect(try keychain.update(KeychainQuery(service: "app", account: "u1"), with: ItemUpdate(data: SecretBytes(utf8: "g1b"), label: .some(nil))) == 1)
        let updated = try keychain.copyMatching(KeychainQuery(service: "app", account: "u1", returning: [.data, .attributes]))
        #expect(text(try #require(updated[0].data)) == "g1b")
        #expect(updated[0].attributes?.label == nil)
        #expect(updated[0].attributes?.accessibility == .alwaysThisDeviceOnly)
        #expect(try keychain.update(KeychainQuery(service: "app"), with: ItemUpdate(accessibility: .whenUnlockedThisDeviceOnly)) == 2)
        #expect(try keychain.copyMatching(KeychainQuery(accessibility: .whenUnlockedThisDeviceOnly, limit: .all)).count == 2)
        #expect(keychainError { try keychain.update(KeychainQuery(service: "none"), with: ItemUpdate(label: "x")) }?.isNotFound == true)

        // Delete by query.
        #expect(try keychain.delete(KeychainQuery(itemClass: .internetPassword, server: "example.com")) == 2)
        #expect(keychainError { try keychain.delete(KeychainQuery(itemClass: .internetPassword)) }?.isNotFound == true)
        try keychain.flush()
        #expect(try keychain.copyMatching(KeychainQuery(limit: .all)).count == 2)
    }

    @Test func creationDateSurvivesUpdates() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("a", forService: "s", account: "x")
        try keychain.flush()
        let created = try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes).creationDate
        Thread.sleep(forTimeInterval: 0.02)
        let other = try open(dir, source)
        try other.setPassword("b", forService: "s", account: "x")
        try other.flush()
        let after = try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes)
        #expect(after.creationDate == created)
        #expect(after.modificationDate > created)
    }

    /// A write of an item this keychain has not read (another keychain object created it) keeps
    /// the creation date in the file: read back while the write is pending, by key and in a
    /// listing (which stays in creation order), and after the commit, it reports that date.
    @Test func pendingWriteOfAnUnreadItemReportsTheStoredCreationDate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let first = try open(dir, source)
        try first.setPassword("a", forService: "s", account: "old")
        try first.flush()
        let created = try #require(first.copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes).creationDate
        Thread.sleep(forTimeInterval: 0.02)
        let second = try open(dir, source, interval: .seconds(3600))
        try second.setPassword("n", forService: "s", account: "new")
        try second.setPassword("b", forService: "s", account: "old")
        let byKey = try #require(second.copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes)
        #expect(byKey.creationDate == created)
        #expect(byKey.modificationDate > created)
        let listed = try second.copyMatching(KeychainQuery(service: "s", limit: .all, returning: .attributes)).compactMap(\.attributes)
        #expect(listed.map(\.key.account) == ["old", "new"])
        #expect(listed.first?.creationDate == created)
        #expect(try second.accounts(forService: "s").map(\.account) == ["old", "new"])
        #expect(try second.password(forService: "s", account: "old") == "b")
        try second.flush()
        let stored = try #require(try open(dir, source).copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes)
        #expect(stored.creationDate == created)
        #expect(stored.modificationDate == byKey.modificationDate)
    }
}
    /// Within one coalescing window: repeated sets keep the first creation date, an update of a
    /// cached item keeps the stored one, and an item deleted and set again is a new item.
    @Test func creationDatesWithinOneCoalescingWindow() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .seconds(3600))
        func attributes(_ keychain: Keychain) throws -> ItemAttributes {
            try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes)
        }
        try keychain.setPassword("a", forService: "s", account: "x")
        Thread.sleep(forTimeInterval: 0.02)
        try keychain.setPassword("b", forService: "s", account: "x")
        try keychain.flush()
        let first = try attributes(keychain)
        #expect(first.modificationDate > first.creationDate)

        _ = try keychain.password(forService: "s", account: "x")  // now cached
        Thread.sleep(forTimeInterval: 0.02)
        try keychain.setPassword("c", forService: "s", account: "x")
        try keychain.flush()
        #expect(try attributes(keychain).creationDate == first.creationDate)

        Thread.sleep(forTimeInterval: 0.02)
        try keychain.deletePassword(forService: "s", account: "x")
        try keychain.setPassword("d", forService: "s", account: "x")
        let renewed = try attributes(keychain)
        #expect(renewed.creationDate > first.creationDate)
        #expect(renewed.creationDate == renewed.modificationDate)
        try keychain.flush()
        let stored = try attributes(try open(dir, source))
        #expect(stored.creationDate == renewed.creationDate)
        #expect(try open(dir, source).password(forService: "s", account: "x") == "d")
    }


@Suite struct MigrationTests {
    @Test func importsLegacyBinaryPlist() throws {
        let dir = try TemporaryDirectory()
        let legacy: [String: [String: Data]] = [
            "org.mitre.imas.crypto-manager": ["salt": Data(repeating: 7, count: 32), "shared-key.passcode": Data(repeating: 9, count: 64)],
            "mail": ["alice": Data("alice-pw".utf8), "bob": Data("bob-pw".utf8)],
        ]
        let plist = try PropertyListSerialization.data(fromPropertyList: legacy, format: .binary, options: 0)
        #expect(plist.prefix(8) == Data("bplist00".utf8))
        let file = dir.sub("...")
        try plist.write(to: URL(fileURLWithPath: file))
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("kept", forService: "mail", account: "alice")
        let report = try keychain.importLegacyKeychain(at: file)
        #expect(report == Keychain.LegacyImportReport(imported: 3, skipped: 1))
        #expect(try keychain.password(forService: "mail", account: "alice") == "kept")
        #expect(try keychain.password(forService: "mail", account: "bob") == "bob-pw")
        #expect(try keychain.passwordData(forService: "org.mitre.imas.crypto-manager", account: "salt").count == 32)
        let again = try keychain.importLegacyKeychain(at: file, overwrite: true)
        #expect(again.imported == 4)
        #expect(try keychain.password(forService: "mail", account: "alice") == "alice-pw")

        let empty = dir.sub("empty")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(try keychain.importLegacyKeychain(at: empty).imported == 0)
        let bad = dir.sub("bad")
        try PropertyListSerialization.data(fromPropertyList: ["a": "b"], format: .binary, options: 0).write(to: URL(fileURLWithPath: bad))
        guard case .legacyFormat? = keychainError({ _ = try keychain.importLegacyKeychain(at: bad) }) else {
            Issue.record("a plist of the wrong shape must be refused"); return
        }
    }

    @Test func reinstallWipesStaleItems() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let marker = dir.sub("cache/install-marker")
        do {
            let keychain = try open(dir, source, marker: marker)
            #expect(keychain.wipedStaleItems == 0)
            try keychain.setPassword("v", forService: "s", account: "a")
            try keychain.setPassword("w", forService: "s", account: "b")
            try keychain.flush()
        }
        #expect(FileManager.default.fileExists(atPath: marker))
        // Same installation: nothing wiped.
        do {
            let keychain = try open(dir, source, marker: marker)
            #expect(keychain.wipedStaleItems == 0)
            #expect(try keychain.password(forService: "s", account: "a") == "v")
        }
        // The marker went away with a reinstall: the items are stale.
        try FileManager.default.removeItem(atPath: dir.sub("cache"))
        let keychain = try open(dir, source, marker: marker)
        #expect(keychain.wipedStaleItems == 2)
        #expect(keychainError { _ = try keychain.password(forService: "s", account: "a") }?.isNotFound == true)
        #expect(FileManager.default.fileExists(atPath: marker))
        // Without the option, nothing is checked.
        try keychain.setPassword("x", forService: "s", account: "a")
        try keychain.flush()
        try FileManager.default.removeItem(atPath: marker)
        #expect(try open(dir, source).password(forService: "s", account: "a") == "x")
    }
}
