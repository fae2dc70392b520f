import Foundation
import Testing

/// Runs the built `securefoundation shred` and checks exit codes and effects on files.
@Suite("shred command")
struct ShredCLITests {
    /// The `securefoundation` binary next to the test bundle (`.build/debug`).
    static func binary() throws -> String {
        var candidates: [String] = []
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = runner.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("securefoundation").path)
            directory = directory.deletingLastPathComponent()
        }
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("securefoundation").path)
        candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug/securefoundation")
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CLIMissing(searched: candidates)
        }
        return found
    }

    struct CLIMissing: Error, CustomStringConvertible {
        let searched: [String]
        var description: String { "securefoundation binary not found; searched \(searched)" }
    }

    /// Runs `securefoundation shred ARGS`, returning the exit status and standard error.
    static func shred(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try binary())
        process.arguments = ["shred"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func makeDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/sf-shred-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func content(_ count: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) | 1 })
    }

    @Test("without -u the file is overwritten and kept; -z leaves zeros; exit 0")
    func keep() throws {
        let dir = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
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
        let dir = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/b.bin"
        try Self.content(5000).write(to: URL(fileURLWithPath: path))
        let result = try Self.shred(["-u", "-v", path])
        #expect(result.status == 0)
        #expect(result.stderr.contains("shred: \(path): removed"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("-r -u removes a directory tree")
    func recursive() throws {
        let dir = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/t/s", withIntermediateDirectories: true)
        try Self.content(100).write(to: URL(fileURLWithPath: dir + "/t/x"))
        try Self.content(200).write(to: URL(fileURLWithPath: dir + "/t/s/y"))
        #expect(try Self.shred(["-u", dir + "/t"]).status == 1)  // a directory needs -r
        #expect(try Self.shred(["-r", "-u", dir + "/t"]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("a missing file, a symlink and a hard-linked file fail with exit 1; --force accepts the hard link")
    func failures() throws {
        let dir = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
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
