import Foundation
import Testing
@testable import Cipher

/// How SecureFile.writeOutput treats each kind of path a person names as output.
@Suite struct OutputFileTests {
    @Test("outputTarget: new and regular paths are replaced, devices and FIFOs written in place, descriptors used, links refused")
    func classification() throws {
        let directory = try TemporaryDirectory()
        let base = directory.path
        #expect(try SecureFile.outputTarget(of: base + "/new") == .replace)
        try SecureFile.writeAtomically([1], to: base + "/file")
        #expect(try SecureFile.outputTarget(of: base + "/file") == .replace)
        #expect(mkfifo(base + "/fifo", 0o600) == 0)
        #expect(try SecureFile.outputTarget(of: base + "/fifo") == .inPlace)
        #expect(try SecureFile.outputTarget(of: "/dev/stdout") == .descriptor(1))
        #expect(try SecureFile.outputTarget(of: "/dev/stderr") == .descriptor(2))
        #expect(try SecureFile.outputTarget(of: "/dev/fd/2") == .descriptor(2))
        #expect(try SecureFile.outputTarget(of: "/proc/self/fd/2") == .descriptor(2))
        #expect(symlink("/dev/stderr", base + "/to-stderr") == 0)
        #expect(try SecureFile.outputTarget(of: base + "/to-stderr") == .descriptor(2))
        #expect(symlink("file", base + "/link") == 0)
        #expect(throws: SecureFile.Failure.insecurePermissions(
            path: base + "/link", reason: "it is a symbolic link (to file), which output neither follows nor replaces",
            fix: "name the file it points to instead, or rm \(base)/link")) {
            try SecureFile.outputTarget(of: base + "/link")
        }
        #expect(throws: SecureFile.Failure.insecurePermissions(path: base, reason: "it is a directory, not a file to write",
                                                              fix: "name a file inside it")) {
            try SecureFile.outputTarget(of: base)
        }
        // A descriptor that is not open.
        #expect(throws: SecureFile.Failure.system(operation: "use descriptor 999 named by", path: "/dev/fd/999", errno: EBADF)) {
            try SecureFile.outputTarget(of: "/dev/fd/999")
        }
        #expect(SecureFile.descriptorNumber("/dev/fd/1x") == nil)
        #expect(SecureFile.descriptorNumber("/dev/fd/") == nil)
    }

    /// In a shared directory another user can plant a FIFO (or a link to /dev/stdout) at the
    /// path someone will name as output, and read what is written into it: refused unless it
    /// belongs to the caller or to root.
    @Test("another user's FIFO or link to a descriptor is refused as output; the caller's and root's are used")
    func anotherUsersFIFOIsRefused() throws {
        guard geteuid() == 0 else {
            print("skipping: handing a FIFO to another user needs root")
            return
        }
        let directory = try TemporaryDirectory()
        let base = directory.path
        #expect(mkfifo(base + "/planted", 0o666) == 0)
        #expect(chown(base + "/planted", 65534, 65534) == 0)
        #expect(throws: SecureFile.Failure.insecurePermissions(
            path: base + "/planted", reason: "it is a FIFO owned by another user (uid 65534), who could read what is written into it",
            fix: "write to a path of your own")) {
            try SecureFile.outputTarget(of: base + "/planted")
        }
        #expect(throws: SecureFile.Failure.self) { try SecureFile.writeOutput([1, 2, 3], to: base + "/planted") }
        #expect(symlink("/dev/stdout", base + "/to-stdout") == 0)
        #expect(lchown(base + "/to-stdout", 65534, 65534) == 0)
        #expect(throws: SecureFile.Failure.self) { try SecureFile.outputTarget(of: base + "/to-stdout") }
        // Root's devices and the caller's own FIFO are written in place.
        #expect(try SecureFile.outputTarget(of: "/dev/null") == .inPlace)
        #expect(mkfifo(base + "/mine", 0o600) == 0)
        #expect(try SecureFile.outputTarget(of: base + "/mine") == .inPlace)
    }

    @Test("writeOutput into a FIFO writes in place and keeps the FIFO; into a descriptor leaves it open")
    func fifoAndDescriptor() throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(reader >= 0)
        defer { close(reader) }
        #expect(try SecureFile.writeOutput(Array("through".utf8), to: fifo) == .inPlace)
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(reader, &buffer, buffer.count)
        #expect(n == 7 && Array(buffer[0..<7]) == Array("through".utf8))
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["fifo"])

        var pipeFDs: [Int32] = [0, 0]
        #expect(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]); close(pipeFDs[1]) }
        #expect(try SecureFile.writeOutput(Array("pipe".utf8), to: "/dev/fd/\(pipeFDs[1])") == .descriptor(pipeFDs[1]))
        #expect(fcntl(pipeFDs[1], F_GETFD) >= 0)
        #expect(read(pipeFDs[0], &buffer, buffer.count) == 4)
    }

    @Test("an abandoned .sf-lk temporary is removed by the next replacement; a locked one, another user's name shape and a link are kept")
    func abandonedTemporaries() throws {
        let directory = try TemporaryDirectory()
        let base = directory.path
        for name in [".sf-lk-AbandonedTemp001.tmp", ".sf-lk-LiveWriterTemp01.tmp", ".sf-lk-short.tmp", ".sf-AAAAAAAAAAAAAAAA.tmp"] {
            #expect(FileManager.default.createFile(atPath: base + "/" + name, contents: Data([1, 2, 3]), attributes: [.posixPermissions: 0o600]))
        }
        #expect(symlink(base + "/.sf-AAAAAAAAAAAAAAAA.tmp", base + "/.sf-lk-SymbolicLinkTmp1.tmp") == 0)
        let holder = open(base + "/.sf-lk-LiveWriterTemp01.tmp", O_RDONLY | O_CLOEXEC)
        #expect(holder >= 0 && flock(holder, LOCK_EX | LOCK_NB) == 0)
        defer { close(holder) }
        try SecureFile.writeAtomically([5], to: base + "/state")
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: base))
        #expect(names == [".sf-lk-LiveWriterTemp01.tmp", ".sf-lk-short.tmp", ".sf-AAAAAAAAAAAAAAAA.tmp",
                          ".sf-lk-SymbolicLinkTmp1.tmp", "state"])
    }

    @Test("a replacement in progress holds its temporary locked, so a concurrent cleaner keeps it")
    func inProgressTemporaryIsKept() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/state"
        try SecureFile.replaceAtomically(path) { fd in
            _ = write(fd, "new", 3)
            #expect(SecureFile.removeAbandonedTemporaries(in: directory.path) == 0)
        }
        #expect(try SecureFile.read(path) == Array("new".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["state"])
    }
}

/// The named temporaries filesystems without O_TMPFILE get.
@Suite struct NamedTemporaryTests {
    @Test("a named temporary is locked while its writer lives and removed by the next replacement once the writer is gone")
    func namedTemporaryLifecycle() throws {
        let directory = try TemporaryDirectory()
        let base = directory.path
        let unnamed = try SecureFile.LockedTemporary(in: base, mode: 0o600)
        #if os(Linux)
        #expect(unnamed.path == nil, "O_TMPFILE is expected on Linux test filesystems")
        #endif
        unnamed.discard()
        let live = try SecureFile.LockedTemporary(in: base, mode: 0o600, unnamed: false)
        let name = try #require(live.path)
        #expect(SecureFile.isLockedTemporaryName(String(name.split(separator: "/").last!)))
        #expect(SecureFile.removeAbandonedTemporaries(in: base) == 0)
        #expect(FileManager.default.fileExists(atPath: name))
        // The writer dies without renaming: its descriptor (and lock) goes, its name stays.
        close(live.fd)
        #expect(FileManager.default.fileExists(atPath: name))
        try SecureFile.writeAtomically([1], to: base + "/state")
        #expect(try FileManager.default.contentsOfDirectory(atPath: base) == ["state"])
    }

    @Test("a named temporary commits by rename like an unnamed one")
    func namedTemporaryCommits() throws {
        let directory = try TemporaryDirectory()
        let temporary = try SecureFile.LockedTemporary(in: directory.path, mode: 0o600, unnamed: false)
        defer { temporary.discard() }
        _ = write(temporary.fd, "named", 5)
        try temporary.commit(as: directory.path + "/out")
        #expect(try SecureFile.read(directory.path + "/out") == Array("named".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["out"])
    }
}
