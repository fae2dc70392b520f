import Foundation
import TestSupport
import Testing

/// Two network namespaces joined by a veth pair: the members' traffic crosses a real interface.
///
/// Each instance makes namespaces and interfaces of its own (unique names), gives the two ends
/// addresses on a private /30 and brings the links up; ``remove()`` (also run by `deinit`)
/// deletes them whatever happened.
final class NamespacePair {
    /// `ip`, if iproute2 is installed.
    static let ip: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether namespaces can be made here (iproute2 and CAP_SYS_ADMIN); says why not on stdout.
    static let available: Bool = {
        guard let ip else {
            print("skipping the network-namespace test: `ip` (iproute2) is not installed; the loopback tests still run")
            return false
        }
        let name = "sfprobe-" + UUID().uuidString.prefix(8).lowercased()
        let added = tool(ip, ["netns", "add", name])
        guard added.status == 0 else {
            print("skipping the network-namespace test: `ip netns add` was refused (needs root / CAP_SYS_ADMIN): \(added.output); the loopback tests still run")
            return false
        }
        defer { _ = tool(ip, ["netns", "del", name]) }
        let entered = tool(ip, ["netns", "exec", name, "/bin/sh", "-c", "exit 0"])
        guard entered.status == 0 else {
            print("skipping the network-namespace test: `ip netns exec` was refused: \(entered.output); the loopback tests still run")
            return false
        }
        return true
    }()

    let server: String
    let client: String
    let serverInterface: String
    let clientInterface: String
    let serverAddress = "10.231.0.1"
    let clientAddress = "10.231.0.2"
    private var removed = false

    init() throws {
        guard let ip = Self.ip else { throw NamespaceError("iproute2 is not installed") }
        let tag = UUID().uuidString.prefix(8).lowercased()
        server = "sf-\(tag)-a"
        client = "sf-\(tag)-b"
        serverInterface = "sfv\(tag)a"
        clientInterface = "sfv\(tag)b"
        let steps: [[String]] = [
            ["netns", "add", server],
            ["netns", "add", client],
            ["link", "add", serverInterface, "netns", server, "type", "veth", "peer", "name", clientInterface, "netns", client],
            ["-n", server, "addr", "add", serverAddress + "/30", "dev", serverInterface],
            ["-n", client, "addr", "add", clientAddress + "/30", "dev", clientInterface],
            ["-n", server, "link", "set", "lo", "up"],
            ["-n", client, "link", "set", "lo", "up"],
            ["-n", server, "link", "set", serverInterface, "up"],
            ["-n", client, "link", "set", clientInterface, "up"],
        ]
        for step in steps {
            let result = Self.tool(ip, step)
            if result.status != 0 {
                remove()
                throw NamespaceError("ip \(step.joined(separator: " ")) failed: \(result.output)")
            }
        }
    }

    deinit { remove() }

    /// Deletes both namespaces (and with them the veth pair); idempotent.
    func remove() {
        guard !removed, let ip = Self.ip else { return }
        removed = true
        _ = Self.tool(ip, ["netns", "del", server])
        _ = Self.tool(ip, ["netns", "del", client])
        // Only if moving it into a namespace failed.
        _ = Self.tool(ip, ["link", "del", serverInterface])
    }

    /// The names `ip netns list` shows.
    static func namespaces() -> [String] {
        guard let ip else { return [] }
        return tool(ip, ["netns", "list"]).output.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    /// The bytes the server's interface received so far.
    func serverReceivedBytes() -> Int? {
        guard let ip = Self.ip else { return nil }
        let result = Self.tool(ip, ["netns", "exec", server, "cat", "/sys/class/net/\(serverInterface)/statistics/rx_bytes"])
        return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Runs `securefoundation arguments…` in `namespace`, killed after `timeout` seconds.
    func run(in namespace: String, _ arguments: [String], environment: [String: String], timeout: TimeInterval = 90) throws -> CLIRunner.Result {
        guard let ip = Self.ip else { throw NamespaceError("iproute2 is not installed") }
        let child = try ChildProcess.start(ip, ["netns", "exec", namespace, CLIRunner.executable] + arguments, environment: environment)
        return child.wait(timeout: timeout)
    }

    /// Starts `securefoundation arguments…` (a server) in `namespace` and waits at most 60 s for
    /// its "listening on …:PORT" line.
    func startServer(in namespace: String, _ arguments: [String], environment: [String: String]) throws -> (BoundedChild, Int) {
        guard let ip = Self.ip else { throw NamespaceError("iproute2 is not installed") }
        let child = try ChildProcess.start(ip, ["netns", "exec", namespace, CLIRunner.executable] + arguments, environment: environment)
        if let line = child.waitForLine(startingWith: "listening on ", timeout: .seconds(60)),
           let colon = line.lastIndex(of: ":"),
           let port = Int(line[line.index(after: colon)...].prefix(while: \.isNumber)) {
            return (child, port)
        }
        child.kill()
        throw NamespaceError("\(arguments.prefix(2).joined(separator: " ")) did not start: "
                             + String(decoding: child.stdout, as: UTF8.self) + " " + String(decoding: child.stderr, as: UTF8.self))
    }

    /// Runs a program to completion (at most 30 s); its status and its output and errors.
    static func tool(_ path: String, _ arguments: [String]) -> (status: Int32, output: String) {
        guard let child = try? ChildProcess.start(path, arguments) else { return (-1, "\(path) cannot be started") }
        let result = child.wait(timeout: 30)
        return (result.status, result.text + result.stderr)
    }
}

struct NamespaceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child process whose standard output and error are collected as they come, so waiting for it
/// is bounded in time.
typealias BoundedChild = ChildProcess.Running

extension ChildProcess.Running {
    /// Waits at most `timeout` seconds for the process to end (then kills it: status 9).
    func wait(timeout: TimeInterval) -> CLIRunner.Result {
        do {
            return CLIRunner.Result(try wait(timeout: .seconds(timeout)))
        } catch let timedOut as ChildProcess.TimedOut {
            return CLIRunner.Result(status: SIGKILL, stdout: timedOut.stdout, stderr: String(decoding: timedOut.stderr, as: UTF8.self))
        } catch {
            return CLIRunner.Result(status: -1, stdout: [], stderr: "\(error)")
        }
    }
}

/// `share` between two processes in two network namespaces joined by a veth pair: the TLS
/// traffic crosses a real interface, not loopback.
@Suite("share across network namespaces", .serialized,
       .enabled(if: NamespacePair.available, "needs `ip netns` (iproute2, root or CAP_SYS_ADMIN); the loopback share tests still run"))
struct ShareNamespaceCLITests {
    @Test("a member in another namespace sends a file that arrives protected; a revoked device, another group and a man in the middle are refused")
    func shareAcrossNamespaces() throws {
        let (a, b) = try ShareCLITests.group()
        let net = try NamespacePair()
        var children: [BoundedChild] = []
        defer {
            for child in children { child.kill() }
            net.remove()
        }
        let names = [net.server, net.client]
        #expect(Set(names).isSubset(of: Set(NamespacePair.namespaces())))

        let sample = Array("a picture that crosses the veth pair ".utf8)
        let bytes = (0..<4096).flatMap { _ in sample }
        let photo = try b.file("photo.jpg", bytes)
        let before = net.serverReceivedBytes() ?? 0

        let (server, port) = try net.startServer(
            in: net.server,
            ["share", "serve", "--listen", "\(net.serverAddress):0", "--max-transfers", "3", "--passcode-file", a.passcode] + a.common,
            environment: a.environment)
        children.append(server)
        let to = "\(net.serverAddress):\(port)"

        // b, in the other namespace, sends; a receives while its vault is locked.
        let sent = try net.run(in: net.client, ["share", "send", photo, "--to", to, "--device", "alpha", "--timeout", "30",
                                                "--passcode-file", b.passcode] + b.common, environment: b.environment)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.text == "sent \(photo) to alpha as photo.jpg (\(bytes.count) bytes)\n")
        #expect(a.inboxNames() == ["photo.jpg"])
        let received = (net.serverReceivedBytes() ?? 0) - before
        #expect(received > bytes.count, "the server's veth received \(received) bytes")
        // On disk: a protected file, no plaintext.
        let stored = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: a.inbox + "/photo.jpg"))) ?? Data())
        #expect(stored.count > bytes.count)
        #expect(!contains(stored, sample))
        let locked = try a.run(["share", "open", "photo.jpg"], unlocked: false)
        #expect(locked.status == 36, "\(locked.stderr)")
        #expect(locked.stdout.isEmpty)

        // A machine of another group (its own root, a device named alpha too): each side trusts
        // its own root only, nothing is sent.
        let c = try ShareCLITests.Machine()
        #expect(try c.run(["share", "init", "--new-group", "--name", "alpha"]).status == 0)
        let intruder = try c.file("evil.txt", Array("evil".utf8))
        let foreign = try net.run(in: net.client, ["share", "send", intruder, "--to", to, "--timeout", "30",
                                                   "--passcode-file", c.passcode] + c.common, environment: c.environment)
        #expect(foreign.status == 50, "\(foreign.stderr)")

        // b revoked on a while the server runs: its next connection is refused.
        let revoked = try a.run(["share", "revoke", "bravo"], unlocked: false)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let afterRevoke = try net.run(in: net.client, ["share", "send", photo, "--to", to, "--timeout", "30",
                                                       "--passcode-file", b.passcode] + b.common, environment: b.environment)
        #expect(afterRevoke.status == 50, "\(afterRevoke.stderr)")
        #expect(afterRevoke.stderr.contains("the device bravo is revoked in this group"), "\(afterRevoke.stderr)")

        let served = server.wait(timeout: 60)
        #expect(served.status == 0, "\(served.stderr)")
        #expect(served.text.contains("received photo.jpg (\(bytes.count) bytes) from bravo"))
        #expect(served.stderr.contains("the device bravo is revoked in this group"), "\(served.stderr)")
        #expect(a.inboxNames() == ["photo.jpg"])

        // A man in the middle at the receiver's address, with a valid certificate of another
        // group's root for the name "alpha": the sender refuses it, sends nothing.
        let (impostor, impostorPort) = try net.startServer(
            in: net.server,
            ["share", "serve", "--listen", "\(net.serverAddress):0", "--max-transfers", "1", "--passcode-file", c.passcode] + c.common,
            environment: c.environment)
        children.append(impostor)
        let toImpostor = try net.run(in: net.client, ["share", "send", photo, "--to", "\(net.serverAddress):\(impostorPort)",
                                                      "--device", "alpha", "--timeout", "30", "--passcode-file", b.passcode] + b.common,
                                     environment: b.environment)
        #expect(toImpostor.status == 50, "\(toImpostor.stderr)")
        #expect(toImpostor.stderr.contains("the peer's certificate was refused"), "\(toImpostor.stderr)")
        _ = impostor.wait(timeout: 60)
        #expect(c.inboxNames().isEmpty)

        // Read after an unlock.
        let opened = try a.run(["share", "open", "photo.jpg"])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == bytes)

        for child in children { child.kill() }
        net.remove()
        #expect(Set(NamespacePair.namespaces()).isDisjoint(with: Set(names)))
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for index in 0...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<(index + needle.count)]) == needle { return true }
        }
        return false
    }
}
