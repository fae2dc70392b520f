import Foundation
import Testing
import Cipher
import Vault
@testable import ProtectedFiles

/// protected-files.keys format 3 against the rollback anchor beside the device key: a table from
/// before a key-pair rotation, a table copied from another home on the same device key and a
/// deleted table are refused; a writer killed before it advanced the anchor leaves a table that
/// opens.
@Suite("Key table rollback")
struct KeyTableRollbackTests {
    /// A set-up, unlocked vault in `home` whose device key is the file `root/config/device.key`
    /// (the anchor lives in `root/config/vaults/`).
    func setUp(_ fixture: ProtectFixture, home: String? = nil) throws -> CryptoManager {
        let manager = try CryptoManager(directory: home ?? fixture.home, deviceKeyProvider: FileDeviceKeyProvider(path: fixture.root + "/config/device.key"),
                                        policy: .interactive, attemptPolicy: .unlimited)
        try manager.setUp(passcode: fixture.passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: fixture.passcode) }
        return manager
    }

    func table(_ home: String) throws -> ClassKeyTableFile {
        try JSONDecoder().decode(ClassKeyTableFile.self, from: Data(try bytes(home + "/" + ClassKeyTable.fileName)))
    }

    func expectKeyTableError(_ containing: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
        let error = #expect(throws: ProtectedFileError.self, sourceLocation: sourceLocation) { try body() }
        guard case .keyTable(let why)? = error, why.contains(containing) else {
            Issue.record("expected a key-table error saying \(containing.debugDescription), got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
    }

    @Test func theTableCarriesAGenerationTheAnchorFollows() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try setUp(fixture)
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let anchor = try #require(try manager.rollbackAnchor)
        let first = try table(fixture.home)
        #expect(first.format == 3 && first.generation == 1)
        #expect(try anchor.current(RollbackAnchor.protectedFilesKeys) == 1)
        #expect(try files.rotateKeyPairs() == 8)
        #expect(try table(fixture.home).generation == 2)
        #expect(try anchor.current(RollbackAnchor.protectedFilesKeys) == 2)
        #expect(try files.destroyRetiredKeyPairs() == 8)
        #expect(try table(fixture.home).generation == 3)
    }

    /// rotate-keys, then the table from before the rotation put back: refused (its old key
    /// pairs would take new files again), locked and unlocked; also with its generation raised.
    @Test func aTableFromBeforeAKeyPairRotationIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try setUp(fixture)
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let tablePath = fixture.home + "/" + ClassKeyTable.fileName
        let before = try bytes(tablePath)
        #expect(try files.rotateKeyPairs() == 8)
        try writeBytes(before, tablePath)
        chmod(tablePath, 0o600)
        expectKeyTableError("rolled back") { _ = try files.recipient(for: .complete) }
        manager.lock()
        expectKeyTableError("rolled back") {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out")))
        // Its generation raised past the anchor: the entry MACs (which cover it) do not verify.
        let raised = String(decoding: before, as: UTF8.self).replacingOccurrences(of: "\"generation\" : 1", with: "\"generation\" : 9")
        #expect(raised != String(decoding: before, as: UTF8.self))
        try writeBytes(Array(raised.utf8), tablePath)
        expectKeyTableError("does not verify") {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        try manager.unlock(passcode: fixture.passcode)
        expectKeyTableError("does not verify") {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out")))
    }

    /// The table of another home on the same device key copied in: its MACs name the other
    /// vault, so it is refused (before, they verified and its recipients took new files).
    @Test func aTableCopiedFromAnotherHomeOnTheSameDeviceKeyIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try setUp(fixture)
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let otherHome = fixture.root + "/other"
        let other = ProtectedFiles(manager: try setUp(fixture, home: otherHome))
        try other.prepareClasses()
        _ = try other.rotateKeyPairs()
        try writeBytes(try bytes(otherHome + "/" + ClassKeyTable.fileName), fixture.home + "/" + ClassKeyTable.fileName)
        manager.lock()
        expectKeyTableError("does not verify") {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        try manager.unlock(passcode: fixture.passcode)
        expectKeyTableError("does not verify") {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .complete)
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out")))
    }

    /// A table deleted once one was written is not an empty table.
    @Test func aDeletedTableIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try setUp(fixture))
        try files.write(Array("kept".utf8), to: fixture.path("kept"), protection: .complete)
        unlink(fixture.home + "/" + ClassKeyTable.fileName)
        expectKeyTableError("missing") { _ = try files.read(at: fixture.path("kept")) }
        expectKeyTableError("missing") { try files.write(Array("x".utf8), to: fixture.path("new"), protection: .complete) }
    }

    /// A writer killed after writing the table, before advancing the anchor: the newer table
    /// opens, and the anchor is advanced then.
    @Test func aTableNewerThanTheAnchorOpensAndAdvancesIt() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try setUp(fixture)
        let files = ProtectedFiles(manager: manager)
        try files.write(Array("one".utf8), to: fixture.path("one"), protection: .completeUnlessOpen)
        let anchor = try #require(try manager.rollbackAnchor)
        let anchorBytes = try SecureFile.read(anchor.path)
        #expect(try files.rotateKeyPairs() == 8)
        try SecureFile.writeAtomically(anchorBytes, to: anchor.path)
        #expect(try anchor.current(RollbackAnchor.protectedFilesKeys) == 1)
        manager.lock()
        try files.write(Array("two".utf8), to: fixture.path("two"), protection: .completeUnlessOpen)
        #expect(try anchor.current(RollbackAnchor.protectedFilesKeys) == 2)
        try manager.unlock(passcode: fixture.passcode)
        #expect(try files.read(at: fixture.path("one")) == Array("one".utf8))
        #expect(try files.read(at: fixture.path("two")) == Array("two".utf8))
    }

    /// A format-2 table (as the previous version wrote it) is read and written as format 3 by
    /// the next write, where no anchor holds a generation yet.
    @Test func aFormat2TableIsUpgradedAtItsNextWrite() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let tablePath = fixture.home + "/" + ClassKeyTable.fileName
        let current = try table(fixture.home)
        // The entries MACed as format 2 did (the previous MAC input).
        let macKey = try manager.deviceSubkey(purpose: ClassKeyTable.macPurpose)
        defer { macKey.wipe() }
        let v2 = try JSONSerialization.data(withJSONObject: [
            "format": 2,
            "entries": current.entries.map { entry -> [String: String] in
                let mac = ClassKeyTable.mac(entry, format: 2, vaultID: Data(), generation: 0, key: macKey)
                return ["name": entry.name, "recipient": entry.recipient, "sealedIdentity": entry.sealedIdentity, "mac": mac]
            },
            "retired": [Any](),
        ])
        try writeBytes(Array(v2), tablePath)
        chmod(tablePath, 0o600)
        manager.lock()
        // Trusted while locked through its format-2 MAC, as before.
        try files.write(Array("v2".utf8), to: fixture.path("v2"), protection: .completeUnlessOpen)
        #expect(try table(fixture.home).format == 2)
        try manager.unlock(passcode: fixture.passcode)
        #expect(try files.rotateKeyPairs() == 8)
        let upgraded = try table(fixture.home)
        #expect(upgraded.format == 3 && upgraded.generation == 1 && upgraded.entries.allSatisfy { !$0.mac.isEmpty })
        manager.lock()
        try files.write(Array("v3".utf8), to: fixture.path("v3"), protection: .completeUnlessOpen)
        try manager.unlock(passcode: fixture.passcode)
        #expect(try files.read(at: fixture.path("v2")) == Array("v2".utf8))
        #expect(try files.read(at: fixture.path("v3")) == Array("v3".utf8))
    }
}
