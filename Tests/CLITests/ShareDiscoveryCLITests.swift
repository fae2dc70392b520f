import Foundation
import TestSupport
import Testing

/// An avahi-daemon, with a D-Bus system bus of its own, in each namespace of a ``NamespacePair``.
///
/// Each daemon runs in `ip netns exec NS unshare -m` with `/run/avahi-daemon` and `/run/dbus`
/// bind-mounted to directories of the test (the daemon's pid file and bus socket paths are
/// fixed), so it neither sees nor disturbs the machine's own daemons. Clients reach it with
/// ``environment(_:)``. ``stop()`` (also run by `deinit`) kills both by pid.
final class AvahiPair {
    static let daemon = ChildProcess.which("avahi-daemon") ?? (FileManager.default.isExecutableFile(atPath: "/usr/sbin/avahi-daemon") ? "/usr/sbin/avahi-daemon" : nil)
    static let browseTool = ChildProcess.which("avahi-browse")
    static let publishTool = ChildProcess.which("avahi-publish")
    static let dbus = ChildProcess.which("dbus-daemon")

    /// Whether namespaces and the avahi tools are here; says what is missing on stdout.
    static let available: Bool = {
        guard NamespacePair.available else { return false }
        guard daemon != nil, browseTool != nil, publishTool != nil, dbus != nil,
              FileManager.default.fileExists(atPath: "/usr/share/dbus-1/system.conf") else {
            print("skipping the DNS-SD tests: install avahi-daemon avahi-utils dbus (apt-get); the address-based share tests still run")
            return false
        }
        return true
    }()

    let scratch: TemporaryDirectory
    private var daemons: [ChildProcess.Running] = []
    private let net: NamespacePair

    init(_ net: NamespacePair) throws {
        self.net = net
        // A short path: the bus socket's must fit in 107 bytes.
        scratch = try TemporaryDirectory.short(prefix: "sf-avahi")
        try FileManager.default.createDirectory(atPath: "/run/avahi-daemon", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/dbus", withIntermediateDirectories: true)
        let original = try String(contentsOfFile: "/usr/share/dbus-1/system.conf", encoding: .utf8)
        for namespace in [net.server, net.client] {
            let dir = directory(namespace)
            for sub in ["avahi", "dbus"] {
                try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true)
            }
            // The packaged policy lets only user avahi own the name, and denies clients by
            // default: root may own it here, and everyone may talk to it.
            let config = original
                .replacingOccurrences(of: #"<listen>[^<]*</listen>"#, with: "<listen>unix:path=\(dir)/dbus/system_bus_socket</listen>",
                                      options: .regularExpression)
                .replacingOccurrences(of: #"<user>[^<]*</user>"#, with: "", options: .regularExpression)
                .replacingOccurrences(of: #"<pidfile>[^<]*</pidfile>"#, with: "", options: .regularExpression)
                .replacingOccurrences(of: "</busconfig>", with: """
                    <policy user="root"><allow own="org.freedesktop.Avahi"/></policy>
                    <policy context="mandatory"><allow send_destination="org.freedesktop.Avahi"/>
                    <allow receive_sender="org.freedesktop.Avahi"/></policy></busconfig>
                    """)
            try config.write(toFile: dir + "/system.conf", atomically: true, encoding: .utf8)
            let script = "mount --bind '\(dir)/avahi' /run/avahi-daemon && mount --bind '\(dir)/dbus' /run/dbus"
                + " && '\(Self.dbus!)' --config-file='\(dir)/system.conf' --fork --print-pid > '\(dir)/dbus.pid'"
                + " && exec '\(Self.daemon!)' --no-drop-root --no-chroot --no-rlimits"
            daemons.append(try ChildProcess.start(NamespacePair.ip!, ["netns", "exec", namespace, "unshare", "-m", "sh", "-c", script]))
        }
        // Ready when avahi-browse reaches the daemon (at most 30 s each).
        for namespace in [net.server, net.client] {
            var ready = false
            for _ in 0..<60 where !ready {
                ready = tool(in: namespace, Self.browseTool!, ["-a", "-t", "-p"], timeout: 10).status == 0
                if !ready { Thread.sleep(forTimeInterval: 0.5) }
            }
            if !ready {
                stop()
                throw NamespaceError("avahi-daemon did not start in \(namespace): "
                                     + daemons.map { String(decoding: $0.stdout + $0.stderr, as: UTF8.self) }.joined(separator: "\n"))
            }
        }
    }

    deinit { stop() }

    func directory(_ namespace: String) -> String { scratch.path + "/" + namespace }

    /// The variables that make a client in `namespace` use that namespace's daemon.
    func environment(_ namespace: String) -> [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory(namespace))/dbus/system_bus_socket", "AVAHI_COMPAT_NOWARN": "1"]
    }

    /// Runs a tool in `namespace` with its daemon, killed after `timeout` seconds.
    func tool(in namespace: String, _ path: String, _ arguments: [String], timeout: TimeInterval = 30) -> CLIRunner.Result {
        guard let child = try? ChildProcess.start(NamespacePair.ip!, ["netns", "exec", namespace, path] + arguments,
                                                  environment: environment(namespace)) else {
            return CLIRunner.Result(status: -1, stdout: [], stderr: "\(path) cannot be started")
        }
        return child.wait(timeout: timeout)
    }

    /// Starts a long-running tool (avahi-publish) in `namespace`.
    func start(in namespace: String, _ path: String, _ arguments: [String]) throws -> ChildProcess.Running {
        try ChildProcess.start(NamespacePair.ip!, ["netns", "exec", namespace, path] + arguments, environment: environment(namespace))
    }

    func stop() {
        for dir in [net.server, net.client].map(directory) {
            if let text = try? String(contentsOfFile: dir + "/dbus.pid", encoding: .utf8),
               let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 1 {
                kill(pid, SIGKILL)
            }
            try? FileManager.default.removeItem(atPath: dir + "/dbus.pid")
        }
        for daemon in daemons { daemon.kill() }
        daemons.removeAll()
    }
}

/// DNS-SD discovery (`share serve --advertise`, `share send --to DEVICE`, `share list --nearby`)
/// between two network namespaces, each with a real avahi-daemon; interop with avahi-browse and
/// avahi-publish.
@Suite("share discovery across network namespaces", .serialized,
       .enabled(if: AvahiPair.available, "needs `ip netns` and avahi-daemon, avahi-utils, dbus"))
struct ShareDiscoveryCLITests {
    /// Waits (at most `attempts` × 1 s) for avahi-browse in the client namespace to resolve a
    /// service on `port`; its parsable lines.
    func browse(_ avahi: AvahiPair, _ net: NamespacePair, port: Int, attempts: Int = 20) -> [String] {
        for _ in 0..<attempts {
            let result = avahi.tool(in: net.client, AvahiPair.browseTool!, ["-r", "-t", "-p", "_securefoundation._tcp"], timeout: 20)
            let lines = result.text.split(separator: "\n").map(String.init).filter { $0.hasPrefix("=;") && $0.contains(";\(port);") }
            if !lines.isEmpty { return lines }
            Thread.sleep(forTimeInterval: 1)
        }
        return []
    }

    @Test("serve --advertise: avahi-browse sees v and g only; list --nearby says member, send --to DEVICE finds and uses it")
    func advertisedServiceIsFoundAndUsed() throws {
        let (a, b) = try ShareCLITests.group()
        let net = try NamespacePair()
        let avahi = try AvahiPair(net)
        var children: [BoundedChild] = []
        defer {
            for child in children { child.kill() }
            avahi.stop()
            net.remove()
        }
        let (server, port) = try net.startServer(
            in: net.server, ["share", "serve", "--listen", "0.0.0.0:0", "--advertise", "--passcode-file", a.passcode] + a.common,
            environment: a.environment.merging(avahi.environment(net.server)) { $1 })
        children.append(server)
        let advertised = server.waitForLine(startingWith: "advertising ", timeout: .seconds(30))
        #expect(advertised?.contains("as _securefoundation._tcp in local.") == true, "\(String(decoding: server.stdout, as: UTF8.self)) \(server.stderr)")
        let tag = advertised.flatMap { line in line.range(of: "g=").map { String(line[$0.upperBound...].prefix(16)) } } ?? "?"
        #expect(tag.count == 16 && tag.allSatisfy(\.isHexDigit), "\(advertised ?? "")")

        // The real tool in the other namespace: the TXT record is v and g, no device name.
        let lines = browse(avahi, net, port: port)
        #expect(!lines.isEmpty, "avahi-browse did not resolve the service")
        let ipv4 = lines.first { $0.contains(";IPv4;") } ?? ""
        #expect(ipv4.contains(";\(net.serverAddress);\(port);"), "\(ipv4)")
        #expect(ipv4.hasSuffix("\"g=\(tag)\" \"v=1\"") || ipv4.hasSuffix("\"v=1\" \"g=\(tag)\""), "\(ipv4)")
        #expect(ipv4.contains(";securefoundation-"), "\(ipv4)")
        #expect(!ipv4.contains("alpha"), "\(ipv4)")

        let env = b.environment.merging(avahi.environment(net.client)) { $1 }
        let nearby = try net.run(in: net.client, ["share", "list", "--nearby", "--seconds", "5", "--passcode-file", b.passcode] + b.common,
                                 environment: env)
        #expect(nearby.status == 0, "\(nearby.stderr)")
        #expect(nearby.text.contains("\t\(net.serverAddress):\(port)\tmember\talpha\t"), "\(nearby.text)")

        let photo = try b.file("photo.jpg", Array(repeating: 0x42, count: 70_000))
        let sent = try net.run(in: net.client, ["share", "send", photo, "--to", "alpha", "--timeout", "20",
                                                "--passcode-file", b.passcode] + b.common, environment: env)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.text == "sent \(photo) to alpha as photo.jpg (70000 bytes)\n", "\(sent.text)")
        #expect(a.inboxNames() == ["photo.jpg"])

        // Another device name than the one advertised: found, checked by its certificate,
        // refused, nothing sent.
        let wrong = try net.run(in: net.client, ["share", "send", photo, "--to", "charlie", "--timeout", "6",
                                                 "--passcode-file", b.passcode] + b.common, environment: env)
        #expect(wrong.status == 50, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("the receiver is alpha, not charlie"), "\(wrong.stderr)")
        #expect(a.inboxNames() == ["photo.jpg"])

        // b revokes alpha (by its pin: a joined machine knows no other device's name): listed as
        // revoked, and not sent to.
        let devices = try a.run(["share", "list", "--devices"], unlocked: false).text
        let pin = devices.split(separator: "\n").first { $0.hasPrefix("alpha\t") }?.split(separator: "\t").dropFirst().first.map(String.init) ?? "?"
        let revoking = try b.run(["share", "revoke", pin], unlocked: false)
        #expect(revoking.status == 0, "\(revoking.stderr)")
        let revoked = try net.run(in: net.client, ["share", "list", "--nearby", "--seconds", "5", "--passcode-file", b.passcode] + b.common,
                                  environment: env)
        #expect(revoked.text.contains("\t\(net.serverAddress):\(port)\trevoked\talpha\t"), "\(revoked.text) \(revoked.stderr)")
        let toRevoked = try net.run(in: net.client, ["share", "send", photo, "--to", "alpha", "--timeout", "6",
                                                     "--passcode-file", b.passcode] + b.common, environment: env)
        #expect(toRevoked.status == 50, "\(toRevoked.stderr)")
        #expect(toRevoked.stderr.contains("the device alpha is revoked in this group"), "\(toRevoked.stderr)")
        #expect(a.inboxNames() == ["photo.jpg"])
    }

    @Test("services published with avahi-publish are found; one answering with another group's certificate is refused and the next is used")
    func publishedServicesAndAnImpostor() throws {
        let (a, b) = try ShareCLITests.group()
        let net = try NamespacePair()
        let avahi = try AvahiPair(net)
        var children: [BoundedChild] = []
        defer {
            for child in children { child.kill() }
            avahi.stop()
            net.remove()
        }
        let serverEnv = a.environment.merging(avahi.environment(net.server)) { $1 }
        // The group's tag, as anyone on the link can copy it.
        let (real, realPort) = try net.startServer(
            in: net.server, ["share", "serve", "--listen", "0.0.0.0:0", "--advertise", "--passcode-file", a.passcode] + a.common,
            environment: serverEnv)
        children.append(real)
        let advertised = real.waitForLine(startingWith: "advertising ", timeout: .seconds(30)) ?? ""
        let tag = advertised.range(of: "g=").map { String(advertised[$0.upperBound...].prefix(16)) } ?? "?"

        // Another group's machine, also named alpha, published by avahi-publish with the copied tag.
        let c = try ShareCLITests.Machine()
        #expect(try c.run(["share", "init", "--new-group", "--name", "alpha"]).status == 0)
        let (impostor, impostorPort) = try net.startServer(
            in: net.server, ["share", "serve", "--listen", "0.0.0.0:0", "--passcode-file", c.passcode] + c.common,
            environment: c.environment)
        children.append(impostor)
        let published = try avahi.start(in: net.server, AvahiPair.publishTool!,
                                        ["-s", "impostor", "_securefoundation._tcp", "\(impostorPort)", "v=1", "g=\(tag)"])
        children.append(published)
        // A service of another tag: listed as unknown, never connected to.
        let other = try avahi.start(in: net.server, AvahiPair.publishTool!,
                                    ["-s", "stranger", "_securefoundation._tcp", "9", "v=1", "g=0000000000000000"])
        children.append(other)
        #expect(!browse(avahi, net, port: impostorPort).isEmpty, "avahi-browse did not resolve the published service")

        let env = b.environment.merging(avahi.environment(net.client)) { $1 }
        let nearby = try net.run(in: net.client, ["share", "list", "--nearby", "--seconds", "6", "--passcode-file", b.passcode] + b.common,
                                 environment: env)
        #expect(nearby.status == 0, "\(nearby.stderr)")
        let rows = nearby.text.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        let impostorRow = rows.first { $0.first == "impostor" } ?? []
        #expect(impostorRow.count >= 3 && impostorRow[1] == "\(net.serverAddress):\(impostorPort)" && impostorRow[2] == "unknown", "\(nearby.text)")
        #expect(impostorRow.last?.contains("the peer's certificate was refused") == true, "\(nearby.text)")
        let strangerRow = rows.first { $0.first == "stranger" } ?? []
        #expect(strangerRow.count >= 3 && strangerRow[2] == "unknown" && strangerRow.last == "another group's tag", "\(nearby.text)")
        #expect(rows.contains { $0.count >= 4 && $0[1] == "\(net.serverAddress):\(realPort)" && $0[2] == "member" && $0[3] == "alpha" },
                "\(nearby.text)")

        // send --to alpha: whichever order they come in, the impostor is refused and the real one stores the file.
        let note = try b.file("note.txt", Array("to alpha, found by DNS-SD".utf8))
        let sent = try net.run(in: net.client, ["share", "send", note, "--to", "alpha", "--timeout", "20",
                                                "--passcode-file", b.passcode] + b.common, environment: env)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.text == "sent \(note) to alpha as note.txt (25 bytes)\n", "\(sent.text)")
        #expect(a.inboxNames() == ["note.txt"])
        #expect(c.inboxNames().isEmpty)
    }

    @Test("without a DNS-SD daemon, send --to DEVICE says so and exits 7")
    func withoutADaemon() throws {
        let (_, b) = try ShareCLITests.group()
        let note = try b.file("note.txt", Array("x".utf8))
        var env = b.environment
        env["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=" + b.scratch.path + "/no-bus"
        env["AVAHI_COMPAT_NOWARN"] = "1"
        let sent = try CLIRunner.run(["share", "send", note, "--to", "alpha", "--timeout", "3", "--passcode-file", b.passcode] + b.common,
                                     environment: env)
        #expect(sent.status == 7, "\(sent.stderr)")
        #expect(sent.stderr.contains("DNS-SD is not available"), "\(sent.stderr)")
        #expect(sent.stdout.isEmpty)
    }
}
