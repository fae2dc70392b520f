import Foundation
import GRDB
import SecureFoundation

/// The keychain beside a plain SQLite table (no encryption, names in the clear) through GRDB,
/// in the same run: coalesced sets, durable flush, gets (p50/p99), open, deletes.
enum KeychainBench {
    static let count = Int(ProcessInfo.processInfo.environment["KEYCHAIN_BENCH_COUNT"] ?? "") ?? 100_000
    static let deleteRoundCount = 5
    static let smallCommitRuns = 200

    static func run() throws {
        let root = (FileManager.default.temporaryDirectory.path as NSString).appendingPathComponent("sf-keychain-bench-\(getpid())")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let source = try StaticKeySource(masterKey: SecretBytes.random(count: 32))
        let names = (0..<count).map { ("service-\($0 % 100)", "account-\($0)") }
        let values = (0..<count).map { "password-value-\($0)-\(String(repeating: "x", count: 16))" }
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "n/a"
        print("items: \(count); values \(values[0].utf8.count) bytes; keychain accessibility always (StaticKeySource);"
              + " \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(load)")

        // MARK: Plain SQLite reference
        let plainPath = root + "/plain.sqlite"
        var config = GRDB.Configuration()
        config.journalMode = .wal
        // The keychain's settings: every commit synced, checkpoints not run inside commits.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        let plain = try DatabaseQueue(path: plainPath, configuration: config)
        // GRDB's WAL set-up selects synchronous = NORMAL after prepareDatabase; FULL again, as
        // the keychain does, so that both stores sync every commit.
        try plain.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try plain.write { db in
            try db.execute(sql: "CREATE TABLE items (service TEXT NOT NULL, account TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (service, account)) WITHOUT ROWID")
        }
        let plainInsert = try BenchSupport.time {
            try plain.inDatabase { db in
                try db.inTransaction(.immediate) {
                    let statement = try db.cachedStatement(sql: "INSERT INTO items (service, account, value) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET value = excluded.value")
                    for index in 0..<count {
                        statement.setUncheckedArguments([names[index].0, names[index].1, Data(values[index].utf8)])
                        try statement.execute()
                    }
                    return .commit
                }
            }
        }
        try checkpoint(plainPath)
        // A new value every time: SQLite skips writing a row rewritten with the same bytes, and a
        // commit with nothing written neither writes nor syncs the WAL.
        var plainRun = 0
        let plainSmallCommit = try median(smallCommitRuns) {
            plainRun += 1
            try plain.inDatabase { db in
                try db.inTransaction(.immediate) {
                    try db.execute(sql: "UPDATE items SET value = ? WHERE service = ? AND account = ?", arguments: [Data("new-\(plainRun)".utf8), names[7].0, names[7].1])
                    return .commit
                }
            }
        }
        let order = (0..<count).shuffled()
        var plainGets = [Double]()
        plainGets.reserveCapacity(count)
        try plain.inDatabase { db in
            let statement = try db.cachedStatement(sql: "SELECT value FROM items WHERE service = ? AND account = ?")
            for index in order {
                let start = DispatchTime.now().uptimeNanoseconds
                let value = try Data.fetchOne(statement, arguments: [names[index].0, names[index].1])
                plainGets.append(Double(DispatchTime.now().uptimeNanoseconds - start))
                precondition(value != nil)
            }
        }
        let plainOpen = try BenchSupport.time {
            let queue = try DatabaseQueue(path: plainPath, configuration: config)
            _ = try queue.inDatabase { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM items WHERE service = 'x'") }
        }

        // MARK: Keychain
        let directory = root + "/keychain"
        var keychain: Keychain? = try Keychain(directory: directory, keySource: source)
        let kc = try require(keychain)
        let setCalls = try BenchSupport.time {
            for index in 0..<count { try kc.setPassword(values[index], forService: names[index].0, account: names[index].1) }
        }
        let bulkFlush = try BenchSupport.time { try kc.flush() }
        try checkpoint(directory + "/keychain.sqlite")
        var smallRun = 0
        let smallFlush = try median(smallCommitRuns) {
            smallRun += 1
            try kc.setPassword("new-\(smallRun)", forService: names[7].0, account: names[7].1)
            try kc.flush()
        }
        keychain = nil

        // The cost of the set call alone: a writer that does not commit until flushed.
        var quiet = Keychain.Configuration()
        quiet.coalescingInterval = .seconds(3600)
        let quietKeychain = try Keychain(directory: root + "/quiet", keySource: source, configuration: quiet)
        let quietSetCalls = try BenchSupport.time {
            for index in 0..<count { try quietKeychain.setPassword(values[index], forService: names[index].0, account: names[index].1) }
        }
        let quietFlush = try BenchSupport.time { try quietKeychain.flush() }

        let openTime = try median(5) { _ = try Keychain(directory: directory, keySource: source) }
        let reopened = try Keychain(directory: directory, keySource: source)
        var coldGets = [Double]()
        var warmGets = [Double]()
        coldGets.reserveCapacity(count)
        warmGets.reserveCapacity(count)
        for pass in 0..<2 {
            for index in order {
                let start = DispatchTime.now().uptimeNanoseconds
                let secret = try reopened.passwordData(forService: names[index].0, account: names[index].1)
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
                if pass == 0 { coldGets.append(elapsed) } else { warmGets.append(elapsed) }
                precondition(secret.count > 0)
            }
        }
        // Deletes: rounds of count/10 items (round r deletes the items whose index is r mod 10, all
        // the accounts of 10 services), the plain table and the keychain in turn, each from a
        // checkpointed file; the median round is reported (one round is too short to trust alone).
        var deleteRounds = [(calls: Double, flush: Double, plain: Double)]()
        for round in 0..<deleteRoundCount {
            try checkpoint(plainPath)
            let plainTime = try BenchSupport.time {
                try plain.inDatabase { db in
                    try db.inTransaction(.immediate) {
                        let statement = try db.cachedStatement(sql: "DELETE FROM items WHERE service = ? AND account = ?")
                        for index in stride(from: round, to: count, by: 10) {
                            statement.setUncheckedArguments([names[index].0, names[index].1])
                            try statement.execute()
                        }
                        return .commit
                    }
                }
            }
            try checkpoint(directory + "/keychain.sqlite")
            let calls = try BenchSupport.time {
                for index in stride(from: round, to: count, by: 10) { try reopened.deletePassword(forService: names[index].0, account: names[index].1) }
            }
            let flush = try BenchSupport.time { try reopened.flush() }
            deleteRounds.append((calls, flush, plainTime))
        }

        // whenUnlocked items through a real CryptoManager (asked for the class key on every read).
        let manager = try CryptoManager(directory: root + "/vault", deviceKeyProvider: FileDeviceKeyProvider(path: root + "/device.key"),
                                        attemptPolicy: .unlimited)
        try manager.storeTemporaryPasscode(SecretBytes(utf8: "bench-passcode"))
        try manager.finalize()
        let managed = try Keychain(directory: root + "/vault/keychain", keySource: manager)
        let managedCount = min(count, 10_000)
        let managedSets = try BenchSupport.time {
            for index in 0..<managedCount {
                try managed.setSecurePasswordData(SecretBytes(utf8: values[index]), forService: names[index].0, account: names[index].1)
            }
            try managed.flush()
        }
        var managedGets = [Double]()
        for index in (0..<managedCount).shuffled() {
            let start = DispatchTime.now().uptimeNanoseconds
            let secret = try managed.securePasswordData(forService: names[index].0, account: names[index].1)
            managedGets.append(Double(DispatchTime.now().uptimeNanoseconds - start))
            precondition(secret.count > 0)
        }

        // Close every keychain before the directory is removed.
        try quietKeychain.close()
        try reopened.close()
        try managed.close()
        try kc.close()

        // MARK: Report
        let setRate = Double(count) / setCalls
        let sustained = Double(count) / (setCalls + bulkFlush)
        let plainRate = Double(count) / plainInsert
        print("set (coalesced, returns at once): \(Int(setRate)) /s   [target >= 50,000/s]")
        print("set call alone (writer idle until flush): \(Int(Double(count) / quietSetCalls)) /s; then one durable flush of \(count): \(BenchSupport.format(quietFlush * 1000, 1)) ms")
        print("set + durable flush of all \(count): \(BenchSupport.format(setCalls + bulkFlush, 3)) s = \(Int(sustained)) /s;"
              + " plain SQLite insert (one transaction): \(BenchSupport.format(plainInsert, 3)) s = \(Int(plainRate)) /s;"
              + " ratio \(BenchSupport.format((setCalls + bulkFlush) / plainInsert))x")
        print("durable flush: \(BenchSupport.format(bulkFlush * 1000, 1)) ms for \(count) pending writes;"
              + " \(BenchSupport.format(smallFlush * 1000, 2)) ms for 1 write (median);"
              + " plain SQLite 1-row commit (synchronous=FULL) \(BenchSupport.format(plainSmallCommit * 1000, 2)) ms;"
              + " ratio \(BenchSupport.format(smallFlush / plainSmallCommit))x")
        let (p50, p99) = percentiles(warmGets)
        let (c50, c99) = percentiles(coldGets)
        let (q50, q99) = percentiles(plainGets)
        let (m50, m99) = percentiles(managedGets)
        print("get, cached (second read): p50 \(us(p50)) us, p99 \(us(p99)) us   [target p50 <= 20 us]")
        print("get, first read after open: p50 \(us(c50)) us, p99 \(us(c99)) us")
        print("plain SQLite get: p50 \(us(q50)) us, p99 \(us(q99)) us; ratio p50 cached \(BenchSupport.format(p50 / q50))x, first read \(BenchSupport.format(c50 / q50))x")
        print("get of whenUnlocked items via CryptoManager (\(managedCount) items): p50 \(us(m50)) us, p99 \(us(m99)) us"
              + "; their set + flush \(Int(Double(managedCount) / managedSets)) /s")
        print("open with \(count) items: \(BenchSupport.format(openTime * 1000, 2)) ms (median of 5)   [target <= 200 ms];"
              + " plain SQLite open \(BenchSupport.format(plainOpen * 1000, 2)) ms")
        let deletes = Double(count / 10)
        let byTotal = deleteRounds.sorted { $0.calls + $0.flush < $1.calls + $1.flush }
        let middle = byTotal[byTotal.count / 2]
        let plainDelete = deleteRounds.map(\.plain).sorted()[deleteRounds.count / 2]
        let ratios = deleteRounds.map { ($0.calls + $0.flush) / $0.plain }.sorted()
        print("delete \(Int(deletes)) + flush (median of \(deleteRoundCount) rounds): \(BenchSupport.format((middle.calls + middle.flush) * 1000, 1)) ms"
              + " (calls \(BenchSupport.format(middle.calls * 1000, 1)) ms, flush \(BenchSupport.format(middle.flush * 1000, 1)) ms)"
              + " (\(Int(deletes / (middle.calls + middle.flush))) /s); plain SQLite \(BenchSupport.format(plainDelete * 1000, 1)) ms;"
              + " ratio \(BenchSupport.format((middle.calls + middle.flush) / plainDelete))x"
              + " (per round: \(ratios.map { BenchSupport.format($0) }.joined(separator: ", ")))")
    }

    /// Copies the WAL into the database and empties it, outside any timing, so that each timed
    /// phase starts from the same state for both stores (neither pays for an earlier phase's
    /// checkpoint).
    static func checkpoint(_ path: String) throws {
        var config = GRDB.Configuration()
        config.busyMode = .timeout(30)
        try DatabaseQueue(path: path, configuration: config).writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    static func require<T>(_ value: T?) throws -> T {
        guard let value else { throw KeychainError.invalidArgument("benchmark setup failed") }
        return value
    }

    static func median(_ runs: Int, _ body: () throws -> Void) throws -> Double {
        var times = [Double]()
        for _ in 0..<runs { times.append(try BenchSupport.time(body)) }
        return times.sorted()[runs / 2]
    }

    static func percentiles(_ nanoseconds: [Double]) -> (Double, Double) {
        let sorted = nanoseconds.sorted()
        guard !sorted.isEmpty else { return (0, 0) }
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }

    static func us(_ nanoseconds: Double) -> String { BenchSupport.format(nanoseconds / 1000, 1) }
}
