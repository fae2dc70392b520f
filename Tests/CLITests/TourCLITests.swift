import Foundation
import Testing

@Suite struct TourCLITests {
    @Test func tourRunsEndToEndAndLeavesNothingBehind() throws {
        let scratch = try ScratchDirectory()
        let result = try CLIRunner.run(["tour", "--home", scratch.path])
        #expect(result.status == 0, "\(result.stderr)\n\(result.text)")
        #expect(result.text.contains("All 13 steps did what they claim"))
        for claim in ["refused with the typed reason", "2 of 3 suffice", "old data still opens", "nothing opens any more",
                      "locked: a completeUnlessOpen file was written", "upgraded to complete",
                      "locked again: the complete file is unreadable: the complete protected-file class is unavailable",
                      "stored while locked as a completeUnlessOpen protected file, no plaintext on disk",
                      "a machine of another group (its own root, the same device name) is refused",
                      "locked: reading the received file is refused", "upgraded to complete and read back, byte for byte",

                      "after `agent lock` the whenUnlocked key is refused again"] {
            #expect(result.text.contains(claim), "missing: \(claim)")
        }
        if CLIRunner.which("age") != nil {
            #expect(result.text.contains("-d` opens our file"))
            #expect(result.text.contains("`age -d -j securefoundation inbox/order-42.json` (the real age, through age-plugin-securefoundation) read the complete file"))
            #expect(result.text.contains("after `agent lock` the real age is refused too"))
        }
        if FileManager.default.fileExists(atPath: "/usr/lib/softhsm/libsofthsm2.so"), CLIRunner.which("softhsm2-util") != nil,
           CLIRunner.which("pkcs11-tool") != nil {
            #expect(result.text.contains("sensitive, not extractable"))
            #expect(result.text.contains("the signature came from the token, the key's bytes never entered this process"))
            #expect(result.text.contains("token taken away: the next handshake fails (C_"))
        } else {
            #expect(result.text.contains("SoftHSM2 or pkcs11-tool is not installed: skipping"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
    }

    @Test func tourRefusesANonEmptyHomeAndTouchesNothing() throws {
        let scratch = try ScratchDirectory()
        let precious = try scratch.file("precious", Array("keep me".utf8))
        let result = try CLIRunner.run(["tour", "--home", scratch.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("is not empty"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: precious)) == Data("keep me".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path) == ["precious"])
    }
}
