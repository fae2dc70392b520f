import Cipher
import Foundation
import TestSupport
import Testing

/// `securefoundation vault rotate-device-key`: keychain items and protected files of every
/// class readable afterwards under the new key, and a `kill -9` at a step resumed.
@Suite struct DeviceKeyRotationCLITests {
    final class Workspace {
        private let directory: TemporaryDirectory
        var root: String { directory.path }
        let home: String
        var pin: String { root + "/pin" }
        var deviceKey: String { root + "/config/device.key" }
        var files: String { root + "/files" }
        static let items = ["whenUnlocked", "alwaysThisDeviceOnly", "always", "whenUnlockedThisDeviceOnly", "afterFirstUnlockThisDeviceOnly"]
        static let classes = ["complete", "completeThisDeviceOnly", "noneThisDeviceOnly", "completeUnlessOpenThisDeviceOnly"]

        /// - Parameter home: The data directory (default: `home` in the workspace).
        init(home: String? = nil) throws {
            directory = try TemporaryDirectory(prefix: "sf-rotate-dk")
            self.home = home ?? directory.path + "/home"
            try directory.directory("files")
            try Data("2468".utf8).write(to: URL(fileURLWithPath: pin))
            chmod(pin, 0o600)
            let created = try run(["vault", "init", "--passcode-file", pin])
            #expect(created.status == 0, "\(created.stderr)")
            for name in Self.items {
                let added = try run(["keychain", "add-generic-password", "-s", "svc", "-a", name, "-w", "pw-" + name,
                                     "--accessibility", name, "--passcode-file", pin])
                #expect(added.status == 0, "\(added.stderr)")
            }
            for name in Self.classes {
                let written = try run(["protect", "write", "--class", name, "-o", files + "/" + name, "--passcode-file", pin], stdin: Array(name.utf8))
                #expect(written.status == 0, "\(written.stderr)")
            }
        }

        func run(_ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:]) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + ["--home", home, "--device-key", deviceKey], stdin: stdin,
                              environment: ["SECUREFOUNDATION_AGENT": "off"].merging(environment) { $1 })
        }

        /// Every item and file reads back.
        func expectAllReadable() throws {
            for name in Self.items {
                let found = try run(["keychain", "find-generic-password", "-s", "svc", "-a", name, "-w", "--passcode-file", pin])
                #expect(found.status == 0, "\(name): \(found.stderr)")
                #expect(found.text == "pw-\(name)\n")
            }
            for name in Self.classes {
                let read = try run(["protect", "read", files + "/" + name, "--passcode-file", pin])
                #expect(read.status == 0, "\(name): \(read.stderr)")
                #expect(read.text == name)
            }
        }

        func keyBytes() -> Data? { FileManager.default.contents(atPath: deviceKey) }
        /// Whether a rotation journal exists: beside the device key, never in the home.
        var journalExists: Bool {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: root + "/config/vaults")) ?? []
            return files.contains { $0.hasSuffix(".device-key.rotation") }
        }
    }

    @Test func rotatesAndSaysWhatToRedo() throws {
        let ws = try Workspace()
        let old = try #require(ws.keyBytes())
        let rotated = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.text.contains("device key rotated"))
        #expect(rotated.text.contains(ws.home + "/keychain.sqlite: re-keyed 5"))
        #expect(rotated.text.contains(ws.home + "/protected-files.keys: re-keyed"))
        #expect(rotated.text.contains("redo: values derived from the device key outside the home changed"))
        #expect(rotated.text.contains("secrets device-share"))
        let new = try #require(ws.keyBytes())
        #expect(new != old && new.count == 32)
        try ws.expectAllReadable()
        // Nothing to resume afterwards.
        let resumed = try ws.run(["vault", "rotate-device-key", "--resume", "--passcode-file", ws.pin])
        #expect(resumed.status == 1)
        #expect(resumed.stderr.contains("nothing to resume"))
        // The old device key opens nothing of the rotated home.
        let oldKey = ws.root + "/old.key"
        #expect(FileManager.default.createFile(atPath: oldKey, contents: old, attributes: [.posixPermissions: 0o600]))
        let withOld = try CLIRunner.run(["keychain", "find-generic-password", "-s", "svc", "-a", "alwaysThisDeviceOnly", "-w",
                                         "--home", ws.home, "--device-key", oldKey], environment: ["SECUREFOUNDATION_AGENT": "off"])
        #expect(withOld.status != 0)
        // vault.state names the new key: the old key file is refused before the keychain is read.
        #expect(withOld.stderr.contains("not this vault's"), "\(withOld.stderr)")
    }

    /// The attack through the command line, by a writer of the data directory who knows no
    /// secret: a key file of their own and a provider record naming it (with its check value)
    /// planted in the home. It used to become the device key, so the attacker could forge the
    /// key table's device MACs and have files written while locked encrypted to them. Now no
    /// command takes it: what needs the device key fails and names the record, `vault status`
    /// says it is not used, and removing it restores everything.
    @Test func aProviderRecordPlantedInTheHomeIsUsedByNoCommand() throws {
        let ws = try Workspace()
        let attackerKey = SecretBytes(count: 32) { buffer in for index in buffer.indices { buffer[index] = UInt8(index) } }
        let attackerFile = ws.home + "/attacker.key"
        #expect(FileManager.default.createFile(atPath: attackerFile, contents: attackerKey.withUnsafeBytes { Data($0) },
                                               attributes: [.posixPermissions: 0o600]))
        let check = KeyDerivation.hkdf(attackerKey, info: "securefoundation device key check v1").withUnsafeBytes { Data($0.prefix(16)) }
        let record = #"{"check":"\#(check.base64EncodedString())","format":"securefoundation-device-key-provider","kind":"file","path":"\#(attackerFile)","version":2}"#
        #expect(FileManager.default.createFile(atPath: ws.home + "/device-key.provider", contents: Data(record.utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let locked = ws.files + "/written-while-locked"
        let written = try ws.run(["protect", "write", "--class", "completeUnlessOpen", "-o", locked], stdin: Array("secret".utf8))
        // Without a device key the table's device MACs cannot be checked, and the locked vault
        // cannot open the identity instead: refused, nothing written.
        #expect(written.status != 0, "\(written.stderr)")
        #expect(access(locked, F_OK) != 0)
        let item = try ws.run(["keychain", "find-generic-password", "-s", "svc", "-a", "alwaysThisDeviceOnly", "-w"])
        #expect(item.status != 0 && !item.text.contains("pw-"))
        let status = try ws.run(["vault", "status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.text.contains("not used"), "\(status.text)")
        unlink(ws.home + "/device-key.provider")
        try ws.expectAllReadable()
    }

    /// `kill -9` after the key table was re-keyed, inside the keychain's transaction, and after the
    /// key file was switched: the vault still opens, commands needing the device key say how to
    /// finish, and `--resume` finishes with every item and file readable.
    @Test(arguments: ["protected-files committed:1", "keychain batch:1", "moved:1"])
    func killedRotationResumes(_ point: String) throws {
        let ws = try Workspace()
        let old = try #require(ws.keyBytes())
        let killed = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin], environment: ["SECUREFOUNDATION_TEST_KILL_AT": point])
        #expect(killed.status == SIGKILL, "\(killed.status) \(killed.stderr)")
        #expect(ws.journalExists && access(ws.home + "/device-key.rotation", F_OK) != 0)

        let status = try ws.run(["vault", "status"])
        #expect(status.status == 0, "\(status.stderr)")
        let blocked = try ws.run(["keychain", "find-generic-password", "-s", "svc", "-a", "always", "-w"])
        #expect(blocked.status == 1)
        #expect(blocked.stderr.contains("rotate-device-key --resume"), "\(blocked.stderr)")
        let again = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin])
        #expect(again.status == 1)
        #expect(again.stderr.contains("unfinished"), "\(again.stderr)")

        let resumed = try ws.run(["vault", "rotate-device-key", "--resume", "--passcode-file", ws.pin])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.text.contains("rotation finished"))
        #expect(!ws.journalExists)
        #expect(access(ws.deviceKey + ".rotating", F_OK) != 0 && access(ws.deviceKey + ".retired", F_OK) != 0)
        #expect(ws.keyBytes() != old)
        try ws.expectAllReadable()
    }

    /// `kill -9` after the new key was staged and read back, before the journal was written
    /// (`device.key.rotating` with no journal): the next command crypto-erases the staged key,
    /// nothing is unfinished, the old key stays, and a new rotation goes through.
    @Test func killedBeforeTheJournalLeavesNoStagedKey() throws {
        let ws = try Workspace()
        let old = try #require(ws.keyBytes())
        let killed = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin], environment: ["SECUREFOUNDATION_TEST_KILL_AT": "stored:1"])
        #expect(killed.status == SIGKILL, "\(killed.status) \(killed.stderr)")
        #expect(!ws.journalExists)
        #expect(access(ws.deviceKey + ".rotating", F_OK) == 0)
        // The next command that reads the device key: the staged key is gone, everything opens.
        try ws.expectAllReadable()
        #expect(access(ws.deviceKey + ".rotating", F_OK) != 0)
        #expect(ws.keyBytes() == old)
        // A staged key left again is cleared by the next rotation itself, which goes through.
        let again = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin], environment: ["SECUREFOUNDATION_TEST_KILL_AT": "stored:1"])
        #expect(again.status == SIGKILL)
        let rotated = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(access(ws.deviceKey + ".rotating", F_OK) != 0 && !ws.journalExists)
        #expect(ws.keyBytes() != old)
        try ws.expectAllReadable()
    }

    /// A full disk under the data directory during both rotations: exit status 74, a message
    /// naming the command that finishes, every item and file readable after it ran.
    @Test func aFullDiskStopsRotationsWithTheNextCommand() throws {
        guard let disk = try SmallFileSystem(kilobytes: 2048) else {
            print("skipping the full-disk rotation test: mounting a tmpfs is not permitted here (needs root)")
            return
        }
        let ws = try Workspace(home: disk.path + "/home")
        disk.fill()
        let classKeys = try ws.run(["vault", "rotate-class-keys", "--passcode-file", ws.pin])
        #expect(classKeys.status == 74, "\(classKeys.status) \(classKeys.stderr)")
        let resealOnly = classKeys.stderr.contains("free some space, then run `securefoundation vault rotate-class-keys --reseal-only` with the passcode")
        #expect(resealOnly || classKeys.stderr.contains("free some space, then run `securefoundation vault rotate-class-keys` with the passcode"), "\(classKeys.stderr)")
        disk.unfill()
        let finished = try ws.run(["vault", "rotate-class-keys"] + (resealOnly ? ["--reseal-only"] : []) + ["--passcode-file", ws.pin])
        #expect(finished.status == 0, "\(finished.stderr)")
        try ws.expectAllReadable()

        disk.fill()
        let deviceKey = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin])
        #expect(deviceKey.status == 74, "\(deviceKey.status) \(deviceKey.stderr)")
        #expect(deviceKey.stderr.contains("rotate-device-key --resume") || deviceKey.stderr.contains("nothing was changed"), "\(deviceKey.stderr)")
        disk.unfill()
        let next = deviceKey.stderr.contains("--resume") ? ["--resume"] : []
        let resumed = try ws.run(["vault", "rotate-device-key"] + next + ["--passcode-file", ws.pin])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(!ws.journalExists && access(ws.deviceKey + ".rotating", F_OK) != 0)
        try ws.expectAllReadable()
    }

    /// Two homes on one device-key file: home A's rotation killed after its journal was written;
    /// commands in home B (a new vault, its status) must not take A's staged key for a stray one,
    /// nor must a home whose vault.state was deleted; A's `--resume` then finishes.
    @Test func anotherHomesCommandsLeaveAnUnfinishedRotationsStagedKey() throws {
        let ws = try Workspace()
        let killed = try ws.run(["vault", "rotate-device-key", "--passcode-file", ws.pin], environment: ["SECUREFOUNDATION_TEST_KILL_AT": "protected-files committed:1"])
        #expect(killed.status == SIGKILL)
        #expect(ws.journalExists && access(ws.deviceKey + ".rotating", F_OK) == 0)
        let other = ws.root + "/other-home"
        for arguments in [["vault", "init", "--passcode-file", ws.pin], ["vault", "status"]] {
            let result = try CLIRunner.run(arguments + ["--home", other, "--device-key", ws.deviceKey], environment: ["SECUREFOUNDATION_AGENT": "off"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(access(ws.deviceKey + ".rotating", F_OK) == 0, "\(arguments)")
        }
        // A writer of A's home deletes its vault.state: the journal in CONFIG still names the key.
        let state = try Data(contentsOf: URL(fileURLWithPath: ws.home + "/vault.state"))
        unlink(ws.home + "/vault.state")
        _ = try ws.run(["vault", "status"])
        #expect(access(ws.deviceKey + ".rotating", F_OK) == 0)
        try state.write(to: URL(fileURLWithPath: ws.home + "/vault.state"))
        chmod(ws.home + "/vault.state", 0o600)
        let resumed = try ws.run(["vault", "rotate-device-key", "--resume", "--passcode-file", ws.pin])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try ws.expectAllReadable()
    }
}
