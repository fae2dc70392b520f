import Foundation
import TestSupport
import Testing

/// Runs the built `securefoundation db …`: output bytes and exit statuses.
@Suite("db command")
struct DatabaseCLITests {
    final class Workspace {
        let directory: TemporaryDirectory
        var root: String { directory.path }
        var home: String { root + "/home" }
        var pin: String { root + "/pin" }
        var db: String { root + "/app.db" }

        init() throws {
            directory = try TemporaryDirectory(prefix: "sf-db-cli")
            try directory.file("pin", "2468")
            let created = try run(["vault", "init", "--passcode-file", pin])
            #expect(created.status == 0, "\(created.stderr)")
        }

        func run(_ arguments: [String]) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + ["--home", home, "--device-key", root + "/device.key"])
        }

        func db(_ arguments: [String], unlocked: Bool = false) throws -> CLIRunner.Result {
            try run(["db"] + arguments + (unlocked ? ["--passcode-file", pin] : []))
        }
    }

    @Test func createQueryUpgradeRekeyAndTheirStatuses() throws {
        let ws = try Workspace()
        #expect(try ws.db(["create", ws.db, "--class", "complete"]).status == 36)
        let created = try ws.db(["create", ws.db, "--class", "complete"], unlocked: true)
        #expect(created.status == 0, "\(created.stderr)")
        var info = stat()
        #expect(lstat(ws.db, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try ws.db(["create", ws.db, "--class", "complete"], unlocked: true).status == 45)
        #expect(try ws.db(["sql", ws.db, "CREATE TABLE n(id INTEGER PRIMARY KEY, body TEXT, b BLOB)"], unlocked: true).text == "changes 0\n")
        #expect(try ws.db(["sql", ws.db, "INSERT INTO n(body, b) VALUES ('hello', x'00ff'), (NULL, NULL)"], unlocked: true).text == "changes 2\n")
        #expect(try ws.db(["sql", ws.db, "SELECT * FROM n ORDER BY id"], unlocked: true).text == "1\thello\tX'00ff'\n2\t\t\n")
        let locked = try ws.db(["sql", ws.db, "SELECT * FROM n"])
        #expect(locked.status == 36 && locked.stdout.isEmpty)
        #expect(try ws.db(["sql", ws.db, "SELEC 1"], unlocked: true).status == 64)
        let opened = try ws.db(["open", ws.db, "--expect", "complete"], unlocked: true).text
        #expect(opened.hasPrefix("ok: complete, ") && opened.hasSuffix(" pages, 1 tables\n"), "\(opened)")
        #expect(try ws.db(["open", ws.db, "--expect", "none"], unlocked: true).status == 1)
        let status = try ws.db(["status", ws.db])
        #expect(status.status == 0 && status.text.hasPrefix("class complete\npages ") && status.text.contains("\nwal 0 bytes\nsalt "), "\(status.text)")
        #expect(try ws.db(["upgrade", ws.db, "--from", "complete", "--to", "none"], unlocked: true).text == "changed \(ws.db): complete -> none\n")
        #expect(try ws.db(["upgrade", ws.db, "--from", "complete", "--to", "none"], unlocked: true).text == "already none: \(ws.db)\n")
        #expect(try ws.db(["sql", ws.db, "SELECT count(*) FROM n"]).text == "2\n")
        let oldKey = try ws.db(["export-key", ws.db]).text
        #expect(oldKey.count == 65)
        let rekeyed = try ws.db(["rekey", ws.db])
        #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
        #expect(try ws.db(["export-key", ws.db]).text != oldKey)
        #expect(try ws.db(["sql", ws.db, "SELECT body FROM n WHERE id = 1"]).text == "hello\n")
        #expect(try ws.db(["open", ws.root + "/missing.db"]).status == 44)
        // A flipped byte in page 2: damaged.
        let fd = open(ws.db, O_RDWR)
        var byte: UInt8 = 0
        _ = pread(fd, &byte, 1, 4096 + 200)
        byte ^= 0xFF
        _ = pwrite(fd, &byte, 1, 4096 + 200)
        close(fd)
        let damaged = try ws.db(["sql", ws.db, "SELECT * FROM n"])
        #expect(damaged.status == 2, "\(damaged.stderr)")
        #expect(damaged.stderr.contains("modified or damaged"))
    }

    /// kill -9 in a transaction and at every step of a rekey: the database opens, whole.
    @Test func statusOfAPlainSQLiteFileWithACopiedKeyRecordSaysWhatItIs() throws {
        let ws = try Workspace()
        #expect(try ws.db(["create", ws.db, "--class", "none"], unlocked: true).status == 0)
        let plain = ws.root + "/plain.db"
        let made = try CLIRunner.runTool("/usr/bin/python3", ["-c", "import sqlite3; c = sqlite3.connect('\(plain)'); c.execute('CREATE TABLE t(x)'); c.commit()"])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try CLIRunner.runTool("/bin/cp", [ws.db + "-key", plain + "-key"]).status == 0)
        let status = try ws.db(["status", plain])
        #expect(status.status != 0, "\(status.text)")
        #expect(status.stderr.contains("plain SQLite database"), "\(status.stderr)")
        #expect(!status.text.contains("salt"))
    }

    @Test func killedInATransactionOrARekey() throws {
        let ws = try Workspace()
        #expect(try ws.db(["create", ws.db, "--class", "completeUnlessOpen"]).status == 0)
        #expect(try ws.db(["sql", ws.db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"], unlocked: true).status == 0)
        let seeded = try ws.db(["sql", ws.db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO t(v) SELECT 'seed ' || i FROM n"], unlocked: true)
        #expect(seeded.text == "changes 1000\n", "\(seeded.stderr)")
        // A transaction of two million rows, killed while it runs (or after it committed: then all of it).
        let big = try ChildProcess.start(CLIRunner.executable, ["db", "sql", ws.db,
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000) INSERT INTO t(v) SELECT hex(randomblob(40)) FROM n",
            "--passcode-file", ws.pin, "--home", ws.home, "--device-key", ws.root + "/device.key"])
        _ = big.waitForOutput(timeout: .seconds(3)) { _ in false }
        big.kill(SIGKILL)
        _ = try? big.wait(timeout: .seconds(30))
        let count = try ws.db(["sql", ws.db, "SELECT count(*) FROM t"], unlocked: true)
        #expect(count.text == "1000\n" || count.text == "2001000\n", "\(count.text) \(count.stderr)")
        #expect(try ws.db(["open", ws.db], unlocked: true).status == 0)
        let expected = count.text
        // A rekey killed at each step, then run to the end.
        for step in ["db-rekey-both-keys", "db-rekey-before-rename", "db-rekey-after-rename"] {
            let killed = try CLIRunner.run(["db", "rekey", ws.db, "--passcode-file", ws.pin, "--home", ws.home, "--device-key", ws.root + "/device.key"],
                                           environment: ["SECUREFOUNDATION_TEST_KILL_AT": step])
            #expect(killed.status == 128 + SIGKILL || killed.status == -SIGKILL || killed.status == SIGKILL, "\(step): \(killed.status) \(killed.stderr)")
            let after = try ws.db(["sql", ws.db, "SELECT count(*) FROM t"], unlocked: true)
            #expect(after.text == expected, "\(step): \(after.text) \(after.stderr)")
        }
        #expect(try ws.db(["rekey", ws.db], unlocked: true).status == 0)
        #expect(try ws.db(["sql", ws.db, "SELECT count(*) FROM t"], unlocked: true).text == expected)
        #expect(!FileManager.default.fileExists(atPath: ws.db + "-rekey"))
        // Rotating the protected-file key pairs re-wraps the key record with the other files of the folder.
        let rotated = try ws.run(["protect", "rotate-keys", ws.root, "--passcode-file", ws.pin])
        #expect(rotated.status == 0 && rotated.text.contains("failed 0"), "\(rotated.text) \(rotated.stderr)")
        #expect(try ws.db(["sql", ws.db, "SELECT count(*) FROM t"], unlocked: true).text == expected)
    }

    /// `export-key` gives SQLCipher what it needs, and `adopt` takes an SQLCipher database in.
    @Test func exportedKeyOpensInSQLCipherAndAdoptTakesItBack() throws {
        guard let python = CLIRunner.which("python3"), try ChildProcess.run(python, ["-c", "import sqlcipher3"]).status == 0 else {
            Issue.record("SQLCipher 4 for Python is not installed: pip install sqlcipher3-wheels")
            return
        }
        let ws = try Workspace()
        #expect(try ws.db(["create", ws.db, "--class", "completeUnlessOpen"]).status == 0)
        #expect(try ws.db(["sql", ws.db, "CREATE TABLE t(v TEXT)"]).status == 36)   // made while locked, read after an unlock
        #expect(try ws.db(["sql", ws.db, "CREATE TABLE t(v TEXT)"], unlocked: true).status == 0)
        #expect(try ws.db(["sql", ws.db, "INSERT INTO t VALUES ('from the project')"], unlocked: true).status == 0)
        let key = try ws.db(["export-key", ws.db, "-o", ws.root + "/app.key"], unlocked: true)
        #expect(key.status == 0 && key.stdout.isEmpty && key.stderr.contains("keep it secret"))
        let script = """
        import sys, sqlcipher3
        key = open(sys.argv[2]).read().strip()
        c = sqlcipher3.connect(sys.argv[1])
        c.execute("PRAGMA key = \\"x'%s'\\"" % key)
        print(c.execute("SELECT v FROM t").fetchone()[0])
        d = sqlcipher3.connect(sys.argv[3])
        d.execute("PRAGMA key = \\"x'%s'\\"" % key)
        d.execute("CREATE TABLE s(v TEXT)")
        d.execute("INSERT INTO s VALUES ('from sqlcipher')")
        d.commit()
        """
        let other = ws.root + "/theirs.db"
        let result = try ChildProcess.run(python, ["-c", script, ws.db, ws.root + "/app.key", other])
        #expect(result.status == 0 && result.text == "from the project\n", "\(result.errorText)")
        let adopted = try ws.db(["adopt", other, "--key-file", ws.root + "/app.key", "--class", "none"])
        #expect(adopted.status == 0, "\(adopted.stderr)")
        #expect(try ws.db(["sql", other, "SELECT v FROM s"]).text == "from sqlcipher\n")
        // A wrong key: damaged, and no key record is left behind.
        let wrong = ws.root + "/wrong.key"
        try String(repeating: "ab", count: 32).write(toFile: wrong, atomically: true, encoding: .utf8)
        let third = ws.root + "/third.db"
        try FileManager.default.copyItem(atPath: ws.root + "/app.db", toPath: third)
        #expect(try ws.db(["adopt", third, "--key-file", wrong, "--class", "none"]).status == 2)
        // Not a key file at all: refused as seal --key-file refuses it, nothing written.
        let garbage = ws.root + "/garbage.key"
        try String(repeating: "zz", count: 32).write(toFile: garbage, atomically: true, encoding: .utf8)
        let refused = try ws.db(["adopt", third, "--key-file", garbage, "--class", "none"])
        #expect(refused.status == 1 && refused.stderr.contains("neither 32 raw bytes nor 64 hex digits"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: third + "-key"))
    }
}
