import DeviceSharing
import Foundation
import NIOCore
import SecureFoundation

/// `securefoundation-bench share`: a file sent between two processes over loopback with
/// `securefoundation share serve` / `share send` (mutual TLS, the receiver encrypting into a
/// protected file on disk), beside `openssl s_client` → `openssl s_server` (mutual TLS, every
/// byte counted) and plain TCP without TLS (`socat`, to /dev/null and to a file) as the
/// ceiling, and the same server and client pipeline without the TLS handler (this executable run
/// again as receiver and as sender: two processes), in the same run. Prints MiB/s, ratios, and the peak RSS and CPU seconds of each
/// side (CPU of the peers too: on a shared machine, CPU seconds say more than wall time).
///
/// Needs the `securefoundation` executable beside this one (`swift build -c release`), or
/// SECUREFOUNDATION_BIN. SHARE_BENCH_MIB (default 1024), SHARE_BENCH_RUNS (default 3, medians),
/// SHARE_BENCH_DIR (default the temporary directory; needs twice the payload free).
enum ShareBench {
    typealias Failure = BenchSupport.Failure

    /// One timed transfer: seconds, and the peak RSS (KiB) of the receiver and sender when known.
    struct Sample {
        var seconds: Double
        var receiverKiB: Int?
        var senderKiB: Int?
        /// User + system CPU seconds of the receiver and the sender (from /usr/bin/time).
        var receiverCPU: Double?
        var senderCPU: Double?
    }

    static func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let mib = max(1, Int(environment["SHARE_BENCH_MIB"] ?? "1024") ?? 1024)
        let runs = max(1, Int(environment["SHARE_BENCH_RUNS"] ?? "3") ?? 3)
        guard let cli = executable() else {
            print("securefoundation not found beside this executable: run `swift build -c release` (or set SECUREFOUNDATION_BIN)")
            return
        }
        let base = environment["SHARE_BENCH_DIR"] ?? FileManager.default.temporaryDirectory.path
        let dir = base + "/sf-share-bench-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let payload = dir + "/payload.bin"
        try writePayload(payload, mib: mib)
        let tiny = dir + "/tiny.bin"
        try Data([0x2a]).write(to: URL(fileURLWithPath: tiny))
        let (alpha, bravo) = try makeGroup(cli: cli, dir: dir)
        let time = FileManager.default.isExecutableFile(atPath: "/usr/bin/time") ? "/usr/bin/time" : nil
        let openssl = BenchSupport.which("openssl")
        let socat = BenchSupport.which("socat")
        if let openssl { try BenchSupport.makePKI(openssl: openssl, dir: dir, clientName: "bravo") }

        print("loopback, \(mib) MiB, \(ProcessInfo.processInfo.activeProcessorCount) cores, median of \(runs); load average \(loadAverage())")
        if time == nil { print("note: /usr/bin/time is not installed (apt-get install time): peak RSS read from /proc while running") }
        // The same transfers with each side's class keys from its unlock agent (no scrypt per process).
        let alphaAgent = try alpha.startAgent(cli: cli), bravoAgent = try bravo.startAgent(cli: cli)
        defer {
            alphaAgent.stopAgent(cli: cli)
            bravoAgent.stopAgent(cli: cli)
        }
        var ours: [Sample] = [], fixed: [Sample] = [], opensslRuns: [Peer] = []
        var agentRuns: [Sample] = [], agentFixed: [Sample] = []
        var socatNull: [Peer] = [], socatFile: [Peer] = [], plain: [Sample] = []
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let bytes = UInt64(mib) << 20
        for round in 0..<runs {
            // Alternating which goes first: the first transfer after a pause meets colder page
            // allocation in the file system (tmpfs above all) than the one right after it.
            for viaAgent in (round % 2 == 0 ? [false, true] : [true, false]) {
                let (from, to) = viaAgent ? (bravoAgent, alphaAgent) : (bravo, alpha)
                let sample = try share(cli: cli, time: time, from: from, to: to, file: payload, dir: dir, expected: bytes)
                let small = try share(cli: cli, time: time, from: from, to: to, file: tiny, dir: dir, expected: 1)
                if viaAgent { agentRuns.append(sample); agentFixed.append(small) } else { ours.append(sample); fixed.append(small) }
            }
            plain.append(try plainPipeline(bench: bench, time: time, file: payload, dir: dir, expected: bytes))
            if let openssl, let peer = try opensslPair(openssl: openssl, time: time, dir: dir, payload: payload, expected: bytes) {
                opensslRuns.append(peer)
            }
            if let socat {
                if let peer = try socatPair(socat: socat, time: time, dir: dir, payload: payload, sink: "/dev/null") { socatNull.append(peer) }
                let copy = dir + "/socat-copy"
                if let peer = try socatPair(socat: socat, time: time, dir: dir, payload: payload, sink: copy) { socatFile.append(peer) }
                unlink(copy)
            }
        }

        let oursSeconds = BenchSupport.median(ours.map(\.seconds))
        let oursRate = Double(mib) / oursSeconds
        func rate(_ runs: [Peer]) -> Double? { runs.isEmpty ? nil : Double(mib) / BenchSupport.median(runs.map(\.seconds)) }
        func show(_ value: Double?) -> String { value.map { BenchSupport.format($0, 0) + " MiB/s" } ?? "n/a" }
        func cpu(_ values: [Double]) -> String { values.isEmpty ? "n/a" : BenchSupport.format(BenchSupport.median(values), 2) + " s" }
        let fixedCost = BenchSupport.median(fixed.map(\.seconds))
        let steadyRate = Double(mib) / max(0.001, oursSeconds - fixedCost)
        print("share send → share serve (mTLS, protected file written and synced, end marker checked): \(show(oursRate))")
        print("  of which fixed costs (start, vault unlock, handshake; a 1-byte file): \(BenchSupport.format(fixedCost, 2)) s;"
              + " without them \(show(steadyRate))")
        let receiver = ours.compactMap(\.receiverKiB).max(), sender = ours.compactMap(\.senderKiB).max()
        print("  peak RSS: receiver \(receiver.map { "\($0 / 1024) MiB" } ?? "n/a"), sender \(sender.map { "\($0 / 1024) MiB" } ?? "n/a")")
        print("  CPU (user + system): receiver \(cpu(ours.compactMap(\.receiverCPU))), sender \(cpu(ours.compactMap(\.senderCPU)))"
              + "; the 1-byte transfer: receiver \(cpu(fixed.compactMap(\.receiverCPU))), sender \(cpu(fixed.compactMap(\.senderCPU)))")
        let agentRate = Double(mib) / BenchSupport.median(agentRuns.map(\.seconds))
        print("the same, each side's class keys from its unlock agent (no passcode, no scrypt per process): \(show(agentRate))"
              + " (\(BenchSupport.format(agentRate / oursRate, 2))x); a 1-byte file \(BenchSupport.format(BenchSupport.median(agentFixed.map(\.seconds)), 2)) s")
        print("  CPU (user + system): receiver \(cpu(agentRuns.compactMap(\.receiverCPU))), sender \(cpu(agentRuns.compactMap(\.senderCPU)))"
              + "; the 1-byte transfer: receiver \(cpu(agentFixed.compactMap(\.receiverCPU))), sender \(cpu(agentFixed.compactMap(\.senderCPU)))")
        let plainRate = Double(mib) / BenchSupport.median(plain.map(\.seconds))
        print("the same pipeline without the TLS handler (two processes; protected file written and synced, end marker"
              + " checked; no encryption on the wire, no identities): \(show(plainRate))")
        let plainReceiver = plain.compactMap(\.receiverKiB).max(), plainSender = plain.compactMap(\.senderKiB).max()
        print("  peak RSS: receiver \(plainReceiver.map { "\($0 / 1024) MiB" } ?? "n/a"), sender \(plainSender.map { "\($0 / 1024) MiB" } ?? "n/a")")
        print("  CPU (user + system): receiver \(cpu(plain.compactMap(\.receiverCPU))), sender \(cpu(plain.compactMap(\.senderCPU)))")
        let opensslRate = rate(opensslRuns)
        print("openssl s_client → s_server (mTLS, every byte counted by this bench through a pipe): \(show(opensslRate)),"
              + " CPU of both \(cpu(opensslRuns.compactMap(\.cpu)))")
        if socat == nil {
            print("plain TCP: skipped, socat is not installed (apt-get install socat)")
        }
        let nullRate = rate(socatNull), fileRate = rate(socatFile)
        if socat != nil {
            print("plain TCP, socat → /dev/null (the ceiling): \(show(nullRate)), CPU of both \(cpu(socatNull.compactMap(\.cpu)))")
            print("plain TCP, socat → a file (not synced): \(show(fileRate)), CPU of both \(cpu(socatFile.compactMap(\.cpu)))")
        }
        if let opensslRate { print("ratio share / openssl: \(BenchSupport.format(oursRate / opensslRate * 100, 1)) %") }
        if let nullRate {
            let ratio = oursRate / nullRate * 100
            print("ratio share / socat → /dev/null: \(BenchSupport.format(ratio, 1)) % (≥ 50 %: \(ratio >= 50 ? "yes" : "no"));"
                  + " without the fixed costs \(BenchSupport.format(steadyRate / nullRate * 100, 1)) %")
        }
        if let fileRate { print("ratio share / plain TCP to a file: \(BenchSupport.format(oursRate / fileRate * 100, 1)) %") }
        let pipelineRatio = oursRate / plainRate * 100
        print("ratio share / the same pipeline without TLS (what TLS itself costs): \(BenchSupport.format(pipelineRatio, 1)) % (≥ 50 %: \(pipelineRatio >= 50 ? "yes" : "no"))")
        if let nullRate {
            print("ratio the pipeline without TLS / plain TCP ceiling (what the pipeline costs without TLS):"
                  + " \(BenchSupport.format(plainRate / nullRate * 100, 1)) %")
        }
        print("target: at least 50 % of a plain-TCP ceiling, either socat or the same pipeline without TLS; socat moves bytes"
              + " only, while the pipeline encrypts the file into a protected file and syncs it, which no ceiling without that work can match on two cores")
        print("load average after: \(loadAverage())")
    }

    // MARK: the two members

    struct Member {
        let home: String
        let deviceKey: String
        let passcode: String
        var environment: [String: String]
        /// Whether the member's commands take their class keys from its unlock agent (started
        /// and unlocked once, ``startAgent(cli:)``) instead of a passcode (a scrypt per process).
        var viaAgent = false
        var common: [String] { ["--home", home, "--device-key", deviceKey] }
        var unlocked: [String] { viaAgent ? common : common + ["--passcode-file", passcode] }

        /// The member with its own unlock agent, started and unlocked (one scrypt, in the agent).
        func startAgent(cli: String) throws -> Member {
            var member = self
            let run = URL(fileURLWithPath: home).deletingLastPathComponent().path + "/run"
            try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            member.environment["SECUREFOUNDATION_AGENT"] = nil
            member.environment["XDG_RUNTIME_DIR"] = run
            member.viaAgent = true
            for arguments in [["agent", "start"] + common, ["agent", "unlock", "--home", home, "--passcode-file", passcode]] {
                let child = try Child(cli, arguments, environment: member.environment)
                let status = child.wait(timeout: 120)
                guard status == 0 else { throw Failure(description: "`securefoundation \(arguments.prefix(2).joined(separator: " "))` failed (\(status)): \(child.errors)") }
            }
            return member
        }

        /// Stops the member's agent (when it has one).
        func stopAgent(cli: String) {
            guard viaAgent else { return }
            _ = (try? Child(cli, ["agent", "stop", "--home", home], environment: environment))?.wait(timeout: 30)
        }
    }

    static func member(_ name: String, dir: String) throws -> Member {
        let root = dir + "/" + name
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let passcode = root + "/passcode.txt"
        try Data("bench-passcode-\(name)\n".utf8).write(to: URL(fileURLWithPath: passcode))
        return Member(home: root + "/home", deviceKey: root + "/device.key", passcode: passcode,
                      environment: ["XDG_CONFIG_HOME": root + "/config", "SECUREFOUNDATION_AGENT": "off"])
    }

    /// `alpha` creates the group, `bravo` joins it (file-based enrolment).
    static func makeGroup(cli: String, dir: String) throws -> (Member, Member) {
        let alpha = try member("alpha", dir: dir), bravo = try member("bravo", dir: dir)
        let invitation = dir + "/invite.json", request = dir + "/request.json", certificate = dir + "/bravo.pem"
        let steps: [(Member, [String])] = [
            (alpha, ["vault", "init"]),
            (bravo, ["vault", "init"]),
            (alpha, ["share", "init", "--new-group", "--name", "alpha"]),
            (alpha, ["share", "invite", "-o", invitation]),
            (bravo, ["share", "join", invitation, "--name", "bravo", "-o", request]),
            (alpha, ["share", "approve", request, "-o", certificate]),
            (bravo, ["share", "join", "--certificate", certificate]),
        ]
        for (member, arguments) in steps {
            let child = try Child(cli, arguments + member.unlocked, environment: member.environment)
            let status = child.wait(timeout: 120)
            guard status == 0 else {
                throw Failure(description: "`securefoundation \(arguments.prefix(2).joined(separator: " "))` failed (\(status)): \(child.errors)")
            }
        }
        return (alpha, bravo)
    }

    /// One `share serve` (one transfer) and one `share send`; the time is the sender's, from
    /// start to the receiver's reply (the file stored and synced).
    static func share(cli: String, time: String?, from sender: Member, to receiver: Member, file: String, dir: String,
                      expected: UInt64) throws -> Sample {
        let inbox = dir + "/inbox"
        let receiverRSS = dir + "/receiver.rss", senderRSS = dir + "/sender.rss"
        func wrapped(_ arguments: [String], rss: String) -> (String, [String]) {
            if let time { return (time, ["-v", "-o", rss, cli] + arguments) }
            return (cli, arguments)
        }
        let (serveTool, serveArguments) = wrapped(["share", "serve", "--listen", "127.0.0.1:0", "--max-transfers", "1",
                                                   "--inbox", inbox] + receiver.unlocked, rss: receiverRSS)
        let server = try Child(serveTool, serveArguments, environment: receiver.environment)
        defer { server.kill() }
        let port = try server.port(timeout: 60)
        let (sendTool, sendArguments) = wrapped(["share", "send", file, "--to", "127.0.0.1:\(port)", "--timeout", "600"]
                                                + sender.unlocked, rss: senderRSS)
        let start = DispatchTime.now().uptimeNanoseconds
        let client = try Child(sendTool, sendArguments, environment: sender.environment)
        let sentStatus = client.wait(timeout: 1800)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let servedStatus = server.wait(timeout: 120)
        guard sentStatus == 0, servedStatus == 0, server.output.contains("(\(expected) bytes)") else {
            throw Failure(description: "the transfer failed: send \(sentStatus) \(client.errors); serve \(servedStatus) \(server.errors)")
        }
        try? FileManager.default.removeItem(atPath: inbox)
        let receiverKiB = time == nil ? server.peakKiB : maxRSS(receiverRSS)
        let senderKiB = time == nil ? client.peakKiB : maxRSS(senderRSS)
        return Sample(seconds: seconds, receiverKiB: receiverKiB, senderKiB: senderKiB,
                      receiverCPU: cpuSeconds(receiverRSS), senderCPU: cpuSeconds(senderRSS))
    }

    // MARK: the same pipeline without TLS

    /// The hidden arguments that make this executable one end of the plain-TCP pipeline.
    static let plainReceiverMode = "__share-plain-receiver", plainSenderMode = "__share-plain-sender"

    /// One receiver (`share serve` without TLS, one transfer) and one sender, each this executable
    /// run again; timed as ``share(cli:time:from:to:file:dir:expected:)``.
    static func plainPipeline(bench: String, time: String?, file: String, dir: String, expected: UInt64) throws -> Sample {
        let inbox = dir + "/plain-inbox"
        let receiverReport = dir + "/plain-receiver.time", senderReport = dir + "/plain-sender.time"
        let (serveTool, serveArguments) = timed(time, bench, [plainReceiverMode, dir + "/plain-vault", inbox], report: receiverReport)
        let server = try Child(serveTool, serveArguments, environment: [:])
        defer { server.kill() }
        let port = try server.port(timeout: 120)
        let (sendTool, sendArguments) = timed(time, bench, [plainSenderMode, file, String(port)], report: senderReport)
        let start = DispatchTime.now().uptimeNanoseconds
        let client = try Child(sendTool, sendArguments, environment: [:])
        let sentStatus = client.wait(timeout: 1800)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let servedStatus = server.wait(timeout: 120)
        guard sentStatus == 0, servedStatus == 0, server.output.contains("(\(expected) bytes)") else {
            throw Failure(description: "the transfer without TLS failed: sender \(sentStatus) \(client.output) \(client.errors);"
                          + " receiver \(servedStatus) \(server.output) \(server.errors)")
        }
        try? FileManager.default.removeItem(atPath: inbox)
        return Sample(seconds: seconds, receiverKiB: time == nil ? server.peakKiB : maxRSS(receiverReport),
                      senderKiB: time == nil ? client.peakKiB : maxRSS(senderReport),
                      receiverCPU: cpuSeconds(receiverReport), senderCPU: cpuSeconds(senderReport))
    }

    /// Runs this process as one end of the plain-TCP pipeline when `arguments` ask for it; the
    /// exit status, or nil for an ordinary bench run.
    ///
    /// Receiver (`VAULT INBOX`): opens (the first time, creates) a vault, prepares the file classes
    /// and locks it as `share serve` does, prints `listening on 127.0.0.1:PORT`, receives one
    /// file and prints `received NAME (SIZE bytes) …`. Sender (`FILE PORT`): sends the file.
    static func plainEnd(_ arguments: [String]) -> Int32? {
        guard let mode = arguments.first, mode == plainReceiverMode || mode == plainSenderMode, arguments.count == 3 else {
            return nil
        }
        let status = StatusBox()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                if mode == plainReceiverMode {
                    try await plainReceive(vault: arguments[1], inbox: arguments[2])
                } else {
                    let sent = try await ShareClient(withoutTLS: ()).send(arguments[1], to: "127.0.0.1", port: Int(arguments[2]) ?? 0,
                                                                         timeout: .seconds(600))
                    print("sent \(sent.size) bytes, stored as \(sent.storedName)")
                }
                status.set(0)
            } catch {
                FileHandle.standardError.write(Data("\(mode): \(error)\n".utf8))
                status.set(1)
            }
            done.signal()
        }
        done.wait()
        return status.value
    }

    static func plainReceive(vault: String, inbox: String) async throws {
        let passcode = SecretBytes(utf8: "bench-passcode-plain")
        let manager = try CryptoManager(directory: vault, deviceKeyProvider: FileDeviceKeyProvider(path: vault + ".key"),
                                        attemptPolicy: .unlimited)
        if try manager.isSetUp {
            try await manager.unlock(passcode: passcode)
        } else {
            try manager.storeTemporaryPasscode(passcode)
            try manager.finalize()
        }
        let files = ProtectedFiles(manager: manager)
        if manager.isUnlocked { _ = try files.prepareClasses() }
        manager.lock()
        let server = try await ShareServer.bindWithoutTLS(inbox: inbox, files: files)
        // Unbuffered: the bench reads the port while this process runs.
        FileHandle.standardOutput.write(Data("listening on 127.0.0.1:\(server.port)\n".utf8))
        let outcome = StatusBox()
        try await server.run { event in
            switch event {
            case let .received(name, size, _):
                FileHandle.standardOutput.write(Data("received \(name) (\(size) bytes)\n".utf8))
                outcome.set(0)
            case let .refused(peer, error):
                FileHandle.standardError.write(Data("refused \(peer): \(error)\n".utf8))
                outcome.set(1)
            }
            Task { await server.close() }
        }
        guard outcome.value == 0 else { throw Failure(description: "nothing was stored") }
    }

    final class StatusBox: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: Int32 = 1
        func set(_ value: Int32) { lock.lock(); stored = value; lock.unlock() }
        var value: Int32 { lock.lock(); defer { lock.unlock() }; return stored }
    }

    // MARK: peers

    /// A peer's run: seconds, and the CPU seconds of its two processes (with /usr/bin/time).
    struct Peer {
        var seconds: Double
        var cpu: Double?
    }

    /// `tool arguments`, under `/usr/bin/time -v -o report` when there is one.
    static func timed(_ time: String?, _ tool: String, _ arguments: [String], report: String) -> (String, [String]) {
        unlink(report)
        guard let time else { return (tool, arguments) }
        return (time, ["-v", "-o", report, tool] + arguments)
    }

    static func cpuOfBoth(_ first: String, _ second: String) -> Double? {
        guard let a = cpuSeconds(first), let b = cpuSeconds(second) else { return nil }
        return a + b
    }

    /// `openssl s_client -cert … < payload` → `openssl s_server -Verify 1`, whose output this
    /// process reads and counts (the bytes must all arrive: a run that delivers fewer is not
    /// counted): seconds from the client's start until both ended. `s_server` ends a
    /// connection when its own standard input ends, so that stays open; `s_client` must end
    /// at the end of its input (`-no_ign_eof`, which `-quiet` turns off) and must not read
    /// lines of the payload as commands (`-nocommands`).
    static func opensslPair(openssl: String, time: String?, dir: String, payload: String, expected: UInt64) throws -> Peer? {
        guard let port = BenchSupport.freePort() else { return nil }
        let serverReport = dir + "/openssl-server.time", clientReport = dir + "/openssl-client.time"
        let (serverTool, serverArguments) = timed(time, openssl, [
            "s_server", "-accept", "127.0.0.1:\(port)", "-cert", dir + "/server.pem", "-key", dir + "/server.key",
            "-Verify", "1", "-CAfile", dir + "/root.pem", "-naccept", "1", "-quiet"], report: serverReport)
        let server = try Child(serverTool, serverArguments, environment: [:], stdin: nil, holdStdinOpen: true, countOutput: true)
        defer { server.kill() }
        // s_server accepts one connection only: give it time to listen instead of probing.
        usleep(500_000)
        let (clientTool, clientArguments) = timed(time, openssl, [
            "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", dir + "/root.pem", "-cert", dir + "/client.pem",
            "-key", dir + "/client.key", "-quiet", "-no_ign_eof", "-nocommands"], report: clientReport)
        let start = DispatchTime.now().uptimeNanoseconds
        let client = try Child(clientTool, clientArguments, environment: [:], stdin: payload)
        let status = client.wait(timeout: 1800)
        let served = server.wait(timeout: 60)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard status == 0, served == 0, server.counted == expected else {
            print("note: an openssl run is left out (s_client \(status), s_server \(served), \(server.counted) of \(expected) bytes arrived)")
            return nil
        }
        return Peer(seconds: seconds, cpu: cpuOfBoth(serverReport, clientReport))
    }

    /// `socat -u FILE:payload TCP:…` → `socat -u TCP-LISTEN:… sink`: seconds from the client's
    /// start until the receiver ended.
    static func socatPair(socat: String, time: String?, dir: String, payload: String, sink: String) throws -> Peer? {
        guard let port = BenchSupport.freePort() else { return nil }
        let serverReport = dir + "/socat-server.time", clientReport = dir + "/socat-client.time"
        let (serverTool, serverArguments) = timed(time, socat, [
            "-b", "262144", "-u", "TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr", "OPEN:\(sink),creat,trunc,wronly"], report: serverReport)
        let server = try Child(serverTool, serverArguments, environment: [:])
        defer { server.kill() }
        usleep(300_000)
        let (clientTool, clientArguments) = timed(time, socat, [
            "-b", "262144", "-u", "OPEN:\(payload),rdonly", "TCP:127.0.0.1:\(port)"], report: clientReport)
        let start = DispatchTime.now().uptimeNanoseconds
        let client = try Child(clientTool, clientArguments, environment: [:])
        let status = client.wait(timeout: 1800)
        let served = server.wait(timeout: 600)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return status == 0 && served == 0 ? Peer(seconds: seconds, cpu: cpuOfBoth(serverReport, clientReport)) : nil
    }


    // MARK: helpers

    /// `mib` MiB of pseudo-random bytes (incompressible, so no layer can shortcut them).
    static func writePayload(_ path: String, mib: Int) throws {
        guard let random = FileHandle(forReadingAtPath: "/dev/urandom") else { throw Failure(description: "no /dev/urandom") }
        defer { try? random.close() }
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot write \(path)")
        }
        defer { try? handle.close() }
        let seed = random.readData(ofLength: 1 << 20)
        guard seed.count == 1 << 20 else { throw Failure(description: "short read from /dev/urandom") }
        var block = [UInt8](seed)
        for index in 0..<mib {
            // Each MiB differs: the first 8 bytes carry its index.
            for byte in 0..<8 { block[byte] = UInt8(truncatingIfNeeded: index >> (8 * byte)) }
            try handle.write(contentsOf: block)
        }
    }

    static func executable() -> String? {
        if let override = ProcessInfo.processInfo.environment["SECUREFOUNDATION_BIN"] { return override }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("securefoundation").path
        return FileManager.default.isExecutableFile(atPath: beside) ? beside : nil
    }

    static func maxRSS(_ path: String) -> Int? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.contains("Maximum resident set size") {
            return line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        return nil
    }

    /// User + system seconds from a `/usr/bin/time -v` report.
    static func cpuSeconds(_ path: String) -> Double? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var total = 0.0, found = 0
        for line in text.split(separator: "\n") where line.contains("User time (seconds)") || line.contains("System time (seconds)") {
            if let value = line.split(separator: ":").last.flatMap({ Double($0.trimmingCharacters(in: .whitespaces)) }) {
                total += value
                found += 1
            }
        }
        return found == 2 ? total : nil
    }

    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    }



    /// A child process: output collected by a thread, waits bounded in time, and its peak RSS
    /// sampled from /proc while it runs.
    final class Child: @unchecked Sendable {
        let process = Process()
        private let lock = NSLock()
        private var out = ""
        private var err = ""
        private var peak: Int?
        private var readers = 0

        /// Bytes of standard output counted (and discarded) with `countOutput`.
        private var count: UInt64 = 0
        /// The write end of standard input, kept open with `holdStdinOpen`.
        private var heldInput: Pipe?

        /// - Parameters:
        ///   - stdin: a file to read as standard input; nil for /dev/null (or, with
        ///     `holdStdinOpen`, a pipe that stays open until the process ends).
        ///   - countOutput: standard output is counted and discarded, not collected.
        init(_ path: String, _ arguments: [String], environment: [String: String], stdin: String? = nil,
             holdStdinOpen: Bool = false, countOutput: Bool = false) throws {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for (key, value) in environment { env[key] = value }
            process.environment = env
            let outPipe = Pipe(), errPipe = Pipe()
            process.standardOutput = outPipe
            process.standardError = errPipe
            if let stdin {
                guard let handle = FileHandle(forReadingAtPath: stdin) else { throw Failure(description: "cannot read \(stdin)") }
                process.standardInput = handle
            } else if holdStdinOpen {
                let input = Pipe()
                heldInput = input
                process.standardInput = input
            } else {
                process.standardInput = FileHandle.nullDevice
            }
            try process.run()
            readers = 2
            for (pipe, isError) in [(outPipe, false), (errPipe, true)] {
                let handle = pipe.fileHandleForReading
                if countOutput && !isError {
                    let fd = handle.fileDescriptor
                    Thread { [self] in
                        var buffer = [UInt8](repeating: 0, count: 1 << 20)
                        while true {
                            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                            if got < 0 && errno == EINTR { continue }
                            if got <= 0 { break }
                            lock.lock(); count += UInt64(got); lock.unlock()
                        }
                        lock.lock(); readers -= 1; lock.unlock()
                    }.start()
                    continue
                }
                Thread { [self] in
                    while true {
                        let chunk = handle.availableData
                        if chunk.isEmpty { break }
                        let text = String(decoding: chunk, as: UTF8.self)
                        lock.lock()
                        if isError { err += text } else { out += text }
                        lock.unlock()
                    }
                    lock.lock(); readers -= 1; lock.unlock()
                }.start()
            }
            let pid = process.processIdentifier
            Thread { [self] in
                while process.isRunning {
                    if let value = Self.vmHWM(pid) {
                        lock.lock(); peak = max(peak ?? 0, value); lock.unlock()
                    }
                    usleep(50_000)
                }
            }.start()
        }

        var output: String { lock.lock(); defer { lock.unlock() }; return out }
        var errors: String { lock.lock(); defer { lock.unlock() }; return err }
        var peakKiB: Int? { lock.lock(); defer { lock.unlock() }; return peak }
        var counted: UInt64 { lock.lock(); defer { lock.unlock() }; return count }

        /// The port of the "listening on HOST:PORT" line, waiting at most `timeout` seconds.
        func port(timeout: TimeInterval) throws -> Int {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let line = output.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
                   let colon = line.lastIndex(of: ":"),
                   let port = Int(line[line.index(after: colon)...].prefix(while: \.isNumber)) {
                    return port
                }
                if !process.isRunning { break }
                usleep(10_000)
            }
            throw Failure(description: "the server did not start: \(output) \(errors)")
        }

        /// The exit status, killing the process after `timeout` seconds.
        func wait(timeout: TimeInterval) -> Int32 {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline { usleep(5_000) }
            kill()
            process.waitUntilExit()
            try? heldInput?.fileHandleForWriting.close()
            heldInput = nil
            let drained = Date().addingTimeInterval(10)
            while Date() < drained {
                lock.lock(); let open = readers; lock.unlock()
                if open == 0 { break }
                usleep(5_000)
            }
            return process.terminationStatus
        }

        func kill() {
            if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        }

        static func vmHWM(_ pid: Int32) -> Int? {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
            for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
                return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
            }
            return nil
        }
    }
}
