import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// Age's `toFile` functions against the kinds of output path.
@Suite struct AgeOutputPathTests {
    @Test("encryptFile and decryptFile write a FIFO in place and refuse a symbolic link")
    func fifoAndSymlink() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = Array("age through a FIFO\n".utf8)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        let fifo = dir + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        func drain(_ reader: Int32) -> [UInt8] {
            var out = [UInt8](), buffer = [UInt8](repeating: 0, count: 65536)
            for _ in 0..<64 {
                let n = read(reader, &buffer, buffer.count)
                if n <= 0 { break }
                out += buffer[0..<n]
            }
            return out
        }
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(reader >= 0)
        defer { close(reader) }
        try Age.encryptFile(at: dir + "/plain", to: fifo, recipients: [identity.recipient])
        let encrypted = drain(reader)
        #expect(try Age.decrypt(encrypted, identities: [identity]) == plaintext)
        try SecureFile.writeAtomically(encrypted, to: dir + "/plain.age")
        try Age.decryptFile(at: dir + "/plain.age", to: fifo, identities: [identity])
        #expect(drain(reader) == plaintext)
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)

        #expect(symlink("plain", dir + "/link") == 0)
        #expect(throws: AgeError.io("refusing \(dir)/link: it is a symbolic link (to plain), which output neither follows nor replaces. Fix it with: name the file it points to instead, or rm \(dir)/link")) {
            try Age.encryptFile(at: dir + "/plain", to: dir + "/link", recipients: [identity.recipient])
        }
        #expect(throws: AgeError.self) {
            try Age.decryptFile(at: dir + "/plain.age", to: dir + "/link", identities: [identity])
        }
        #expect(lstat(dir + "/link", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
        #expect(try SecureFile.read(dir + "/plain") == plaintext)
    }
}
