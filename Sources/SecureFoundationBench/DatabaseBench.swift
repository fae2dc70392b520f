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

    /// Rounds per cache size (DB_BENCH_ROUNDS, at least 5): each round runs the four databases
    /// afresh, their order alternating from one round to the next, and each row prints the
    /// median of the rounds with the range of the per-round ratios, so that one noisy run shows
    /// as a wide range instead of a different figure.
    static let rounds = max(5, Int(ProcessInfo.processInfo.environment["DB_BENCH_ROUNDS"] ?? "") ?? 5)

    static func run(cacheKiB: Int) throws {
        var base = FileManager.default.temporaryDirectory.path
        if let chosen = ProcessInfo.processInfo.environment["DB_BENCH_DIR"], !chosen.isEmpty { base = chosen }
        let dir = base + "/sf-db-bench-\(getpid())-\(cacheKiB)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "n/a"
        print("rows: \(rows) of about 120 bytes; \(singleTransactions) single-row transactions; \(pointReads) point reads; \(scans) scans;"
              + " \(rounds) rounds, alternating; files in \(base); \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(load)")

        let manager = try CryptoManager(directory: dir + "/home", deviceKeyProvider: StaticDeviceKeyProvider(key: SecretBytes.random(count: 32)),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "bench passcode 2468"))
        if !manager.isUnlocked { try manager.unlock(passcode: SecretBytes(utf8: "bench passcode 2468")) }
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let python = BenchSupport.which("python3").flatMap { BenchSupport.run($0, ["-c", "import sqlcipher3"])?.status == 0 ? $0 : nil }
        let scriptPath = dir + "/bench.py"
        try pythonWorkload.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let key = try SecretBytes.random(count: 32).withUnsafeBytes { Encoding.hex(Array($0)) }

        var plain: [Figures] = [], protected: [Figures] = [], plainPython: [Figures] = [], cipher: [Figures] = []
        for round in 0..<rounds {
            let roundDir = dir + "/round-\(round)"
            try FileManager.default.createDirectory(atPath: roundDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // Alternate which database goes first, so that neither always meets a warm (or a busy) machine.
            for first in round % 2 == 0 ? [true, false] : [false, true] {
                if first {
                    plain.append(try plainRound(roundDir + "/plain.db", cacheKiB: cacheKiB))
                } else {
                    protected.append(try protectedRound(roundDir + "/protected.db", cacheKiB: cacheKiB, files: files))
                }
            }
            if let python {
                for module in round % 2 == 0 ? ["sqlite3", "sqlcipher3"] : ["sqlcipher3", "sqlite3"] {
                    guard let figures = pythonRound(python, scriptPath, module: module, path: roundDir + "/\(module).db", key: key, cacheKiB: cacheKiB) else {
                        print("SQLCipher: the Python workload failed for \(module)")
                        return
                    }
                    if module == "sqlite3" { plainPython.append(figures) } else { cipher.append(figures) }
                }
            }
            try? FileManager.default.removeItem(atPath: roundDir)
        }

        print("GRDB (same harness)            plain SQLite  protected     ratio   ratio range   (medians of \(rounds); ratio: protected / plain time)")
        var worst = 0.0
        for row in 0..<5 {
            let (name, plainRate, unit) = median(plain, row)
            let ours = median(protected, row).1
            let ratios = zip(plain, protected).map { $0.rates[row].1 / $1.rates[row].1 }
            let ratio = plainRate / ours
            worst = max(worst, ratio)
            let columns: [String] = [pad(name, 28), pad(BenchSupport.format(plainRate, 0), 14), pad(BenchSupport.format(ours, 0), 14),
                                     pad(BenchSupport.format(ratio) + "x", 8), pad(range(ratios), 14), unit]
            print("  " + columns.joined(separator: ""))
        }
        print("  slowest case: \(BenchSupport.format(worst))x plain SQLite's time (target: at most 1.3x)")

        guard python != nil, !cipher.isEmpty else {
            print("SQLCipher: python3 with sqlcipher3 is not installed (pip install sqlcipher3-wheels); skipped")
            return
        }
        print("Python (same harness)          plain SQLite  SQLCipher 4   ratio   ratio range   overhead: protected / SQLCipher")
        for row in 0..<5 {
            let (name, plainRate, unit) = median(plainPython, row)
            let theirs = median(cipher, row).1
            let theirRatios = zip(plainPython, cipher).map { $0.rates[row].1 / $1.rates[row].1 }
            let theirRatio = plainRate / theirs
            let ourRatio = median(plain, row).1 / median(protected, row).1
            let columns: [String] = [pad(name, 28), pad(BenchSupport.format(plainRate, 0), 14), pad(BenchSupport.format(theirs, 0), 14),
                                     pad(BenchSupport.format(theirRatio) + "x", 8), pad(range(theirRatios), 14),
                                     pad(BenchSupport.format(ourRatio / theirRatio), 6), unit]
            print("  " + columns.joined(separator: ""))
        }
        print("  (overhead below 1: the protected database costs less over plain SQLite than SQLCipher does)")
    }

    /// Row `row` of `figures`' rates: its name, the median rate over the rounds, its unit.
    static func median(_ figures: [Figures], _ row: Int) -> (String, Double, String) {
        let first = figures[0].rates[row]
        return (first.0, BenchSupport.median(figures.map { $0.rates[row].1 }), first.2)
    }

    /// `min–max` of per-round ratios.
    static func range(_ ratios: [Double]) -> String {
        guard let low = ratios.min(), let high = ratios.max() else { return "n/a" }
        return BenchSupport.format(low) + "–" + BenchSupport.format(high) + "x"
    }

    /// One round on plain SQLite through GRDB.
    static func plainRound(_ path: String, cacheKiB: Int) throws -> Figures {
        var config = Configuration()
        config.journalMode = .wal
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheKiB)")
        }
        let plain = try DatabaseQueue(path: path, configuration: config)
        defer { try? plain.close() }
        return try workload(plain)
    }

    /// One round on a protected database (class completeUnlessOpen) through GRDB.
    static func protectedRound(_ path: String, cacheKiB: Int, files: ProtectedFiles) throws -> Figures {
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheKiB)")
        }
        let protected = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files, kind: .queue, configuration: config)
        defer { try? protected.close() }
        return try workload(protected.writer)
    }

    /// One round of the Python workload on `module` (`sqlite3` or `sqlcipher3`), or nil on a failure.
    static func pythonRound(_ python: String, _ script: String, module: String, path: String, key: String, cacheKiB: Int) -> Figures? {
        guard let result = BenchSupport.run(python, [script, module, path, key, String(rows), String(singleTransactions), String(pointReads),
                                                     String(scans), String(cacheKiB)]),
              result.status == 0 else { return nil }
        let numbers = result.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double(String($0)) }
        guard numbers.count == 5 else { return nil }
        return Figures(single: numbers[0], batch: numbers[1], point: numbers[2], scan: numbers[3], checkpoint: numbers[4])
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
