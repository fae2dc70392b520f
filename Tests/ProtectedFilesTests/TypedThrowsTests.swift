import Foundation
import Testing
import Cipher
import Vault
@testable import ProtectedFiles

/// `ProtectedFiles`'s public functions throw `ProtectedFileError`: a caller switches over its
/// cases with no cast and no `default`.
@Suite("Protected files typed throws")
struct ProtectedFilesTypedThrowsTests {
    /// The exit-status-like class of a protected-file error, by an exhaustive switch.
    static func kind(_ error: ProtectedFileError) -> String {
        switch error {
        case .locked, .noKeyPairYet: return "locked"
        case .tampered, .notProtectedFile, .keyTable: return "damaged"
        case .io, .permission: return "io"
        case .vault: return "vault"
        case .wrongDevice, .modifiedDuringChange, .invalidArgument: return "failure"
        }
    }

    @Test func readsOfLockedAndPlainFilesAreCasesOfProtectedFileError() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let path = fixture.path("typed")
        try files.write(Array("typed".utf8), to: path, protection: .complete)
        manager.lock()
        do {
            _ = try files.read(at: path)
            Issue.record("read a complete file while locked")
        } catch {
            #expect(Self.kind(error) == "locked")
            #expect(error == .locked(.complete, .locked))
        }
        let plain = fixture.path("plain")
        try writeBytes(Array("not a protected file".utf8), plain)
        do {
            _ = try files.protection(ofItemAt: plain)
            Issue.record("a plain file has a class")
        } catch {
            #expect(Self.kind(error) == "damaged")
            guard case .notProtectedFile(path: plain, reason: _) = error else { Issue.record("\(error)"); return }
        }
    }
}
