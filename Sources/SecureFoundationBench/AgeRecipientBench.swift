import Foundation
import SecureFoundation

/// The per-file cost of recipient types (`securefoundation-bench age --recipients-only`, also
/// run at the end of the full age section): a 1 KiB file encrypted to 1 and to 20 recipients of
/// one type (X25519 for reference, ssh-ed25519, and a plugin: the Python test plugin
/// Tests/AgePluginFixture/age-plugin-sfpy when python3-cryptography is installed), then
/// decrypted with the identity of the last recipient (every stanza before it is tried).
/// In process (this library: header creation and unwrap, no start-up), and as commands
/// (`securefoundation encrypt -R`, `decrypt -i` against `age -R`, `age -d -i`), ours and
/// age's in alternation; medians.
enum AgeRecipientBench {
    struct Kind {
        var name: String
        /// The recipients file lines and the identity file of the last one.
        var recipients: [String]
        var identityFile: String
        var library: [any AgeRecipient]
        var libraryIdentity: any AgeIdentity
    }

    static let plugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/AgePluginFixture/age-plugin-sfpy").path

    static func run(ours: String, age: String?, dir: String) throws {
        let runs = max(1, Int(ProcessInfo.processInfo.environment["AGE_BENCH_RECIPIENT_RUNS"] ?? "15") ?? 15)
        let small = dir + "/recipients-small"
        try SecureFile.writeAtomically(try SecureRandom.bytes(1024), to: small)
        // The plugin on the PATH of the commands (ours and age run with it).
        let pluginDir = dir + "/plugins"
        try FileManager.default.createDirectory(atPath: pluginDir, withIntermediateDirectories: true)
        var havePlugin = false
        if FileManager.default.isExecutableFile(atPath: plugin), FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") {
            try? FileManager.default.createSymbolicLink(atPath: pluginDir + "/age-plugin-sfpy", withDestinationPath: plugin)
            havePlugin = AgeBench.spawnDirect([pluginDir + "/age-plugin-sfpy", "--generate"], stdin: "/dev/null", stdout: "/dev/null")?.status == 0
        }
        setenv("PATH", pluginDir + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"), 1)
        print("  per-file recipient cost, a 1 KiB file, identity of the last recipient (median of \(runs) runs; load average \(AgeBench.loadAverage())):")
        for count in [1, 20] {
            var kinds = [Kind]()
            kinds.append(try x25519(count, dir: dir))
            if let ssh = try sshEd25519(count, dir: dir) { kinds.append(ssh) } else { print("    ssh-keygen not found: no ssh-ed25519 figures") }
            if havePlugin, let kind = try pluginKind(count, dir: dir, pluginDir: pluginDir) { kinds.append(kind) }
            for kind in kinds {
                // In process: header creation (encrypt) and unwrap (decrypt), no start-up.
                let plaintext = try SecureFile.read(small)
                var encryptTimes = [Double](), decryptTimes = [Double]()
                var file = [UInt8]()
                for _ in 0..<runs {
                    let start = DispatchTime.now().uptimeNanoseconds
                    file = try Age.encrypt(plaintext, recipients: AgePlugin.grouped(kind.library))
                    let middle = DispatchTime.now().uptimeNanoseconds
                    _ = try Age.decrypt(file, identities: [kind.libraryIdentity])
                    let end = DispatchTime.now().uptimeNanoseconds
                    encryptTimes.append(Double(middle - start) / 1e9)
                    decryptTimes.append(Double(end - middle) / 1e9)
                }
                // Commands: ours and age's in alternation.
                let list = dir + "/recipients-\(kind.name)-\(count).txt"
                try SecureFile.writeAtomically(Array((kind.recipients.joined(separator: "\n") + "\n").utf8), to: list)
                var ourEncrypt = [Double](), ourDecrypt = [Double](), ageEncrypt = [Double](), ageDecrypt = [Double]()
                var failed = false
                for _ in 0..<runs {
                    guard let e = AgeBench.spawnDirect([ours, "encrypt", "-R", list, "-o", dir + "/r-ours.age", small], stdin: "/dev/null", stdout: "/dev/null"),
                          let d = AgeBench.spawnDirect([ours, "decrypt", "-i", kind.identityFile, "-o", "/dev/null", dir + "/r-ours.age"], stdin: "/dev/null", stdout: "/dev/null"),
                          e.status == 0, d.status == 0 else { failed = true; break }
                    ourEncrypt.append(e.seconds); ourDecrypt.append(d.seconds)
                    if let age {
                        guard let e = AgeBench.spawnDirect([age, "-R", list, "-o", dir + "/r-age.age", small], stdin: "/dev/null", stdout: "/dev/null"),
                              let d = AgeBench.spawnDirect([age, "-d", "-i", kind.identityFile, "-o", "/dev/null", dir + "/r-age.age"], stdin: "/dev/null", stdout: "/dev/null"),
                              e.status == 0, d.status == 0 else { failed = true; break }
                        ageEncrypt.append(e.seconds); ageDecrypt.append(d.seconds)
                    }
                }
                let label = "\(count) \(kind.name)".padding(toLength: 16, withPad: " ", startingAt: 0)
                var line = "    \(label) library: header \(ms(BenchSupport.median(encryptTimes))), unwrap \(ms(BenchSupport.median(decryptTimes)))"
                if failed {
                    line += "; commands: a run FAILED"
                } else {
                    line += "; commands: encrypt \(ms(BenchSupport.median(ourEncrypt))), decrypt \(ms(BenchSupport.median(ourDecrypt)))"
                    if age != nil {
                        line += "; age: encrypt \(ms(BenchSupport.median(ageEncrypt))), decrypt \(ms(BenchSupport.median(ageDecrypt)))"
                        line += " (ours/age \(BenchSupport.format(BenchSupport.median(ourEncrypt) / BenchSupport.median(ageEncrypt)))x, \(BenchSupport.format(BenchSupport.median(ourDecrypt) / BenchSupport.median(ageDecrypt)))x)"
                    }
                }
                print(line)
            }
        }
        if !havePlugin { print("    no plugin figures: python3 with python3-cryptography, and \(plugin), are needed") }
    }

    static func ms(_ seconds: Double) -> String { BenchSupport.format(seconds * 1000, 2) + " ms" }

    static func x25519(_ count: Int, dir: String) throws -> Kind {
        let identities = (0..<count).map { _ in X25519Identity.generate() }
        let file = dir + "/x25519-\(count).key"
        let last = identities[count - 1]
        try SecureFile.writeAtomically(last.encoded.withUnsafeBytes { Array($0) } + [0x0A], to: file)
        return Kind(name: "X25519", recipients: identities.map(\.recipient.description), identityFile: file,
                    library: identities.map(\.recipient), libraryIdentity: last)
    }

    static func sshEd25519(_ count: Int, dir: String) throws -> Kind? {
        guard let keygen = BenchSupport.which("ssh-keygen") else { return nil }
        var lines = [String]()
        var path = ""
        for index in 0..<count {
            path = dir + "/ssh-\(count)-\(index)"
            guard AgeBench.spawnDirect([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", path], stdin: "/dev/null", stdout: "/dev/null")?.status == 0 else { return nil }
            lines.append(String(decoding: try SecureFile.read(path + ".pub"), as: UTF8.self).trimmingCharacters(in: .newlines))
        }
        let contents = try SecretBytes(contentsOfFile: path)
        defer { contents.wipe() }
        guard let identity = try AgeKeys.identities(fileContents: contents, name: path).first else { return nil }
        return Kind(name: "ssh-ed25519", recipients: lines, identityFile: path,
                    library: try lines.map { try AgeKeys.recipient($0) }, libraryIdentity: identity)
    }

    /// The plugin's messages are not shown (it says one per unwrap).
    static let quiet = AgePluginUI(message: { _, _ in true }, requestSecret: { _, _ in nil }, requestPublic: { _, _ in nil }, confirm: { _, _, _, _ in nil })

    static func pluginKind(_ count: Int, dir: String, pluginDir: String) throws -> Kind? {
        var recipients = [String]()
        var identity = ""
        for index in 0..<count {
            let out = dir + "/plugin-gen-\(count)-\(index)"
            guard AgeBench.spawnDirect([pluginDir + "/age-plugin-sfpy", "--generate"], stdin: "/dev/null", stdout: out)?.status == 0 else { return nil }
            let lines = String(decoding: try SecureFile.read(out), as: UTF8.self).split(separator: "\n").map(String.init)
            guard lines.count == 3 else { return nil }
            recipients.append(lines[1])
            identity = lines[0]
        }
        let file = dir + "/plugin-\(count).key"
        try SecureFile.writeAtomically(Array((identity + "\n").utf8), to: file)
        return Kind(name: "plugin (sfpy)", recipients: recipients, identityFile: file,
                    library: try recipients.map { try AgePluginRecipient($0, ui: quiet, searchPath: pluginDir) },
                    libraryIdentity: try AgePluginIdentity(identity, ui: quiet, searchPath: pluginDir))
    }
}
