import AgeCommandLine
import ArgumentParser
import Foundation
import GRDB
import SecureFoundation

/// `securefoundation db …`: SQLite databases under a data-protection class.
struct DatabaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "SQLite databases under a data-protection class, in SQLCipher 4's format.",
        discussion: """
        A protected database is an SQLite file encrypted and authenticated page by page \
        (SQLCipher 4: AES-256-CBC, HMAC-SHA512, 4096-byte pages) under a random key kept in \
        its key record PATH-key, a protected file of the database's class. The classes mean \
        what they mean for protected files: complete opens only while unlocked (and an open \
        database refuses every read at the lock), completeUnlessOpen can be created while \
        locked, completeUntilFirstUserAuthentication and none open locked. \
        PROTECTED-DATABASE.md in the documentation describes the format and its guarantees.

        Each command runs locked unless given --passcode-file, --answers-file or --unlock.

        Exit status (CLI.md in the documentation): 0 success, 1 error, 2 damaged or tampered database or key \
        record, 3 wrong passcode, 36 the class is locked, 44 no database, 45 exists already, 64 \
        usage error, 74 a file cannot be read or written (disk full).

        Examples:
          securefoundation db create app.db --class complete --passcode-file pin.txt
          securefoundation db sql app.db "CREATE TABLE notes(body TEXT)" \\
              --passcode-file pin.txt
          securefoundation db sql app.db "SELECT count(*) FROM notes" \\
              --passcode-file pin.txt
          securefoundation db upgrade app.db --from complete --to completeUnlessOpen \\
              --passcode-file pin.txt
          securefoundation db status app.db
        """,
        subcommands: [
            DatabaseCreateCommand.self, DatabaseOpenCommand.self, DatabaseStatusCommand.self, DatabaseSQLCommand.self,
            DatabaseUpgradeCommand.self, DatabaseRekeyCommand.self, DatabaseExportKeyCommand.self, DatabaseAdoptCommand.self,
        ]
    )
}

/// How `db open` and `db sql` open a database: the vault flags and the class to expect.
struct DatabaseOpenOptions: ParsableArguments {
    @Option(name: .customLong("expect"), help: "Refuse the database unless it is of this class.", completion: CompletionValues.fileProtectionClasses)
    var expect: String?

    @OptionGroup var vault: ProtectVaultOptions

    /// The database at `path` (one connection), of the expected class if one was named.
    func open(_ path: String) throws -> ProtectedDatabase {
        let expected = try expect.map(ProtectCLI.parseClass)
        return try ProtectedDatabase.open(at: path, files: try vault.files(), expecting: expected, kind: .queue)
    }
}

struct DatabaseCreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create an empty protected database and its key record.",
        usage: "securefoundation db create [options] --class CLASS PATH",
        discussion: """
        A completeUnlessOpen database can be created while the vault is locked; the other \
        classes need their class key.

        Example:
          securefoundation db create app.db \\
              --class completeUntilFirstUserAuthentication --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file to create (PATH-key is created beside it).")
    var path: String

    @Option(name: .customLong("class"), help: "The protection class.", completion: CompletionValues.fileProtectionClasses)
    var className: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let cls = try ProtectCLI.parseClass(className)
            let files = try vault.files()
            let db = try ProtectedDatabase.create(at: path, protection: cls, files: files)
            try db.close()
            try VaultCLI.say("created \(path) (\(cls.name)); key record \(ProtectedDatabase.keyPath(for: path))")
        }
    }
}

struct DatabaseOpenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a database and check it: every page authenticates and SQLite's integrity check passes.",
        usage: "securefoundation db open [options] [--expect CLASS] PATH",
        discussion: """
        Prints `ok: CLASS, N pages, N tables`. With --expect, a database of another class is \
        refused (exit 1), as an application that states its class refuses it.

        Example:
          securefoundation db open app.db --expect complete --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @OptionGroup var opening: DatabaseOpenOptions

    func run() throws {
        try CLI.run {
            let db = try opening.open(path)
            defer { try? db.close() }
            let verified = try db.verify()
            try db.close()
            try VaultCLI.say("ok: \(db.protection.name), \(verified.pageCount) pages, \(verified.tableCount) tables")
        }
    }
}

struct DatabaseStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "The class, size and salt of a database (no key needed).",
        usage: "securefoundation db status [options] PATH",
        discussion: """
        Prints `class CLASS`, `pages N`, `wal N bytes` and `salt HEX` (SQLCipher's database \
        identifier, the file's first 16 bytes).

        Example:
          securefoundation db status app.db
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @Flag(name: .customLong("json"), help: "Print the status as JSON (CLI.md, \"JSON output\").")
    var json = false

    /// `db status --json`: `{"class", "pages", "salt", "version": 1, "walBytes"}`.
    struct StatusJSON: Encodable {
        var protection: String
        var pages: Int
        var walBytes: Int64
        var salt: String
        var version = JSONOutput.schemaVersion

        enum CodingKeys: String, CodingKey { case protection = "class", pages, walBytes, salt, version }
    }

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let files = try vault.files()
            let status = try ProtectedDatabase.status(at: path, files: files)
            if json {
                try JSONOutput.write(StatusJSON(protection: status.protection.name, pages: status.pageCount,
                                                walBytes: status.walSize, salt: status.salt))
                return
            }
            try VaultCLI.say("class \(status.protection.name)\npages \(status.pageCount)\nwal \(status.walSize) bytes\nsalt \(status.salt)")
        }
    }
}

struct DatabaseSQLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run one SQL statement on a database (for inspection and scripts).",
        usage: "securefoundation db sql [options] [--expect CLASS] PATH STATEMENT",
        discussion: """
        Rows go to standard output, one a line, columns separated by tabs (NULL as an empty \
        field, blobs as X'hex'); a statement that returns no rows prints `changes N`. The \
        statement runs in a transaction of its own.

        Example:
          securefoundation db sql app.db "SELECT id, body FROM notes ORDER BY id" \\
              --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @Argument(help: "One SQL statement.")
    var statement: String

    @OptionGroup var opening: DatabaseOpenOptions

    func run() throws {
        try CLI.run {
            let db = try opening.open(path)
            defer { try? db.close() }
            // A statement that only reads runs in a read transaction (no write lock, no WAL
            // frame); any other in a write transaction of its own.
            let output: String
            if let read = try db.read({ db in try Self.prepare(statement, db).isReadonly ? try Self.run(statement, db) : nil }) {
                output = read
            } else {
                output = try db.write { db in try Self.run(statement, db) }
            }
            try db.close()
            try CLI.writeStdout(Array(output.utf8))
        }
    }

    static func prepare(_ statement: String, _ db: Database) throws -> Statement {
        do {
            return try db.makeStatement(sql: statement)
        } catch let error as DatabaseError {
            throw ValidationError("the statement is not valid SQL: \(error.message ?? "\(error)")")
        }
    }

    /// Runs the statement: its rows, one a line, or `changes N`.
    static func run(_ statement: String, _ db: Database) throws -> String {
        let prepared = try prepare(statement, db)
        if prepared.columnCount == 0 {
            try prepared.execute()
            return "changes \(db.changesCount)\n"
        }
        var text = ""
        let rows = try Row.fetchCursor(prepared)
        while let row = try rows.next() {
            text += row.databaseValues.map(Self.field).joined(separator: "\t") + "\n"
        }
        return text
    }

    static func field(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: return ""
        case .int64(let int): return String(int)
        case .double(let double): return String(double)
        case .string(let string): return string
        case .blob(let data): return "X'" + Encoding.hex(Array(data)) + "'"
        }
    }
}

struct DatabaseUpgradeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Change a database's class (its key record is re-wrapped; the pages are not touched).",
        usage: "securefoundation db upgrade [options] --from CLASS --to CLASS PATH",
        discussion: """
        Atomic: the key record is of the old class or the new one, never neither. Prints \
        `changed` or `already CLASS`. A database of neither class is refused (exit 1).

        Example:
          securefoundation db upgrade app.db --from completeUnlessOpen --to complete \\
              --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @Option(name: .customLong("from"), help: "The class it has now.", completion: CompletionValues.fileProtectionClasses)
    var from: String

    @Option(name: .customLong("to"), help: "The class it gets.", completion: CompletionValues.fileProtectionClasses)
    var to: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let old = try ProtectCLI.parseClass(from)
            let new = try ProtectCLI.parseClass(to)
            let files = try vault.files()
            switch try ProtectedDatabase.upgrade(at: path, from: old, to: new, files: files) {
            case .changed: try VaultCLI.say("changed \(path): \(old.name) -> \(new.name)")
            case .alreadyInClass: try VaultCLI.say("already \(new.name): \(path)")
            }
        }
    }
}

struct DatabaseRekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Re-encrypt every page under a new key and salt (for a key that leaked), crash-safely.",
        usage: "securefoundation db rekey [options] PATH",
        discussion: """
        The key record first holds the old and the new key, the database is copied page by \
        page under the new key beside the old one (PATH-rekey) and renamed over it, then the \
        record keeps the new key only: a kill at any point leaves a database that opens (run \
        `db rekey` again to finish). Stop every program that has the database open first. Keys \
        exported earlier no longer open it.

        Example:
          securefoundation db rekey app.db --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let files = try vault.files()
            if let hook = FaultInjection.stepHook() {
                // Crash tests: SECUREFOUNDATION_TEST_KILL_AT=db-rekey-both-keys|db-rekey-before-rename|db-rekey-after-rename.
                ProtectedDatabase.testHooks.afterBothKeys = { try hook("db-rekey-both-keys") }
                ProtectedDatabase.testHooks.beforeRename = { try hook("db-rekey-before-rename") }
                ProtectedDatabase.testHooks.afterRename = { try hook("db-rekey-after-rename") }
            }
            try ProtectedDatabase.rekey(at: path, files: files)
            let status = try ProtectedDatabase.status(at: path, files: files)
            try VaultCLI.say("rekeyed \(path): new salt \(status.salt)")
        }
    }
}

struct DatabaseExportKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-key",
        abstract: "Print a database's raw key (64 hex digits), for SQLCipher and recovery.",
        usage: "securefoundation db export-key [options] [-o OUTPUT] PATH",
        discussion: """
        Whoever holds the key reads and writes the database without the vault, on any \
        device: keep it as you would the passcode. SQLCipher 4 opens the database with \
        `PRAGMA key = "x'HEX'";` (close every connection of the project first, so the main \
        file holds every page).

        Example:
          securefoundation db export-key app.db -o app.key --passcode-file pin.txt
        """
    )

    @Argument(help: "The database file.")
    var path: String

    @Option(name: .shortAndLong, help: "Write the key to this file (0600) instead of standard output.")
    var output: String?

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let files = try vault.files()
            let key = try ProtectedDatabase.exportKey(at: path, files: files)
            defer { key.wipe() }
            CLI.warn("securefoundation: warning: this key opens \(path) without the vault; keep it secret (SQLCipher: PRAGMA key = \"x'…'\")")
            let hex = key.hexEncoded(newline: true)
            defer { hex.wipe() }
            try hex.withUnsafeBytes { bytes in
                if let output, output != "-" {
                    try CLI.writeOutput(to: output) { fd in try SecureFile.writeAll(fd, bytes, path: output) }
                } else {
                    try CLI.writeStdout(bytes)
                }
            }
        }
    }
}

struct DatabaseAdoptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adopt",
        abstract: "Take in a database written by SQLCipher 4 with a raw key: write its key record of a class.",
        usage: "securefoundation db adopt [options] --key-file FILE --class CLASS PATH",
        discussion: """
        The key file holds SQLCipher's raw key (`PRAGMA key = "x'HEX'"`, SQLCipher 4's \
        default settings) as a key file of the CLI: 64 hex digits with at most one newline (what \
        `db export-key` writes), or 32 raw bytes. The database is switched to WAL mode; close it in \
        SQLCipher first.

        Example:
          securefoundation db adopt legacy.db --key-file legacy.key --class complete \\
              --passcode-file pin.txt
        """
    )

    @Argument(help: "The SQLCipher database file.")
    var path: String

    @Option(name: .customLong("key-file"), help: "SQLCipher's raw key: 64 hex digits (as `db export-key` writes) or 32 raw bytes.")
    var keyFile: String

    @Option(name: .customLong("class"), help: "The protection class of its key record.", completion: CompletionValues.fileProtectionClasses)
    var className: String

    @OptionGroup var vault: ProtectVaultOptions

    func run() throws {
        try CLI.run {
            let cls = try ProtectCLI.parseClass(className)
            let key = try KeyFile.read(keyFile)
            defer { key.wipe() }
            let files = try vault.files()
            try ProtectedDatabase.adopt(at: path, key: key, protection: cls, files: files)
            try VaultCLI.say("adopted \(path) (\(cls.name)); key record \(ProtectedDatabase.keyPath(for: path))")
        }
    }
}
