import Foundation
import SecureFoundation

/// `securefoundation-bench backup`: a backup of a home with a 1 GiB included file (what a closed
/// protected database is to a backup: opaque bytes copied into the age stream) beside `age -r`
/// encrypting the same file, alternating runs, medians. `BACKUP_BENCH_MIB` sets the size,
/// `BACKUP_BENCH_RUNS` the runs (default 5).
enum BackupBench {
    static func run() throws {
        let size = Int(ProcessInfo.processInfo.environment["BACKUP_BENCH_MIB"] ?? "1024") ?? 1024
        let runs = max(1, Int(ProcessInfo.processInfo.environment["BACKUP_BENCH_RUNS"] ?? "5") ?? 5)
        var base = FileManager.default.temporaryDirectory.path
        var fs = statvfs()
        if statvfs("/dev/shm", &fs) == 0, UInt64(fs.f_bavail) * UInt64(fs.f_frsize) > UInt64(size + 64) << 22 { base = "/dev/shm" }
        let dir = base + "/sf-backup-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }

        // A vault with a keychain of 1,000 items and the included file.
        let manager = try CryptoManager(directory: dir + "/home", deviceKeyProvider: StaticDeviceKeyProvider(key: try SecretBytes.random(count: 32)), policy: .minimum)
        try manager.setUp(passcode: SecretBytes(utf8: "bench"))
        let keychain = try Keychain(manager: manager)
        for index in 0..<1000 { try keychain.setPassword("value-\(index)", forService: "bench", account: "a\(index)") }
        try keychain.close()
        let data = dir + "/data.db"
        let block = try SecureRandom.bytes(1 << 20)
        let fd = open(data, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for _ in 0..<size { try block.withUnsafeBytes { try SecureFile.writeAll(fd, $0) } }
        close(fd)
        let identity = X25519Identity.generate()
        let recipient = identity.recipient

        print("home: vault + keychain of 1,000 items; included file \(size) MiB; X25519 recipient; \(ProcessInfo.processInfo.activeProcessorCount) cores; median of \(runs) alternating runs; files in \(base)")
        let age = BenchSupport.which("age")
        var ours: [Double] = [], theirs: [Double] = []
        for _ in 0..<runs {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try Backup.write(manager: manager, recipients: [recipient], toFile: dir + "/backup.age", includePaths: [data])
            ours.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            unlink(dir + "/backup.age")
            if let age, let measured = AgeBench.spawnDirect([age, "-r", recipient.description, "-o", dir + "/age.age", data], stdin: "/dev/null", stdout: "/dev/null") {
                theirs.append(measured.seconds)
                unlink(dir + "/age.age")
            }
        }
        let mine = BenchSupport.median(ours)
        print(String(format: "  backup create (library, in-process): %.2f s, %.0f MiB/s", mine, Double(size) / mine))
        if let age, !theirs.isEmpty {
            let peer = BenchSupport.median(theirs)
            print(String(format: "  age -r (%@): %.2f s, %.0f MiB/s", age, peer, Double(size) / peer))
            print(String(format: "  ratio backup / age: %.2f (time; below 1 is faster)", mine / peer))
        } else {
            print("  age is not installed (apt-get install age): no peer to compare with")
        }
    }
}
