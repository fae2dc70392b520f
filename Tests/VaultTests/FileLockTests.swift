import Foundation
import Testing
import Cipher
import TestSupport
@testable import Vault

/// FileLock, the package's one owner of the lock-file sequence.
@Suite struct FileLockTests {
    struct Mapped: Error, Equatable { let operation: String; let code: Int32 }
    struct FromBody: Error, Equatable {}

    static func map(_ failure: SecureFile.Failure) -> any Error {
        if case let .system(operation, _, code) = failure { return Mapped(operation: operation, code: code) }
        return failure
    }

    @Test("the lock file is made 0600, the body's result and errors pass through unchanged")
    func bodyAndFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/test.lock"
        #expect(try FileLock.withExclusiveLock(path: path, failure: Self.map) { 42 } == 42)
        let status = try FileCalls.linkStatus(path)
        #expect(status.permissions == 0o600)
        #expect(throws: FromBody()) { try FileLock.withExclusiveLock(path: path, failure: Self.map) { throw FromBody() } }
    }

    @Test("a lock file that cannot be opened is a failure of the step, mapped by the caller")
    func openFailureIsMapped() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.path + "/no-such-directory/test.lock"
        #expect(throws: Mapped(operation: "open lock file", code: ENOENT)) {
            try FileLock.withExclusiveLock(path: missing, failure: Self.map) { 1 }
        }
        // Without a mapping the SecureFile failure itself is thrown.
        #expect(throws: SecureFile.Failure.system(operation: "open lock file", path: missing, errno: ENOENT)) {
            try FileLock.withExclusiveLock(path: missing) { 1 }
        }
    }

    @Test("while the lock is held, the non-waiting form returns nil without running its body")
    func ifFree() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/test.lock"
        let inner = try FileLock.withExclusiveLock(path: path) { () throws -> Int? in
            // flock locks belong to the open file: a second open of the same file conflicts.
            try FileLock.withExclusiveLockIfFree(path: path) { Issue.record("ran while held"); return 1 }
        }
        #expect(inner == nil)
        #expect(try FileLock.withExclusiveLockIfFree(path: path) { 7 } == 7)
    }

    @Test("a lock file open to others is refused before locking")
    func loosePermissionsAreRefused() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/test.lock"
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        #expect(throws: SecureFile.Failure.self) { try FileLock.withExclusiveLock(path: path) { 1 } }
    }
}
