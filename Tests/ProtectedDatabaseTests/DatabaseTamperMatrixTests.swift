import Foundation
import GRDB
import Testing
import Cipher
import TestSupport
@testable import ProtectedFiles
@testable import ProtectedDatabase

/// The tamper matrix of a protected database's own files (docs/SECURITY.md, trust table row
/// "Protected databases anywhere"): `DB`, `DB-wal`, `DB-shm` and `DB-key`, each deleted, cut,
/// altered, rolled back to an older copy and replaced by another database's, on the files as a
/// kill -9 leaves them (transactions still in the WAL). Every case must end in an error of the
/// project or in rows this database once held (never another's, never a crash), and in the
/// outcome the trust table states.
@Suite("Protected database tamper matrix")
struct DatabaseTamperMatrixTests {
    enum Mutation: String, CaseIterable { case D, T, R, RB, C }
    static let files = ["DB", "DB-wal", "DB-shm", "DB-key"]

    static func name(_ file: String, _ base: String) -> String {
        file == "DB" ? base : base + String(file.dropFirst(2))
    }

    /// The four files of a database as a kill leaves them: `rows` rows checkpointed into the
    /// main file, then `inWAL` more committed in the WAL.
    static func killedState(_ path: String, _ files: ProtectedFiles, tag: String, checkpointed rows: Int, inWAL: Int,
                            older: String? = nil) throws -> [String: [UInt8]] {
        let db = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files)
        try db.write { try $0.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)") }
        for index in 0..<rows { try db.write { try $0.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["\(tag) \(index)"]) } }
        try db.close()
        if let older { try copySet(from: path, to: older) }
        let reopened = try ProtectedDatabase.open(at: path, files: files)
        try reopened.write { try $0.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["\(tag) after the older copy"]) }
        _ = try reopened.writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        for index in 0..<inWAL {
            try reopened.write { try $0.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["\(tag) wal \(index)"]) }
        }
        var state: [String: [UInt8]] = [:]
        for file in Self.files {
            let bytes = (try? fileBytes(name(file, path))) ?? []
            state[file] = bytes
        }
        // (Closing afterwards: the copy above is what a kill leaves.)
        try reopened.close()
        return state
    }

    static func copySet(from: String, to: String) throws {
        for file in Self.files {
            if let bytes = try? fileBytes(name(file, from)) { try writeFileBytes(bytes, name(file, to)) } else { unlink(name(file, to)) }
        }
    }

    static func write(_ state: [String: [UInt8]], to path: String) throws {
        for file in Self.files {
            if let bytes = state[file] { try writeFileBytes(bytes, name(file, path)) } else { unlink(name(file, path)) }
        }
    }

    /// What opening and reading every row gives: "rows N" or "error CASE".
    static func outcome(_ path: String, _ files: ProtectedFiles, known: Set<String>) -> String {
        do {
            let db = try ProtectedDatabase.open(at: path, files: files)
            defer { try? db.close() }
            let values = try db.read { try String.fetchAll($0, sql: "SELECT v FROM t") }
            let foreign = values.filter { !known.contains($0) }
            if !foreign.isEmpty { return "foreign rows \(foreign)" }
            return "rows \(values.count)"
        } catch let error as ProtectedDatabaseError {
            switch error {
            case .tampered: return "error tampered"
            case .keyMismatch: return "error keyMismatch"
            case .notFound: return "error notFound"
            case .notProtectedDatabase: return "error notProtectedDatabase"
            case .sqlite: return "error sqlite \(error)"
            case .protectedFile: return "error protectedFile \(error)"
            case .io: return "error io \(error)"
            default: return "error other \(error)"
            }
        } catch {
            return "error other \(error)"
        }
    }

    @Test("DB, DB-wal, DB-shm, DB-key × delete, cut, alter, roll back, copy from another database")
    func matrix() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let older = fixture.path("older.db")
        let current = try Self.killedState(fixture.path("a.db"), files, tag: "a", checkpointed: 5, inWAL: 10, older: older)
        let olderState = Dictionary(uniqueKeysWithValues: Self.files.map { ($0, (try? fileBytes(Self.name($0, older))) ?? []) })
        let other = try Self.killedState(fixture.path("b.db"), files, tag: "b", checkpointed: 5, inWAL: 10)
        #expect(current["DB-wal"]!.count >= 32 + 10 * (24 + 4096), "the WAL holds the last transactions")
        let known = Set((0..<5).map { "a \($0)" } + ["a after the older copy"] + (0..<10).map { "a wal \($0)" })

        // The untampered copy: every row.
        let target = fixture.path("x.db")
        try Self.write(current, to: target)
        #expect(Self.outcome(target, files, known: known) == "rows 16")

        var results: [String: String] = [:]
        for file in Self.files {
            for mutation in Mutation.allCases {
                try Self.write(current, to: target)
                let path = Self.name(file, target)
                var bytes = current[file] ?? []
                switch mutation {
                case .D: unlink(path)
                case .T: try writeFileBytes(Array(bytes.prefix(bytes.count / 2)), path)
                case .R:
                    if bytes.isEmpty { bytes = [UInt8](repeating: 0x41, count: 16) } else { bytes[bytes.count / 2] ^= 0x01 }
                    try writeFileBytes(bytes, path)
                case .RB: try writeFileBytes(olderState[file] ?? [], path)
                case .C: try writeFileBytes(other[file] ?? [], path)
                }
                results["\(file) \(mutation.rawValue)"] = Self.outcome(target, files, known: known)
            }
        }
        // What the trust table states. Rows: 16 all, 6 without the WAL's transactions (5 + 1
        // checkpointed), between them a prefix of the WAL's commits.
        let partial = (6...16).map { "rows \($0)" }
        let expected: [String: [String]] = [
            "DB D": ["error notFound", "error io"],
            "DB T": ["error tampered"],
            // The altered page is read and refused, or it is a page the WAL holds a newer copy
            // of (never read; the next checkpoint overwrites it).
            "DB R": ["error tampered", "rows 16"],
            // An older main file under the current WAL: pages of two versions (rollback of
            // pages is accepted, Open); whatever SQLite makes of them, only this database's rows.
            "DB RB": partial + ["error tampered", "error sqlite"],
            "DB C": ["error keyMismatch"],
            "DB-wal D": ["rows 6"], "DB-wal T": partial, "DB-wal R": partial,
            "DB-wal RB": ["rows 6"],   // the older copy had no WAL (closed cleanly)
            "DB-wal C": ["rows 6"],   // another database's WAL: its header does not check under this key
            "DB-shm D": ["rows 16"], "DB-shm T": ["rows 16"], "DB-shm R": ["rows 16"], "DB-shm RB": ["rows 16"], "DB-shm C": ["rows 16"],
            "DB-key D": ["error notFound"], "DB-key T": ["error tampered"], "DB-key R": ["error tampered"],
            "DB-key RB": ["rows 16"],   // the same key (a rekey would leave it two keys)
            "DB-key C": ["error keyMismatch"],
        ]
        for (key, outcome) in results.sorted(by: { $0.key < $1.key }) {
            #expect(!outcome.hasPrefix("foreign"), "\(key): \(outcome)")
            let allowed = expected[key] ?? []
            #expect(allowed.contains { outcome == $0 || (outcome.hasPrefix($0) && $0.hasPrefix("error")) }, "\(key): \(outcome), expected one of \(allowed)")
        }
        #expect(results.count == 20)
    }
}
