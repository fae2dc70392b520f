import Crypto
import Foundation
import HardwareKeys
import NIOCore
import NIOPosix
import PinnedTLS
import X509

/// `hwkeys`: TLS 1.3 handshakes per second with the server's key in a PKCS #11 token
/// (SoftHSM2) against the same key in memory, in the same run, and the ratio. The key is made
/// in software and imported into the token, so both servers present the same certificate.
/// Needs SoftHSM2 and pkcs11-tool (Debian: softhsm2 opensc). Environment: HW_BENCH_HANDSHAKES
/// (default 300), HW_BENCH_RUNS (default 3, medians).
///
/// Then the same with the server's key made in a software TPM (swtpm, started here on a
/// loopback port with a state directory of its own) against a P-256 key in memory, and where a
/// TPM signature's time goes: starting the tpm2-tools programs (measured with a
/// `tpm2_flushcontext` that has nothing to flush) against the TPM's own work. Needs swtpm and
/// tpm2-tools (Debian: swtpm tpm2-tools). HW_BENCH_TPM_HANDSHAKES (default 60).
enum HardwareKeyBench {
    static let module = "/usr/lib/softhsm/libsofthsm2.so"

    static func run() throws {
        try BenchSupport.runBlocking { try await runAsync() }
    }

    static func runAsync() async throws {
        try await softHSMRows()
        try await tpmRows()
    }

    static func softHSMRows() async throws {
        guard FileManager.default.fileExists(atPath: module), let util = BenchSupport.which("softhsm2-util"),
              let tool = BenchSupport.which("pkcs11-tool") else {
            print("SoftHSM2 or pkcs11-tool not found (Debian: softhsm2 opensc); the hwkeys section needs them")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let handshakes = max(10, Int(environment["HW_BENCH_HANDSHAKES"] ?? "300") ?? 300)
        let runs = max(1, Int(environment["HW_BENCH_RUNS"] ?? "3") ?? 3)
        let dir = FileManager.default.temporaryDirectory.path + "/sf-hw-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/tokens", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Array("directories.tokendir = \(dir)/tokens\nobjectstore.backend = file\nlog.level = ERROR\n".utf8)
            .write(to: dir + "/softhsm2.conf")
        // Read by SoftHSM2 when the module is initialized (once per process: before the first load).
        setenv("SOFTHSM2_CONF", dir + "/softhsm2.conf", 1)

        let key = P256.Signing.PrivateKey()
        try Array(key.pemRepresentation.utf8).write(to: dir + "/key.pem")
        try Array(key.publicKey.derRepresentation).write(to: dir + "/pub.der")
        try Array("1234\n".utf8).write(to: dir + "/pin")
        func check(_ result: (status: Int32, output: String, seconds: Double)?, _ what: String) throws {
            guard let result, result.status == 0 else { throw TLSBench.Failure(description: "\(what) failed: \(result?.output ?? "")") }
        }
        try check(BenchSupport.run(util, ["--init-token", "--free", "--label", "bench", "--so-pin", "0000", "--pin", "1234"]), "softhsm2-util")
        let login = ["--module", module, "--token-label", "bench", "--login", "--pin", "1234"]
        try check(BenchSupport.run(tool, login + ["--write-object", dir + "/key.pem", "--type", "privkey", "--id", "01", "--label", "tls",
                                                  "--sensitive", "--usage-sign"]), "pkcs11-tool (private key)")
        try check(BenchSupport.run(tool, login + ["--write-object", dir + "/pub.der", "--type", "pubkey", "--id", "01", "--label", "tls"]),
                  "pkcs11-tool (public key)")
        unlink(dir + "/key.pem")

        let chain = try chain(for: .init(key.publicKey))

        let tokenKey = try PKCS11PrivateKey(uri: PKCS11URI("pkcs11:token=bench;object=tls"), modulePath: module, pin: .file(dir + "/pin"))
        guard let tokenIdentity = TLSIdentity(chain: chain, tokenKey: tokenKey),
              let softwareIdentity = TLSIdentity(chain: chain, privateKey: .init(key))
        else { throw TLSBench.Failure(description: "the identities do not match their certificate") }

        try await compare(hardware: tokenIdentity, software: softwareIdentity, handshakes: handshakes, runs: runs,
                          setting: "SoftHSM2 \(module); \(ProcessInfo.processInfo.activeProcessorCount) cores",
                          hardwareLabel: "key in SoftHSM2 (PKCS #11)", ratioLabel: "token/memory", ratioDigits: 2)
    }
}

extension HardwareKeyBench {
    /// A root and a leaf for `publicKey`, made here.
    static func chain(for publicKey: Certificate.PublicKey) throws -> [Certificate] {
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("hwkeys bench root") }
        let now = Date()
        let root = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
                                   notValidBefore: now - 3600, notValidAfter: now + 86_400, issuer: rootName, subject: rootName,
                                   signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: try Certificate.Extensions {
                                       Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                                       Critical(KeyUsage(keyCertSign: true))
                                   }, issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(version: .v3, serialNumber: .init(), publicKey: publicKey,
                                   notValidBefore: now - 3600, notValidAfter: now + 86_400, issuer: rootName,
                                   subject: try DistinguishedName { CommonName("localhost") }, signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: try Certificate.Extensions {
                                       Critical(BasicConstraints.notCertificateAuthority)
                                       Critical(KeyUsage(digitalSignature: true))
                                       try ExtendedKeyUsage([.serverAuth])
                                       SubjectAlternativeNames([.dnsName("localhost")])
                                   }, issuerPrivateKey: .init(rootKey))
        return [leaf, root]
    }

    /// The swtpm rows: handshakes/s with the key in swtpm against a software P-256 key, and
    /// the split of a TPM signature's time.
    static func tpmRows() async throws {
        guard let swtpm = BenchSupport.which("swtpm"), BenchSupport.which("tpm2_sign") != nil,
              BenchSupport.which("tpm2_flushcontext") != nil else {
            print("swtpm or tpm2-tools not found (Debian: swtpm tpm2-tools); the TPM rows of hwkeys need them")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let handshakes = max(10, Int(environment["HW_BENCH_TPM_HANDSHAKES"] ?? "60") ?? 60)
        let runs = max(1, Int(environment["HW_BENCH_RUNS"] ?? "3") ?? 3)
        let dir = FileManager.default.temporaryDirectory.path + "/sf-tpm-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = Int.random(in: 20000..<40000) & ~1
        let tcti = "swtpm:host=127.0.0.1,port=\(port)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: swtpm)
        process.arguments = ["socket", "--tpm2", "--tpmstate", "dir=" + dir + "/state",
                             "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                             "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1", "--flags", "not-need-init,startup-clear"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { process.terminate(); kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        func tool(_ name: String, _ arguments: [String]) -> (status: Int32, output: String, seconds: Double)? {
            guard let path = BenchSupport.which(name) else { return nil }
            return BenchSupport.run("/usr/bin/env", ["TPM2TOOLS_TCTI=" + tcti, path] + arguments)
        }
        var ready = false
        for _ in 0..<100 where !ready {
            if let result = tool("tpm2_flushcontext", ["-t"]), result.status == 0 { ready = true } else { usleep(100_000) }
        }
        guard ready else { throw TLSBench.Failure(description: "swtpm did not answer on \(tcti)") }

        // swtpm's socket has no resource manager, where a key is loaded and flushed at every
        // signature; the rows measure the key left loaded, as behind /dev/tpmrm0 (one process
        // uses this TPM here), and print the other way's signature time beside.
        TPM2.keepKeysLoaded(true, tcti: tcti)
        let tpmKey = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tcti), tcti: tcti)
        let otherKey = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tcti), tcti: tcti)
        let software = P256.Signing.PrivateKey()
        let tpmChain = try chain(for: tpmKey.publicKey)
        let softwareChain = try chain(for: .init(software.publicKey))
        guard let tpmIdentity = TLSIdentity(chain: tpmChain, tokenKey: tpmKey),
              let softwareIdentity = TLSIdentity(chain: softwareChain, privateKey: .init(software))
        else { throw TLSBench.Failure(description: "the identities do not match their certificate") }

        // A signature's time in-process: the key left loaded (one TPM command), and two keys
        // taking turns (each signature loads its key's saved context and flushes the other's);
        // beside tpm2-tools' way (a tpm2_sign and a tpm2_flushcontext run per signature).
        let samples = 200
        func seconds(_ count: Int, _ body: (Int) throws -> Void) rethrows -> Double {
            let begin = Date()
            for index in 0..<count { try body(index) }
            return Date().timeIntervalSince(begin) / Double(count) * 1000
        }
        _ = try tpmKey.signature(for: [0], scheme: .ecdsaSHA256)
        let resident = try seconds(samples) { index in _ = try tpmKey.signature(for: Array("sample \(index)".utf8), scheme: .ecdsaSHA256) }
        let alternating = try seconds(samples) { index in
            _ = try (index % 2 == 0 ? tpmKey : otherKey).signature(for: Array("sample \(index)".utf8), scheme: .ecdsaSHA256)
        }
        var toolsSign: Double?
        if let blobs = Optional(otherKey.blobs) {
            try blobs.publicArea.write(to: dir + "/key.pub")
            try blobs.privateArea.write(to: dir + "/key.priv")
            try Array(repeating: 0x61, count: 32).write(to: dir + "/message")
            _ = tool("tpm2_flushcontext", ["-t"])
            if tool("tpm2_createprimary", ["-Q", "-C", "o", "-g", "sha256", "-G", "ecc256", "-c", dir + "/primary.ctx"])?.status == 0,
               tool("tpm2_flushcontext", ["-t"])?.status == 0,
               tool("tpm2_load", ["-Q", "-C", dir + "/primary.ctx", "-u", dir + "/key.pub", "-r", dir + "/key.priv", "-c", dir + "/key.ctx"])?.status == 0 {
                _ = tool("tpm2_flushcontext", ["-t"])
                toolsSign = seconds(20) { _ in
                    _ = tool("tpm2_sign", ["-c", dir + "/key.ctx", "-g", "sha256", "-o", dir + "/signature", dir + "/message"])
                    _ = tool("tpm2_flushcontext", ["-t"])
                }
            }
        }

        try await compare(hardware: tpmIdentity, software: softwareIdentity, handshakes: handshakes, runs: runs,
                          setting: "swtpm \(tcti) (in-process through ESYS, a socket TCTI without resource manager)",
                          hardwareLabel: "key in swtpm (ESYS)", ratioLabel: "TPM/memory", ratioDigits: 3)
        print("  one TPM signature in-process: \(BenchSupport.format(resident, 2)) ms with the key left loaded, "
            + "\(BenchSupport.format(alternating, 2)) ms with two keys taking turns (context load and flush each time, "
            + "as every signature without a resource manager); "
            + "with tpm2-tools (tpm2_sign + tpm2_flushcontext, the way before): "
            + (toolsSign.map { BenchSupport.format($0, 1) + " ms (" + BenchSupport.format($0 / resident, 0) + "×)" } ?? "n/a"))
    }

    /// Handshakes per second (connect, handshake, 1-byte round trip, close) with a server whose
    /// key is in hardware against one whose key is in memory, in alternating runs on loopback;
    /// prints the medians, the CPU per handshake and the ratio. Each server has its own event
    /// loops and its client trusts the root of the server's chain only.
    static func compare(hardware: TLSIdentity, software: TLSIdentity, handshakes: Int, runs: Int, setting: String,
                        hardwareLabel: String, ratioLabel: String, ratioDigits: Int) async throws {
        let hardwareGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let softwareGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let hardwareServer = try await PinnedTLSServer.bind(identity: hardware, eventLoopGroup: hardwareGroup)
        let softwareServer = try await PinnedTLSServer.bind(identity: software, eventLoopGroup: softwareGroup)
        let tasks = [hardwareServer, softwareServer].map { server in
            Task { try await server.run { connection in try await TLSBench.serve(connection.channel, bulk: 1) } }
        }
        func client(_ identity: TLSIdentity, _ group: MultiThreadedEventLoopGroup) throws -> PinnedTLSClient {
            let root = identity.chain[identity.chain.count - 1]
            return try PinnedTLSClient(policy: TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([root]))],
                                                           defaultAnchors: nil), eventLoopGroup: group)
        }
        let hardwareClient = try client(hardware, hardwareGroup), softwareClient = try client(software, softwareGroup)
        func loop(_ client: PinnedTLSClient, _ port: Int) -> @Sendable () async throws -> Void {
            {
                let connection = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost", timeout: .seconds(10))
                try await TLSBench.roundTrip(connection.channel, bytes: 1)
            }
        }
        print("loopback, TLS 1.3, P-256 server key, no client certificates; \(setting); median of \(runs); "
            + "load average before: \(TLSBench.loadAverage())")
        var hardwareRuns: [(rate: Double, cpu: Double)] = [], softwareRuns: [(rate: Double, cpu: Double)] = []
        for _ in 0..<runs {
            hardwareRuns.append(try await TLSBench.rate(handshakes, loop(hardwareClient, hardwareServer.port)))
            softwareRuns.append(try await TLSBench.rate(handshakes, loop(softwareClient, softwareServer.port)))
        }
        func line(_ label: String, _ runs: [(rate: Double, cpu: Double)]) -> String {
            let label = label.padding(toLength: max(label.count, hardwareLabel.count), withPad: " ", startingAt: 0)
            return "  \(label) \(BenchSupport.format(BenchSupport.median(runs.map(\.rate)), 0))/s, "
                + "CPU \(BenchSupport.format(BenchSupport.median(runs.map(\.cpu)) * 1e6, 0)) µs/handshake  "
                + "runs \(runs.map { BenchSupport.format($0.rate, 0) }.joined(separator: ", "))"
        }
        print("handshakes/s (connect, handshake, 1-byte round trip, close), \(handshakes) each:")
        print(line(hardwareLabel, hardwareRuns))
        print(line("key in memory", softwareRuns))
        let ratio = BenchSupport.median(hardwareRuns.map(\.rate)) / BenchSupport.median(softwareRuns.map(\.rate))
        print("  ratio \(ratioLabel): \(BenchSupport.format(ratio, ratioDigits))")
        await hardwareServer.close()
        await softwareServer.close()
        for task in tasks { _ = await task.result }
        try? await hardwareGroup.shutdownGracefully()
        try? await softwareGroup.shutdownGracefully()
    }
}

extension Array where Element == UInt8 {
    fileprivate func write(to path: String) throws {
        try Data(self).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
    }
}
