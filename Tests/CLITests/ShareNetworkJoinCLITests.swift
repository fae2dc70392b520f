import Foundation
import TestSupport
import Testing

/// `share invite --listen` / `share join --connect`: enrolment over the network, as processes.
@Suite("share enrolment over the network", .serialized)
struct ShareNetworkJoinCLITests {
    @Test("a device joins over the network with the invitation; a forged one is refused (52) and the inviter keeps waiting")
    func joinOverTheNetwork() throws {
        let a = try ShareCLITests.Machine(), b = try ShareCLITests.Machine(), c = try ShareCLITests.Machine()
        #expect(try a.run(["share", "init", "--new-group", "--name", "alpha"]).status == 0)
        let invitation = a.scratch.path + "/invite.json"
        let started = try CLIRunner.startServer(
            ["share", "invite", "-o", invitation, "--listen", "127.0.0.1:0", "--minutes", "5", "--passcode-file", a.passcode] + a.common,
            environment: a.environment)
        defer { if started.process.isRunning { kill(started.process.processIdentifier, SIGKILL) } }
        let to = "127.0.0.1:\(started.port)"
        let text = try String(contentsOfFile: invitation, encoding: .utf8)

        // The same invitation with another secret: refused by the inviter, nothing issued.
        let secret = try #require(text.split(separator: "\n").first { $0.contains("\"secret\"") })
        let forged = text.replacingOccurrences(of: String(secret), with: "  \"secret\" : \"\(Data(repeating: 0x41, count: 32).base64EncodedString())\",")
        let forgedPath = try c.file("invite.json", Array(forged.utf8))
        let refused = try c.run(["share", "join", forgedPath, "--name", "charlie", "--connect", to])
        #expect(refused.status == 52, "\(refused.stderr)")
        #expect(refused.stderr.contains("not authenticated by the invitation's secret"), "\(refused.stderr)")

        let copied = try b.file("invite.json", Array(text.utf8))
        let joined = try b.run(["share", "join", copied, "--name", "bravo", "--connect", to])
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(joined.text.hasPrefix("device: bravo\ndevice pin: sha256/"))

        let ended = try started.process.wait(timeout: .seconds(120))
        #expect(ended.status == 0)
        let output = ended.text
        #expect(output.contains("enrolled bravo"), "\(output)")
        let devices = try a.run(["share", "list", "--devices"], unlocked: false)
        #expect(devices.text.contains("bravo\tsha256/"))
        #expect(!devices.text.contains("charlie"))

        // The new member sends to the inviter.
        let (server, port) = try a.serve(["--max-transfers", "1"])
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let note = try b.file("note.txt", Array("joined over the network".utf8))
        let sent = try b.run(["share", "send", note, "--to", "127.0.0.1:\(port)", "--device", "alpha"])
        #expect(sent.status == 0, "\(sent.stderr)")
        try server.wait(timeout: .seconds(120))
        #expect(a.inboxNames() == ["note.txt"])
    }
}
