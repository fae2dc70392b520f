import Foundation
import TestSupport
import Testing

/// Runs the built `securefoundation protect …`: exit codes, stdout bytes, interop with `age`.
@Suite("protect command")
struct ProtectCLITests {
    /// A vault home, a device key, a passcode file and a directory of files.
    final class Workspace {
        let directory: TemporaryDirectory
        var root: String { directory.path }
        var home: String { root + "/home" }
        var pin: String { root + "/pin" }
        var dir: String { root + "/files" }

        init() throws {
            directory = try TemporaryDirectory(prefix: "sf-protect-cli")
            try FileManager.default.createDirectory(atPath: root + "/files", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try directory.file("pin", "2468")
            let created = try run(["vault", "init", "--passcode-file", pin])
            #expect(created.status == 0, "\(created.stderr)")
        }

        func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + ["--home", home, "--device-key", root + "/device.key"], stdin: stdin)
        }

        func protect(_ arguments: [String], unlocked: Bool = false, stdin: [UInt8] = []) throws -> CLIRunner.Result {
            try run(["protect"] + arguments + (unlocked ? ["--passcode-file", pin] : []), stdin: stdin)
        }
    }

    /// Every class × {never unlocked in this process} × {read, write}: each command is a new
    /// process that does not unlock, after the key pairs and files were made in another.
    @Test func neverUnlockedProcessMatrix() throws {
        let ws = try Workspace()
        let classes = ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"]
        for name in classes + classes.map({ $0 + "ThisDeviceOnly" }) {
            let made = try ws.protect(["write", "--class", name, "-o", ws.dir + "/" + name], unlocked: true, stdin: Array(name.utf8))
            #expect(made.status == 0, "\(made.stderr)")
        }
        for name in classes + classes.map({ $0 + "ThisDeviceOnly" }) {
            let written = try ws.protect(["write", "--class", name, "-o", ws.dir + "/new-" + name], stdin: Array("new".utf8))
            let read = try ws.protect(["read", ws.dir + "/" + name])
            switch name.replacingOccurrences(of: "ThisDeviceOnly", with: "") {
            case "complete":
                #expect(written.status == 36 && read.status == 36, "\(name)")
                #expect(read.stderr == "securefoundation: error: the \(name) protected-file class is unavailable: the vault is locked; unlock it with the passcode or the security answers (give the vault passcode with --passcode-file, or unlock a running agent with `securefoundation agent unlock`)\n")
                #expect(read.stdout.isEmpty)
            case "completeUnlessOpen":
                #expect(written.status == 0, "\(name): \(written.stderr)")
                #expect(read.status == 36, "\(name)")
            case "completeUntilFirstUserAuthentication":
                #expect(written.status == 36 && read.status == 36, "\(name)")
                #expect(read.stderr == "securefoundation: error: the \(name) protected-file class is unavailable: the vault has not been unlocked since this process started; unlock it once (give the vault passcode with --passcode-file, or unlock a running agent with `securefoundation agent unlock`)\n")
            default:
                #expect(written.status == 0, "\(name): \(written.stderr)")
                #expect(read.status == 0 && read.stdout == Array(name.utf8), "\(name): \(read.stderr)")
            }
            #expect(FileManager.default.fileExists(atPath: ws.dir + "/new-" + name) == (written.status == 0))
        }
    }

    /// The first locked write of a completeUnlessOpen file right after `vault init` works: the
    /// key pairs are made at init.
    @Test func firstLockedWriteAfterInit() throws {
        let ws = try Workspace()
        for name in ["completeUnlessOpen", "completeUnlessOpenThisDeviceOnly"] {
            let written = try ws.protect(["write", "--class", name, "-o", ws.dir + "/" + name], stdin: Array("early".utf8))
            #expect(written.status == 0, "\(written.stderr)")
            #expect(try ws.protect(["read", ws.dir + "/" + name], unlocked: true).stdout == Array("early".utf8))
        }
        #expect(FileManager.default.fileExists(atPath: ws.home + "/protected-files.keys"))
    }

    /// Written while locked as completeUnlessOpen, upgraded after an unlock, then unreadable locked.
    @Test func lockedWriteUpgradeThenUnreadableLocked() throws {
        let ws = try Workspace()
        #expect(try ws.protect(["status", ws.dir], unlocked: true).status == 0)
        let inbox = ws.dir + "/inbox"
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let written = try ws.protect(["write", "--class", "completeUnlessOpen", "-o", inbox + "/1"], stdin: Array("mail".utf8))
        #expect(written.status == 0, "\(written.stderr)")
        let status = try ws.protect(["status", inbox])
        #expect(status.text == "\(inbox)/1: completeUnlessOpen, locked (the vault is locked; unlock it with the passcode or the security answers)\n")
        #expect(try ws.protect(["read", inbox + "/1"]).status == 36)
        let upgraded = try ws.protect(["upgrade", "--from", "completeUnlessOpen", "--to", "complete", inbox], unlocked: true)
        #expect(upgraded.status == 0)
        #expect(upgraded.text == "changed 1, already in the class 0, skipped 0, failed 0\n")
        #expect(try ws.protect(["status", inbox]).text == "\(inbox)/1: complete, locked (the vault is locked; unlock it with the passcode or the security answers)\n")
        #expect(try ws.protect(["status", inbox], unlocked: true).text == "\(inbox)/1: complete, readable\n")
        #expect(try ws.protect(["read", inbox + "/1"]).status == 36)
        let read = try ws.protect(["read", "-o", ws.dir + "/out", inbox + "/1"], unlocked: true)
        #expect(read.status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: ws.dir + "/out")) == Data("mail".utf8))
        // A class-key rotation re-seals the class identities; files still open.
        let rotated = try ws.run(["vault", "rotate-class-keys", "--passcode-file", ws.pin])
        #expect(rotated.text == "class keys rotated; keychain items re-sealed: 0\nprotected-file class identities re-sealed: 8\n")
        #expect(try ws.protect(["read", inbox + "/1"], unlocked: true).stdout == Array("mail".utf8))
        #expect(try ws.protect(["write", "--class", "bogus", "-o", ws.dir + "/b"]).status == 64)
    }

    /// A 1 GiB protected file written from a pipe and read back to a pipe, byte for byte, each
    /// process's peak RSS bounded (constant memory; no timing is asserted).
    @Test func oneGiBRoundTripInConstantMemory() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/time") else {
            print("skipping: GNU time (/usr/bin/time) is not installed to measure peak RSS")
            return
        }
        let ws = try Workspace()
        var fs = statvfs()
        guard statvfs(ws.root, &fs) == 0, UInt64(fs.f_bavail) * UInt64(fs.f_frsize) > 3 << 30 else {
            print("skipping: less than 3 GiB free for the 1 GiB round trip")
            return
        }
        let flags = "--home \(ws.home) --device-key \(ws.root)/device.key"
        let file = ws.dir + "/large"
        let script = """
        set -o pipefail
        head -c 1G /dev/zero | /usr/bin/time -f %M -o \(ws.root)/write.rss \(CLIRunner.executable) protect write --class completeUntilFirstUserAuthentication -o \(file) --passcode-file \(ws.pin) \(flags) &&
        /usr/bin/time -f %M -o \(ws.root)/read.rss \(CLIRunner.executable) protect read \(file) --passcode-file \(ws.pin) \(flags) | cmp - <(head -c 1G /dev/zero)
        """
        let result = try CLIRunner.runTool("/bin/bash", ["-c", script])
        #expect(result.status == 0, "\(result.stderr)")
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        #expect(size > 1 << 30)
        for name in ["write", "read"] {
            let text = (try? String(contentsOfFile: ws.root + "/\(name).rss", encoding: .utf8)) ?? ""
            let kib = text.split(separator: "\n").last.flatMap { Int($0) } ?? Int.max
            print("1 GiB protect \(name): peak RSS \(kib / 1024) MiB")
            #expect(kib < 256 * 1024, "peak RSS of protect \(name): \(kib) KiB")
        }
        unlink(file)
    }

    /// `age -d -i` opens a protected file with the exported identity; `age -r RECIPIENT` output
    /// reads as that class.
    @Test func exportIdentityInteropWithAge() throws {
        guard let age = CLIRunner.which("age") else {
            print("skipping: the age tool is not installed")
            return
        }
        let ws = try Workspace()
        let file = ws.dir + "/doc"
        #expect(try ws.protect(["write", "--class", "none", "-o", file], unlocked: true, stdin: Array("interop".utf8)).status == 0)
        let exported = try ws.protect(["export-identity", "--class", "none", "-o", ws.dir + "/id"], unlocked: true)
        #expect(exported.status == 0)
        #expect(exported.stderr.contains("warning: this identity opens every none file without the vault"))
        let opened = try CLIRunner.runTool(age, ["-d", "-i", ws.dir + "/id", file])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == Array("interop".utf8))
        let recipient = try #require(exported.stderr.split(separator: "(recipient: ").last?.split(separator: ")").first).description
        let sealed = try CLIRunner.runTool(age, ["-r", recipient, "-o", ws.dir + "/from-age"], stdin: Array("from age".utf8))
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(try ws.protect(["status", ws.dir + "/from-age"]).text == "\(ws.dir)/from-age: none, readable\n")
        #expect(try ws.protect(["read", ws.dir + "/from-age"]).stdout == Array("from age".utf8))
    }

    /// `protect rotate-keys`: new key pairs, files re-wrapped, old pairs destroyed; an old copy
    /// of the data directory with the passcode opens the file before, not after. A damaged file
    /// is reported (exit 1); --resume makes no new pairs.
    @Test func rotateKeysCutsOffOldDataDirectory() throws {
        let ws = try Workspace()
        let inbox = ws.dir + "/inbox"
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        #expect(try ws.protect(["write", "--class", "complete", "-o", inbox + "/1"], unlocked: true, stdin: Array("mail".utf8)).status == 0)
        let stolen = ws.root + "/stolen"
        #expect(try CLIRunner.runTool("/bin/cp", ["-a", ws.home, stolen]).status == 0)
        let stolenRead = ["protect", "read", inbox + "/1", "--passcode-file", ws.pin, "--home", stolen, "--device-key", ws.root + "/device.key"]
        #expect(try CLIRunner.run(stolenRead).stdout == Array("mail".utf8))
        let rotated = try ws.protect(["rotate-keys", inbox], unlocked: true)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.text == "key pairs rotated: 8\nre-wrapped 1, current 0, skipped 0, damaged 0, failed 0\nretired key pairs destroyed: 8\n")
        #expect(try ws.protect(["read", inbox + "/1"], unlocked: true).stdout == Array("mail".utf8))
        // On this machine the rollback anchor beside the device key refuses the old copy's key
        // table outright; elsewhere its old key pairs no longer open the re-wrapped file.
        let attack = try CLIRunner.run(stolenRead)
        #expect(attack.status != 0 && attack.stdout.isEmpty)
        #expect(attack.stderr.contains("\(stolen)/protected-files.keys was rolled back"), "\(attack.stderr)")
        unlink(ws.root + "/vaults/" + (try #require(try FileManager.default.contentsOfDirectory(atPath: ws.root + "/vaults").first { $0.hasSuffix(".anchor") })))
        let elsewhere = try CLIRunner.run(stolenRead)
        #expect(elsewhere.status == 2 && elsewhere.stdout.isEmpty)
        #expect(elsewhere.stderr.contains("\(inbox)/1 was modified or damaged: its file key is not wrapped to this vault's complete key"), "\(elsewhere.stderr)")

        try Data("age-encryption.org/v1\n-> junk".utf8).write(to: URL(fileURLWithPath: inbox + "/2"))
        let resumed = try ws.protect(["rotate-keys", "--resume", inbox], unlocked: true)
        #expect(resumed.status == 1)
        #expect(resumed.text == "key pairs rotated: 0\nre-wrapped 0, current 1, skipped 0, damaged 1, failed 0\nretired key pairs destroyed: 0\n")
        #expect(resumed.stderr.hasPrefix("securefoundation: damaged: \(inbox)/2: "))
        #expect(try ws.protect(["rotate-keys", inbox]).status == 36)
        #expect(try ws.protect(["rotate-keys"], unlocked: true).status == 64)
    }

    /// `protect rotate-keys` killed (-9) while it re-wraps: every file still opens (current or
    /// retired pair), and `--resume` finishes: every file re-wrapped, the retired pairs gone.
    @Test func rotateKeysKilledMidwayIsResumed() throws {
        let ws = try Workspace()
        let inbox = ws.dir + "/inbox"
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let payload = [UInt8](repeating: 0x5A, count: 256 << 10)
        let count = 24
        // Written through the library path of the CLI, unlocked once, then locked writes.
        #expect(try ws.protect(["write", "--class", "completeUnlessOpen", "-o", inbox + "/0"], unlocked: true, stdin: payload).status == 0)
        for index in 1..<count {
            #expect(try ws.protect(["write", "--class", "completeUnlessOpen", "-o", inbox + "/\(index)"], stdin: payload).status == 0)
        }
        func inodes() -> [UInt64] {
            (0..<count).map { index in
                var info = stat()
                return lstat(inbox + "/\(index)", &info) == 0 ? UInt64(info.st_ino) : 0
            }
        }
        let before = inodes()
        let process = try ChildProcess.start(CLIRunner.executable, ["protect", "rotate-keys", inbox, "--passcode-file", ws.pin,
                                                                    "--home", ws.home, "--device-key", ws.root + "/device.key"])
        // Killed once the new pairs are in the table and a first file was re-wrapped (replaced),
        // or at 20 s.
        let table = ws.home + "/protected-files.keys"
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline {
            if retiredCount(table) > 0 && inodes() != before { break }
            usleep(500)
        }
        process.kill()
        try process.wait(timeout: .seconds(30))
        // Every file opens with the current or a retired pair: the resumed run re-wraps or
        // finds current every one of them, none damaged (a header no pair opens).
        let resumed = try ws.protect(["rotate-keys", "--resume", inbox], unlocked: true)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.text.hasPrefix("key pairs rotated: 0\nre-wrapped "))
        #expect(resumed.text.contains(", skipped 0, damaged 0, failed 0\nretired key pairs destroyed: "), "\(resumed.text)")
        print("after the kill: \(resumed.text.split(separator: "\n").dropFirst().joined(separator: "; "))")
        #expect(retiredCount(table) == 0)
        let again = try ws.protect(["rotate-keys", "--resume", inbox], unlocked: true)
        #expect(again.text == "key pairs rotated: 0\nre-wrapped 0, current \(count), skipped 0, damaged 0, failed 0\nretired key pairs destroyed: 0\n")
        for index in [0, count / 2, count - 1] {
            #expect(try ws.protect(["read", inbox + "/\(index)"], unlocked: true).stdout == payload)
        }
    }

    /// `vault rotate-class-keys --protected-dir DIR`: class keys and key pairs in one run; an
    /// old copy of the data directory no longer opens the re-wrapped file.
    @Test func rotateClassKeysWithProtectedDirectory() throws {
        let ws = try Workspace()
        let inbox = ws.dir + "/inbox"
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        #expect(try ws.protect(["write", "--class", "completeUntilFirstUserAuthentication", "-o", inbox + "/1"], unlocked: true, stdin: Array("note".utf8)).status == 0)
        let stolen = ws.root + "/stolen"
        #expect(try CLIRunner.runTool("/bin/cp", ["-a", ws.home, stolen]).status == 0)
        let rotated = try ws.run(["vault", "rotate-class-keys", "--protected-dir", inbox, "--passcode-file", ws.pin])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.text == "class keys rotated; keychain items re-sealed: 0\nprotected-file class identities re-sealed: 8\nprotected-file key pairs rotated: 8; files re-wrapped 1, current 0, skipped 0, damaged 0, failed 0; retired key pairs destroyed: 8\n")
        #expect(try ws.protect(["read", inbox + "/1"], unlocked: true).stdout == Array("note".utf8))
        let attack = try CLIRunner.run(["protect", "read", inbox + "/1", "--passcode-file", ws.pin, "--home", stolen, "--device-key", ws.root + "/device.key"])
        #expect(attack.status == 2 && attack.stdout.isEmpty)
        let finished = try ws.run(["vault", "rotate-class-keys", "--reseal-only", "--protected-dir", inbox, "--passcode-file", ws.pin])
        #expect(finished.text.hasSuffix("protected-file key pairs rotated: 0; files re-wrapped 0, current 1, skipped 0, damaged 0, failed 0; retired key pairs destroyed: 0\n"), "\(finished.text)")
    }
}

/// The number of retired key pairs in a key table (0 when it cannot be read).
func retiredCount(_ path: String) -> Int {
    guard let data = FileManager.default.contents(atPath: path),
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return 0 }
    return (object["retired"] as? [Any])?.count ?? 0
}
