import Foundation
import TestSupport
import Testing

/// `share send --watch`: a folder whose complete files are sent once each, across restarts.
@Suite("share send --watch", .serialized)
struct ShareWatchCLITests {
    typealias Machine = ShareCLITests.Machine

    static func watch(_ b: Machine, _ folder: String, port: Int) throws -> ChildProcess.Running {
        try ChildProcess.start(CLIRunner.executable,
                               ["share", "send", "--watch", folder, "--to", "127.0.0.1:\(port)", "--device", "alpha", "--once", "--settle", "1",
                                "--passcode-file", b.passcode] + b.common,
                               environment: b.environment)
    }

    @Test("files written slowly, renamed into place or deleted first; a restart sends nothing twice; a changed file goes again")
    func watchedFolder() throws {
        let (a, b) = try ShareCLITests.group()
        let (server, port) = try a.serve(["--max-transfers", "100"])
        defer { server.kill(SIGTERM) }
        let folder = b.scratch.path + "/outbox"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try Data("ready before the start".utf8).write(to: URL(fileURLWithPath: folder + "/ready.txt"))

        // A file still being written when the watcher starts: open, a chunk every 200 ms, closed after 2 s.
        let slowPath = folder + "/slow.bin"
        let slowBytes = (0..<10).flatMap { chunk in [UInt8](repeating: UInt8(chunk + 1), count: 10_000) }
        let fd = open(slowPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        _ = slowBytes.withUnsafeBytes { write(fd, $0.baseAddress, 10_000) }
        let watcher = try Self.watch(b, folder, port: port)
        let writer = Thread {
            for chunk in 1..<10 {
                Thread.sleep(forTimeInterval: 0.2)
                _ = slowBytes.withUnsafeBytes { write(fd, $0.baseAddress! + chunk * 10_000, 10_000) }
            }
            close(fd)
        }
        writer.start()
        // Written under a hidden name, renamed into place; and a file deleted before it settles.
        let hidden = folder + "/.part"
        try Data("renamed into place".utf8).write(to: URL(fileURLWithPath: hidden))
        #expect(rename(hidden, folder + "/renamed.txt") == 0)
        try Data("short-lived".utf8).write(to: URL(fileURLWithPath: folder + "/gone.txt"))
        unlink(folder + "/gone.txt")

        let first = try watcher.wait(timeout: .seconds(180))
        #expect(first.status == 0, "\(first.errorText)")
        let lines = first.text.split(separator: "\n").map(String.init).sorted()
        #expect(lines == [
            "sent \(folder)/ready.txt to alpha as ready.txt (22 bytes)",
            "sent \(folder)/renamed.txt to alpha as renamed.txt (18 bytes)",
            "sent \(folder)/slow.bin to alpha as slow.bin (100000 bytes)",
        ], "\(first.text)")
        #expect(a.inboxNames() == ["ready.txt", "renamed.txt", "slow.bin"])
        let received = try a.run(["share", "open", "slow.bin"])
        #expect(received.status == 0 && received.stdout == slowBytes, "the slow file arrived incomplete or changed")

        // A restart: nothing is sent twice.
        let second = try Self.watch(b, folder, port: port).wait(timeout: .seconds(120))
        #expect(second.status == 0 && second.text.isEmpty, "\(second.text) \(second.errorText)")
        #expect(a.inboxNames() == ["ready.txt", "renamed.txt", "slow.bin"])

        // A changed file goes again; a file touched with the same bytes does not.
        try Data("ready, changed".utf8).write(to: URL(fileURLWithPath: folder + "/ready.txt"))
        try Data("renamed into place".utf8).write(to: URL(fileURLWithPath: folder + "/renamed.txt"))
        let third = try Self.watch(b, folder, port: port).wait(timeout: .seconds(120))
        #expect(third.status == 0, "\(third.errorText)")
        #expect(third.text.split(separator: "\n").sorted() == [
            "sent \(folder)/ready.txt to alpha as ready.txt.1 (14 bytes)",
            "unchanged \(folder)/renamed.txt",
        ], "\(third.text)")

        // The state file altered by a writer of the data directory: refused, nothing sent.
        let stateDirectory = b.scratch.path + "/home/share-watch"
        let states = try FileManager.default.contentsOfDirectory(atPath: stateDirectory)
        #expect(states.count == 1)
        let statePath = stateDirectory + "/" + states[0]
        var sealed = Array(try Data(contentsOf: URL(fileURLWithPath: statePath)))
        sealed[sealed.count / 2] ^= 1
        try Data(sealed).write(to: URL(fileURLWithPath: statePath))
        try Data("new".utf8).write(to: URL(fileURLWithPath: folder + "/new.txt"))
        let tampered = try Self.watch(b, folder, port: port).wait(timeout: .seconds(120))
        #expect(tampered.status == 2 && tampered.text.isEmpty)
        #expect(tampered.errorText.contains("remove it to send every file"), "\(tampered.errorText)")
    }
}
