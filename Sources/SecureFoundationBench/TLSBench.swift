import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PinnedTLS
import X509

/// `securefoundation-bench tls`: over loopback, handshakes per second and bulk throughput with
/// the PinnedTLS policy (own anchors + pins on the client, client certificates required by the
/// server) beside the same exchange with plain swift-nio-ssl default verification (BoringSSL,
/// the same anchors, the same client certificate), in the same run, alternating; the policy
/// twice: with the verified-chain caches (peers seen before, the common case) and without them
/// (every chain validated in full, a peer seen for the first time). Then bulk throughput beside
/// `openssl s_client` → `openssl s_server`. TLS_BENCH_HANDSHAKES (default 300), TLS_BENCH_MIB
/// (default 256), TLS_BENCH_RUNS (default 3, medians); TLS_BENCH_ONLY=policy|cold|plain runs
/// that handshake loop alone (for a profiler), TLS_BENCH_ONLY=verify times the chain evaluations
/// alone. CPU time per handshake is the process's (client and server together).
enum TLSBench {
    static func run() throws {
        try BenchSupport.runBlocking { try await runAsync() }
    }

    final class BenchResult: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: (any Error)?
        func set(_ error: any Error) { lock.lock(); stored = error; lock.unlock() }
        var error: (any Error)? { lock.lock(); defer { lock.unlock() }; return stored }
    }

    typealias Failure = BenchSupport.Failure

    static func runAsync() async throws {
        guard let openssl = BenchSupport.which("openssl") else {
            print("openssl not found; the tls section needs it for certificates")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let handshakes = max(10, Int(environment["TLS_BENCH_HANDSHAKES"] ?? "300") ?? 300)
        let mib = max(1, Int(environment["TLS_BENCH_MIB"] ?? "256") ?? 256)
        let runs = max(1, Int(environment["TLS_BENCH_RUNS"] ?? "3") ?? 3)
        let dir = FileManager.default.temporaryDirectory.path + "/sf-tls-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try BenchSupport.makePKI(openssl: openssl, dir: dir, clientName: "device-1")

        let root = try PEMFiles.certificates(atPath: dir + "/root.pem")
        let serverIdentity = try PEMFiles.identity(certificatePath: dir + "/server.pem", keyPath: dir + "/server.key")
        let clientIdentity = try PEMFiles.identity(certificatePath: dir + "/client.pem", keyPath: dir + "/client.key")
        let rootPin = try SPKIPin(certificate: root[0])
        let backup = SPKIPin("sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString())!
        let pins = try PinSet(pins: [backup, rootPin])

        // Each configuration runs on an event loop group of its own, alike (two loops; the
        // listener takes the first, then each connection's client and server side alternate), so
        // that no configuration pays for accepting on one loop and serving on the other while
        // another does not (with one shared group that depends on the order of the binds).
        let policyGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let coldGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let plainGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let pinnedServer = try await PinnedTLSServer.bind(
            identity: serverIdentity,
            clientAuthentication: ClientAuthentication(anchors: .only(root), pins: pins), eventLoopGroup: policyGroup)
        let pinnedServerTask = Task {
            try await pinnedServer.run { connection in try await serve(connection.channel, bulk: mib << 20) }
        }
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only(root), pins: pins)],
            defaultAnchors: nil)
        let pinnedClient = try PinnedTLSClient(policy: policy, identity: clientIdentity, eventLoopGroup: policyGroup)
        // The same policy with the verified-chain caches off on both sides: every handshake builds
        // and verifies the peer's chain in full (a peer seen for the first time).
        let coldServer = try await PinnedTLSServer.bind(
            identity: serverIdentity,
            clientAuthentication: ClientAuthentication(anchors: .only(root), pins: pins), eventLoopGroup: coldGroup,
            verifiedChainCacheSize: 0)
        let coldServerTask = Task {
            try await coldServer.run { connection in try await serve(connection.channel, bulk: mib << 20) }
        }
        let coldClient = try PinnedTLSClient(policy: policy, identity: clientIdentity, eventLoopGroup: coldGroup,
                                             verifiedChainCacheSize: 0)

        let plain = try await PlainTLS(dir: dir, bulk: mib << 20, group: plainGroup)
        defer { plain.close() }

        let policyLoop: @Sendable () async throws -> Void = {
            let connection = try await pinnedClient.connect(host: "127.0.0.1", port: pinnedServer.port,
                                                            serverName: "localhost", timeout: .seconds(10))
            try await roundTrip(connection.channel, bytes: 1)
        }
        let plainLoop: @Sendable () async throws -> Void = {
            try await roundTrip(try await plain.connect(), bytes: 1)
        }
        let coldLoop: @Sendable () async throws -> Void = {
            let connection = try await coldClient.connect(host: "127.0.0.1", port: coldServer.port,
                                                          serverName: "localhost", timeout: .seconds(10))
            try await roundTrip(connection.channel, bytes: 1)
        }
        // TLS_BENCH_ONLY=verify: what a first-seen chain costs in Swift, without the network:
        // the client's and the server's full evaluation of the other side's chain.
        if environment["TLS_BENCH_ONLY"] == "verify" {
            let serverChain = try PEMFiles.certificates(atPath: dir + "/server.pem")
            let clientChain = try PEMFiles.certificates(atPath: dir + "/client.pem")
            let authentication = ClientAuthentication(anchors: .only(root), pins: pins)
            for _ in 0..<runs {
                let cpuStart = cpuSeconds()
                for _ in 0..<handshakes {
                    _ = try await policy.evaluate(host: "localhost", port: 443, presented: serverChain)
                }
                let serverSide = (cpuSeconds() - cpuStart) / Double(handshakes)
                let cpuMiddle = cpuSeconds()
                for _ in 0..<handshakes {
                    _ = try await authentication.evaluate(peer: "client", presented: clientChain)
                }
                let clientSide = (cpuSeconds() - cpuMiddle) / Double(handshakes)
                print("  full evaluation, CPU per chain: server's chain \(BenchSupport.format(serverSide * 1e6, 0)) µs, client's chain \(BenchSupport.format(clientSide * 1e6, 0)) µs")
            }
            await coldServer.close()
            await pinnedServer.close()
            return
        }
        // TLS_BENCH_ONLY=policy|cold|plain: that handshake loop alone (for a profiler), no bulk.
        if let only = environment["TLS_BENCH_ONLY"] {
            let loops = ["policy": policyLoop, "cold": coldLoop, "plain": plainLoop]
            guard let loop = loops[only] else { throw Failure(description: "TLS_BENCH_ONLY: policy, cold or plain") }
            print("\(only) only, load average before: \(loadAverage())")
            for _ in 0..<runs {
                let measured = try await rate(handshakes, loop)
                print("  \(BenchSupport.format(measured.rate, 0)) handshakes/s, CPU \(BenchSupport.format(measured.cpu * 1e6, 0)) µs per handshake (client and server)")
            }
            await coldServer.close()
            await pinnedServer.close()
            return
        }

        print("loopback, TLS 1.3, P-256 certificates, client certificates required; \(ProcessInfo.processInfo.activeProcessorCount) cores; median of \(runs); load average before: \(loadAverage())")
        var policyRuns: [(rate: Double, cpu: Double)] = [], plainRuns: [(rate: Double, cpu: Double)] = []
        var coldRuns: [(rate: Double, cpu: Double)] = []
        for _ in 0..<runs {
            policyRuns.append(try await rate(handshakes, policyLoop))
            plainRuns.append(try await rate(handshakes, plainLoop))
            coldRuns.append(try await rate(handshakes, coldLoop))
        }
        let policyRate = BenchSupport.median(policyRuns.map(\.rate)), plainRate = BenchSupport.median(plainRuns.map(\.rate))
        let coldRate = BenchSupport.median(coldRuns.map(\.rate))
        let policyCPU = BenchSupport.median(policyRuns.map(\.cpu)), plainCPU = BenchSupport.median(plainRuns.map(\.cpu))
        let coldCPU = BenchSupport.median(coldRuns.map(\.cpu))
        func line(_ label: String, _ rate: Double, _ cpu: Double, _ runs: [(rate: Double, cpu: Double)]) -> String {
            "  \(label) \(BenchSupport.format(rate, 0))/s, CPU \(BenchSupport.format(cpu * 1e6, 0)) µs/handshake  runs \(runs.map { BenchSupport.format($0.rate, 0) }.joined(separator: ", "))"
        }
        print("handshakes/s (connect, handshake, 1-byte round trip, close), \(handshakes) each; CPU: process user + system time per handshake, client and server together:")
        print(line("PinnedTLS policy (anchors + pins + mTLS), peers seen before:", policyRate, policyCPU, policyRuns))
        print(line("PinnedTLS policy, every chain validated in full (no cache): ", coldRate, coldCPU, coldRuns))
        print(line("swift-nio-ssl default verification:                        ", plainRate, plainCPU, plainRuns))
        print("  policy overhead, peers seen before: \(BenchSupport.format((plainRate / policyRate - 1) * 100, 1)) % in handshakes/s, \(BenchSupport.format((policyCPU / plainCPU - 1) * 100, 1)) % in CPU (target < 10 %)")
        print("  policy overhead, full validation:   \(BenchSupport.format((plainRate / coldRate - 1) * 100, 1)) % in handshakes/s, \(BenchSupport.format((coldCPU / plainCPU - 1) * 100, 1)) % in CPU")
        await coldServer.close()
        _ = try? await coldServerTask.value

        let bytes = mib << 20
        var policyBulk: [Double] = [], plainBulk: [Double] = []
        for _ in 0..<runs {
            policyBulk.append(try await throughput(bytes) {
                let connection = try await pinnedClient.connect(host: "127.0.0.1", port: pinnedServer.port,
                                                                serverName: "localhost", timeout: .seconds(10))
                try await roundTrip(connection.channel, bytes: bytes)
            })
            plainBulk.append(try await throughput(bytes) {
                try await roundTrip(try await plain.connect(), bytes: bytes)
            })
        }
        print("bulk, \(mib) MiB client → server:")
        print("  PinnedTLS:                   \(BenchSupport.format(BenchSupport.median(policyBulk), 0)) MiB/s")
        print("  swift-nio-ssl default:       \(BenchSupport.format(BenchSupport.median(plainBulk), 0)) MiB/s")

        // openssl s_client → openssl s_server, and openssl s_client → our server.
        let payload = dir + "/payload"
        _ = FileManager.default.createFile(atPath: payload, contents: nil)
        if let handle = FileHandle(forWritingAtPath: payload) {
            let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            for _ in 0..<mib { handle.write(block) }
            try? handle.close()
        }
        var opensslBulk: [Double] = [], oursFromOpenSSL: [Double] = []
        for _ in 0..<runs {
            if let seconds = try opensslPair(openssl: openssl, dir: dir, payload: payload) {
                opensslBulk.append(Double(mib) / seconds)
            }
            let counter = Counter()
            let sink = try await PinnedTLSServer.bind(identity: serverIdentity)
            let sinkTask = Task {
                try await sink.run { connection in
                    try await connection.channel.executeThenClose { inbound, _ in
                        for try await buffer in inbound { counter.add(buffer.readableBytes) }
                    }
                    await sink.close()
                }
            }
            let start = DispatchTime.now().uptimeNanoseconds
            let client = BenchSupport.run("/bin/sh", ["-c", "'\(openssl)' s_client -connect 127.0.0.1:\(sink.port) -CAfile '\(dir)/root.pem' < '\(payload)' > /dev/null 2>&1"])
            _ = try? await sinkTask.value
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if client?.status == 0, counter.value == bytes { oursFromOpenSSL.append(Double(mib) / seconds) }
        }
        print("bulk, \(mib) MiB, with openssl (process start and handshake included):")
        print("  openssl s_client → openssl s_server: \(opensslBulk.isEmpty ? "n/a" : BenchSupport.format(BenchSupport.median(opensslBulk), 0) + " MiB/s")")
        print("  openssl s_client → PinnedTLSServer:  \(oursFromOpenSSL.isEmpty ? "n/a" : BenchSupport.format(BenchSupport.median(oursFromOpenSSL), 0) + " MiB/s")")

        await pinnedServer.close()
        _ = try? await pinnedServerTask.value
        print("load average after: \(loadAverage())")
    }

    /// /proc/loadavg's first three fields, or "n/a".
    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "n/a" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var total = 0
        func add(_ count: Int) { lock.lock(); total += count; lock.unlock() }
        var value: Int { lock.lock(); defer { lock.unlock() }; return total }
    }


    /// Handshakes per second over `count` runs of `body`, and the process's CPU time (user and
    /// system, every thread: client and server) per run.
    static func rate(_ count: Int, _ body: () async throws -> Void) async throws -> (rate: Double, cpu: Double) {
        let cpuStart = cpuSeconds()
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<count { try await body() }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return (Double(count) / seconds, (cpuSeconds() - cpuStart) / Double(count))
    }

    /// User + system CPU time of this process so far.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        let who = __rusage_who_t(RUSAGE_SELF.rawValue)
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static func throughput(_ bytes: Int, _ body: () async throws -> Void) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(bytes >> 20) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }

    /// Client side: sends `bytes` bytes, waits for the server's one-byte answer.
    static func roundTrip(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, bytes: Int) async throws {
        try await channel.executeThenClose { inbound, outbound in
            let chunk = ByteBuffer(repeating: 0x61, count: min(bytes, 64 * 1024))
            var sent = 0
            while sent < bytes {
                let size = min(chunk.readableBytes, bytes - sent)
                try await outbound.write(chunk.getSlice(at: 0, length: size) ?? chunk)
                sent += size
            }
            var iterator = inbound.makeAsyncIterator()
            guard try await iterator.next() != nil else { throw Failure(description: "no answer") }
        }
    }

    /// Server side: answers one byte once the client sent one byte (a handshake round trip) or
    /// the whole bulk size.
    static func serve(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, bulk: Int) async throws {
        try await channel.executeThenClose { inbound, outbound in
            var received = 0
            for try await buffer in inbound {
                received += buffer.readableBytes
                if received == 1 || received >= bulk {
                    try await outbound.write(ByteBuffer(string: "y"))
                    return
                }
            }
        }
    }


    /// Seconds for `openssl s_client < payload` → `openssl s_server > /dev/null`.
    static func opensslPair(openssl: String, dir: String, payload: String) throws -> Double? {
        guard let port = BenchSupport.freePort() else { return nil }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: openssl)
        server.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", dir + "/server.pem",
                            "-key", dir + "/server.key", "-naccept", "1", "-quiet"]
        server.standardInput = Pipe()
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { server.terminate() }; server.waitUntilExit() }
        // s_server accepts one connection only: give it time to listen instead of probing.
        usleep(500_000)
        let result = BenchSupport.run("/bin/sh", ["-c", "'\(openssl)' s_client -connect 127.0.0.1:\(port) -CAfile '\(dir)/root.pem' < '\(payload)' > /dev/null 2>&1"])
        guard result?.status == 0 else { return nil }
        return result?.seconds
    }

}

/// The same exchange with plain swift-nio-ssl: BoringSSL's default verification against the
/// same root, hostname checked, client certificate required. No policy.
final class PlainTLS: Sendable {
    let serverChannel: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    let serverTask: Task<Void, any Error>
    let clientContext: NIOSSLContext
    let port: Int
    let group: MultiThreadedEventLoopGroup

    init(dir: String, bulk: Int, group: MultiThreadedEventLoopGroup) async throws {
        self.group = group
        let root = try NIOSSLCertificate.fromPEMFile(dir + "/root.pem")
        var server = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(dir + "/server.pem").map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: dir + "/server.key", format: .pem)))
        server.minimumTLSVersion = .tlsv12
        server.certificateVerification = .noHostnameVerification
        server.trustRoots = .certificates(root)
        let serverContext = try NIOSSLContext(configuration: server)
        var client = TLSConfiguration.makeClientConfiguration()
        client.minimumTLSVersion = .tlsv12
        client.certificateVerification = .fullVerification
        client.trustRoots = .certificates(root)
        client.certificateChain = try NIOSSLCertificate.fromPEMFile(dir + "/client.pem").map { .certificate($0) }
        client.privateKey = .privateKey(try NIOSSLPrivateKey(file: dir + "/client.key", format: .pem))
        clientContext = try NIOSSLContext(configuration: client)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: serverContext))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        serverChannel = channel
        port = channel.channel.localAddress?.port ?? 0
        serverTask = Task {
            try await channel.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        group.addTask { try? await TLSBench.serve(connection, bulk: bulk) }
                    }
                }
            }
        }
    }

    func connect() async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        let context = clientContext
        return try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
    }

    func close() {
        serverChannel.channel.close(promise: nil)
    }
}
