import Foundation
import SecureFoundation

/// `securefoundation-bench shred`: overwrite throughput on a 1 GiB file of random data, beside
/// GNU shred with the same number of passes, on the filesystem of the temporary directory.
enum ShredBench {
    static let size = 1 << 30

    static func run() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/sf-shred-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/data.bin"
        try createRandomFile(path, size: size)
        let gnu = FileManager.default.isExecutableFile(atPath: "/usr/bin/shred") ? "/usr/bin/shred" : BenchSupport.which("shred")
        if gnu == nil { print("GNU shred not found: only SecureFoundation figures are printed") }
        print("file: \(size >> 20) MiB of random data in \(directory)")

        for passes in [1, 3] {
            // Each side runs twice, alternating; the better time is kept (page cache and disk noise).
            var ours = Double.infinity
            var theirs = Double.infinity
            var report: ShredReport?
            for _ in 0..<2 {
                ours = min(ours, try BenchSupport.time {
                    report = try FileShredder.shred(path, options: ShredOptions(passes: passes, remove: false)).first
                })
                if let gnu {
                    guard let result = BenchSupport.run(gnu, ["-n", "\(passes)", path]), result.status == 0 else {
                        print("GNU shred failed")
                        return
                    }
                    theirs = min(theirs, result.seconds)
                }
            }
            let written = Double(size) * Double(passes) / 1e6
            var line = "\(passes) pass\(passes == 1 ? " " : "es"): SecureFoundation \(BenchSupport.format(written / ours, 0)) MB/s"
                + " (\(BenchSupport.format(ours)) s)"
            if gnu != nil {
                line += ", GNU shred -n\(passes) \(BenchSupport.format(written / theirs, 0)) MB/s (\(BenchSupport.format(theirs)) s)"
                    + ", ratio \(BenchSupport.format(theirs / ours))x"
            }
            print(line)
            if let report {
                let warnings = report.warnings.isEmpty ? "no warnings" : report.warnings.map(\.description).joined(separator: "; ")
                print("  report: \(report.filesystem), placement \(report.inPlace), \(warnings)")
            }
        }
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        print("peak resident memory of this process: \(usage.ru_maxrss / 1024) MiB (1 MiB I/O buffer)")
    }

    /// Writes `size` random bytes (SecureRandom, 1 MiB at a time) and syncs them.
    static func createRandomFile(_ path: String, size: Int) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "create", path: path, errno: errno) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var written = 0
        while written < size {
            try buffer.withUnsafeMutableBytes { try SecureRandom.fill($0) }
            try buffer.withUnsafeBytes { try SecureFile.writeAll(fd, $0, path: path) }
            written += buffer.count
        }
        guard fsync(fd) == 0 else { throw SecureFile.Failure.system(operation: "fsync", path: path, errno: errno) }
    }
}
