import Foundation
import Testing

/// The system's `stat` structure is read in `Platform/` files only: everywhere else the modules
/// use ``FileStatus``. An extension of the C structure (or its fields) used from another module
/// depends on which C module the compiler took the structure from, which can change with what
/// else is compiled in the same job (a clean build then fails where an incremental one passed),
/// and the field names differ between Linux and Darwin.
@Suite("Platform boundary")
struct PlatformBoundaryTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources").path

    /// Field names, type bits and uses of the structure as a Swift type.
    static let pattern = #"\.st_(mode|mtim|ctim|atim|ino|dev|nlink|size|uid|gid|rdev|blocks|blksize|mtimespec|ctimespec|atimespec)\b|\bS_IF(MT|REG|DIR|LNK|CHR|BLK|IFO|SOCK)\b|\bextension stat\b|:\s*stat\b|->\s*stat\b|\bstat\(\)"#

    @Test(.enabled(if: FileManager.default.fileExists(atPath: sources), "the package's Sources directory is not next to the tests"))
    func onlyPlatformFilesReadTheStatStructure() throws {
        let pattern = try NSRegularExpression(pattern: Self.pattern)
        let enumerator = try #require(FileManager.default.enumerator(atPath: Self.sources))
        var offending: [String] = []
        var scanned = 0
        while let relative = enumerator.nextObject() as? String, scanned < 10_000 {
            guard relative.hasSuffix(".swift") else { continue }
            scanned += 1
            // Platform files read it by design; the benchmarks keep their own code.
            if relative.contains("/Platform/") || relative.hasPrefix("SecureFoundationBench/") { continue }
            let text = try String(contentsOfFile: Self.sources + "/" + relative, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                if line.trimmingCharacters(in: .whitespaces).hasPrefix("//") { continue }
                if pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                    offending.append("\(relative):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(scanned > 50)
        #expect(offending.isEmpty, "use FileStatus (Cipher/Platform/FileStatus.swift) instead:\n\(offending.joined(separator: "\n"))")
    }
}
