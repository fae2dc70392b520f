import Foundation
import Testing
import TestSupport
@testable import DeviceSharing

/// The inbox lives in the data directory, which an attacker who knows no secret may write.
@Suite struct InboxStagingTests {
    /// The attack: a symbolic link planted at `inbox/.incoming` pointing at another directory
    /// of the user's. Starting the receiver used to empty that directory (it removed every
    /// "staging leftover" through the link). Now only a private directory is emptied, through a
    /// descriptor opened without following links.
    @Test func aLinkPlantedAsTheStagingDirectoryEmptiesNothing() async throws {
        let (a, _) = try makeGroup()
        let victim = a.root + "/documents"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        let precious = victim + "/thesis.tex"
        try Data("years of work".utf8).write(to: URL(fileURLWithPath: precious))
        try FileManager.default.createDirectory(atPath: a.inbox, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(symlink(victim, a.inbox + "/" + IncomingFile.stagingName) == 0)
        IncomingFile.removeLeftovers(in: a.inbox)
        try await withServer(a) { _, _ in }
        #expect(FileManager.default.contents(atPath: precious) == Data("years of work".utf8))
        // A real staging directory is still emptied of its leftovers, links removed, not followed.
        unlink(a.inbox + "/" + IncomingFile.stagingName)
        let staging = a.inbox + "/" + IncomingFile.stagingName
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try Data("partial".utf8).write(to: URL(fileURLWithPath: staging + "/0123abcd"))
        #expect(symlink(precious, staging + "/link") == 0)
        IncomingFile.removeLeftovers(in: a.inbox)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? ["?"]).isEmpty)
        #expect(FileManager.default.contents(atPath: precious) == Data("years of work".utf8))
    }
}
