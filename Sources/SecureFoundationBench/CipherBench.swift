import Foundation
import SecureFoundation

/// Sealing throughput beside `openssl speed -evp aes-256-gcm`, and KDF time beside Python's
/// hashlib (OpenSSL) for the same parameters.
enum CipherBench {
    static func run() throws {
        try sealing()
        print("")
        try kdfs()
    }

    static func sealing() throws {
        let key = try SealingKey.generate()
        let openssl = BenchSupport.which("openssl")
        if openssl == nil { print("openssl not found: printing our figures only") }
        print("size      ours MB/s (seal)   ours MB/s (open)   openssl MB/s   seal/openssl")
        for size in [64, 1024, 65536, 1 << 20] {
            let plaintext = try SecureRandom.bytes(size)
            // About 128 MiB per measurement, and at most 2,000,000 calls (small sizes measure the
            // fixed cost per call).
            let iterations = max(64, min(2_000_000, (1 << 29) / size / 4))
            var sealed: [UInt8] = []
            _ = try Sealed.seal(plaintext, with: key) // warm up
            let sealSeconds = try best(of: 3) {
                for _ in 0..<iterations { sealed = try Sealed.seal(plaintext, with: key) }
            }
            let openSeconds = try best(of: 3) {
                for _ in 0..<iterations { _ = try Sealed.open(sealed, with: key) }
            }
            let sealRate = Double(size * iterations) / sealSeconds / 1e6
            let openRate = Double(size * iterations) / openSeconds / 1e6
            var reference = "-"
            var ratio = "-"
            if let openssl, let rate = opensslRate(openssl, size: size) {
                reference = BenchSupport.format(rate, 0)
                ratio = BenchSupport.format(sealRate / rate * 100, 0) + " %"
            }
            print(pad(size < 1024 ? "\(size) B" : "\(size / 1024) KiB", 10) + pad(BenchSupport.format(sealRate, 0), 19)
                  + pad(BenchSupport.format(openRate, 0), 19) + pad(reference, 15) + ratio)
        }
        print("(AES-256-GCM, one core; ours includes the envelope header, a fresh nonce and copies)")
    }

    /// openssl's single-core AES-256-GCM rate for `size`-byte buffers, in MB/s.
    static func opensslRate(_ openssl: String, size: Int) -> Double? {
        guard let result = BenchSupport.run(openssl, ["speed", "-evp", "aes-256-gcm", "-bytes", "\(size)", "-seconds", "2"]),
              result.status == 0,
              let line = result.output.split(separator: "\n").last(where: { $0.hasPrefix("AES-256-GCM") || $0.hasPrefix("aes-256-gcm") }),
              let field = line.split(separator: " ").last, field.hasSuffix("k"),
              let thousands = Double(field.dropLast()) else { return nil }
        return thousands * 1000 / 1e6
    }

    static func kdfs() throws {
        let python = BenchSupport.which("python3")
        if python == nil { print("python3 not found: printing our figures only") }
        print("KDF                                    ours s    hashlib s   ours/hashlib")
        let cases: [KDFParameters] = [KDFPolicy.interactive.parameters, KDFPolicy.sensitive.parameters,
                                      KDFPolicy.fipsInteractive.parameters, KDFPolicy.fipsSensitive.parameters]
        let password = SecretBytes(utf8: "correct horse battery staple")
        let salt = Array("0123456789abcdef".utf8)
        for parameters in cases {
            let ours = try best(of: 3) {
                _ = try KeyDerivation.derive(password: password, salt: salt, parameters: parameters)
            }
            var theirs = "-"
            var ratio = "-"
            if let python, let seconds = hashlibSeconds(python, parameters) {
                theirs = BenchSupport.format(seconds, 3)
                ratio = BenchSupport.format(ours / seconds, 2)
            }
            print(pad(parameters.summary, 39) + pad(BenchSupport.format(ours, 3), 10) + pad(theirs, 12) + ratio)
        }
    }

    /// Best of three runs of hashlib's KDF with the same parameters, timed inside Python.
    static func hashlibSeconds(_ python: String, _ parameters: KDFParameters) -> Double? {
        let call: String
        switch parameters {
        case let .scrypt(logN, r, p):
            call = "hashlib.scrypt(b'correct horse battery staple', salt=b'0123456789abcdef', n=1<<\(logN), r=\(r), p=\(p), maxmem=2**31-1, dklen=32)"
        case let .pbkdf2SHA256(rounds):
            call = "hashlib.pbkdf2_hmac('sha256', b'correct horse battery staple', b'0123456789abcdef', \(rounds))"
        }
        let script = "import hashlib,time\nb=1e9\nfor _ in range(3):\n t=time.perf_counter(); \(call); b=min(b,time.perf_counter()-t)\nprint(b)"
        guard let result = BenchSupport.run(python, ["-c", script]), result.status == 0 else { return nil }
        return Double(result.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func best(of runs: Int, _ body: () throws -> Void) throws -> Double {
        var best = Double.infinity
        for _ in 0..<runs { best = min(best, try BenchSupport.time(body)) }
        return best
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
