import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct ProtectionTests {
    @Test func lockedErrorsNameTheClassAndReason() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource(unlocked: false)
        let keychain = try open(dir, source)
        // Before the first unlock: afterFirstUnlock and whenUnlocked are unavailable, always works.
        let beforeFirst = keychainError { try keychain.set("v", forService: "s", account: "afu", accessibility: .afterFirstUnlock) }
        guard case .interactionNotAllowed(let a1, let r1)? = beforeFirst else { Issue.record("got \(String(describing: beforeFirst))"); return }
        #expect(a1 == .afterFirstUnlock && r1 == .noFirstUnlockYet)
        let locked = keychainError { try keychain.setSecurePasswordData(SecretBytes(utf8: "x"), forService: "s", account: "wu") }
        guard case .interactionNotAllowed(let a2, let r2)? = locked else { Issue.record("got \(String(describing: locked))"); return }
        #expect(a2 == .whenUnlocked && r2 == .locked)
        #expect(locked?.description.contains("whenUnlocked class key is unavailable") == true)
        try keychain.setPassword("open", forService: "s", account: "always")

        source.setUnlocked(true)
        try keychain.setSecurePassword("secret", forService: "s", account: "wu")
        try keychain.set("afu-value", forService: "s", account: "afu", accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.flush()
        source.setUnlocked(false)
        let read = keychainError { _ = try keychain.securePasswordData(forService: "s", account: "wu") }
        guard case .interactionNotAllowed(let a3, .locked)? = read else { Issue.record("got \(String(describing: read))"); return }
        #expect(a3 == .whenUnlocked)
        #expect(try keychain.value(String.self, forService: "s", account: "afu") == "afu-value")
        #expect(try keychain.password(forService: "s", account: "always") == "open")
        // Names of locked items cannot be listed; the summary says which class is unavailable.
        let summaries = try keychain.summaries()
        #expect(summaries.count == 3)
        #expect(summaries.filter { $0.attributes == nil }.map(\.accessibility) == [.whenUnlocked])
        source.setUnlocked(true)
        #expect(try keychain.securePassword(forService: "s", account: "wu") == "secret")
    }

    @Test func fileHoldsNoNameOrValue() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("PASSWORDNEEDLE", forService: "SERVICENEEDLE", account: "ACCOUNTNEEDLE")
        try keychain.setSecurePassword("SECUREVALUENEEDLE", forService: "SERVICENEEDLE", account: "SECOND")
        try keychain.add(SecretBytes(utf8: "NETVALUENEEDLE"), for: .internet(server: "SERVERNEEDLE.example", account: "NETACCOUNT",
                                                                             networkProtocol: "https", port: 8443, path: "/PATHNEEDLE"),
                         label: "LABELNEEDLE", comment: "COMMENTNEEDLE")
        try keychain.flush()
        let needles = ["PASSWORDNEEDLE", "SERVICENEEDLE", "ACCOUNTNEEDLE", "SECUREVALUENEEDLE", "SECOND", "NETVALUENEEDLE",
                       "SERVERNEEDLE", "NETACCOUNT", "PATHNEEDLE", "LABELNEEDLE", "COMMENTNEEDLE", "8443"]
        var scanned = 0
        for suffix in ["", "-wal"] {
            let path = keychain.path + suffix
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            scanned += bytes.count
            for needle in needles {
                #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) found in \(path)")
                #expect(bytes.range(of: Data(needle.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })) == nil)
            }
        }
        #expect(scanned > 0)
        // The WAL holds the data (not yet checkpointed), so the scan covered it.
        #expect(FileManager.default.fileExists(atPath: keychain.path + "-wal"))
    }

    @Test func filesArePrivate() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        try keychain.setPassword("v", forService: "s", account: "a")
        try keychain.flush()
        for (path, mode) in [(keychain.directory, 0o700), (keychain.path, 0o600), (keychain.path + "-wal", 0o600), (keychain.path + "-shm", 0o600)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(path)")
        }
    }

    @Test func refusesFileOpenToOthers() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path: String
        do { path = try open(dir, source).path }
        chmod(path, 0o644)
        let error = keychainError { _ = try open(dir, source) }
        guard case .insecurePermissions(let reported, _)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(reported == path)
    }

    @Test func wrongBlindIndexKeyIsRefused() throws {
        let dir = try TemporaryDirectory()
        _ = try open(dir, try TestKeySource())
        let error = keychainError { _ = try open(dir, try TestKeySource()) }
        guard case .keyUnavailable? = error else { Issue.record("got \(String(describing: error))"); return }
    }
}
