import Foundation
import TestSupport
import Testing

/// `-o PATH` of every command, against each kind of path: a character device and a FIFO are
/// written in place, `/dev/stdout` and `/dev/fd/1` write into the open descriptor, a symbolic
/// link, a directory and a socket are refused, and a killed writer leaves no temporary.
@Suite("output paths (-o)")
struct OutputPathCLITests {
    typealias Run = AgeCLITests

    /// The device number of the null device, character (1, 3) (Linux's encoding).
    static let nullDevice = dev_t((1 << 8) | 3)

    static func write(_ bytes: [UInt8], _ path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func read(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Every `-o` command with its arguments, writing into `target`.
    static func commands(dir: String, key: String, recipient: String, target: String) throws -> [(String, [String])] {
        let plain = dir + "/plain"
        try write(Array("secret text\n".utf8), plain)
        let age = try Run.run(["encrypt", "-r", recipient, plain]).stdout
        try write(age, dir + "/plain.age")
        try write((0..<32).map { UInt8($0) }, dir + "/raw.key")
        let sealed = try Run.run(["seal", "--key-file", dir + "/raw.key", plain]).stdout
        try write(sealed, dir + "/plain.sealed")
        return [
            ("encrypt", ["encrypt", "-r", recipient, "-o", target, plain]),
            ("decrypt", ["decrypt", "-i", key, "-o", target, dir + "/plain.age"]),
            ("seal", ["seal", "--key-file", dir + "/raw.key", "-o", target, plain]),
            ("open", ["open", "--key-file", dir + "/raw.key", "-o", target, dir + "/plain.sealed"]),
            ("keygen", ["keygen", "-o", target]),
        ]
    }

    @Test("a character device given to -o is written in place and stays the device (encrypt, decrypt, seal, open, keygen)")
    func characterDevice() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Run.keygen(dir)
        let device = dir + "/null"
        // The null device (1, 3) under a private name: the machine's /dev/null is never the victim.
        guard mknod(device, S_IFCHR | 0o666, Self.nullDevice) == 0 else {
            print("skipping the character-device case: mknod needs root (\(String(cString: strerror(errno))))")
            return
        }
        for (name, arguments) in try Self.commands(dir: dir, key: key, recipient: recipient, target: device) {
            let result = try Run.run(arguments)
            #expect(result.status == 0, "\(name): \(result.stderr)")
            var info = stat()
            #expect(lstat(device, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFCHR, "\(name) replaced the device")
            #expect(info.st_rdev == Self.nullDevice, "\(name)")
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(".sf-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("a FIFO given to -o is written in place: its reader gets the output and it stays a FIFO")
    func fifo() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Run.keygen(dir)
        let fifo = dir + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        for (name, arguments) in try Self.commands(dir: dir, key: key, recipient: recipient, target: fifo) {
            // A non-blocking reader is open first, so the writer's open never waits; every output
            // here is far smaller than the pipe buffer, so it is all there once the writer exits.
            let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            #expect(reader >= 0)
            defer { close(reader) }
            let result = try Run.run(arguments)
            #expect(result.status == 0, "\(name): \(result.stderr)")
            var received = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65536)
            for _ in 0..<64 {
                let n = Foundation.read(reader, &buffer, buffer.count)
                if n <= 0 { break }
                received += buffer[0..<n]
            }
            var info = stat()
            #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "\(name) replaced the FIFO")
            switch name {
            case "encrypt":
                try Self.write(received, dir + "/got.age")
                let back = try Run.run(["decrypt", "-i", key, dir + "/got.age"])
                #expect(back.status == 0 && back.text == "secret text\n", "\(back.stderr)")
            case "decrypt", "open":
                #expect(received == Array("secret text\n".utf8), "\(name)")
            case "seal":
                #expect(received.starts(with: Array("SFSD".utf8)), "\(name)")
            default:
                #expect(String(decoding: received, as: UTF8.self).contains("AGE-SECRET-KEY-1"), "\(name)")
            }
        }
    }

    @Test("-o /dev/stdout and -o /dev/fd/1 write into standard output, a pipe or a redirected regular file")
    func standardOutputAliases() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Run.keygen(dir)
        try Self.write(Array("secret text\n".utf8), dir + "/plain")
        for alias in ["/dev/stdout", "/dev/fd/1"] {
            // A pipe.
            let piped = try Run.run(["encrypt", "-r", recipient, "-o", alias, dir + "/plain"])
            #expect(piped.status == 0, "\(piped.stderr)")
            try Self.write(piped.stdout, dir + "/piped.age")
            let back = try Run.run(["decrypt", "-i", key, "-o", alias, dir + "/piped.age"])
            #expect(back.status == 0 && back.text == "secret text\n", "\(alias): \(back.stderr)")
            // A regular file redirected as standard output: written through the descriptor, the
            // same inode keeps the output.
            let redirected = dir + "/redirected"
            try Self.write([], redirected)
            var before = stat(), after = stat()
            #expect(stat(redirected, &before) == 0)
            let decrypted = try ChildProcess.run(try BuiltProducts.commandLine, ["decrypt", "-i", key, "-o", alias, dir + "/piped.age"],
                                                 stdout: .file(redirected), timeout: .seconds(300))
            #expect(decrypted.status == 0, "\(decrypted.errorText)")
            #expect(stat(redirected, &after) == 0 && after.st_ino == before.st_ino)
            #expect(try Self.read(redirected) == Array("secret text\n".utf8), "\(alias)")
        }
    }

    @Test("a symbolic link given to -o is refused and neither it nor its target changes (also a dangling one)")
    func symbolicLink() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Run.keygen(dir)
        try Self.write(Array("keep me".utf8), dir + "/target")
        #expect(symlink("target", dir + "/link") == 0)
        #expect(symlink("nowhere", dir + "/dangling") == 0)
        for link in [dir + "/link", dir + "/dangling"] {
            for (name, arguments) in try Self.commands(dir: dir, key: key, recipient: recipient, target: link) {
                let result = try Run.run(arguments)
                #expect(result.status == 74, "\(name) \(link): \(result.stderr)")
                #expect(result.stderr.contains("is a symbolic link"), "\(name): \(result.stderr)")
                var info = stat()
                #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "\(name) replaced \(link)")
            }
        }
        #expect(try Self.read(dir + "/target") == Array("keep me".utf8))
        #expect(!FileManager.default.fileExists(atPath: dir + "/nowhere"))
    }

    @Test("a socket, a directory or a block device given to -o is refused with a message saying so")
    func socketAndDirectory() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Run.keygen(dir)
        let socketPath = dir + "/sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(socketPath.utf8)
            raw.copyBytes(from: bytes.prefix(raw.count - 1))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: false)
        for (target, word) in [(socketPath, "is a socket"), (dir + "/sub", "is a directory")] {
            for (name, arguments) in try Self.commands(dir: dir, key: key, recipient: recipient, target: target) {
                let result = try Run.run(arguments)
                #expect(result.status == 74, "\(name): \(result.stderr)")
                #expect(result.stderr.contains(word), "\(name): \(result.stderr)")
            }
        }
        var info = stat()
        #expect(lstat(socketPath, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK)
        // A block device (never opened: refused from what lstat says).
        let block = dir + "/block"
        if mknod(block, S_IFBLK | 0o600, dev_t((7 << 8) | 200)) == 0 {
            for (name, arguments) in try Self.commands(dir: dir, key: key, recipient: recipient, target: block) {
                let result = try Run.run(arguments)
                #expect(result.status == 74 && result.stderr.contains("is a block device"), "\(name): \(result.stderr)")
            }
            #expect(lstat(block, &info) == 0 && info.st_mode & S_IFMT == S_IFBLK)
        } else {
            print("skipping the block-device case: mknod needs root")
        }
    }

    @Test("kill -9 of encrypt -o mid-write leaves no temporary, and a later run removes an abandoned one")
    func killedWriterLeavesNoTemporary() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (_, recipient) = try Run.keygen(dir)
        let out = dir + "/out.age"
        try Self.write(Array("old".utf8), out)
        for round in 0..<3 {
            let process = try ChildProcess.start(try BuiltProducts.commandLine, ["encrypt", "-r", recipient, "-o", out], stdin: .pipe)
            // 3 MiB written and the pipe kept open: the writer is blocked mid-output with its
            // temporary open; find that descriptor (bounded: 10 s). A write into the pipe of the
            // killed process fails with EPIPE.
            let fed = DispatchSemaphore(value: 0)
            let value = UInt8(round)
            DispatchQueue.global().async {
                let chunk = [UInt8](repeating: value, count: 1 << 20)
                for _ in 0..<3 { process.write(chunk) }
                fed.signal()
            }
            #expect(fed.wait(timeout: .now() + 20) == .success, "the writer did not read its input")
            var sawTemporary = false
            for _ in 0..<1000 where !sawTemporary {
                let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd")) ?? []
                for fd in fds {
                    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.processIdentifier)/fd/\(fd)")) ?? ""
                    if target.hasPrefix(dir + "/") && !target.hasSuffix("/key.txt") { sawTemporary = true }
                }
                if !sawTemporary { usleep(10_000) }
            }
            #expect(sawTemporary, "the writer never opened its output")
            process.kill()
            let ended = try process.wait(timeout: .seconds(30))
            process.closeInput()
            #expect(ended.signalled)
            #expect(try Self.read(out) == Array("old".utf8))
        }
        // Whatever the filesystem, a later successful run leaves nothing but its output.
        let plain = dir + "/plain"
        try Self.write(Array("new".utf8), plain)
        let later = try Run.run(["encrypt", "-r", recipient, "-o", out, plain])
        #expect(later.status == 0, "\(later.stderr)")
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir))
        #expect(names == ["key.txt", "out.age", "plain"], "\(names)")
    }

    @Test("a later run removes abandoned .sf-lk-*.tmp temporaries and keeps one a live writer holds")
    func abandonedTemporariesRemoved() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-output-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (_, recipient) = try Run.keygen(dir)
        let abandoned = dir + "/.sf-lk-AbandonedTemp001.tmp"
        let live = dir + "/.sf-lk-LiveWriterTemp01.tmp"
        let foreign = dir + "/.sf-notours.tmp"
        for path in [abandoned, live, foreign] { try Self.write(Array(repeating: 7, count: 4096), path) }
        // A live writer holds an exclusive flock on its temporary until the rename.
        let holder = open(live, O_RDONLY | O_CLOEXEC)
        #expect(holder >= 0 && flock(holder, LOCK_EX | LOCK_NB) == 0)
        defer { close(holder) }
        try Self.write(Array("plain".utf8), dir + "/plain")
        let result = try Run.run(["encrypt", "-r", recipient, "-o", dir + "/out.age", dir + "/plain"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: live))
        #expect(FileManager.default.fileExists(atPath: foreign))
    }
}
