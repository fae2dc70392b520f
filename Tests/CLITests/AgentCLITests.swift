import Foundation
import TestSupport
import Testing

/// `securefoundation agent …` run as real processes: a detached agent, commands that use it,
/// a killed agent's socket, exit codes.
@Suite(.serialized) struct AgentCLITests {
    final class Setup: @unchecked Sendable {
        private let directory: TemporaryDirectory
        var root: String { directory.path }
        let socket: String
        let passcodeFile: String
        var environment: [String: String]

        init() throws {
            // Short: the agent's socket is inside.
            directory = try TemporaryDirectory.short(prefix: "sf-agent-cli")
            try directory.directory("run")
            let root = directory.path
            socket = root + "/run/agent.sock"
            passcodeFile = root + "/pin.txt"
            try Data("1234-abcd\n".utf8).write(to: URL(fileURLWithPath: passcodeFile))
            environment = ["SECUREFOUNDATION_AGENT_SOCKET": socket, "XDG_CONFIG_HOME": root + "/config"]
        }

        var home: [String] { ["--home", root + "/home", "--device-key", root + "/device.key"] }

        func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments, stdin: stdin, environment: environment)
        }

        /// The running agent's pid from `agent status --json`, or nil.
        func agentPID() throws -> Int32? {
            let result = try run(["agent", "status", "--json", "--socket", socket])
            guard result.status == 0, let object = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any] else { return nil }
            #expect(object["version"] as? Int == 1, "agent status --json carries the schema version")
            return (object["pid"] as? NSNumber)?.int32Value
        }

        func cleanup() {
            if let pid = try? agentPID() { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    @Test func commandsUseARunningAgentInsteadOfThePasscode() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        let add = try setup.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-", "--accessibility", "whenUnlocked",
                                 "--passcode-file", setup.passcodeFile] + setup.home, stdin: Array("hunter2".utf8))
        #expect(add.status == 0, "\(add.stderr)")
        let find = ["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w"] + setup.home

        // No agent: locked (36, as `security`); `agent status` exits 7.
        #expect(try setup.run(find).status == 36)
        #expect(try setup.run(["agent", "status", "--socket", setup.socket]).status == 7)

        let start = try setup.run(["agent", "start", "--socket", setup.socket, "--idle-ttl", "600"] + setup.home)
        #expect(start.status == 0, "\(start.stderr)")
        #expect(start.text.hasPrefix("agent started (pid "))
        var info = stat()
        #expect(lstat(setup.socket, &info) == 0 && info.st_mode & 0o777 == 0o600 && (info.st_mode & S_IFMT) == S_IFSOCK)
        // A second start is refused while the first runs.
        #expect(try setup.run(["agent", "start", "--socket", setup.socket] + setup.home).status == 1)

        // Locked agent: still 36.
        #expect(try setup.run(find).status == 36)
        let wrong = try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", "-"], stdin: Array("nope".utf8))
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("wrong passcode"))
        let unlock = try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile])
        #expect(unlock.status == 0, "\(unlock.stderr)")

        // Unlocked agent: the keychain command needs no passcode.
        let found = try setup.run(find)
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.text == "hunter2\n")
        let status = try setup.run(["agent", "status", "--socket", setup.socket])
        #expect(status.text.contains("state: unlocked"))

        #expect(try setup.run(["agent", "lock", "--socket", setup.socket]).status == 0)
        #expect(try setup.run(find).status == 36)
        #expect(try setup.run(["agent", "stop", "--socket", setup.socket]).status == 0)
        #expect(access(setup.socket, F_OK) != 0)
        #expect(try setup.run(["agent", "status", "--socket", setup.socket]).status == 7)
    }

    /// An agent stopped with SIGSTOP is a timeout (28), a killed one is no agent (7), each with
    /// its own message; neither is reported as a locked vault (36).
    @Test func aStoppedOrKilledAgentIsNotReportedAsLocked() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        let add = try setup.run(["keychain", "add-generic-password", "-s", "mail", "-a", "alice", "-w", "-", "--accessibility", "whenUnlocked",
                                 "--passcode-file", setup.passcodeFile] + setup.home, stdin: Array("hunter2".utf8))
        #expect(add.status == 0, "\(add.stderr)")
        #expect(try setup.run(["agent", "start", "--socket", setup.socket] + setup.home).status == 0)
        #expect(try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile]).status == 0)
        let pid = try #require(try setup.agentPID())
        let find = ["keychain", "find-generic-password", "-s", "mail", "-a", "alice", "-w"] + setup.home

        #expect(kill(pid, SIGSTOP) == 0)
        let stopped = try setup.run(find)
        #expect(kill(pid, SIGCONT) == 0)
        #expect(stopped.status == 28, "\(stopped.stderr)")
        #expect(stopped.stderr.contains("the unlock agent did not answer in time"))
        #expect(stopped.stderr.contains("it is stopped or hung"))
        #expect(!stopped.stderr.contains("locked"))
        let resumed = try setup.run(find)
        #expect(resumed.status == 0, "\(resumed.stderr)")

        #expect(kill(pid, SIGKILL) == 0)
        var gone = false
        for _ in 0..<100 where !gone {
            gone = kill(pid, 0) != 0 || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z ") == true
            if !gone { usleep(50_000) }
        }
        let killed = try setup.run(find)
        #expect(killed.status == 7, "\(killed.stderr)")
        #expect(killed.stderr.contains("its socket is left by an agent that stopped without removing it"))
    }

    @Test func killedAgentLeavesAStaleSocketThatTheNextStartReplaces() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        #expect(try setup.run(["agent", "start", "--socket", setup.socket] + setup.home).status == 0)
        #expect(try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile]).status == 0)
        let pid = try #require(try setup.agentPID())
        #expect(kill(pid, SIGKILL) == 0)
        var gone = false
        for _ in 0..<100 where !gone {
            gone = kill(pid, 0) != 0 || (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z ") == true
            if !gone { usleep(50_000) }
        }
        #expect(gone)
        #expect(access(setup.socket, F_OK) == 0)
        #expect(try setup.run(["agent", "status", "--socket", setup.socket]).status == 7)
        let restart = try setup.run(["agent", "start", "--socket", setup.socket] + setup.home)
        #expect(restart.status == 0, "\(restart.stderr)")
        let status = try setup.run(["agent", "status", "--socket", setup.socket])
        #expect(status.status == 0)
        // A new agent starts locked: nothing of the killed one survives.
        #expect(status.text.contains("state: locked"))
        #expect(status.text.contains("first unlock done: no"))
        #expect(try setup.run(["agent", "stop", "--socket", setup.socket]).status == 0)
    }

    @Test func deviceKeyProviderIsRecordedAndMigratedWithoutChangingTheKey() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--device-key-provider", "file"] + setup.home).status == 0)
        #expect(try setup.run(["vault", "status"] + setup.home).text.contains("device key: file \(setup.root)/device.key"))
        let add = try setup.run(["keychain", "add-generic-password", "-s", "db", "-a", "app", "-w", "-", "--accessibility", "alwaysThisDeviceOnly"] + setup.home,
                                stdin: Array("s3cret".utf8))
        #expect(add.status == 0, "\(add.stderr)")
        let find = ["keychain", "find-generic-password", "-s", "db", "-a", "app", "-w"] + setup.home
        guard geteuid() == 0, CLIRunner.which("systemd-creds") != nil else {
            print("skipping the migration: needs root and systemd-creds")
            return
        }
        let migrate = try setup.run(["vault", "migrate-device-key", "--to", "systemd-credential", "--with-key", "host"] + setup.home)
        #expect(migrate.status == 0, "\(migrate.stderr)")
        #expect(migrate.text.contains("same key; nothing re-encrypted"))
        #expect(try setup.run(["vault", "status"] + setup.home).text.contains("device key: systemd-credential securefoundation-device-key"))
        // The key file is no longer read: removing it changes nothing.
        #expect(unlink(setup.root + "/device.key") == 0)
        let found = try setup.run(find)
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.text == "s3cret\n")
        // Without the credential, the vault says what is wrong instead of deriving other keys.
        #expect(unlink(setup.root + "/home/device-key.cred") == 0)
        let missing = try setup.run(find)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("systemd-creds could not decrypt"))
    }

    /// `vault erase` while an agent holds the vault unlocked: the agent forgets it at once. And
    /// with the keyring provider, a new vault made at the same path with another device key works
    /// at once: the erase evicted the cached key (else every command failed with "not this
    /// vault's" until the cache timed out).
    @Test func eraseReachesTheAgentAndTheKeyringCache() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        let first = try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--device-key-provider", "keyring"] + setup.home)
        #expect(first.status == 0, "\(first.stderr)")
        let add = ["keychain", "add-generic-password", "-s", "db", "-a", "app", "-w", "-", "--accessibility", "alwaysThisDeviceOnly"]
        #expect(try setup.run(add + setup.home, stdin: Array("one".utf8)).status == 0)
        #expect(try setup.run(["agent", "start", "--socket", setup.socket] + setup.home).status == 0)
        #expect(try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile]).status == 0)
        #expect(try setup.run(["agent", "status", "--socket", setup.socket]).text.contains("first unlock done: yes"))

        let erase = try setup.run(["vault", "erase", "--yes"] + setup.home)
        #expect(erase.status == 0, "\(erase.stderr)")
        let status = try setup.run(["agent", "status", "--socket", setup.socket])
        #expect(status.text.contains("state: locked") && status.text.contains("first unlock done: no"), "\(status.text)")
        #expect(try setup.run(["agent", "stop", "--socket", setup.socket]).status == 0)

        // A new vault at the same path, its device key in another file, behind the same keyring
        // entry (the erased vault's keychain, unreadable now, goes first).
        for suffix in ["", "-wal", "-shm"] { unlink(setup.root + "/home/keychain.sqlite" + suffix) }
        let again = ["--home", setup.root + "/home", "--device-key", setup.root + "/device2.key"]
        let second = try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile, "--device-key-provider", "keyring"] + again)
        #expect(second.status == 0, "\(second.stderr)")
        let added = try setup.run(add + again, stdin: Array("two".utf8))
        #expect(added.status == 0, "\(added.stderr)")
        let found = try setup.run(["keychain", "find-generic-password", "-s", "db", "-a", "app", "-w"] + again)
        #expect(found.status == 0 && found.text == "two\n", "\(found.stderr)")
        // Leaves no entry in the user keyring.
        #expect(try setup.run(["vault", "erase", "--yes"] + again).status == 0)
    }

    @Test func startRefusesASymlinkAtTheSocketPath() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        let target = setup.root + "/target"
        try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, setup.socket) == 0)
        let start = try setup.run(["agent", "start", "--socket", setup.socket] + setup.home)
        #expect(start.status == 1)
        #expect(start.stderr.contains("is not a socket"))
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep")
    }

    /// The `db` commands take class keys from the agent as every other command does: a
    /// `complete` database opens while the agent holds the vault unlocked, and `agent lock`
    /// locks it for the next command (exit 36), as it does a protected file.
    @Test func databaseCommandsUseTheAgentAndLockWithIt() throws {
        let setup = try Setup()
        defer { setup.cleanup() }
        #expect(try setup.run(["vault", "init", "--passcode-file", setup.passcodeFile] + setup.home).status == 0)
        let db = setup.root + "/notes.db"
        let create = try setup.run(["db", "create", db, "--class", "complete", "--passcode-file", setup.passcodeFile] + setup.home)
        #expect(create.status == 0, "\(create.stderr)")
        let table = try setup.run(["db", "sql", db, "CREATE TABLE notes(body TEXT)", "--passcode-file", setup.passcodeFile] + setup.home)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(try setup.run(["agent", "start", "--socket", setup.socket] + setup.home).status == 0)
        #expect(try setup.run(["agent", "unlock", "--socket", setup.socket, "--passcode-file", setup.passcodeFile]).status == 0)
        let insert = try setup.run(["db", "sql", db, "INSERT INTO notes VALUES ('through the agent')"] + setup.home)
        #expect(insert.status == 0, "\(insert.stderr)")
        let select = try setup.run(["db", "sql", db, "SELECT body FROM notes"] + setup.home)
        #expect(select.status == 0, "\(select.stderr)")
        #expect(select.text.contains("through the agent"))
        #expect(try setup.run(["agent", "lock", "--socket", setup.socket]).status == 0)
        let locked = try setup.run(["db", "sql", db, "SELECT body FROM notes"] + setup.home)
        #expect(locked.status == 36, "\(locked.stderr)")
        #expect(!locked.text.contains("through the agent"))
    }
}
