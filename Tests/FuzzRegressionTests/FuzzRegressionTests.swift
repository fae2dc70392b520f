import Foundation
import Testing

/// Replays every saved fuzzing input (Tests/FuzzRegressionTests/Cases/TARGET/*: crashes found
/// and fixed, and inputs that reached new code) through the fuzz targets' entry points. An input
/// that crashes a parser again stops the test process, naming the case in the log.
@Suite struct FuzzRegressionTests {
    static let casesDirectory: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Cases").path
    }()

    static func cases(_ target: String) -> [String] {
        let dir = (casesDirectory as NSString).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { (dir as NSString).appendingPathComponent($0) }
    }

    @Test(arguments: FuzzHarness.targets.keys.sorted())
    func savedCasesReplay(target: String) throws {
        let run = try #require(FuzzHarness.targets[target])
        for path in Self.cases(target) {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            run(bytes)
        }
    }

    /// Every case folder names a target, so a renamed target cannot silently drop its cases.
    @Test func everyCaseFolderIsATarget() throws {
        let folders = ((try? FileManager.default.contentsOfDirectory(atPath: Self.casesDirectory)) ?? []).filter { !$0.hasPrefix(".") }
        #expect(!folders.isEmpty)
        for folder in folders { #expect(FuzzHarness.targets[folder] != nil, "\(folder)") }
    }

    /// The generated seeds run too (they are the starting corpus of the targets without files).
    @Test(arguments: ["agePayload", "sealed", "legacyPlist", "legacyCipher", "keychainDB", "tlsPolicy", "tlsPEM", "tlsPin", "tlsPKCS12", "tlsCSR", "tlsRecord"])
    func seedsRun(target: String) throws {
        let run = try #require(FuzzHarness.targets[target])
        let seeds = FuzzHarness.seeds(for: target)
        #expect(!seeds.isEmpty)
        seeds.forEach(run)
    }
}
