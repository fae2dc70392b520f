import Foundation
import Testing
@testable import DeviceSharing

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
    @Test(arguments: ["agePayload", "sealed", "legacyPlist", "legacyCipher", "keychainDB", "tlsPolicy", "tlsPEM", "tlsPin", "tlsPKCS12", "tlsCSR", "tlsRecord", "tlsCRL",
                            "shareWire", "enrolment", "agentFrame", "embeddedSecrets", "protectedKeys", "deviceKey"])
    func seedsRun(target: String) throws {
        let run = try #require(FuzzHarness.targets[target])
        let seeds = FuzzHarness.seeds(for: target)
        #expect(!seeds.isEmpty)
        seeds.forEach(run)
    }

    /// The sharing and enrolment seeds are made by hand in the harness (the fuzz package reaches
    /// only public API); they are byte for byte what the writers write.
    @Test func peerSeedsAreWhatTheWritersWrite() throws {
        let share = FuzzHarness.seeds(for: "shareWire")
        let written: [[UInt8]] = [
            [0] + (try ShareWire.Offer(name: "report.pdf", size: 1_048_576)).encoded,
            [0] + (try ShareWire.Offer.version2(name: "report.pdf", size: 1_048_576)).encoded,
            [0] + (try ShareWire.Offer(name: "a", size: 0, digest: [UInt8](repeating: 0xE3, count: 32))).encoded,
            [1] + ShareWire.Reply(status: .stored, text: "report.pdf").encoded,
            [1] + ShareWire.Reply(status: .refused, text: "full").encoded,
            [1] + ShareWire.Reply(status: .revoked, text: "laptop").encoded,
            [1] + ShareWire.Reply(status: .digestMismatch, text: "").encoded,
        ]
        #expect(share == written)
        let enrolment = FuzzHarness.seeds(for: "enrolment")
        let chain = "-----BEGIN CERTIFICATE-----\nMAo=\n-----END CERTIFICATE-----\n"
        let messages: [[UInt8]] = [
            [0] + NetworkEnrolment.challenge([UInt8](repeating: 0x5A, count: 32)),
            [1] + NetworkEnrolment.request(id: [UInt8](repeating: 0xA1, count: 16), device: "laptop", spki: [UInt8](repeating: 0x30, count: 91),
                                           mac: [UInt8](repeating: 0x77, count: 32)),
            [2] + NetworkEnrolment.answer(issued: true, text: chain),
            [2] + NetworkEnrolment.answer(issued: false, text: "expired"),
        ]
        #expect(Array(enrolment.prefix(4)) == messages)
    }
}
