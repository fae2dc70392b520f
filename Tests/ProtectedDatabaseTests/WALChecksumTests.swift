import Crypto
import CryptoExtras
import Foundation
import GRDB
import Testing
import Cipher
import TestSupport
@testable import ProtectedFiles
@testable import ProtectedDatabase

/// SQLite computes the checksums of the WAL over the plaintext page, before the codec sees
/// it. Stored in clear, each frame's words were an offline test of any guess at its page (a
/// 6-digit PIN fell in seconds from a copied `DB-wal`). The codec stores them masked under a
/// key of the database, and keeps the WAL index (which repeats the last frame's words) off
/// the disk.
@Suite("Protected database WAL checksums")
struct WALChecksumTests {
    /// SQLite's WAL checksum (walChecksumBytes) of `bytes` from `s`.
    static func checksum(_ bytes: ArraySlice<UInt8>, bigEndian: Bool, from s: (UInt32, UInt32)) -> (UInt32, UInt32) {
        var (s1, s2) = s
        var index = bytes.startIndex
        func word(_ at: Int) -> UInt32 {
            let b = (UInt32(bytes[at]), UInt32(bytes[at + 1]), UInt32(bytes[at + 2]), UInt32(bytes[at + 3]))
            return bigEndian ? (b.0 << 24 | b.1 << 16 | b.2 << 8 | b.3) : (b.3 << 24 | b.2 << 16 | b.1 << 8 | b.0)
        }
        while index + 8 <= bytes.endIndex {
            s1 = s1 &+ word(index) &+ s2
            s2 = s2 &+ word(index + 4) &+ s1
            index += 8
        }
        return (s1, s2)
    }

    static func be32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    static func putBE32(_ value: UInt32, _ bytes: inout [UInt8], _ at: Int) {
        for i in 0..<4 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
    }

    /// The plaintext SQLite wrote for the page of a frame: what an attacker who guesses the
    /// page right would hash (decrypted here with the key, as a perfect guess).
    static func plaintext(frame: [UInt8], key: SymmetricKey) throws -> [UInt8] {
        let pgno = be32(frame, 0)
        let page = Array(frame[24...])
        let offset = pgno == 1 ? 16 : 0
        let iv = try AES._CBC.IV(ivBytes: Array(page[4016..<4032]))
        let clear = try AES._CBC.decrypt(page[offset..<4016], using: key, iv: iv, noPadding: true)
        var plain = pgno == 1 ? Array("SQLite format 3\0".utf8) : []
        plain += clear
        plain += [UInt8](repeating: 0, count: 80)
        return plain
    }

    /// The WAL's checksum chain computed over the true plaintext: the header's words, then each
    /// frame's.
    static func clearChain(wal: [UInt8], key: SymmetricKey) throws -> (header: (UInt32, UInt32), frames: [(UInt32, UInt32)]) {
        let bigEndian = be32(wal, 0) & 1 == 1
        let header = checksum(wal[0..<24], bigEndian: bigEndian, from: (0, 0))
        var s = header
        var frames: [(UInt32, UInt32)] = []
        var at = 32
        while at + 24 + 4096 <= wal.count {
            let frame = Array(wal[at..<(at + 24 + 4096)])
            s = checksum(frame[0..<8], bigEndian: bigEndian, from: s)
            s = checksum(try plaintext(frame: frame, key: key)[...], bigEndian: bigEndian, from: s)
            frames.append(s)
            at += 24 + 4096
        }
        return (header, frames)
    }

    /// A `complete` database holding a PIN, its WAL as a kill -9 leaves it (copied while the
    /// connection is open), the copy's paths and the raw key.
    static func walWithAPIN(_ fixture: DatabaseFixture, _ files: ProtectedFiles) throws -> (db: ProtectedDatabase, path: String, key: SymmetricKey) {
        let path = fixture.path("pin.db")
        let db = try ProtectedDatabase.create(at: path, protection: .complete, files: files)
        // (The export checkpoints the WAL: first.)
        let key = try ProtectedDatabase.exportKey(at: path, files: files).withUnsafeBytes { SymmetricKey(data: Array($0)) }
        try db.write { try $0.execute(sql: "CREATE TABLE secrets(name TEXT, pin TEXT)") }
        for index in 0..<3 {
            try db.write { try $0.execute(sql: "INSERT INTO secrets VALUES (?, ?)", arguments: ["card \(index)", String(format: "%06d", 271_828 + index)]) }
        }
        return (db, path, key)
    }

    @Test func noStoredChecksumIsSQLitesOverThePlaintext() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let (db, path, key) = try Self.walWithAPIN(fixture, files)
        defer { try? db.close() }
        let wal = try fileBytes(path + "-wal")
        #expect(wal.count >= 32 + 3 * (24 + 4096))
        let chain = try Self.clearChain(wal: wal, key: key)
        #expect(!chain.frames.isEmpty)
        // The header's words are not SQLite's in clear (they are masked, which marks version 2).
        #expect((Self.be32(wal, 24), Self.be32(wal, 28)) != chain.header)
        // No frame's stored words equal the checksum of its true plaintext: a perfect guess
        // confirms nothing, so no guess does.
        for (index, words) in chain.frames.enumerated() {
            let at = 32 + index * (24 + 4096)
            #expect((Self.be32(wal, at + 16), Self.be32(wal, at + 20)) != words, "frame \(index)")
        }
        // The index (which repeats the last frame's words) is not beside the database.
        let shm = path + "-shm"
        if FileManager.default.fileExists(atPath: shm) {
            #expect(try fileBytes(shm).isEmpty, "DB-shm holds the WAL index")
            var st = stat()
            #expect(stat(shm, &st) == 0 && st.st_mode & 0o777 == 0o600)
        }
        // The database reads back through the masked words, and so does a copy of the files
        // as a kill leaves them (SQLite's recovery checks every frame's words).
        let copy = fixture.path("copy.db")
        try writeFileBytes(try fileBytes(path), copy)
        try writeFileBytes(wal, copy + "-wal")
        try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: copy))
        let reopened = try ProtectedDatabase.open(at: copy, files: files)
        #expect(try reopened.read { try String.fetchAll($0, sql: "SELECT pin FROM secrets ORDER BY pin") } == ["271828", "271829", "271830"])
        try reopened.close()
    }

    /// A WAL written before the words were masked (version 1: SQLite's words in clear), as a
    /// crash of an earlier version leaves it, is read with every committed frame; the next
    /// WAL is version 2.
    @Test func aVersionOneWALIsReadThenReplaced() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let (db, path, key) = try Self.walWithAPIN(fixture, files)
        var wal = try fileBytes(path + "-wal")
        let main = try fileBytes(path)
        try db.close()
        // The same WAL in version 1's form: every word SQLite's, in clear.
        let chain = try Self.clearChain(wal: wal, key: key)
        Self.putBE32(chain.header.0, &wal, 24)
        Self.putBE32(chain.header.1, &wal, 28)
        for (index, words) in chain.frames.enumerated() {
            Self.putBE32(words.0, &wal, 32 + index * (24 + 4096) + 16)
            Self.putBE32(words.1, &wal, 32 + index * (24 + 4096) + 20)
        }
        let old = fixture.path("old.db")
        try writeFileBytes(main, old)
        try writeFileBytes(wal, old + "-wal")
        try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: old))
        let reopened = try ProtectedDatabase.open(at: old, files: files)
        #expect(try reopened.read { try String.fetchAll($0, sql: "SELECT pin FROM secrets ORDER BY pin") } == ["271828", "271829", "271830"])
        // The open checkpointed it away (frames appended to it would carry clear checksums, and
        // a version 1 WAL put back must not make later commits leak): the next write starts a
        // version 2 WAL.
        try reopened.write { try $0.execute(sql: "INSERT INTO secrets VALUES ('card 9', '314159')") }
        let fresh = try fileBytes(old + "-wal")
        let freshChain = try Self.clearChain(wal: fresh, key: key)
        #expect(!freshChain.frames.isEmpty)
        #expect((Self.be32(fresh, 24), Self.be32(fresh, 28)) != freshChain.header)
        try reopened.close()
        #expect(try Self.count(old, files, table: "secrets") == 4)
    }

    /// Frames written again within one transaction (a transaction larger than the page cache
    /// spills, then changes a spilled page): SQLite rewrites the words of every later frame
    /// at the commit. The copy reads back whole, and still no word is SQLite's in clear.
    @Test func pagesWrittenAgainInATransaction() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("spill.db")
        let db = try ProtectedDatabase.create(at: path, protection: .complete, files: files)
        defer { try? db.close() }
        let key = try ProtectedDatabase.exportKey(at: path, files: files).withUnsafeBytes { SymmetricKey(data: Array($0)) }
        try db.write { conn in
            try conn.execute(sql: "PRAGMA cache_size = 10")
            try conn.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for index in 0..<400 { try conn.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: [String(repeating: "v", count: 300) + "\(index)"]) }
            // Pages spilled to the WAL are changed again in the same transaction.
            try conn.execute(sql: "UPDATE t SET v = 'changed ' || id")
        }
        let wal = try fileBytes(path + "-wal")
        let chain = try Self.clearChain(wal: wal, key: key)
        for (index, words) in chain.frames.enumerated() {
            let at = 32 + index * (24 + 4096)
            #expect((Self.be32(wal, at + 16), Self.be32(wal, at + 20)) != words, "frame \(index)")
        }
        let copy = fixture.path("copy.db")
        try writeFileBytes(try fileBytes(path), copy)
        try writeFileBytes(wal, copy + "-wal")
        try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: copy))
        #expect(try Self.count(copy, files, table: "t") == 400)
        let changed = try ProtectedDatabase.open(at: copy, files: files)
        #expect(try changed.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t WHERE v LIKE 'changed %'") } == 400)
        try changed.close()
    }

    /// The index lives on /dev/shm for connections of the codec, in `DB-shm` for SQLCipher:
    /// two indexes of one WAL would corrupt it, so each side waits for the other. SQLCipher
    /// cannot read or write while the project's connection is open; the project cannot start
    /// while SQLCipher has the database open; one after the other both work.
    @Test func sqlcipherAndTheCodecNeverShareTheWAL() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let (db, path, key) = try Self.walWithAPIN(fixture, files)
        let hex = key.withUnsafeBytes { Encoding.hex(Array($0)) }
        let read = """
        import sys, sqlcipher3
        c = sqlcipher3.connect(sys.argv[1], timeout=0.3)
        c.execute("PRAGMA key = \\"x'" + sys.argv[2] + "'\\"")
        try:
            print(c.execute("SELECT count(*) FROM secrets").fetchone()[0])
        except sqlcipher3.OperationalError as e:
            print("error:", e)
        if len(sys.argv) > 3:
            print("holding", flush=True)
            sys.stdin.read()
        """
        guard let whileOpen = try sqlcipher(read, [path, hex]) else {
            Issue.record("SQLCipher 4 for Python is not installed: pip install sqlcipher3-wheels")
            try db.close()
            return
        }
        // (SQLite says "locking protocol" when it cannot take the locks to rebuild its index.)
        #expect(whileOpen.1.hasPrefix("error: locking protocol") || whileOpen.1.hasPrefix("error: database is locked"), "\(whileOpen)")
        #expect(try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM secrets") } == 3)
        try db.close()
        let afterClose = try #require(try sqlcipher(read, [path, hex]))
        #expect(afterClose.1 == "3\n", "\(afterClose)")
        // SQLCipher holds the database open: the project's connection does not start.
        let python = try #require(ChildProcess.which("python3"))
        let holder = try ChildProcess.start(python, ["-c", read, path, hex, "hold"], stdin: .pipe)
        #expect(holder.waitForLine(startingWith: "holding") != nil)
        #expect(throws: ProtectedDatabaseError.self) {
            let db = try ProtectedDatabase.open(at: path, files: files)
            defer { try? db.close() }
            _ = try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM secrets") }
        }
        holder.closeInput()
        _ = try holder.wait()
        #expect(try Self.count(path, files, table: "secrets") == 3)
    }

    /// A connection that recovered the WAL read its first stale frame whole (an earlier WAL's
    /// frame beyond the restart, whose page still authenticates) and then appends a frame at
    /// that very offset: that is a new frame, not SQLite rewriting the stale one's checksums.
    /// Taken for a rewrite, its words were destroyed and a later recovery lost every commit from
    /// it on. Each commit made after the recovery must survive a kill.
    @Test func anAppendAtTheFirstStaleFrameIsANewFrame() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("stale.db")
        let db = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files, kind: .queue)
        try db.write { conn in
            try conn.execute(sql: "CREATE TABLE hot(id INTEGER PRIMARY KEY, v TEXT)")
            try conn.execute(sql: "CREATE TABLE other(id INTEGER PRIMARY KEY, v TEXT)")
        }
        for index in 0..<30 { try db.write { try $0.execute(sql: "INSERT INTO hot(v) VALUES (?)", arguments: ["hot \(index)"]) } }
        // Copied to the main file; the next write restarts the WAL over the old frames.
        _ = try db.writer.writeWithoutTransaction { try $0.checkpoint(.passive) }
        try db.write { try $0.execute(sql: "INSERT INTO hot(v) VALUES ('after the restart')") }
        let killed = fixture.path("killed.db")
        for suffix in ["", "-wal", "-key"] { try writeFileBytes(try fileBytes(path + suffix), killed + suffix) }
        try db.close()
        let wal = try fileBytes(killed + "-wal")
        #expect(wal.count > 32 + 5 * (24 + 4096), "stale frames beyond the restarted WAL")

        // One connection recovers (reading frames whole up to the first stale one), then
        // commits to the other table: new frames at the stale frames' offsets.
        // (No read of a page in the WAL in between: the open's first read recovers, then the
        // writes; the open's own read touches page 1 only.)
        let recovering = try ProtectedDatabase.open(at: killed, files: files, kind: .queue)
        for index in 0..<3 { try recovering.write { try $0.execute(sql: "INSERT INTO other(v) VALUES (?)", arguments: ["other \(index)"]) } }
        let again = fixture.path("again.db")
        for suffix in ["", "-wal", "-key"] { try writeFileBytes(try fileBytes(killed + suffix), again + suffix) }
        try recovering.close()
        let reopened = try ProtectedDatabase.open(at: again, files: files, kind: .queue)
        #expect(try reopened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM other") } == 3)
        #expect(try reopened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM hot") } == 31)
        try reopened.close()
    }

    /// The index is a file on /dev/shm: cleared under open connections (logind's RemoveIPC at
    /// logout, `rm /dev/shm/*`), a new connection would start a second index of the same WAL
    /// and both would append at the same offsets. The lock every live index holds on `DB-shm`
    /// refuses the second; once the first connections close, the database opens again.
    @Test func aSecondIndexOfTheSameWALIsRefused() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("live.db")
        let before = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? [])
        let first = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files, kind: .queue)
        try first.write { try $0.execute(sql: "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('one')") }
        let created = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm")) ?? []).subtracting(before)
            .filter { $0.hasPrefix("securefoundation-wal-index-") }
        guard let index = created.first else {
            // No /dev/shm here: SQLite's own DB-shm is the index, nothing to clear.
            try first.close()
            return
        }
        #expect(unlink("/dev/shm/" + index) == 0)
        #expect(throws: ProtectedDatabaseError.self) {
            let second = try ProtectedDatabase.open(at: path, files: files, kind: .queue)
            defer { try? second.close() }
            try second.write { try $0.execute(sql: "INSERT INTO t VALUES ('two')") }
        }
        try first.write { try $0.execute(sql: "INSERT INTO t VALUES ('three')") }
        try first.close()
        let reopened = try ProtectedDatabase.open(at: path, files: files, kind: .queue)
        #expect(try reopened.read { try String.fetchAll($0, sql: "SELECT v FROM t ORDER BY rowid") } == ["one", "three"])
        try reopened.close()
    }

    static func count(_ path: String, _ files: ProtectedFiles, table: String) throws -> Int {
        let db = try ProtectedDatabase.open(at: path, files: files)
        defer { try? db.close() }
        return try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM \(table)") } ?? -1
    }
}
