import Foundation
import SecureFoundation

/// `securefoundation-bench age`: encrypt and decrypt a 1 GiB file with `securefoundation` and
/// with `age`, each run as a child process; wall time, throughput and peak RSS (ru_maxrss of
/// the child from wait4), and the ratios.
enum AgeBench {
    struct Measure {
        var seconds: Double
        var maxRSSKiB: Int
        var status: Int32
    }

    /// Runs `arguments[0]` with stdin/stdout redirected to files; wall time and the child's peak RSS.
    static func spawn(_ arguments: [String], stdin: String, stdout: String) -> Measure? {
        var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let start = DispatchTime.now().uptimeNanoseconds
        guard posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ) == 0 else { return nil }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Measure(seconds: seconds, maxRSSKiB: Int(usage.ru_maxrss), status: exitStatus)
    }

    static func run() throws {
        let size = Int(ProcessInfo.processInfo.environment["AGE_BENCH_MIB"] ?? "1024") ?? 1024
        let binaryDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let ours = binaryDirectory.appendingPathComponent("securefoundation").path
        guard FileManager.default.isExecutableFile(atPath: ours) else {
            print("securefoundation binary not found next to the bench binary (\(ours)); run `swift build -c release` first")
            return
        }
        let age = BenchSupport.which("age")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sf-age-bench-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }

        // Plaintext: 1 MiB of random bytes repeated (the cipher does not care about content).
        let plain = dir + "/plain"
        let block = try SecureRandom.bytes(1 << 20)
        let fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for _ in 0..<size { try block.withUnsafeBytes { try SecureFile.writeAll(fd, $0) } }
        close(fd)

        let identity = X25519Identity.generate()
        let recipient = identity.recipient.description
        try SecureFile.replaceAtomically(dir + "/key.txt") { fd in
            try identity.encoded.withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
            try [UInt8]([0x0A]).withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
        }
        let mib = Double(size)
        print("plaintext: \(size) MiB, recipient X25519; encrypt writes to a file, decrypt writes to /dev/null; \(ProcessInfo.processInfo.activeProcessorCount) cores")
        func report(_ name: String, _ m: Measure?) -> Measure? {
            guard let m else { print("  \(name): could not start"); return nil }
            if m.status != 0 { print("  \(name): exit status \(m.status)"); return nil }
            print("  \(name.padding(toLength: 28, withPad: " ", startingAt: 0)) \(BenchSupport.format(m.seconds)) s  \(BenchSupport.format(mib / m.seconds, 0)) MiB/s  peak RSS \(BenchSupport.format(Double(m.maxRSSKiB) / 1024, 1)) MiB")
            return m
        }
        // Warm the page cache so both tools read the plaintext from memory.
        _ = spawn(["/bin/cat", plain], stdin: "/dev/null", stdout: "/dev/null")

        let ourEncrypt = report("securefoundation encrypt", spawn([ours, "encrypt", "-r", recipient], stdin: plain, stdout: dir + "/ours.age"))
        let ourDecrypt = report("securefoundation decrypt", spawn([ours, "decrypt", "-i", dir + "/key.txt"], stdin: dir + "/ours.age", stdout: "/dev/null"))
        guard let age else {
            print("  age is not installed (apt-get install age): no comparison")
            return
        }
        let ageEncrypt = report("age encrypt", spawn([age, "-r", recipient], stdin: plain, stdout: dir + "/age.age"))
        let ageDecrypt = report("age -d", spawn([age, "-d", "-i", dir + "/key.txt"], stdin: dir + "/age.age", stdout: "/dev/null"))
        // Cross-check: each tool reads the other's file.
        let cross1 = spawn([age, "-d", "-i", dir + "/key.txt"], stdin: dir + "/ours.age", stdout: "/dev/null")?.status
        let cross2 = spawn([ours, "decrypt", "-i", dir + "/key.txt"], stdin: dir + "/age.age", stdout: "/dev/null")?.status
        print("  cross-decryption: age reads ours: \(cross1 == 0 ? "ok" : "FAILED"), ours reads age's: \(cross2 == 0 ? "ok" : "FAILED")")
        if let a = ourEncrypt, let b = ageEncrypt {
            print("  encrypt throughput ratio (securefoundation / age): \(BenchSupport.format(b.seconds / a.seconds))x; RSS \(a.maxRSSKiB / 1024) MiB vs \(b.maxRSSKiB / 1024) MiB")
        }
        if let a = ourDecrypt, let b = ageDecrypt {
            print("  decrypt throughput ratio (securefoundation / age): \(BenchSupport.format(b.seconds / a.seconds))x; RSS \(a.maxRSSKiB / 1024) MiB vs \(b.maxRSSKiB / 1024) MiB")
        }
    }
}
