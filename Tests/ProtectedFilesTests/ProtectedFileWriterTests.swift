import Foundation
import Testing
import Cipher
import Age
import Vault
@testable import ProtectedFiles

@Suite("Protected files written piece by piece")
struct ProtectedFileWriterTests {
    /// Pieces of every size around the 64 KiB chunk boundary: the file reads back whole, with
    /// its class, like one written at once.
    @Test func piecesReadBackWhole() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        var plaintext = [UInt8](repeating: 0, count: 3 * 65536 + 17)
        for index in plaintext.indices { plaintext[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 9) }
        for sizes in [[plaintext.count], [1, 65535, 1, 65535, 65536, 17], [100_000, 60_000, 36_625]] {
            let path = fixture.path("pieces-\(sizes.count)")
            let writer = try files.makeWriter(creating: path, protection: .completeUnlessOpen)
            var offset = 0
            for size in sizes {
                try plaintext[offset..<(offset + size)].withUnsafeBytes { try writer.write($0) }
                offset += size
            }
            #expect(offset == plaintext.count)
            #expect(writer.count == UInt64(plaintext.count))
            try writer.finish()
            #expect(try files.read(at: path) == plaintext)
            #expect(try files.protection(ofItemAt: path) == .completeUnlessOpen)
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        }
        // An empty file is a valid protected file too.
        let empty = fixture.path("empty")
        try files.makeWriter(creating: empty, protection: .complete).finish()
        #expect(try files.read(at: empty) == [])
    }

    /// Abandoned (explicitly or by dropping the writer) or finished twice: no file is left,
    /// nothing more is written.
    @Test func abandonedWritersLeaveNothing() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let path = fixture.path("abandoned")
        let writer = try files.makeWriter(creating: path, protection: .completeUnlessOpen)
        try [UInt8](repeating: 1, count: 200_000).withUnsafeBytes { try writer.write($0) }
        #expect(FileManager.default.fileExists(atPath: path))
        writer.abort()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ProtectedFileError.self) { try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try writer.write($0) } }
        #expect(throws: ProtectedFileError.self) { try writer.finish() }
        #expect(!FileManager.default.fileExists(atPath: path))

        let dropped = fixture.path("dropped")
        do {
            let other = try files.makeWriter(creating: dropped, protection: .completeUnlessOpen)
            try [UInt8](repeating: 2, count: 70_000).withUnsafeBytes { try other.write($0) }
        }
        #expect(!FileManager.default.fileExists(atPath: dropped))
    }

    /// The writer never opens an existing path (a file or a planted link), and a class that
    /// needs its key is refused while locked, before anything is created.
    @Test func existingPathsAndLockedClassesAreRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let existing = fixture.path("existing")
        try Data("keep".utf8).write(to: URL(fileURLWithPath: existing))
        #expect(throws: ProtectedFileError.self) { _ = try files.makeWriter(creating: existing, protection: .completeUnlessOpen) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: existing)) == Data("keep".utf8))
        let target = fixture.path("target")
        let link = fixture.path("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(throws: ProtectedFileError.self) { _ = try files.makeWriter(creating: link, protection: .completeUnlessOpen) }
        #expect(!FileManager.default.fileExists(atPath: target))
        manager.lock()
        let locked = fixture.path("locked")
        #expect(throws: ProtectedFileError.locked(.complete, .locked)) { _ = try files.makeWriter(creating: locked, protection: .complete) }
        #expect(!FileManager.default.fileExists(atPath: locked))
    }
}
