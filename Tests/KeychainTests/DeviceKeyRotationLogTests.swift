import Foundation
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

/// A device-key rotation whose keychain log is held by another connection (a reader on an old
/// snapshot) cannot empty the log, so the rows under the old key are still on disk: it must stop
/// with an error that says to close that program and resume, never report success, and the
/// resume must finish the job.
@Suite struct DeviceKeyRotationLogTests {
    @Test func aReaderHoldingTheLogStopsTheRotationUntilResumed() throws {
        let fixture = try DeviceKeyRotationTests.Fixture()
        let count = 40
        let manager = try fixture.populate(count)
        let oldRecords = try DeviceKeyRotationTests.sealedRecords(fixture.home + "/keychain.sqlite")
        #expect(oldRecords.count == count)

        // Another program reading the keychain: a read transaction kept open on the snapshot
        // from before the rotation.
        let reader = try DatabaseQueue(path: fixture.home + "/keychain.sqlite")
        var dependent = KeychainDeviceKeyDependent(path: fixture.home + "/keychain.sqlite")
        dependent.logWait = 0.3
        var failure: (any Error)?
        try reader.inDatabase { db in
            try db.execute(sql: "BEGIN DEFERRED")
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items")
            do {
                _ = try DeviceKeyRotation.rotate(manager: manager, filePath: fixture.keyPath, dependents: [dependent])
            } catch {
                failure = error
            }
            try db.execute(sql: "COMMIT")
        }
        guard case .database(let message)? = failure as? KeychainError else {
            Issue.record("a rotation that could not empty the log must fail, not succeed: \(String(describing: failure))"); return
        }
        #expect(message.contains("--resume"))
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath) != nil)

        // The reader is gone: the resume empties the log and finishes.
        let resumed = try DeviceKeyRotation.resume(manager: manager, filePath: fixture.keyPath,
                                                   dependents: KeychainDeviceKeyDependent.keychains(in: fixture.home))
        #expect(resumed.dependents.map(\.alreadyNew) == [count])
        #expect(try DeviceKeyRotation.pending(directory: fixture.home, filePath: fixture.keyPath) == nil)
        var bytes = try SecureFile.read(fixture.home + "/keychain.sqlite", maxLength: 1 << 28)
        bytes += (try? SecureFile.read(fixture.home + "/keychain.sqlite-wal", maxLength: 1 << 28)) ?? []
        let haystack = Data(bytes)
        let left = oldRecords.filter { haystack.range(of: Data($0.suffix(48))) != nil }.count
        #expect(left == 0, "\(left) old records still in the rotated file or its log")
        let reopened = try fixture.manager()
        try reopened.unlock(passcode: SecretBytes(utf8: "1234"))
        let keychain = try Keychain(manager: reopened)
        #expect(try DeviceKeyRotationTests.value(keychain, 7) == "secret 7")
        try keychain.close()
    }
}
