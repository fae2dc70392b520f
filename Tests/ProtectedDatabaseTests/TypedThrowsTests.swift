import Foundation
import Testing
import Vault
import ProtectedFiles
@testable import ProtectedDatabase

/// `ProtectedDatabase`'s public functions (but `read` and `write`, which pass on what their
/// closure throws) throw `ProtectedDatabaseError`: a caller switches over its cases with no
/// cast and no `default`.
@Suite("Protected database typed throws")
struct ProtectedDatabaseTypedThrowsTests {
    /// The exit-status-like class of a protected-database error, by an exhaustive switch.
    static func kind(_ error: ProtectedDatabaseError) -> String {
        switch error {
        case .locked: return "locked"
        case .tampered, .keyMismatch, .notProtectedDatabase: return "damaged"
        case .notFound: return "not found"
        case .exists: return "exists"
        case .diskFull, .io: return "io"
        case .invalidArgument: return "usage"
        case .protectedFile: return "protected file"
        case .classMismatch, .closed, .sqlite: return "failure"
        }
    }

    @Test func openingAMissingOrLockedDatabaseIsACaseOfProtectedDatabaseError() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (manager, files) = try fixture.setUp()
        do {
            _ = try ProtectedDatabase.open(at: fixture.path("missing.db"), files: files)
            Issue.record("opened a database that does not exist")
        } catch {
            #expect(Self.kind(error) == "not found")
            #expect(error == .notFound(path: fixture.path("missing.db")))
        }
        let path = fixture.path("typed.db")
        try ProtectedDatabase.create(at: path, protection: .complete, files: files, kind: .queue).close()
        manager.lock()
        do {
            _ = try ProtectedDatabase.open(at: path, files: files, kind: .queue)
            Issue.record("opened a complete database while locked")
        } catch {
            #expect(Self.kind(error) == "locked")
            #expect(error == .locked(path: path, .complete))
        }
    }
}
