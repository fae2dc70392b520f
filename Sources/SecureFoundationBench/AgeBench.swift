import AgeCommandLine
import Foundation
import SecureFoundation

/// `securefoundation-bench age [--cores N[,N...]] [--workers N] [--startup-only] [--recipients-only] [--cli PATH]`:
/// encrypt and decrypt a 1 GiB file with `securefoundation` and with `age`, each run as a child
/// process; wall time, throughput and peak RSS (ru_maxrss of the child from wait4), and the
/// ratios; then the start-up cost (a 1 KiB file).
///
/// `--cores` runs both tools on the first N CPUs (`taskset -c 0-(N-1)`), once per count given;
/// `--workers` makes ours run that many chunk workers (`SECUREFOUNDATION_AGE_WORKERS`), for
/// example more workers than cores. `--startup-only` measures the start-up alone (no 1 GiB
/// file). `--cli` names the `securefoundation` binary to measure (for example the statically
/// linked front program `scripts/build-release` builds, .build-static/dist/bin/securefoundation);
/// by default `securefoundation-front` beside this benchmark, else `securefoundation`. The
/// start-up section also times `--version` through it against the full program it hands that
/// to, when there is one: the cost of the hand-off for every command but encrypt and decrypt.
/// `--recipients-only` measures the per-file cost of recipient types alone (``AgeRecipientBench``),
/// which the full section measures last.
enum AgeBench {
    /// The options after the section name.
    struct Options {
        var cores: [Int] = []
        var workers: Int?
        var startupOnly = false
        var recipientsOnly = false
        var cli: String?

        static func parse(_ arguments: [String]) -> Options {
            var options = Options()
            var index = 0
            while index < arguments.count {
                let argument = arguments[index]
                let value = index + 1 < arguments.count ? arguments[index + 1] : ""
                if argument == "--cores" {
                    options.cores = value.split(separator: ",").compactMap { Int($0) }.filter { $0 >= 1 }
                    index += 1
                } else if argument == "--workers" {
                    options.workers = Int(value).flatMap { $0 >= 1 ? $0 : nil }
                    index += 1
                } else if argument == "--startup-only" {
                    options.startupOnly = true
                } else if argument == "--recipients-only" {
                    options.recipientsOnly = true
                } else if argument == "--cli" {
                    options.cli = value
                    index += 1
                }
                index += 1
            }
            return options
        }
    }

    /// The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them.
    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    struct Measure {
        var seconds: Double
        var maxRSSKiB: Int
        var status: Int32
        /// User + system CPU seconds of the child.
        var cpuSeconds: Double = 0
    }

    /// GNU time, when installed, measures the child's own peak RSS. (ru_maxrss from wait4 also
    /// counts the spawning process's RSS at exec, since Linux keeps the high-water mark across exec.)
    static let gnuTime: String? = FileManager.default.isExecutableFile(atPath: "/usr/bin/time") ? "/usr/bin/time" : nil

    /// Runs the command with stdin/stdout redirected to files; wall time and its peak RSS.
    static func spawn(_ command: [String], stdin: String, stdout: String) -> Measure? {
        guard let gnuTime else { return spawnDirect(command, stdin: stdin, stdout: stdout) }
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("sf-age-bench-rss-\(UUID().uuidString)").path
        defer { unlink(report) }
        guard var measure = spawnDirect([gnuTime, "-f", "%M %U %S", "-o", report] + command, stdin: stdin, stdout: stdout) else { return nil }
        if let text = try? String(contentsOfFile: report, encoding: .utf8),
           let fields = text.split(separator: "\n").last?.split(separator: " "), fields.count == 3,
           let kib = Int(fields[0]), let user = Double(fields[1]), let system = Double(fields[2]) {
            measure.maxRSSKiB = kib
            measure.cpuSeconds = user + system
        }
        return measure
    }

    static func spawnDirect(_ arguments: [String], stdin: String, stdout: String) -> Measure? {
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
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return Measure(seconds: seconds, maxRSSKiB: Int(usage.ru_maxrss), status: exitStatus, cpuSeconds: cpu)
    }

    static func run() throws {
        let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
        let size = options.startupOnly || options.recipientsOnly ? 0 : Int(ProcessInfo.processInfo.environment["AGE_BENCH_MIB"] ?? "1024") ?? 1024
        let binaryDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        // The front program (what `scripts/build-release` installs as `securefoundation`; it hands
        // any other command to the full program beside it) when it was built, else the full one.
        let front = binaryDirectory.appendingPathComponent("securefoundation-front").path
        let ours = options.cli ?? (FileManager.default.isExecutableFile(atPath: front) ? front : binaryDirectory.appendingPathComponent("securefoundation").path)
        guard FileManager.default.isExecutableFile(atPath: ours) else {
            print("securefoundation binary not found (\(ours)); run `swift build -c release` or scripts/build-release first, or name it with --cli")
            return
        }
        print("  securefoundation: \(ours), \(linkage(of: ours))")
        let age = BenchSupport.which("age")
        // Files live on tmpfs when there is room, so disk writeback of earlier runs does not
        // throttle whichever tool happens to run next (AGE_BENCH_DIR overrides).
        var base = FileManager.default.temporaryDirectory.path
        var fs = statvfs()
        if statvfs("/dev/shm", &fs) == 0, UInt64(fs.f_bavail) * UInt64(fs.f_frsize) > UInt64(size + 64) << 22 { base = "/dev/shm" }
        if let chosen = ProcessInfo.processInfo.environment["AGE_BENCH_DIR"], !chosen.isEmpty { base = chosen }
        let dir = base + "/sf-age-bench-\(UUID().uuidString)"
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
        let runs = max(1, Int(ProcessInfo.processInfo.environment["AGE_BENCH_RUNS"] ?? "7") ?? 7)
        if options.recipientsOnly {
            try AgeRecipientBench.run(ours: ours, age: age, dir: dir)
            return
        }
        if options.startupOnly {
            guard let age else {
                print("  age is not installed (apt-get install age): no start-up to compare with")
                return
            }
            startup(ours: ours, age: age, recipient: recipient, dir: dir, pin: [])
            return
        }
        print("plaintext: \(size) MiB, X25519 recipient, \(ProcessInfo.processInfo.activeProcessorCount) cores; median of \(runs) alternating runs (and the ratio of the best runs: page-allocation noise only adds time); files in \(base); peak RSS \(gnuTime != nil ? "from GNU time" : "from wait4 (includes this process's RSS at exec)")")
        // Warm the page cache so both tools read the plaintext from memory.
        _ = spawn(["/bin/cat", plain], stdin: "/dev/null", stdout: "/dev/null")
        guard let age else {
            print("  age is not installed (apt-get install age): measuring securefoundation alone")
            for (name, args, input, output) in [("encrypt", [ours, "encrypt", "-r", recipient], plain, dir + "/ours.age"),
                                                ("decrypt", [ours, "decrypt", "-i", dir + "/key.txt"], dir + "/ours.age", "/dev/null")] {
                if let m = spawn(args, stdin: input, stdout: output) {
                    print("  \(name): \(BenchSupport.format(mib / m.seconds, 0)) MiB/s, peak RSS \(BenchSupport.format(Double(m.maxRSSKiB) / 1024, 1)) MiB")
                }
            }
            return
        }
        // Produce the files to decrypt.
        _ = spawn([ours, "encrypt", "-r", recipient], stdin: plain, stdout: dir + "/ours.age")
        _ = spawn([age, "-r", recipient], stdin: plain, stdout: dir + "/age.age")
        let cross1 = spawn([age, "-d", "-i", dir + "/key.txt"], stdin: dir + "/ours.age", stdout: "/dev/null")?.status
        let cross2 = spawn([ours, "decrypt", "-i", dir + "/key.txt"], stdin: dir + "/age.age", stdout: "/dev/null")?.status
        print("  cross-decryption: age reads ours: \(cross1 == 0 ? "ok" : "FAILED"), ours reads age's: \(cross2 == 0 ? "ok" : "FAILED")")

        if let workers = options.workers {
            setenv("SECUREFOUNDATION_AGE_WORKERS", String(workers), 1)
            print("  securefoundation runs \(workers) chunk workers (SECUREFOUNDATION_AGE_WORKERS)")
        }
        let taskset = BenchSupport.which("taskset")
        if !options.cores.isEmpty && taskset == nil { print("  --cores needs taskset (util-linux); running on every core") }
        for cores in (options.cores.isEmpty || taskset == nil) ? [0] : options.cores {
            let pin = cores > 0 ? [taskset!, "-c", "0-\(cores - 1)"] : []
            if cores > 0 { print("  on \(cores) core(s) (taskset -c 0-\(cores - 1)), load average \(loadAverage())") } else {
                print("  on every core, load average \(loadAverage())")
            }
            compare(ours: ours, age: age, recipient: recipient, dir: dir, pin: pin, runs: runs, mib: mib, target: cores == 1 ? 1.0 : 1.5)
            startup(ours: ours, age: age, recipient: recipient, dir: dir, pin: pin)
        }
        // Constant memory: a 4 GiB stream through a pipe (encrypt | decrypt), peak RSS of each side.
        let streamMiB = Int(ProcessInfo.processInfo.environment["AGE_BENCH_STREAM_MIB"] ?? "4096") ?? 4096
        if streamMiB > 0, let gnuTime {
            let encRSS = dir + "/enc.rss", decRSS = dir + "/dec.rss"
            let pipeline = "head -c \(streamMiB)M /dev/zero | \(gnuTime) -f %M -o \(encRSS) \(ours) encrypt -r \(recipient) | \(gnuTime) -f %M -o \(decRSS) \(ours) decrypt -i \(dir)/key.txt | cmp -s - <(head -c \(streamMiB)M /dev/zero)"
            if let m = spawnDirect(["/bin/bash", "-c", pipeline], stdin: "/dev/null", stdout: "/dev/null") {
                let enc = (try? String(contentsOfFile: encRSS, encoding: .utf8))?.split(separator: "\n").last.flatMap { Int($0) } ?? 0
                let dec = (try? String(contentsOfFile: decRSS, encoding: .utf8))?.split(separator: "\n").last.flatMap { Int($0) } ?? 0
                print("  \(streamMiB) MiB stream, encrypt | decrypt through pipes: \(m.status == 0 ? "round trip ok" : "FAILED (status \(m.status))"), \(BenchSupport.format(m.seconds)) s; peak RSS encrypt \(BenchSupport.format(Double(enc) / 1024, 1)) MiB, decrypt \(BenchSupport.format(Double(dec) / 1024, 1)) MiB")
            }
        }
        try AgeRecipientBench.run(ours: ours, age: age, dir: dir)
    }

    /// The six file cases, ours then age's in alternation, `runs` times each; medians and ratios
    /// against `target` (age's throughput times this).
    static func compare(ours: String, age: String, recipient: String, dir: String, pin: [String], runs: Int, mib: Double, target: Double) {
        let plain = dir + "/plain"
        // `-o FILE`: file to file (ours through a temporary file, fsync and rename; age writes
        // the file directly). `> FILE`: the shell's redirection, both tools writing to stdout.
        let out = dir + "/out"
        let key = dir + "/key.txt"
        // `output`: the file removed between runs; `stdout`: where the tools' stdout goes.
        let cases: [(name: String, ours: [String], age: [String], input: [String], output: String, stdout: String)] = [
            ("encrypt -o file", [ours, "encrypt", "-r", recipient, "-o", out, plain], [age, "-r", recipient, "-o", out, plain], ["/dev/null", "/dev/null"], out, "/dev/null"),
            ("encrypt > file", [ours, "encrypt", "-r", recipient], [age, "-r", recipient], [plain, plain], out, out),
            ("encrypt > /dev/null", [ours, "encrypt", "-r", recipient], [age, "-r", recipient], [plain, plain], "/dev/null", "/dev/null"),
            ("decrypt > /dev/null", [ours, "decrypt", "-i", key], [age, "-d", "-i", key], [dir + "/ours.age", dir + "/age.age"], "/dev/null", "/dev/null"),
            ("decrypt > file", [ours, "decrypt", "-i", key], [age, "-d", "-i", key], [dir + "/ours.age", dir + "/age.age"], out, out),
            ("decrypt -o file", [ours, "decrypt", "-i", key, "-o", out, dir + "/ours.age"], [age, "-d", "-i", key, "-o", out, dir + "/age.age"], ["/dev/null", "/dev/null"], out, "/dev/null"),
        ]
        var ratios = [(String, Double)]()
        func spawn(_ command: [String], stdin: String, stdout: String) -> Measure? { AgeBench.spawn(pin + command, stdin: stdin, stdout: stdout) }
        print("  \("case".padding(toLength: 22, withPad: " ", startingAt: 0))  \("securefoundation".padding(toLength: 38, withPad: " ", startingAt: 0)) \("age".padding(toLength: 38, withPad: " ", startingAt: 0)) throughput ratio")
        for c in cases {
            var ourTimes = [Double](), ageTimes = [Double]()
            var ourRSS = 0, ageRSS = 0
            var ourCPU = [Double](), ageCPU = [Double]()
            var failed = false
            for _ in 0..<runs {
                if c.output != "/dev/null" { unlink(c.output) }
                guard let m = spawn(c.ours, stdin: c.input[0], stdout: c.stdout), m.status == 0 else { failed = true; break }
                ourTimes.append(m.seconds); ourRSS = max(ourRSS, m.maxRSSKiB); ourCPU.append(m.cpuSeconds)
                if c.output != "/dev/null" { unlink(c.output) }
                guard let a = spawn(c.age, stdin: c.input[1], stdout: c.stdout), a.status == 0 else { failed = true; break }
                ageTimes.append(a.seconds); ageRSS = max(ageRSS, a.maxRSSKiB); ageCPU.append(a.cpuSeconds)
            }
            if c.output != "/dev/null" { unlink(c.output) }
            guard !failed else {
                print("  \(c.name): a run failed")
                ratios.append((c.name, 0))
                continue
            }
            let ourMedian = ourTimes.sorted()[runs / 2], ageMedian = ageTimes.sorted()[runs / 2]
            let ourBest = ourTimes.min()!, ageBest = ageTimes.min()!
            func cell(_ seconds: Double, _ rss: Int, _ cpu: [Double]) -> String {
                let cpuMedian = cpu.sorted()[cpu.count / 2]
                return "\(BenchSupport.format(mib / seconds, 0)) MiB/s, RSS \(BenchSupport.format(Double(rss) / 1024, 1)) MiB, CPU \(BenchSupport.format(cpuMedian)) s".padding(toLength: 38, withPad: " ", startingAt: 0)
            }
            ratios.append((c.name, ageMedian / ourMedian))
            print("  \(c.name.padding(toLength: 22, withPad: " ", startingAt: 0))  \(cell(ourMedian, ourRSS, ourCPU)) \(cell(ageMedian, ageRSS, ageCPU)) \(BenchSupport.format(ageMedian / ourMedian))x (best runs \(BenchSupport.format(ageBest / ourBest))x)")
        }
        let under = ratios.filter { $0.1 < target }.map(\.0)
        print("  target \(BenchSupport.format(target, 1))x age's throughput: \(ratios.count - under.count) of \(ratios.count) cases met\(under.isEmpty ? "" : " (under or failed: " + under.joined(separator: ", ") + ")")")
    }

    /// How `binary` links the Swift runtime: asks the dynamic loader for its libraries
    /// (`LD_TRACE_LOADED_OBJECTS`, as `ldd` does) and looks for libswiftCore.
    static func linkage(of binary: String) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--version"]
        process.environment = ["LD_TRACE_LOADED_OBJECTS": "1"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "linkage unknown" }
        let libraries = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var info = stat()
        let size = stat(binary, &info) == 0 ? "\(Int(info.st_size) >> 20) MiB," : "size unknown,"
        if libraries.contains("libswiftCore.so") {
            return "\(size) Swift runtime and Foundation dynamically linked (scripts/build-release builds the statically linked CLI)"
        }
        return "\(size) Swift runtime and Foundation statically linked"
    }

    /// Start-up: `encrypt -r RECIPIENT -o FILE` of a 1 KiB file (the output replaced atomically,
    /// with its fsyncs, by ours; written directly by age), then to `-o /dev/null`; ours and
    /// age's in alternation, median wall and CPU time of `AGE_BENCH_STARTUP_RUNS` (51) runs of each.
    static func startup(ours: String, age: String, recipient: String, dir: String, pin: [String]) {
        let small = dir + "/small"
        let fd = open(small, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0, (try? SecureRandom.bytes(1024).withUnsafeBytes({ try SecureFile.writeAll(fd, $0) })) != nil else {
            print("  start-up: cannot write \(small)")
            return
        }
        close(fd)
        let runs = max(1, Int(ProcessInfo.processInfo.environment["AGE_BENCH_STARTUP_RUNS"] ?? "51") ?? 51)
        print("  start-up, encrypt a 1 KiB file in \(dir) (median of \(runs) alternating runs, load average \(loadAverage())):")
        for (label, output) in [("-o FILE", dir + "/small.age"), ("-o /dev/null", "/dev/null")] {
            var ourTimes = [Double](), ageTimes = [Double](), ourCPU = [Double](), ageCPU = [Double]()
            for _ in 0..<runs {
                guard let m = spawnDirect(pin + [ours, "encrypt", "-r", recipient, "-o", output, small], stdin: "/dev/null", stdout: "/dev/null"),
                      let a = spawnDirect(pin + [age, "-r", recipient, "-o", output, small], stdin: "/dev/null", stdout: "/dev/null"),
                      m.status == 0, a.status == 0 else {
                    print("  start-up: a run failed")
                    return
                }
                ourTimes.append(m.seconds); ourCPU.append(m.cpuSeconds)
                ageTimes.append(a.seconds); ageCPU.append(a.cpuSeconds)
            }
            func ms(_ seconds: Double) -> String { BenchSupport.format(seconds * 1000, 1) + " ms" }
            let wall = BenchSupport.median(ourTimes) / BenchSupport.median(ageTimes)
            print("    \(label.padding(toLength: 13, withPad: " ", startingAt: 0)) securefoundation \(ms(BenchSupport.median(ourTimes))) wall, \(ms(BenchSupport.median(ourCPU))) CPU; age \(ms(BenchSupport.median(ageTimes))) wall, \(ms(BenchSupport.median(ageCPU))) CPU; ours/age \(BenchSupport.format(wall))x wall, \(BenchSupport.format(BenchSupport.median(ourCPU) / max(BenchSupport.median(ageCPU), 1e-6)))x CPU (target 1.3x wall: \(wall <= 1.3 ? "met" : "not met"))")
        }
        // The hand-off: `--version` through the front program and in the full program it starts.
        guard let full = fullProgram(beside: ours) else { return }
        var throughFront = [Double](), direct = [Double]()
        for _ in 0..<runs {
            guard let f = spawnDirect(pin + [ours, "--version"], stdin: "/dev/null", stdout: "/dev/null"),
                  let d = spawnDirect(pin + [full, "--version"], stdin: "/dev/null", stdout: "/dev/null"),
                  f.status == 0, d.status == 0 else {
                print("  hand-off: a run failed")
                return
            }
            throughFront.append(f.seconds)
            direct.append(d.seconds)
        }
        print("    --version     through the front program \(BenchSupport.format(BenchSupport.median(throughFront) * 1000, 1)) ms wall, the full program (\(full)) alone \(BenchSupport.format(BenchSupport.median(direct) * 1000, 1)) ms: the hand-off costs \(BenchSupport.format((BenchSupport.median(throughFront) - BenchSupport.median(direct)) * 1000, 1)) ms")
    }

    /// The full program a front program at `path` hands other commands to (the places it looks,
    /// `CLI.fullProgramCandidates(frontPath:)`), or nil when `path` is itself the full one.
    static func fullProgram(beside path: String) -> String? {
        let own = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return CLI.fullProgramCandidates(frontPath: own).first { candidate in
            URL(fileURLWithPath: candidate).resolvingSymlinksInPath().path != own && FileManager.default.isExecutableFile(atPath: candidate)
        }
    }
}
