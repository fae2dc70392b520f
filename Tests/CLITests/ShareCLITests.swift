import Foundation
import TestSupport
import Testing

/// `share`: two (and three) machines as separate processes on loopback, each with its own vault.
@Suite("share", .serialized)
struct ShareCLITests {
    /// One machine: a data directory, a device key and a passcode.
    final class Machine {
        let scratch: ScratchDirectory
        let passcode: String
        let environment: [String: String]
        var common: [String] { ["--home", scratch.path + "/home", "--device-key", scratch.path + "/device.key"] }
        var inbox: String { scratch.path + "/home/share-inbox" }

        init() throws {
            scratch = try ScratchDirectory()
            passcode = try scratch.file("passcode.txt", Array("2468\n".utf8))
            environment = ["XDG_CONFIG_HOME": scratch.path + "/config", "SECUREFOUNDATION_AGENT": "off"]
            let created = try run(["vault", "init"])
            #expect(created.status == 0, "\(created.stderr)")
        }

        @discardableResult
        func run(_ arguments: [String], unlocked: Bool = true) throws -> CLIRunner.Result {
            try CLIRunner.run(arguments + common + (unlocked ? ["--passcode-file", passcode] : []), environment: environment)
        }

        func file(_ name: String, _ bytes: [UInt8]) throws -> String { try scratch.file(name, bytes) }

        /// Starts `share serve` and returns the process and its port (waits at most 60 s).
        func serve(_ arguments: [String]) throws -> (ChildProcess.Running, Int) {
            let started = try CLIRunner.startServer(
                ["share", "serve", "--listen", "127.0.0.1:0", "--passcode-file", passcode] + arguments + common,
                environment: environment)
            return (started.process, started.port)
        }

        func inboxNames() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        }
    }

    /// `a` creates the group, `b` joins it through invite / join / approve / join --certificate.
    static func group() throws -> (Machine, Machine) {
        let a = try Machine(), b = try Machine()
        let created = try a.run(["share", "init", "--new-group", "--name", "alpha"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.text.contains("device: alpha"))
        let invitation = a.scratch.path + "/invite.json"
        #expect(try a.run(["share", "invite", "-o", invitation]).status == 0)
        let copied = try b.file("invite.json", Array(try Data(contentsOf: URL(fileURLWithPath: invitation))))
        let request = b.scratch.path + "/request.json"
        let joined = try b.run(["share", "join", copied, "--name", "bravo", "-o", request])
        #expect(joined.status == 0, "\(joined.stderr)")
        let certificate = a.scratch.path + "/bravo.pem"
        let approved = try a.run(["share", "approve", request, "-o", certificate])
        #expect(approved.status == 0, "\(approved.stderr)")
        // An invitation enrols one device only.
        let again = try a.run(["share", "approve", request, "-o", a.scratch.path + "/again.pem"])
        #expect(again.status == 52, "\(again.stderr)")
        let completed = try b.run(["share", "join", "--certificate", certificate])
        #expect(completed.status == 0, "\(completed.stderr)")
        #expect(completed.text.contains("device: bravo"))
        return (a, b)
    }

    /// DNS-SD's library (and the ten libraries Avahi's brings: D-Bus, libsystemd, libgcrypt...)
    /// is loaded at the first discovery call, not at every start of every command.
    @Test("the program does not load libdns_sd at start")
    func noDiscoveryLibraryAtStart() throws {
        let traced = try CLIRunner.run(["--version"], environment: ["LD_TRACE_LOADED_OBJECTS": "1"])
        #expect(traced.status == 0, "\(traced.stderr)")
        #expect(traced.text.contains("libc.so"), "\(traced.text)")
        #expect(!traced.text.contains("libdns_sd"), "\(traced.text)")
        #expect(!traced.text.contains("libavahi"), "\(traced.text)")
    }

    @Test("two processes share a file; it is readable only with the passcode; a revoked device and another group are refused")
    func shareBetweenProcesses() throws {
        let (a, b) = try Self.group()
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let photo = try b.file("photo.jpg", bytes)
        let (server, port) = try a.serve(["--max-transfers", "3"])
        defer { server.kill(SIGTERM) }

        let sent = try b.run(["share", "send", photo, "--to", "127.0.0.1:\(port)", "--device", "alpha"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.text == "sent \(photo) to alpha as photo.jpg (100000 bytes)\n")
        #expect(a.inboxNames() == ["photo.jpg"])

        // A member of another group is refused; nothing is written.
        let c = try Machine()
        #expect(try c.run(["share", "init", "--new-group", "--name", "alpha"]).status == 0)
        let intruder = try c.file("evil.txt", Array("evil".utf8))
        let refused = try c.run(["share", "send", intruder, "--to", "127.0.0.1:\(port)"])
        #expect(refused.status == 50, "\(refused.stderr)")

        // Revoked while the server runs.
        let revoked = try a.run(["share", "revoke", "bravo"], unlocked: false)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.text.hasPrefix("revoked bravo sha256/"))
        let afterRevoke = try b.run(["share", "send", photo, "--to", "127.0.0.1:\(port)"])
        #expect(afterRevoke.status == 50, "\(afterRevoke.stderr)")
        #expect(afterRevoke.stderr.contains("the device bravo is revoked in this group"), "\(afterRevoke.stderr)")
        #expect(a.inboxNames() == ["photo.jpg"])

        #expect(try server.wait(timeout: .seconds(120)).status == 0)

        // Locked: not readable.
        let locked = try a.run(["share", "open", "photo.jpg"], unlocked: false)
        #expect(locked.status == 36, "\(locked.stderr)")
        #expect(locked.stdout.isEmpty)
        let listed = try a.run(["share", "list"], unlocked: false)
        #expect(listed.status == 0)
        #expect(listed.text.hasPrefix("photo.jpg\t"))
        let opened = try a.run(["share", "open", "photo.jpg"])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == bytes)
        #expect(opened.stderr.contains("upgraded 1 received file(s) to class complete"))
        let devices = try a.run(["share", "list", "--devices"], unlocked: false)
        #expect(devices.text.contains("alpha\tsha256/"))
        #expect(devices.text.contains("\trevoked\n"))

        // Hostile names on the command line.
        let traversal = try a.run(["share", "open", "../home/keychain.sqlite"])
        #expect(traversal.status == 64)
    }

    /// Deleting the `revoked` row (a writer of the data directory can delete rows, not write
    /// them) used to read as an empty list: the revoked sender's `share send` exited 0. The
    /// group's record holds the list: the sender is still refused (50), and with the record
    /// deleted too the list is refused as tampered (2), never read as empty.
    @Test("deleting the revocation rows does not serve a revoked device again")
    func deletedRevocationRows() throws {
        let (a, b) = try Self.group()
        let photo = try b.file("photo.jpg", Array("photo".utf8))
        #expect(try a.run(["share", "revoke", "bravo"], unlocked: false).status == 0)
        let deleted = try a.run(["keychain", "delete-generic-password", "-s", "securefoundation.share", "-a", "revoked"],
                                unlocked: false)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let listed = try a.run(["share", "list", "--devices"], unlocked: false)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.text.contains("bravo\tsha256/") && listed.text.contains("\trevoked\n"), "\(listed.text)")

        let (server, port) = try a.serve(["--max-transfers", "2"])
        defer { server.kill(SIGTERM) }
        let refused = try b.run(["share", "send", photo, "--to", "127.0.0.1:\(port)"])
        #expect(refused.status == 50, "\(refused.stderr)")
        #expect(refused.stderr.contains("the device bravo is revoked in this group"), "\(refused.stderr)")

        let record = try a.run(["keychain", "delete-generic-password", "-s", "securefoundation.share", "-a", "group"],
                               unlocked: false)
        #expect(record.status == 0, "\(record.stderr)")
        let tampered = try a.run(["share", "list", "--devices"], unlocked: false)
        #expect(tampered.status == 2, "\(tampered.stderr)")
        #expect(tampered.stderr.contains("the revocation list cannot be trusted"), "\(tampered.stderr)")
        let revokeAgain = try a.run(["share", "revoke", "bravo"], unlocked: false)
        #expect(revokeAgain.status == 2, "\(revokeAgain.stderr)")
        let stillRefused = try b.run(["share", "send", photo, "--to", "127.0.0.1:\(port)"])
        #expect(stillRefused.status == 50, "\(stillRefused.stderr)")
        #expect(try server.wait(timeout: .seconds(120)).status == 0)
        #expect(a.inboxNames().isEmpty)
    }
}
