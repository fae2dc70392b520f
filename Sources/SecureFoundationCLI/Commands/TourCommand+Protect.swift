import Foundation
import SecureFoundation

extension Tour {
    /// The protected-files step: a file written while locked as completeUnlessOpen, upgraded to
    /// complete after an unlock, then unreadable after the next lock. Leaves the vault unlocked.
    mutating func protectedFilesStep(manager: CryptoManager, passcode: SecretBytes) throws {
        say("Protected files: write while locked (completeUnlessOpen), upgrade to complete after unlock, lock again")
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let inbox = filesDirectory + "/inbox"
        try SecureFile.ensurePrivateDirectory(inbox)
        let order = inbox + "/order-42.json"
        manager.lock()
        try files.write(value: ["order": "42", "item": "espresso machine"], to: order, protection: .completeUnlessOpen)
        try expect(try files.protection(ofItemAt: order) == .completeUnlessOpen, "the file is not completeUnlessOpen")
        proves("locked: a completeUnlessOpen file was written with the class recipient alone")
        let lockedRead = try expectFailure("reading it while locked", { _ = try files.read(at: order) }, check: { error in
            if case ProtectedFileError.locked(.completeUnlessOpen, .locked) = error { return true }
            return false
        })
        proves("locked: reading it is refused: \(lockedRead)")
        try manager.unlock(passcode: passcode)
        let report = try files.upgradeItems(inDirectory: inbox, from: .completeUnlessOpen, to: .complete)
        try expect(report.changed == [order] && report.failures.isEmpty, "the upgrade did not change exactly the one file: \(report)")
        try expect(try files.read([String: String].self, at: order) == ["order": "42", "item": "espresso machine"], "the file does not read back")
        proves("unlocked: upgraded to complete (header rewritten, payload copied) and read back")
        manager.lock()
        let completeRead = try expectFailure("reading it after the next lock", { _ = try files.read(at: order) }, check: { error in
            if case ProtectedFileError.locked(.complete, .locked) = error { return true }
            return false
        })
        proves("locked again: the complete file is unreadable: \(completeRead)")
        try manager.unlock(passcode: passcode)
    }
}
