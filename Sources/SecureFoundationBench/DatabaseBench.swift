import Foundation
import GRDB
import SecureFoundation

/// `securefoundation-bench db`: the same workload on a plain SQLite database and on a protected
/// database, both through GRDB (WAL, synchronous NORMAL), and on plain SQLite and SQLCipher 4
/// through Python (`sqlite3`, `sqlcipher3`), in the same run: single-row transactions, 10k-row
/// batches, point reads, a range scan and a WAL checkpoint. The protected database is compared
/// with plain SQLite in the same harness (GRDB), SQLCipher with plain SQLite in its harness
/// (Python); the two overheads are then compared. DB_BENCH_ROWS (default 50,000).
enum DatabaseBench {
    static let rows = max(10_000, Int(ProcessInfo.processInfo.environment["DB_BENCH_ROWS"] ?? "") ?? 50_000)
    static let singleTransactions = 2_000
    static let pointReads = 50_000
    static let scans = 5

    struct Figures {
        var single = 0.0, batch = 0.0, point = 0.0, scan = 0.0, checkpoint = 0.0
        var rates: [(String, Double, String)] {
            [("single-row transactions", Double(singleTransactions) / single, "tx/s"),
             ("10k-row batches", Double(rows) / batch, "rows/s"),
             ("point reads", Double(pointReads) / point, "reads/s"),
             ("range scan", Double(rows * scans) / scan, "rows/s"),
             ("WAL checkpoint", 1 / checkpoint, "/s")]
        }
    }

    static func run() throws {
        // 8 MiB holds the whole table (SQLCipher's Python build uses 8000 KiB by default); with
        // 2 MiB (SQLite's default) most reads miss the page cache, and a miss is where an
        // encrypted page costs (HMAC-SHA512 and AES of 4 KiB).
        for cacheKiB in [8000, 2000] {
            print("-- page cache \(cacheKiB) KiB for all four --")
            try run(cacheKiB: cacheKiB)
        }
    }

    static func run(cacheKiB: Int) throws {
        var base = FileManager.default.temporaryDirectory.path
        if let chosen = ProcessInfo.processInfo.environment["DB_BENCH_DIR"], !chosen.isEmpty { base = chosen }
        let dir = base + "/sf-db-bench-\(getpid())-\(cacheKiB)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "n/a"
        print("rows: \(rows) of about 120 bytes; \(singleTransactions) single-row transactions; \(pointReads) point reads; \(scans) scans;"
              + " files in \(base); \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(load)")

        // Plain SQLite through GRDB.
        var config = Configuration()
        config.journalMode = .wal
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheKiB)")
        }
        let plain = try DatabaseQueue(path: dir + "/plain.db", configuration: config)
        let plainFigures = try workload(plain)
        try plain.close()

        // A protected database (class completeUnlessOpen) through GRDB.
        let manager = try CryptoManager(directory: dir + "/home", deviceKeyProvider: StaticDeviceKeyProvider(key: SecretBytes.random(count: 32)),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "bench passcode 2468"))
        if !manager.isUnlocked { try manager.unlock(passcode: SecretBytes(utf8: "bench passcode 2468")) }
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        var protectedConfig = Configuration()
        protectedConfig.prepareDatabase { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheKiB)")
        }
        let protected = try ProtectedDatabase.create(at: dir + "/protected.db", protection: .completeUnlessOpen, files: files,
                                                     kind: .queue, configuration: protectedConfig)
        let protectedFigures = try workload(protected.writer)
        try protected.close()

        print("GRDB (same harness)            plain SQLite      protected    ratio (protected / plain time)")
        var worst = 0.0
        for (index, (name, plainRate, unit)) in plainFigures.rates.enumerated() {
            let ours = protectedFigures.rates[index].1
            let ratio = plainRate / ours
            worst = max(worst, ratio)
            let columns: [String] = [pad(name, 28), pad(BenchSupport.format(plainRate, 0), 14), pad(BenchSupport.format(ours, 0), 14),
                                     BenchSupport.format(ratio) + "x  ", unit]
            print("  " + columns.joined(separator: ""))
        }
        print("  slowest case: \(BenchSupport.format(worst))x plain SQLite's time (target: at most 1.3x)")

        // SQLCipher 4 and plain SQLite through Python, the same workload.
        guard let python = BenchSupport.which("python3"),
              BenchSupport.run(python, ["-c", "import sqlcipher3"])?.status == 0 else {
            print("SQLCipher: python3 with sqlcipher3 is not installed (pip install sqlcipher3-wheels); skipped")
            return
        }
        let scriptPath = dir + "/bench.py"
        try pythonWorkload.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let key = try SecretBytes.random(count: 32).withUnsafeBytes { Encoding.hex(Array($0)) }
        var measured: [String: Figures] = [:]
        for module in ["sqlite3", "sqlcipher3"] {
            guard let result = BenchSupport.run(python, [scriptPath, module, dir + "/\(module).db", key, String(rows), String(singleTransactions), String(pointReads), String(scans), String(cacheKiB)]),
                  result.status == 0 else {
                print("SQLCipher: the Python workload failed for \(module)")
                return
            }
            let numbers = result.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double(String($0)) }
            guard numbers.count == 5 else { print("SQLCipher: unexpected output \(result.output)"); return }
            measured[module] = Figures(single: numbers[0], batch: numbers[1], point: numbers[2], scan: numbers[3], checkpoint: numbers[4])
        }
        guard let plainPython = measured["sqlite3"], let cipher = measured["sqlcipher3"] else { return }
        print("Python (same harness)          plain SQLite     SQLCipher 4   ratio        overhead: protected / SQLCipher")
        for (index, (name, plainRate, unit)) in plainPython.rates.enumerated() {
            let theirs = cipher.rates[index].1
            let theirRatio = plainRate / theirs
            let ourRatio = plainFigures.rates[index].1 / protectedFigures.rates[index].1
            let columns: [String] = [pad(name, 28), pad(BenchSupport.format(plainRate, 0), 14), pad(BenchSupport.format(theirs, 0), 14),
                                     pad(BenchSupport.format(theirRatio) + "x", 13), BenchSupport.format(ourRatio / theirRatio), unit]
            print("  " + columns.joined(separator: ""))
        }
        print("  (overhead below 1: the protected database costs less over plain SQLite than SQLCipher does)")
    }

    static func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(1, width - text.count)) }

    /// The workload, timed part by part.
    static func workload(_ writer: any DatabaseWriter) throws -> Figures {
        var figures = Figures()
        try writer.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT NOT NULL, v TEXT NOT NULL)") }
        let payload = String(repeating: "v", count: 100)
        figures.single = try BenchSupport.time {
            for index in 0..<singleTransactions {
                try writer.write { db in try db.execute(sql: "INSERT INTO t(k, v) VALUES (?, ?)", arguments: ["single-\(index)", payload]) }
            }
        }
        try writer.write { db in try db.execute(sql: "DELETE FROM t") }
        _ = try writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        figures.batch = try BenchSupport.time {
            for batch in 0..<(rows / 10_000) {
                try writer.write { db in
                    let statement = try db.cachedStatement(sql: "INSERT INTO t(id, k, v) VALUES (?, ?, ?)")
                    for index in (batch * 10_000)..<((batch + 1) * 10_000) {
                        statement.setUncheckedArguments([index + 1, "key-\(index)", payload])
                        try statement.execute()
                    }
                }
            }
        }
        figures.checkpoint = try BenchSupport.time {
            _ = try writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        }
        var generator = SystemRandomNumberGenerator()
        let ids = (0..<pointReads).map { _ in Int.random(in: 1...rows, using: &generator) }
        figures.point = try BenchSupport.time {
            try writer.read { db in
                let statement = try db.cachedStatement(sql: "SELECT v FROM t WHERE id = ?")
                for id in ids {
                    let value = try String.fetchOne(statement, arguments: [id])
                    precondition(value != nil)
                }
            }
        }
        figures.scan = try BenchSupport.time {
            for _ in 0..<scans {
                let total = try writer.read { db in try Int.fetchOne(db, sql: "SELECT sum(length(v)) FROM t") }
                precondition(total == rows * 100)
            }
        }
        return figures
    }

    static let pythonWorkload = """
    import sys, time, random, importlib
    module, path, key, rows, single, points, scans, cache = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
    db = importlib.import_module(module)
    c = db.connect(path, isolation_level=None)
    if module == "sqlcipher3":
        c.execute("PRAGMA key = \\"x'%s'\\"" % key)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("PRAGMA synchronous = NORMAL")
    c.execute("PRAGMA wal_autocheckpoint = 0")
    c.execute("PRAGMA cache_size = -%d" % cache)
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT NOT NULL, v TEXT NOT NULL)")
    payload = "v" * 100
    t = time.perf_counter()
    for i in range(single):
        c.execute("BEGIN"); c.execute("INSERT INTO t(k, v) VALUES (?, ?)", ("single-%d" % i, payload)); c.execute("COMMIT")
    s = time.perf_counter() - t
    c.execute("DELETE FROM t"); c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    t = time.perf_counter()
    for b in range(rows // 10000):
        c.execute("BEGIN")
        c.executemany("INSERT INTO t(id, k, v) VALUES (?, ?, ?)", ((i + 1, "key-%d" % i, payload) for i in range(b * 10000, (b + 1) * 10000)))
        c.execute("COMMIT")
    b = time.perf_counter() - t
    t = time.perf_counter(); c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall(); k = time.perf_counter() - t
    ids = [random.randint(1, rows) for _ in range(points)]
    t = time.perf_counter()
    c.execute("BEGIN")
    for i in ids:
        assert c.execute("SELECT v FROM t WHERE id = ?", (i,)).fetchone() is not None
    c.execute("COMMIT")
    p = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(scans):
        assert c.execute("SELECT sum(length(v)) FROM t").fetchone()[0] == rows * 100
    r = time.perf_counter() - t
    print(s, b, p, r, k)
    """
}
