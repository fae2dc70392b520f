import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One command reads each file it trusts once: the opens of the vault's state, its rollback
/// anchor, the protected files' key table, a database's key record and the database file, per
/// command, seen through inotify. The limits are the table in docs/ARCHITECTURE.md ("One
/// command, one read of its state"); before, one `db sql` opened `vault.state` 16 times, the
/// anchor 14 and the key table 10.
@Suite("one command, one read of its state", .enabled(if: inotifyAvailable(), "inotify is not available here to count opens"))
struct StateReadsCLITests {
    /// The opens (by file name) in the watched directories while `body` ran.
    static func opens(in directories: [String], during body: () throws -> Void) throws -> [String: Int] {
        #if os(Linux)
        var counts: [String: Int] = [:]
        for event in try FileEvents.record(directories, mask: UInt32(IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE), during: body)
        where event.mask & UInt32(IN_OPEN) != 0 && event.mask & UInt32(IN_ISDIR) == 0 {
            counts[event.name, default: 0] += 1
        }
        return counts
        #else
        throw POSIXError(.ENOSYS)
        #endif
    }

    @Test func fiveCommandsReadEachTrustedFileOnce() throws {
        let ws = try DatabaseCLITests.Workspace()
        #expect(try ws.db(["create", ws.db, "--class", "complete"], unlocked: true).status == 0)
        #expect(try ws.db(["sql", ws.db, "CREATE TABLE notes(body TEXT)"], unlocked: true).status == 0)
        let plain = ws.root + "/plain"
        try Array("hello".utf8).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: plain)) }
        #expect(try ws.run(["protect", "write", "--class", "complete", "-o", ws.root + "/note.sf", plain, "--passcode-file", ws.pin]).status == 0)
        #expect(try CLIRunner.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-", "--passcode-file", ws.pin,
                                   "--home", ws.home, "--device-key", ws.root + "/device.key"], stdin: Array("pw\n".utf8)).status == 0)
        // Files younger than two seconds are read again at each use (their time stamps could
        // hide a change made within the file system's granularity): let them settle.
        Thread.sleep(forTimeInterval: 2.2)
        let anchor = try #require(try FileManager.default.contentsOfDirectory(atPath: ws.root + "/vaults").first { $0.hasSuffix(".anchor") })
        let watched = [ws.home, ws.root, ws.root + "/vaults"]

        let commands: [(name: String, arguments: [String], limits: [String: Int])] = [
            ("vault status", ["vault", "status"], ["vault.state": 1, anchor: 1]),
            ("db status", ["db", "status", ws.db], ["vault.state": 1, "app.db-key": 1, "app.db": 1]),
            ("db sql SELECT", ["db", "sql", ws.db, "SELECT count(*) FROM notes", "--passcode-file", ws.pin],
             ["vault.state": 1, anchor: 3, "protected-files.keys": 1, "app.db-key": 1, "app.db": 3]),
            // An unlock with a passcode reads the anchor once, and once more under its lock for
            // each of its two writes (the attempt counted before the KDF, then cleared).
            ("protect read", ["protect", "read", ws.root + "/note.sf", "--passcode-file", ws.pin],
             ["vault.state": 1, anchor: 3, "protected-files.keys": 1, "note.sf": 1]),
            ("keychain find-generic-password", ["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w", "--passcode-file", ws.pin],
             ["vault.state": 1, anchor: 3, "keychain.sqlite": 3]),
        ]
        for command in commands {
            var result: CLIRunner.Result?
            let counts = try Self.opens(in: watched) { result = try ws.run(command.arguments) }
            #expect(result?.status == 0, "\(command.name): \(result?.stderr ?? "")")
            for (file, limit) in command.limits {
                #expect((counts[file] ?? 0) <= limit, "\(command.name) opened \(file) \(counts[file] ?? 0) times (at most \(limit)): \(counts)")
            }
            #expect((counts["vault.state"] ?? 0) >= 1, "\(command.name) read the state: \(counts)")
        }
    }
}
