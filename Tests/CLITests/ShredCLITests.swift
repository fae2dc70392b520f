import Foundation
import TestSupport
import Testing

/// Runs the built `securefoundation shred` and checks exit codes and effects on files.
@Suite("shred command")
struct ShredCLITests {
    /// The `securefoundation` binary next to the test bundle.
    static func binary() throws -> String { try BuiltProducts.commandLine }

    /// Runs `securefoundation shred ARGS`, returning the exit status and standard error.
    static func shred(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let result = try ChildProcess.run(try binary(), ["shred"] + arguments, timeout: .seconds(300))
        return (result.status, result.errorText)
    }

    static func content(_ count: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) | 1 })
    }

    @Test("without -u the file is overwritten and kept; -z leaves zeros; exit 0")
    func keep() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-shred-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let path = dir + "/a.txt"
        let original = Self.content(10_000)
        try original.write(to: URL(fileURLWithPath: path))
        let result = try Self.shred(["-n", "1", "-z", "-v", "--verify", path])
        #expect(result.status == 0)
        #expect(result.stderr.contains("shred: \(path): pass 1/2 (random)..."))
        #expect(result.stderr.contains("shred: \(path): pass 2/2 (000000)..."))
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after.count == original.count)
        #expect(after.allSatisfy { $0 == 0 })
    }

    @Test("-u removes the file and leaves no name in the directory")
    func remove() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-shred-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let path = dir + "/b.bin"
        try Self.content(5000).write(to: URL(fileURLWithPath: path))
        let result = try Self.shred(["-u", "-v", path])
        #expect(result.status == 0)
        #expect(result.stderr.contains("shred: \(path): removed"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("-r -u removes a directory tree")
    func recursive() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-shred-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try FileManager.default.createDirectory(atPath: dir + "/t/s", withIntermediateDirectories: true)
        try Self.content(100).write(to: URL(fileURLWithPath: dir + "/t/x"))
        try Self.content(200).write(to: URL(fileURLWithPath: dir + "/t/s/y"))
        #expect(try Self.shred(["-u", dir + "/t"]).status == 1)  // a directory needs -r
        #expect(try Self.shred(["-r", "-u", dir + "/t"]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("a missing file, a symlink and a hard-linked file fail with exit 1; --force accepts the hard link")
    func failures() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-shred-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let target = dir + "/target"
        try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: target)
        let missing = try Self.shred(["-u", dir + "/missing"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("missing"))
        let link = try Self.shred(["-u", dir + "/link"])
        #expect(link.status == 1)
        #expect(link.stderr.contains("symbolic link"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("keep".utf8))

        try FileManager.default.linkItem(atPath: target, toPath: dir + "/second")
        #expect(try Self.shred(["-u", target]).status == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("keep".utf8))
        let forced = try Self.shred(["-u", "--force", target])
        #expect(forced.status == 0)
        #expect(forced.stderr.contains("hard links"))  // the warning is printed without -v
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test("no operand is a usage error")
    func usage() throws {
        #expect(try Self.shred([]).status != 0)
    }
}
