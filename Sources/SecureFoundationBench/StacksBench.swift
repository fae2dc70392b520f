import Foundation
import Hummingbird
import HummingbirdTLS
import NIOSSL
import PinnedTLS
import PinnedTLSHummingbird

/// `securefoundation-bench stacks`: requests per second over keep-alive HTTPS with mutual TLS,
/// a Hummingbird 2 server with the policy (`HTTPServerBuilder.pinnedTLS`) against the same
/// server with swift-nio-ssl's own verification of the client (HummingbirdTLS, the root as its
/// trust root), both in this process, curl as the client (one connection, `STACKS_BENCH_REQUESTS`
/// requests on it, 2000 by default), alternating, `STACKS_BENCH_RUNS` rounds (5).
enum StacksBench {
    static func run() throws {
        try BenchSupport.runBlocking { try await runAsync() }
    }

    static func runAsync() async throws {
        guard let openssl = BenchSupport.which("openssl"), let curl = BenchSupport.which("curl") else {
            print("openssl and curl are needed for the stacks section")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let requests = max(10, Int(environment["STACKS_BENCH_REQUESTS"] ?? "2000") ?? 2000)
        let runs = max(1, Int(environment["STACKS_BENCH_RUNS"] ?? "5") ?? 5)
        let dir = FileManager.default.temporaryDirectory.path + "/sf-stacks-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try BenchSupport.makePKI(openssl: openssl, dir: dir, clientName: "device-1")
        let root = try PEMFiles.certificates(atPath: dir + "/root.pem")
        let identity = try PEMFiles.identity(certificatePath: dir + "/server.pem", keyPath: dir + "/server.key")

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.get("hello") { _, _ in "hello\n" }
            return router
        }
        // The policy: the root as the only anchor, and a pin on it (and a backup) checked
        // against the validated chain.
        let rootPin = try SPKIPin(certificate: root[0])
        let backup = SPKIPin("sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString())!
        let policyServer = Application(
            router: router(),
            server: try .pinnedTLS(identity: identity, clientAuthentication: ClientAuthentication(
                anchors: .only(root), pins: try PinSet(pins: [backup, rootPin]))),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in Ports.shared.set("policy", channel.localAddress?.port) })
        // swift-nio-ssl's own verification: the same root as its trust root.
        var plain = try identity.serverConfiguration(clientCertificates: true)
        plain.trustRoots = .file(dir + "/root.pem")
        plain.certificateVerification = .noHostnameVerification
        let plainServer = Application(
            router: router(),
            server: try .tls(.http1(), tlsConfiguration: plain),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in Ports.shared.set("plain", channel.localAddress?.port) })

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await policyServer.run() }
            group.addTask { try await plainServer.run() }
            defer { group.cancelAll() }
            var ports: [String: Int] = [:]
            for _ in 0..<600 where ports.count < 2 {
                try await Task.sleep(for: .milliseconds(50))
                ports = Ports.shared.all
            }
            guard let policyPort = ports["policy"], let plainPort = ports["plain"] else {
                throw BenchSupport.Failure(description: "the servers did not start")
            }
            // One curl process, one connection, `requests` GETs on it (curl keeps it alive).
            func measure(_ port: Int) throws -> (rate: Double, cpu: Double) {
                let url = "https://localhost:\(port)/hello"
                let config = dir + "/urls-\(port)"
                try String(repeating: "url = \"\(url)\"\noutput = \"/dev/null\"\n", count: requests)
                    .write(toFile: config, atomically: true, encoding: .utf8)
                let cpuBefore = TLSBench.cpuSeconds()
                guard let result = BenchSupport.run(curl, ["-sS", "--fail", "--cacert", dir + "/root.pem",
                                                           "--cert", dir + "/client.pem", "--key", dir + "/client.key",
                                                           "--resolve", "localhost:\(port):127.0.0.1", "-K", config]),
                      result.status == 0 else {
                    throw BenchSupport.Failure(description: "curl failed against port \(port)")
                }
                let cpu = TLSBench.cpuSeconds() - cpuBefore
                return (Double(requests) / result.seconds, cpu / Double(requests) * 1e6)
            }
            _ = try measure(policyPort)   // warm-up, not counted
            _ = try measure(plainPort)
            var policyRuns: [(rate: Double, cpu: Double)] = []
            var plainRuns: [(rate: Double, cpu: Double)] = []
            for round in 0..<runs {
                // Alternating which goes first, so that neither always meets a warmer machine.
                if round % 2 == 0 {
                    policyRuns.append(try measure(policyPort)); plainRuns.append(try measure(plainPort))
                } else {
                    plainRuns.append(try measure(plainPort)); policyRuns.append(try measure(policyPort))
                }
            }
            let policyRate = BenchSupport.median(policyRuns.map(\.rate)), plainRate = BenchSupport.median(plainRuns.map(\.rate))
            let policyCPU = BenchSupport.median(policyRuns.map(\.cpu)), plainCPU = BenchSupport.median(plainRuns.map(\.cpu))
            func spread(_ values: [Double]) -> String {
                "\(BenchSupport.format(values.min() ?? 0, 0))–\(BenchSupport.format(values.max() ?? 0, 0))"
            }
            print("Hummingbird 2, HTTPS with mutual TLS over one keep-alive connection, curl, \(requests) requests, median of \(runs) (spread)")
            print("  with the policy (pinnedTLS)     \(BenchSupport.format(policyRate, 0)) req/s (\(spread(policyRuns.map(\.rate))))  server CPU \(BenchSupport.format(policyCPU, 1)) µs/req")
            print("  swift-nio-ssl's verification    \(BenchSupport.format(plainRate, 0)) req/s (\(spread(plainRuns.map(\.rate))))  server CPU \(BenchSupport.format(plainCPU, 1)) µs/req")
            print("  policy / plain: \(BenchSupport.format(policyRate / plainRate)) × the requests per second, \(BenchSupport.format(policyCPU / plainCPU)) × the server CPU")
        }
    }

    /// The ports the servers report once they listen.
    final class Ports: @unchecked Sendable {
        static let shared = Ports()
        private let lock = NSLock()
        private var ports: [String: Int] = [:]
        func set(_ name: String, _ port: Int?) { lock.withLock { ports[name] = port } }
        var all: [String: Int] { lock.withLock { ports } }
    }
}
