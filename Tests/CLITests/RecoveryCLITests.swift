import Foundation
import TestSupport
import Testing

/// Secrets that survive the machine, as an operator lives it: a recovery key, a data directory
/// re-bound to a new machine's device key, and a backup restored on a second machine (its own
/// configuration directory and device-key provider, the file or a software TPM).
@Suite struct RecoveryCLITests {
    static let items = ["always", "whenUnlocked", "afterFirstUnlock", "whenUnlockedThisDeviceOnly", "alwaysThisDeviceOnly"]
    static let portable = ["always", "whenUnlocked", "afterFirstUnlock"]

    /// One machine: a configuration directory (its device key) and a home, run through the CLI.
    final class Machine: @unchecked Sendable {
        let root: String
        let home: String
        var environment: [String: String] = ["SECUREFOUNDATION_AGENT": "off", "SECUREFOUNDATION_KDF": "minimum"]
        var deviceKey: String { root + "/config/device.key" }

        init(root: String, name: String) {
            self.root = root + "/" + name
            home = self.root + "/home"
            try? FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }

        @discardableResult
        func run(_ arguments: [String], stdin: [UInt8] = [], environment extra: [String: String] = [:]) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + ["--home", home, "--device-key", deviceKey], stdin: stdin,
                              environment: environment.merging(extra) { $1 })
        }

        func item(_ name: String, pin: String) throws -> CLIRunner.Result {
            try run(["keychain", "find-generic-password", "-s", "svc", "-a", name, "-w", "--passcode-file", pin])
        }
    }

    final class World {
        let directory: TemporaryDirectory
        var root: String { directory.path }
        var pin: String { root + "/pin" }
        var files: String { root + "/files" }

        init() throws {
            directory = try TemporaryDirectory(prefix: "sf-recovery")
            try directory.directory("files")
            try write("pin", "2468")
        }

        func write(_ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: root + "/" + name))
            chmod(root + "/" + name, 0o600)
        }

        /// A vault with an item of each class and a protected file of class complete (and one of
        /// completeThisDeviceOnly) in `files`.
        func populated(_ machine: Machine, initArguments: [String] = []) throws {
            let created = try machine.run(["vault", "init", "--passcode-file", pin] + initArguments)
            try #require(created.status == 0, "\(created.stderr)")
            for name in RecoveryCLITests.items {
                let added = try machine.run(["keychain", "add-generic-password", "-s", "svc", "-a", name, "-w", "pw-" + name,
                                             "--accessibility", name, "--passcode-file", pin])
                try #require(added.status == 0, "\(added.stderr)")
            }
            for (name, cls) in [("complete.age", "complete"), ("device.age", "completeThisDeviceOnly")] {
                let written = try machine.run(["protect", "write", "--class", cls, "-o", files + "/" + name, "--passcode-file", pin], stdin: Array(cls.utf8))
                try #require(written.status == 0, "\(written.stderr)")
            }
        }

        /// Every portable item and the complete file read back on `machine`; the thisDeviceOnly
        /// items are gone (not found), never read with another key.
        func expectPortableState(_ machine: Machine, files: String? = nil, deviceOnlyGone: Bool = true,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
            for name in RecoveryCLITests.portable {
                let found = try machine.item(name, pin: pin)
                #expect(found.status == 0 && found.text == "pw-\(name)\n", "\(name): \(found.stderr)", sourceLocation: sourceLocation)
            }
            for name in ["whenUnlockedThisDeviceOnly", "alwaysThisDeviceOnly"] {
                let found = try machine.item(name, pin: pin)
                #expect(deviceOnlyGone ? found.status == 44 : found.text == "pw-\(name)\n", "\(name): \(found.stderr)", sourceLocation: sourceLocation)
            }
            let read = try machine.run(["protect", "read", (files ?? self.files) + "/complete.age", "--passcode-file", pin])
            #expect(read.status == 0 && read.text == "complete", "\(read.stderr)", sourceLocation: sourceLocation)
        }

        /// Copies `from`'s home to `to`'s (what survives a dead disk when the data is on another).
        func copyHome(_ from: Machine, _ to: Machine) throws {
            let copied = try CLIRunner.runTool("/bin/cp", ["-a", from.home, to.home])
            try #require(copied.status == 0, "\(copied.stderr)")
        }

        func stagingLeft(beside machine: Machine) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: machine.root)) ?? []).filter { $0.contains(".restore-") }
        }
    }

    // MARK: The recovery key

    @Test func theRecoveryKeyUnlocksAndResetsThePasscode() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        let created = try a.run(["vault", "init", "--passcode-file", world.pin, "--recovery-key-output", world.root + "/recovery.txt"])
        #expect(created.status == 0, "\(created.stderr)")
        let text = try String(contentsOfFile: world.root + "/recovery.txt", encoding: .utf8)
        #expect(text.count == 48 && text.split(separator: "-").count == 8)
        #expect(try a.run(["vault", "status"]).text.contains("recovery key: yes"))
        #expect(try a.run(["vault", "unlock", "--recovery-key-file", world.root + "/recovery.txt"]).status == 0)
        // The agent takes the passcode or the answers only: the option is refused, not ignored.
        let agent = try a.run(["agent", "unlock", "--recovery-key-file", world.root + "/recovery.txt"])
        #expect(agent.status == 64 && agent.stderr.contains("not the recovery key"), "\(agent.stderr)")

        // A typo is caught by the checksum, before any attempt counts.
        var typed = Array(text)
        typed[2] = typed[2] == "7" ? "8" : "7"
        try world.write("typo.txt", String(typed))
        let typo = try a.run(["vault", "unlock", "--recovery-key-file", world.root + "/typo.txt"])
        #expect(typo.status == 1 && typo.stderr.contains("checksum"), "\(typo.stderr)")
        #expect(try a.run(["vault", "status"]).text.contains("failed attempts: 0"))

        // Another vault's key: a wrong secret (3), counted.
        let b = Machine(root: world.root, name: "b")
        #expect(try b.run(["vault", "init", "--passcode-file", world.pin, "--recovery-key-output", world.root + "/other.txt"]).status == 0)
        let wrong = try a.run(["vault", "unlock", "--recovery-key-file", world.root + "/other.txt"])
        #expect(wrong.status == 3 && wrong.stderr.contains("recovery key does not open"), "\(wrong.stderr)")
        #expect(try a.run(["vault", "status"]).text.contains("failed attempts: 1"))

        // Passcode lost: the recovery key sets a new one.
        try world.write("new-pin", "1357")
        let reset = try a.run(["vault", "change-passcode", "--recovery-key-file", world.root + "/recovery.txt", "--new-passcode-file", world.root + "/new-pin"])
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(try a.run(["vault", "unlock", "--passcode-file", world.pin]).status == 3)
        #expect(try a.run(["vault", "unlock", "--passcode-file", world.root + "/new-pin"]).status == 0)

        // A new key printed once on standard output; the old one is revoked.
        let replaced = try a.run(["vault", "recovery-key", "create", "--passcode-file", world.root + "/new-pin"])
        #expect(replaced.status == 0 && replaced.text.count == 48, "\(replaced.stderr)")
        #expect(replaced.stderr.contains("no longer opens"))
        #expect(try a.run(["vault", "unlock", "--recovery-key-file", world.root + "/recovery.txt"]).status == 3)
        #expect(try a.run(["vault", "unlock", "--recovery-key-file", "-"], stdin: Array(replaced.stdout)).status == 0)
        #expect(try a.run(["vault", "recovery-key", "remove", "--passcode-file", world.root + "/new-pin"]).status == 0)
        #expect(try a.run(["vault", "status"]).text.contains("recovery key: no"))
    }

    // MARK: Re-binding a copied data directory

    @Test func aCopiedDataDirectoryIsReboundWithACredentialOnly() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a"), b = Machine(root: world.root, name: "b")
        try world.populated(a, initArguments: ["--recovery-key-output", world.root + "/recovery.txt"])
        try world.copyHome(a, b)

        // The new machine's device key is not the vault's: every read is refused, and says what to do.
        let refused = try b.item("whenUnlocked", pin: world.pin)
        #expect(refused.status != 0 && refused.stderr.contains("vault rebind-device-key"), "\(refused.stderr)")
        // Without the credential nothing changes: a wrong passcode is a counted attempt.
        try world.write("bad", "0000")
        let wrong = try b.run(["vault", "rebind-device-key", "--passcode-file", world.root + "/bad"])
        #expect(wrong.status == 3, "\(wrong.stderr)")
        #expect(try b.item("always", pin: world.pin).status != 0)

        // The recovery key alone (passcode and answers lost) re-binds it.
        let rebound = try b.run(["vault", "rebind-device-key", "--recovery-key-file", world.root + "/recovery.txt", "--json"])
        #expect(rebound.status == 0, "\(rebound.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(rebound.stdout)) as? [String: Any])
        let leftBehind = report["leftBehind"] as? [String] ?? []
        #expect(leftBehind.filter { $0.contains("ThisDeviceOnly)") }.count == 2, "\(leftBehind)")
        #expect(leftBehind.contains("protected-file class completeThisDeviceOnly"))
        #expect((report["unverified"] as? [String] ?? []).contains { $0.contains("account \"always\"") })
        try world.expectPortableState(b)
        // The thisDeviceOnly file stays closed on the new machine.
        #expect(try b.run(["protect", "read", world.files + "/device.age", "--passcode-file", world.pin]).status != 0)
        // The re-binding is recorded, authenticated with the state.
        let status = try b.run(["vault", "status"]).text
        #expect(status.contains("re-bound to a new device key") && status.contains("with the recovery-key"), "\(status)")
        // Again: nothing to do.
        let again = try b.run(["vault", "rebind-device-key", "--passcode-file", world.pin])
        #expect(again.status == 0 && again.text.contains("already"), "\(again.stderr)")
        // The old machine is untouched.
        try world.expectPortableState(a, deviceOnlyGone: false)
    }

    @Test func aCopiedDataDirectoryIsReboundToATPM() throws {
        let world = try World()
        guard let tpm = try SoftwareTPM.orSkip(root: world.root) else { return }
        defer { tpm.stop() }
        let a = Machine(root: world.root, name: "a"), b = Machine(root: world.root, name: "b")
        try world.populated(a)
        try world.copyHome(a, b)
        b.environment["TPM2TOOLS_TCTI"] = tpm.tcti
        let rebound = try b.run(["vault", "rebind-device-key", "--passcode-file", world.pin, "--device-key-provider", "tpm2"])
        #expect(rebound.status == 0, "\(rebound.stderr)")
        #expect(rebound.text.contains("tpm2"), "\(rebound.text)")
        try world.expectPortableState(b)
        #expect(try b.run(["vault", "status"]).text.contains("device key: tpm2"))
    }

    // MARK: Backup and restore

    @Test func aBackupRestoresOnASecondMachineWithATPM() throws {
        let world = try World()
        guard let tpm = try SoftwareTPM.orSkip(root: world.root) else { return }
        defer { tpm.stop() }
        let a = Machine(root: world.root, name: "a"), b = Machine(root: world.root, name: "b")
        try world.populated(a)
        let keygen = try CLIRunner.run(["keygen", "-o", world.root + "/backup-key.txt"])
        #expect(keygen.status == 0)
        let recipient = try #require(try String(contentsOfFile: world.root + "/backup-key.txt", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("# public key: ") }?.dropFirst("# public key: ".count))
        let backup = world.root + "/app.age"
        let made = try a.run(["backup", "create", "-r", String(recipient), "-o", backup, "--include", world.files + "/complete.age",
                              "--passcode-file", world.pin, "--json"])
        #expect(made.status == 0, "\(made.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(made.stdout)) as? [String: Any])
        let stays = (report["leftBehind"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(stays.contains { $0.contains("account \"whenUnlockedThisDeviceOnly\"") }, "\(stays)")
        #expect(stays.contains { $0.contains("account \"alwaysThisDeviceOnly\"") }, "\(stays)")

        // The real age opens it: the documented container inside.
        if let age = CLIRunner.which("age") {
            let opened = try CLIRunner.runTool(age, ["-d", "-i", world.root + "/backup-key.txt", backup])
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(Array(opened.stdout.prefix(9)) == Array("SFBACKUP".utf8) + [1])
            // No thisDeviceOnly secret inside.
            #expect(!String(decoding: opened.stdout, as: UTF8.self).contains("pw-whenUnlockedThisDeviceOnly"))
        }

        // The second machine: its own configuration directory, its device key in the TPM.
        b.environment["TPM2TOOLS_TCTI"] = tpm.tcti
        let restored = try b.run(["backup", "restore", backup, "-i", world.root + "/backup-key.txt", "--passcode-file", world.pin,
                                  "--device-key-provider", "tpm2", "--paths-to", b.root + "/restored"])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.text.contains("left behind on the machine the backup was made on: keychain.sqlite: generic password (service \"svc\", account \"whenUnlockedThisDeviceOnly\")"), "\(restored.text)")
        try world.expectPortableState(b, files: b.root + "/restored" + world.files)
        #expect(try b.run(["vault", "status"]).text.contains("device key: tpm2"))
        #expect(world.stagingLeft(beside: b).isEmpty)

        // And back from the TPM machine to a file machine.
        let backup2 = world.root + "/from-tpm.age"
        #expect(try b.run(["backup", "create", "-r", String(recipient), "-o", backup2, "--passcode-file", world.pin]).status == 0)
        let c = Machine(root: world.root, name: "c")
        let back = try c.run(["backup", "restore", backup2, "-i", world.root + "/backup-key.txt", "--passcode-file", world.pin])
        #expect(back.status == 0, "\(back.stderr)")
        try world.expectPortableState(c, files: b.root + "/restored" + world.files)
    }

    @Test func damagedForeignAndMisdirectedBackupsAreRefused() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        #expect(try CLIRunner.run(["keygen", "-o", world.root + "/key.txt"]).status == 0)
        #expect(try CLIRunner.run(["keygen", "-o", world.root + "/stranger.txt"]).status == 0)
        let backup = world.root + "/app.age"
        #expect(try a.run(["backup", "create", "-i", world.root + "/key.txt", "-o", backup, "--passcode-file", world.pin]).status == 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: backup))
        var flipped = bytes
        flipped[bytes.count / 2] ^= 0x01
        try flipped.write(to: URL(fileURLWithPath: world.root + "/flipped.age"))
        try bytes.prefix(bytes.count - 100).write(to: URL(fileURLWithPath: world.root + "/truncated.age"))

        let target = Machine(root: world.root, name: "t")
        func restore(_ file: String, identity: String = "key.txt", pin: String? = nil, _ extra: [String] = []) throws -> CLIRunner.Result {
            try target.run(["backup", "restore", world.root + "/" + file, "-i", world.root + "/" + identity, "--passcode-file", pin ?? world.pin] + extra)
        }
        #expect(try restore("flipped.age").status == 2)
        #expect(try restore("truncated.age").status == 2)
        #expect(try restore("app.age", identity: "stranger.txt").status == 3)
        try world.write("bad", "0000")
        #expect(try restore("app.age", pin: world.root + "/bad").status == 3)
        // None of these left a home or a staging directory.
        #expect(!FileManager.default.fileExists(atPath: target.home))
        #expect(world.stagingLeft(beside: target).isEmpty)

        // Made by someone who can encrypt to the recipient but does not hold the vault: the
        // plaintext altered and encrypted again with the real age is refused by the vault's MAC.
        if let age = CLIRunner.which("age") {
            let opened = try CLIRunner.runTool(age, ["-d", "-i", world.root + "/key.txt", backup])
            var plain = opened.stdout
            plain[plain.count - 200] ^= 0x01
            let recipient = try CLIRunner.runTool(age.replacingOccurrences(of: "/age", with: "/age-keygen"), ["-y", world.root + "/key.txt"])
            let forged = try CLIRunner.runTool(age, ["-r", recipient.text.trimmingCharacters(in: .whitespacesAndNewlines), "-o", world.root + "/forged.age"], stdin: plain)
            #expect(forged.status == 0, "\(forged.stderr)")
            let refused = try restore("forged.age")
            #expect(refused.status == 2 && refused.stderr.contains("do not authenticate"), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target.home))
        }

        // A home that holds files: 45 without --replace; a home of another vault: 46 even with it.
        #expect(try restore("app.age").status == 0)
        #expect(try restore("app.age").status == 45)
        let other = Machine(root: world.root, name: "o")
        #expect(try other.run(["vault", "init", "--passcode-file", world.pin]).status == 0)
        let foreign = try other.run(["backup", "restore", backup, "-i", world.root + "/key.txt", "--passcode-file", world.pin, "--replace"])
        #expect(foreign.status == 46, "\(foreign.stderr)")
        #expect(try other.run(["vault", "unlock", "--passcode-file", world.pin]).status == 0)
    }

    @Test func anOlderBackupIsARestoreNotARollback() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        let backup = world.root + "/old.age"
        #expect(try a.run(["backup", "create", "--to-passcode", "--passcode-file", world.pin, "-o", backup]).status == 0)
        // Later: a new passcode (the anchor beside the device key moves on).
        try world.write("new-pin", "1357")
        let beforeRestore = a.home + "/../state-after-change"
        #expect(try a.run(["vault", "change-passcode", "--passcode-file", world.pin, "--new-passcode-file", world.root + "/new-pin"]).status == 0)
        #expect(try CLIRunner.runTool("/bin/cp", [a.home + "/vault.state", beforeRestore]).status == 0)
        // The older backup, restored on purpose with the old passcode, is accepted.
        let restored = try a.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin, "--replace"])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try a.run(["vault", "unlock", "--passcode-file", world.pin]).status == 0)
        try world.expectPortableState(a)
        // Putting back the state from before the restore (a rollback behind the vault's back) is refused.
        #expect(try CLIRunner.runTool("/bin/cp", [beforeRestore, a.home + "/vault.state"]).status == 0)
        let rolledBack = try a.run(["vault", "unlock", "--passcode-file", world.root + "/new-pin"])
        #expect(rolledBack.status == 2 && rolledBack.stderr.contains("rolled back"), "\(rolledBack.stderr)")
    }

    @Test func aSecondCopyOnTheSameMachineNeedsTakeOver() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        let backup = world.root + "/app.age"
        #expect(try a.run(["backup", "create", "--to-passcode", "--passcode-file", world.pin, "-o", backup]).status == 0)
        // The same configuration directory (the same machine), another home: the anchor of the
        // vault would move away from the home that still uses it.
        let copy = try CLIRunner.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin,
                                      "--home", world.root + "/second", "--device-key", a.deviceKey], environment: a.environment)
        #expect(copy.status == 45 && copy.stderr.contains("--take-over"), "\(copy.stderr)")
        #expect(!FileManager.default.fileExists(atPath: world.root + "/second"))
        try world.expectPortableState(a, deviceOnlyGone: false)
        // The first home is gone: --take-over restores it elsewhere.
        #expect(try CLIRunner.runTool("/bin/rm", ["-rf", a.home]).status == 0)
        let moved = try CLIRunner.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin,
                                       "--home", world.root + "/second", "--device-key", a.deviceKey, "--take-over"], environment: a.environment)
        #expect(moved.status == 0, "\(moved.stderr)")
        let item = try CLIRunner.run(["keychain", "find-generic-password", "-s", "svc", "-a", "whenUnlocked", "-w", "--passcode-file", world.pin,
                                      "--home", world.root + "/second", "--device-key", a.deviceKey], environment: a.environment)
        #expect(item.text == "pw-whenUnlocked\n", "\(item.stderr)")
    }

    @Test func killedRestoresLeaveTheOldHomeOrTheRestoredOne() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        let backup = world.root + "/app.age"
        #expect(try a.run(["backup", "create", "--to-passcode", "--passcode-file", world.pin, "-o", backup]).status == 0)
        // Into a new home: killed before it is in place, no home; the next restore cleans up.
        let b = Machine(root: world.root, name: "b")
        for point in ["staged", "authenticated"] {
            let killed = try b.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin],
                                   environment: ["SECUREFOUNDATION_TEST_KILL_AT": point])
            #expect(killed.status == SIGKILL, "\(point): \(killed.status) \(killed.stderr)")
            #expect(!FileManager.default.fileExists(atPath: b.home), "\(point)")
        }
        #expect(!world.stagingLeft(beside: b).isEmpty)
        // Killed after it is in place but before the re-binding: the home is restored, and
        // `vault rebind-device-key` finishes it.
        let late = try b.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin],
                             environment: ["SECUREFOUNDATION_TEST_KILL_AT": "in place"])
        #expect(late.status != 0)
        #expect(world.stagingLeft(beside: b).isEmpty, "\(world.stagingLeft(beside: b))")
        #expect(try b.run(["vault", "rebind-device-key", "--passcode-file", world.pin]).status == 0)
        try world.expectPortableState(b)

        // Over an existing home: killed before the exchange, the old home is whole.
        #expect(try a.run(["keychain", "add-generic-password", "-s", "svc", "-a", "later", "-w", "pw-later", "--accessibility", "always"]).status == 0)
        for point in ["staged", "authenticated", "carried over"] {
            let killed = try a.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin, "--replace"],
                                   environment: ["SECUREFOUNDATION_TEST_KILL_AT": point])
            #expect(killed.status != 0, "\(point)")
            #expect(try a.item("later", pin: world.pin).text == "pw-later\n", "\(point)")
            try world.expectPortableState(a, deviceOnlyGone: false)
        }
        // The next restore removes what the killed ones left, and replaces the home.
        let replaced = try a.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin, "--replace"])
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(world.stagingLeft(beside: a).isEmpty)
        #expect(try a.item("later", pin: world.pin).status == 44)
        try world.expectPortableState(a)
    }

    @Test func aKilledBackupLeavesNoFile() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        let out = world.root + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let killed = try a.run(["backup", "create", "--to-passcode", "--passcode-file", world.pin, "-o", out + "/app.age"],
                               environment: ["SECUREFOUNDATION_TEST_KILL_AT": "backup progress:2"])
        #expect(killed.status != 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }

    @Test func aBackupTakenWhileAWriterAddsItemsIsOneSnapshot() throws {
        let world = try World()
        let a = Machine(root: world.root, name: "a")
        try world.populated(a)
        let count = 40
        let writer = Thread {
            for index in 0..<count {
                _ = try? a.run(["keychain", "add-generic-password", "-s", "load", "-a", "n\(index)", "-w", "v\(index)", "--accessibility", "always"])
            }
        }
        writer.start()
        // Wait for the writer to be under way, then back up while it goes on.
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, (try? a.run(["keychain", "find-generic-password", "-s", "load", "-a", "n3", "-w"]))?.status != 0 { usleep(50_000) }
        let backup = world.root + "/live.age"
        let made = try a.run(["backup", "create", "--to-passcode", "--passcode-file", world.pin, "-o", backup])
        #expect(made.status == 0, "\(made.stderr)")
        while Date() < deadline, writer.isExecuting { usleep(50_000) }
        let b = Machine(root: world.root, name: "b")
        #expect(try b.run(["backup", "restore", backup, "--passphrase-file", world.pin, "--passcode-file", world.pin]).status == 0)
        // The items restored are exactly those written before some moment: n0 … n(k-1), each whole.
        var present: [Bool] = []
        for index in 0..<count {
            let found = try b.run(["keychain", "find-generic-password", "-s", "load", "-a", "n\(index)", "-w"])
            #expect(found.status == 0 ? found.text == "v\(index)\n" : found.status == 44)
            present.append(found.status == 0)
        }
        let k = present.firstIndex(of: false) ?? count
        #expect(k >= 4, "the backup began after n3 was written")
        #expect(present[k...].allSatisfy { !$0 }, "not one snapshot: \(present)")
        try world.expectPortableState(b)
    }
}
