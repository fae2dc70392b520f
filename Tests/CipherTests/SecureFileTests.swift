import Foundation
import Testing
@testable import Cipher

@Suite struct SecureFileTests {
    @Test func atomicWriteIsPrivateAndLeavesNoTemporaries() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/state"
        try SecureFile.writeAtomically(Array("one".utf8), to: path)
        try SecureFile.writeAtomically(Array("two".utf8), to: path)
        #expect(try SecureFile.read(path) == Array("two".utf8))
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["state"])
    }

    @Test func failedWriteLeavesTheOldFile() throws {
        struct Boom: Error {}
        let directory = try TemporaryDirectory()
        let path = directory.path + "/state"
        try SecureFile.writeAtomically(Array("old".utf8), to: path)
        #expect(throws: Boom.self) {
            try SecureFile.replaceAtomically(path) { fd in
                _ = write(fd, "partial", 7)
                throw Boom()
            }
        }
        #expect(try SecureFile.read(path) == Array("old".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["state"])
    }

    @Test func permissionsAreCheckedLikeSSH() throws {
        let directory = try TemporaryDirectory()
        let home = directory.path + "/home"
        try SecureFile.ensurePrivateDirectory(home)
        var info = stat()
        #expect(stat(home, &info) == 0 && info.st_mode & 0o777 == 0o700)
        chmod(home, 0o755)
        #expect(throws: SecureFile.Failure.insecurePermissions(path: home, reason: "its mode 755 lets group or others in", fix: "chmod 700 \(home)")) {
            try SecureFile.ensurePrivateDirectory(home)
        }
        chmod(home, 0o700)
        let file = home + "/f"
        try SecureFile.writeAtomically([1], to: file)
        try SecureFile.checkPrivate(file, isDirectory: false)
        chmod(file, 0o644)
        #expect(throws: SecureFile.Failure.self) { try SecureFile.checkPrivate(file, isDirectory: false) }
        let link = directory.path + "/link"
        symlink(home, link)
        #expect(throws: SecureFile.Failure.self) { try SecureFile.checkPrivate(link, isDirectory: true) }
    }
}
