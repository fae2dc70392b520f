import Foundation
import SecureFoundation

/// `swift run -c release securefoundation-bench [SECTION...]`
///
/// Measures SecureFoundation beside the peer tools (openssl, Python hashlib, GNU shred, age,
/// plain SQLite) in the same run and prints ratios. Sections: see `Bench.sections`.
@main
enum Bench {
    /// Each section: a name and the function that runs it.
    static let sections: [(name: String, run: @Sendable () throws -> Void)] = [
        ("cipher", CipherBench.run),
        ("shred", ShredBench.run),
        ("age", AgeBench.run),
        ("plugin", AgePluginBench.run),
        ("vault", VaultBench.run),
        ("keychain", KeychainBench.run),
        ("protect", ProtectBench.run),
        ("db", DatabaseBench.run),
        ("tls", TLSBench.run),
        ("stacks", StacksBench.run),
        ("hwkeys", HardwareKeyBench.run),
        ("share", ShareBench.run),
        ("backup", BackupBench.run),
    ]

    static func main() {
        let requested = Array(CommandLine.arguments.dropFirst())
        // The share section runs this executable again as the two ends of its plain-TCP pipeline.
        if let status = ShareBench.plainEnd(requested) { exit(status) }
        if requested.contains("-h") || requested.contains("--help") {
            print("usage: securefoundation-bench [\(sections.map(\.name).joined(separator: "|"))]...  (default: all)")
            return
        }
        #if DEBUG
        print("warning: this is a debug build; run `swift run -c release securefoundation-bench` for real figures")
        #endif
        var failed = false
        for section in sections where requested.isEmpty || requested.contains(section.name) {
            print("== \(section.name) ==")
            do { try section.run() } catch {
                print("section \(section.name) failed: \(error)")
                failed = true
            }
            print("")
        }
        exit(failed ? 1 : 0)
    }
}

/// Helpers shared by the benchmark sections.
enum BenchSupport {
    /// The middle value of `values` once sorted (the upper of the two middle ones for an even
    /// count), 0 for none.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// Runs `body` on the cooperative pool and waits for it on this (the main) thread, which a
    /// bench section's synchronous `run()` must do; rethrows its error.
    static func runBlocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        let result = TLSBench.BenchResult()
        let done = DispatchSemaphore(value: 0)
        Task {
            do { try await body() } catch { result.set(error) }
            done.signal()
        }
        done.wait()
        if let error = result.error { throw error }
    }

    /// A TCP port on 127.0.0.1 that is free now (bound, read back, released).
    static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    /// Seconds taken by `body`.
    static func time(_ body: () throws -> Void) rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Runs a command, returning its exit status, stdout and wall time. Nil if it cannot start.
    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil) -> (status: Int32, output: String, seconds: Double)? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        if let stdin { process.standardInput = FileHandle(forReadingAtPath: stdin) }
        let start = DispatchTime.now().uptimeNanoseconds
        do { try process.run() } catch { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return (process.terminationStatus, String(decoding: data, as: UTF8.self), seconds)
    }

    /// The full path of a program on PATH, or nil.
    static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }

    static func format(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A P-256 PKI made by `openssl` in `dir`: root.pem/root.key (a CA), server.pem/server.key
    /// (localhost and 127.0.0.1, serverAuth) and client.pem/client.key (`clientName` as common
    /// name and DNS name, clientAuth), valid for 30 days, with openssl.cnf beside them.
    static func makePKI(openssl: String, dir: String, clientName: String) throws {
        let config = """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = placeholder
            [v3_ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [v3_server]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost, IP:127.0.0.1
            [v3_client]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = clientAuth
            subjectAltName = DNS:\(clientName)

            """
        try config.write(toFile: dir + "/openssl.cnf", atomically: true, encoding: .utf8)
        let script = """
            set -e
            cd '\(dir)'
            o='\(openssl)'
            for k in root server client; do "$o" genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $k.key; done
            "$o" req -x509 -new -key root.key -subj '/CN=Bench Root' -days 30 -config openssl.cnf -extensions v3_ca -out root.pem
            "$o" req -new -key server.key -subj '/CN=localhost' -config openssl.cnf -out server.csr
            "$o" x509 -req -in server.csr -CA root.pem -CAkey root.key -set_serial 2 -days 30 -extfile openssl.cnf -extensions v3_server -out server.pem
            "$o" req -new -key client.key -subj '/CN=\(clientName)' -config openssl.cnf -out client.csr
            "$o" x509 -req -in client.csr -CA root.pem -CAkey root.key -set_serial 3 -days 30 -extfile openssl.cnf -extensions v3_client -out client.pem
            """
        guard run("/bin/sh", ["-c", script])?.status == 0 else {
            throw Failure(description: "openssl could not make the bench certificates")
        }
    }
}
