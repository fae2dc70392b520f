import Foundation
import SecureFoundation

/// `securefoundation-bench plugin [--cli PATH]`: `age -d -j securefoundation` on a 1 KiB
/// protected file (the agent's plugin: the plugin program asks an unlocked agent for the file
/// key) against `age -d -i KEY` on a 1 KiB file for an X25519 identity, medians of alternating
/// runs. The plugin runs once as the front program (`--cli`, by default `securefoundation-front`
/// beside this benchmark) and once as the full program, each through a link
/// `age-plugin-securefoundation` on the `PATH`. The agent runs in this process (as in the tour),
/// so what is measured is the plugin's start and its one request. Target: the front program's
/// plugin within 1.5× of `age` with a plain key.
enum AgePluginBench {
    static func run() throws {
        guard let age = BenchSupport.which("age") else {
            print("  age is not installed (apt-get install age): nothing to compare with")
            return
        }
        let options = AgeBench.Options.parse(Array(CommandLine.arguments.dropFirst()))
        let binaryDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let front = options.cli ?? binaryDirectory.appendingPathComponent("securefoundation-front").path
        let full = AgeBench.fullProgram(beside: front) ?? binaryDirectory.appendingPathComponent("securefoundation").path
        var programs: [(String, String)] = []
        for (name, path) in [("front program", front), ("full program", full)] where FileManager.default.isExecutableFile(atPath: path) {
            programs.append((name, path))
        }
        guard !programs.isEmpty else {
            print("  no securefoundation program found beside this benchmark (build it, or name it with --cli)")
            return
        }
        let root = "/dev/shm/sf-plugin-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: root) }

        // A vault, its agent (in a thread of this process), unlocked; a complete-class file.
        let passcode = SecretBytes(utf8: "correct horse battery staple")
        defer { passcode.wipe() }
        let provider = FileDeviceKeyProvider(path: root + "/device.key")
        let manager = try CryptoManager(directory: root + "/home", deviceKeyProvider: provider, policy: .interactive)
        try manager.setUp(passcode: passcode)
        let protected = root + "/small.age"
        try ProtectedFiles(manager: manager).write(try SecureRandom.bytes(1024), to: protected, protection: .complete)
        manager.lock()
        let socket = root + "/agent.sock"
        let server = try AgentServer(manager: CryptoManager(directory: root + "/home", deviceKeyProvider: provider, policy: .interactive),
                                     socketPath: socket)
        try server.bind()
        let finished = DispatchSemaphore(value: 0)
        Thread {
            try? server.run()
            finished.signal()
        }.start()
        defer {
            server.stop()
            _ = finished.wait(timeout: .now() + 10)
        }
        _ = try AgentClient(socketPath: socket, timeout: 30).unlock(passcode: passcode)

        // The plain-key file.
        let identity = X25519Identity.generate()
        try SecureFile.replaceAtomically(root + "/key.txt") { fd in
            try identity.encoded.withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
            try [UInt8]([0x0A]).withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
        }
        let sealed: [UInt8] = try Age.encrypt(try SecureRandom.bytes(1024), recipients: [identity.recipient])
        try Data(sealed).write(to: URL(fileURLWithPath: root + "/plain.age"))

        // One PATH directory per program, holding only its plugin link.
        var paths: [String] = []
        for (index, program) in programs.enumerated() {
            let bin = root + "/bin\(index)"
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: bin + "/age-plugin-securefoundation", withDestinationPath: program.1)
            paths.append(bin)
        }
        let savedPath = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        setenv("SECUREFOUNDATION_AGENT_SOCKET", socket, 1)
        defer {
            setenv("PATH", savedPath, 1)
            unsetenv("SECUREFOUNDATION_AGENT_SOCKET")
        }
        func plugin(_ index: Int) -> AgeBench.Measure? {
            setenv("PATH", paths[index] + ":" + savedPath, 1)
            return AgeBench.spawnDirect([age, "-d", "-j", AgentAgePlugin.name, "-o", "/dev/null", protected], stdin: "/dev/null", stdout: "/dev/null")
        }
        func plain() -> AgeBench.Measure? {
            AgeBench.spawnDirect([age, "-d", "-i", root + "/key.txt", "-o", "/dev/null", root + "/plain.age"], stdin: "/dev/null", stdout: "/dev/null")
        }
        let runs = max(1, Int(ProcessInfo.processInfo.environment["AGE_BENCH_STARTUP_RUNS"] ?? "51") ?? 51)
        var pluginTimes = Array(repeating: [Double](), count: programs.count)
        var plainTimes: [Double] = []
        for _ in 0..<runs {
            for index in programs.indices {
                guard let m = plugin(index), m.status == 0 else {
                    print("  age -d -j securefoundation through the \(programs[index].0) failed")
                    return
                }
                pluginTimes[index].append(m.seconds)
            }
            guard let a = plain(), a.status == 0 else {
                print("  age -d -i failed")
                return
            }
            plainTimes.append(a.seconds)
        }
        func ms(_ seconds: Double) -> String { BenchSupport.format(seconds * 1000, 1) + " ms" }
        let base = BenchSupport.median(plainTimes)
        print("  decrypt a 1 KiB file, median of \(runs) alternating runs, load average \(AgeBench.loadAverage()):")
        print("    age -d -i KEY (X25519)                 \(ms(base))")
        for (index, program) in programs.enumerated() {
            let ratio = BenchSupport.median(pluginTimes[index]) / base
            let verdict = index == 0 && program.0 == "front program" ? " (target 1.5x: \(ratio <= 1.5 ? "met" : "not met"))" : ""
            print("    age -d -j securefoundation, \(program.0.padding(toLength: 13, withPad: " ", startingAt: 0)) \(ms(BenchSupport.median(pluginTimes[index]))), \(BenchSupport.format(ratio))x\(verdict)")
        }
    }
}
