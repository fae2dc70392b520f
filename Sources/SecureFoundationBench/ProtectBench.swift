import Foundation
import SecureFoundation

/// `securefoundation-bench protect`: a protected file of 1 GiB (class `none`, so no unlock is
/// timed) written and read with `securefoundation protect`, beside `securefoundation encrypt` /
/// `decrypt` and `age` with an X25519 recipient, each run as a child process in the same run;
/// then a class change of the 1 GiB file beside one sequential copy (`cp`), a copy renamed over
/// a file of the same size (`cp` + `mv`, which also frees the replaced file, as every atomic
/// replacement does) and the class change of a small file (the fixed cost). Throughput, CPU
/// time, peak RSS and ratios (of the medians, and per run: protect and ours run back to back).
/// PROTECT_BENCH_MIB (default 1024) and PROTECT_BENCH_RUNS (default 3).
enum ProtectBench {
    static func run() throws {
        let size = Int(ProcessInfo.processInfo.environment["PROTECT_BENCH_MIB"] ?? "1024") ?? 1024
        let runs = max(1, Int(ProcessInfo.processInfo.environment["PROTECT_BENCH_RUNS"] ?? "3") ?? 3)
        let binaryDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let ours = binaryDirectory.appendingPathComponent("securefoundation").path
        guard FileManager.default.isExecutableFile(atPath: ours) else {
            print("securefoundation binary not found next to the bench binary (\(ours)); run `swift build -c release` first")
            return
        }
        var base = FileManager.default.temporaryDirectory.path
        var fs = statvfs()
        if statvfs("/dev/shm", &fs) == 0, UInt64(fs.f_bavail) * UInt64(fs.f_frsize) > UInt64(size + 64) << 22 { base = "/dev/shm" }
        if let chosen = ProcessInfo.processInfo.environment["AGE_BENCH_DIR"], !chosen.isEmpty { base = chosen }
        let dir = base + "/sf-protect-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let home = dir + "/home", deviceKey = dir + "/device.key"
        let vaultFlags = ["--home", home, "--device-key", deviceKey]

        let plain = dir + "/plain"
        let block = try SecureRandom.bytes(1 << 20)
        let fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for _ in 0..<size { try block.withUnsafeBytes { try SecureFile.writeAll(fd, $0) } }
        close(fd)
        try SecureFile.writeAtomically(Array("bench passcode 2468".utf8), to: dir + "/pin")
        guard AgeBench.spawnDirect([ours, "vault", "init", "--passcode-file", dir + "/pin"] + vaultFlags, stdin: "/dev/null", stdout: "/dev/null")?.status == 0,
              AgeBench.spawnDirect([ours, "protect", "status", dir + "/pin", "--passcode-file", dir + "/pin"] + vaultFlags, stdin: "/dev/null", stdout: "/dev/null")?.status == 0 else {
            print("  could not set up a vault in \(home)")
            return
        }
        let identity = X25519Identity.generate()
        let recipient = identity.recipient.description
        try SecureFile.replaceAtomically(dir + "/key.txt") { fd in
            try identity.encoded.withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
            try [UInt8]([0x0A]).withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
        }
        let key = dir + "/key.txt"
        let age = BenchSupport.which("age")
        let mib = Double(size)
        print("plaintext: \(size) MiB, class none vs X25519 recipient, \(ProcessInfo.processInfo.activeProcessorCount) cores; median of \(runs) alternating runs; files in \(base)")
        _ = AgeBench.spawn(["/bin/cat", plain], stdin: "/dev/null", stdout: "/dev/null")

        // Files to read.
        let protected = dir + "/protected", encrypted = dir + "/encrypted.age"
        _ = AgeBench.spawn([ours, "protect", "write", "--class", "none", "-o", protected, plain] + vaultFlags, stdin: "/dev/null", stdout: "/dev/null")
        _ = AgeBench.spawn([ours, "encrypt", "-r", recipient, "-o", encrypted, plain], stdin: "/dev/null", stdout: "/dev/null")
        let out = dir + "/out"
        typealias Case = (name: String, tools: [(String, [String], String)], output: String)
        var cases: [Case] = [
            ("write -o file", [("protect", [ours, "protect", "write", "--class", "none", "-o", out, plain] + vaultFlags, "/dev/null"),
                               ("encrypt", [ours, "encrypt", "-r", recipient, "-o", out, plain], "/dev/null")], out),
            ("read > /dev/null", [("protect", [ours, "protect", "read", protected] + vaultFlags, "/dev/null"),
                                  ("decrypt", [ours, "decrypt", "-i", key, encrypted], "/dev/null")], "/dev/null"),
        ]
        if let age {
            cases[0].tools.append(("age", [age, "-r", recipient, "-o", out, plain], "/dev/null"))
            cases[1].tools.append(("age", [age, "-d", "-i", key, encrypted], "/dev/null"))
        } else {
            print("  age is not installed (apt-get install age): comparing with securefoundation encrypt/decrypt only")
        }
        for c in cases {
            var times = Array(repeating: [Double](), count: c.tools.count)
            var cpu = Array(repeating: [Double](), count: c.tools.count)
            var rss = Array(repeating: 0, count: c.tools.count)
            var failed = false
            for _ in 0..<runs {
                for (index, tool) in c.tools.enumerated() {
                    if c.output != "/dev/null" { unlink(c.output) }
                    guard let m = AgeBench.spawn(tool.1, stdin: "/dev/null", stdout: tool.2), m.status == 0 else { failed = true; break }
                    times[index].append(m.seconds)
                    cpu[index].append(m.cpuSeconds)
                    rss[index] = max(rss[index], m.maxRSSKiB)
                }
                if failed { break }
            }
            if c.output != "/dev/null" { unlink(c.output) }
            guard !failed else { print("  \(c.name): a run failed"); continue }
            let medians = times.map(BenchSupport.median)
            let cells = c.tools.indices.map {
                "\(c.tools[$0].0) \(BenchSupport.format(mib / medians[$0], 0)) MiB/s, CPU \(BenchSupport.format(BenchSupport.median(cpu[$0]))) s (RSS \(BenchSupport.format(Double(rss[$0]) / 1024, 1)) MiB)"
            }
            let ratio = medians[1] / medians[0]
            // Each run's protect and ours ran back to back: the ratio within a run is less
            // exposed to the load of a shared machine drifting between runs.
            let paired = zip(times[1], times[0]).map { $0 / $1 }.sorted()
            let cpuRatio = BenchSupport.median(cpu[0]) / BenchSupport.median(cpu[1])
            print("  \(c.name.padding(toLength: 18, withPad: " ", startingAt: 0)) \(cells.joined(separator: ", "))")
            print("  \("".padding(toLength: 18, withPad: " ", startingAt: 0)) protect/ours throughput: medians \(BenchSupport.format(ratio))x, per run \(paired.map { BenchSupport.format($0) }.joined(separator: " ")) (median \(BenchSupport.format(BenchSupport.median(paired)))x), CPU time protect/ours \(BenchSupport.format(cpuRatio))x (target ≥ 0.95x: \(BenchSupport.median(paired) >= 0.95 ? "met" : "not met"))")
        }

        // A class change of the 1 GiB file (header rewritten, payload copied) beside `cp`.
        let upgradeDir = dir + "/upgrade"
        try FileManager.default.createDirectory(atPath: upgradeDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = upgradeDir + "/file"
        guard link(protected, target) == 0 || (try? FileManager.default.copyItem(atPath: protected, toPath: target)) != nil else {
            print("  class change: could not prepare the file")
            return
        }
        // The fixed cost (process start, vault and key table) from the class change of a small file.
        let smallDir = dir + "/small"
        try FileManager.default.createDirectory(atPath: smallDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = AgeBench.spawn([ours, "protect", "write", "--class", "none", "-o", smallDir + "/file", dir + "/pin"] + vaultFlags, stdin: "/dev/null", stdout: "/dev/null")
        var changeTimes = [Double](), changeCPU = [Double](), copyTimes = [Double](), replaceTimes = [Double](), fixedTimes = [Double]()
        var changeRSS = 0
        var classes = ["none", "noneThisDeviceOnly"]
        for _ in 0..<runs {
            guard let m = AgeBench.spawn([ours, "protect", "upgrade", "--from", classes[0], "--to", classes[1], upgradeDir] + vaultFlags,
                                         stdin: "/dev/null", stdout: "/dev/null"), m.status == 0 else {
                print("  class change: a run failed")
                return
            }
            changeTimes.append(m.seconds)
            changeCPU.append(m.cpuSeconds)
            changeRSS = max(changeRSS, m.maxRSSKiB)
            if let f = AgeBench.spawn([ours, "protect", "upgrade", "--from", classes[0], "--to", classes[1], smallDir] + vaultFlags,
                                      stdin: "/dev/null", stdout: "/dev/null"), f.status == 0 { fixedTimes.append(f.seconds) }
            classes.reverse()
            unlink(dir + "/copy")
            if let c = AgeBench.spawn(["/bin/cp", target, dir + "/copy"], stdin: "/dev/null", stdout: "/dev/null") { copyTimes.append(c.seconds) }
            unlink(dir + "/copy")
            // What any atomic replacement of the file costs: a copy, renamed over a file of the
            // same size, whose blocks are then freed.
            _ = AgeBench.spawn(["/bin/cp", target, dir + "/victim"], stdin: "/dev/null", stdout: "/dev/null")
            if let r = AgeBench.spawn(["/bin/sh", "-c", "cp '\(target)' '\(dir)/new' && mv '\(dir)/new' '\(dir)/victim'"], stdin: "/dev/null", stdout: "/dev/null") {
                replaceTimes.append(r.seconds)
            }
            for name in ["new", "victim"] { unlink(dir + "/" + name) }
        }
        let change = BenchSupport.median(changeTimes)
        let copy = BenchSupport.median(copyTimes)
        let replace = BenchSupport.median(replaceTimes)
        let fixed = BenchSupport.median(fixedTimes)
        print("  class change of \(size) MiB: \(BenchSupport.format(change)) s, CPU \(BenchSupport.format(BenchSupport.median(changeCPU))) s (RSS \(BenchSupport.format(Double(changeRSS) / 1024, 1)) MiB); of a small file (fixed cost): \(BenchSupport.format(fixed)) s")
        print("  cp: \(BenchSupport.format(copy)) s; cp + mv over a file (copy and free of the replaced one): \(BenchSupport.format(replace)) s")
        print("  ratio \(BenchSupport.format(copy > 0 ? change / copy : 0))x a sequential copy, \(BenchSupport.format(replace > 0 ? change / replace : 0))x a copy that replaces a file (the change also fsyncs the copy and the directory)")
    }

}
