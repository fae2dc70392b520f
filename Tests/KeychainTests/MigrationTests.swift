import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct MigrationTests {
    @Test func importsLegacyBinaryPlist() throws {
        let dir = try TemporaryDirectory()
        let legacy: [String: [String: Data]] = [
            "org.mitre.imas.crypto-manager": ["salt": Data(repeating: 7, count: 32), "shared-key.passcode": Data(repeating: 9, count: 64)],
            "mail": ["alice": Data("alice-pw".utf8), "bob": Data("bob-pw".utf8)],
        ]
        let plist = try PropertyListSerialization.data(fromPropertyList: legacy, format: .binary, options: 0)
        #expect(plist.prefix(8) == Data("bplist00".utf8))
        let file = dir.sub("...")
        try plist.write(to: URL(fileURLWithPath: file))
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("kept", forService: "mail", account: "alice")
        let report = try keychain.importLegacyKeychain(at: file)
        #expect(report == Keychain.LegacyImportReport(imported: 3, skipped: 1))
        #expect(try keychain.password(forService: "mail", account: "alice") == "kept")
        #expect(try keychain.password(forService: "mail", account: "bob") == "bob-pw")
        #expect(try keychain.passwordData(forService: "org.mitre.imas.crypto-manager", account: "salt").count == 32)
        let again = try keychain.importLegacyKeychain(at: file, overwrite: true)
        #expect(again.imported == 4)
        #expect(try keychain.password(forService: "mail", account: "alice") == "alice-pw")

        let empty = dir.sub("empty")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(try keychain.importLegacyKeychain(at: empty).imported == 0)
        let bad = dir.sub("bad")
        try PropertyListSerialization.data(fromPropertyList: ["a": "b"], format: .binary, options: 0).write(to: URL(fileURLWithPath: bad))
        guard case .legacyFormat? = keychainError({ _ = try keychain.importLegacyKeychain(at: bad) }) else {
            Issue.record("a plist of the wrong shape must be refused"); return
        }
    }

    @Test func reinstallWipesStaleItems() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let marker = dir.sub("cache/install-marker")
        do {
            let keychain = try open(dir, source, marker: marker)
            #expect(keychain.wipedStaleItems == 0)
            try keychain.setPassword("v", forService: "s", account: "a")
            try keychain.setPassword("w", forService: "s", account: "b")
            try keychain.flush()
        }
        #expect(FileManager.default.fileExists(atPath: marker))
        // Same installation: nothing wiped.
        do {
            let keychain = try open(dir, source, marker: marker)
            #expect(keychain.wipedStaleItems == 0)
            #expect(try keychain.password(forService: "s", account: "a") == "v")
        }
        // The marker went away with a reinstall: the items are stale.
        try FileManager.default.removeItem(atPath: dir.sub("cache"))
        let keychain = try open(dir, source, marker: marker)
        #expect(keychain.wipedStaleItems == 2)
        #expect(keychainError { _ = try keychain.password(forService: "s", account: "a") }?.isNotFound == true)
        #expect(FileManager.default.fileExists(atPath: marker))
        // Without the option, nothing is checked.
        try keychain.setPassword("x", forService: "s", account: "a")
        try keychain.flush()
        try FileManager.default.removeItem(atPath: marker)
        #expect(try open(dir, source).password(forService: "s", account: "a") == "x")
    }
}
