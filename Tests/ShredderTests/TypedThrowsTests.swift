import Foundation
import Testing
import Shredder

/// The shredder's throwing functions declare their error type, so a caller switches over the
/// cases without a cast.
@Suite struct ShredderTypedThrowsTests {
    @Test func aSymbolicLinkIsRefusedAsSymlink() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("typed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let link = directory + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/etc/hostname")
        do {
            _ = try FileShredder.shred(link)
            Issue.record("shredded through a symbolic link")
        } catch {
            switch error {
            case .symlink(let path): #expect(path == link)
            case .notRegularFile, .isDirectory, .hardLinked, .invalidOptions, .verificationFailed,
                 .fileChanged, .random, .incomplete, .system:
                Issue.record("unexpected \(error)")
            }
        }
        #expect(FileManager.default.fileExists(atPath: "/etc/hostname"))
    }

    @Test func loadingNoBytesIsLoadFailed() {
        do {
            _ = try VolatileLibrary.load(bytes: [UInt8]())
            Issue.record("loaded no bytes")
        } catch {
            switch error {
            case .loadFailed(let path, _): #expect(path == "memfd:volatile-library")
            case .unloadFailed, .symbolNotFound, .alreadyClosed, .unsupported, .system, .shred:
                Issue.record("unexpected \(error)")
            }
        }
    }
}
