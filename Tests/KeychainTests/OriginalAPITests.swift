import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct OriginalAPITests {
    @Test func passwordRoundTripAndDelete() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("hunter2", forService: "mail", account: "alice")
        try keychain.setPassword("", forService: "mail", account: "empty")
        #expect(try keychain.password(forService: "mail", account: "alice") == "hunter2")
        #expect(try keychain.password(forService: "mail", account: "empty") == "")
        try keychain.setPassword("changed", forService: "mail", account: "alice")
        #expect(try keychain.password(forService: "mail", account: "alice") == "changed")
        try keychain.setPasswordData([0xFF, 0x00, 0xFE], forService: "bin", account: "x")
        #expect(text(try keychain.passwordData(forService: "bin", account: "x")) == String(decoding: [0xFF, 0x00, 0xFE], as: UTF8.self))
        let notText = keychainError { _ = try keychain.password(forService: "bin", account: "x") }
        guard case .notUTF8? = notText else { Issue.record("expected notUTF8, got \(String(describing: notText))"); return }

        // Deleting one account keeps the service's other account (the old library removed both).
        try keychain.deletePassword(forService: "mail", account: "empty")
        #expect(try keychain.password(forService: "mail", account: "alice") == "changed")
        #expect(keychainError { _ = try keychain.password(forService: "mail", account: "empty") }?.isNotFound == true)
        #expect(keychainError { try keychain.deletePassword(forService: "mail", account: "empty") }?.isNotFound == true)
        try keychain.flush()
        let reopened = try open(dir, source)
        #expect(try reopened.password(forService: "mail", account: "alice") == "changed")
        #expect(try reopened.accounts(forService: "mail").map(\.account) == ["alice"])
    }

    @Test func serviceAndAllDeletes() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        for account in ["a", "b", "c"] { try keychain.setPassword(account, forService: "s1", account: account) }
        try keychain.setPassword("x", forService: "s2", account: "a")
        try keychain.flush()
        try keychain.setPassword("d", forService: "s1", account: "d") // pending, not flushed
        #expect(Set(try keychain.accounts(forService: "s1").map(\.account)) == ["a", "b", "c", "d"])
        #expect(try keychain.accounts().count == 5)
        #expect(try keychain.deleteAccounts(forService: "s1") == 4)
        #expect(try keychain.accounts(forService: "s1").isEmpty)
        #expect(try keychain.password(forService: "s2", account: "a") == "x")
        try keychain.flush()
        #expect(try keychain.deleteAll() == 1)
        try keychain.flush()
        #expect(try keychain.accounts().isEmpty)
    }

    /// Deletes in a service that has seen many checks use the set of its ids (no SQL per call);
    /// answers must stay exact for this keychain's own writes and for another connection's.
    @Test func deletesInABusyServiceStayExact() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        for index in 0..<200 { try keychain.setPassword("v\(index)", forService: "busy", account: "a\(index)") }
        try keychain.setPassword("other", forService: "quiet", account: "a0")
        try keychain.flush()
        // Enough deletes to load the service's ids; interleaved with pending and committed state.
        for index in 0..<100 { try keychain.deletePassword(forService: "busy", account: "a\(index)") }
        for index in 0..<100 {
            guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a\(index)") }) else {
                Issue.record("a pending delete must make the item absent"); return
            }
        }
        try keychain.flush()
        for index in [0, 50, 99] {
            guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a\(index)") }) else {
                Issue.record("a committed delete must make the item absent"); return
            }
        }
        guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "never") }) else {
            Issue.record("an account that never existed is not found"); return
        }
        // Re-added here, then deleted again.
        try keychain.setPassword("back", forService: "busy", account: "a5")
        try keychain.flush()
        try keychain.deletePassword(forService: "busy", account: "a5")
        try keychain.flush()

        // Another connection adds an item: it is found (a miss in the set is always looked up).
        let other = try open(dir, source)
        try other.setPassword("new", forService: "busy", account: "from-other")
        try other.flush()
        try keychain.deletePassword(forService: "busy", account: "from-other")
        try keychain.flush()
        #expect(throws: KeychainError.self) { _ = try other.password(forService: "busy", account: "from-other") }
        // Another connection deletes an item: once its commit is seen (at most 100 ms later),
        // a delete here reports it missing.
        try other.deletePassword(forService: "busy", account: "a150")
        try other.flush()
        Thread.sleep(forTimeInterval: 0.15)
        guard case .itemNotFound? = keychainError({ try keychain.deletePassword(forService: "busy", account: "a150") }) else {
            Issue.record("an item deleted by another connection must be reported missing once its commit is seen"); return
        }
        try other.close()
        // Everything else is intact.
        #expect(try keychain.accounts(forService: "busy").count == 99)
        #expect(try keychain.password(forService: "busy", account: "a199") == "v199")
        #expect(try keychain.password(forService: "quiet", account: "a0") == "other")
        try keychain.close()
    }

    @Test func closeFlushesAndRefusesLaterUse() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .seconds(3600))
        try keychain.setPassword("v", forService: "s", account: "a")
        try keychain.close()
        guard case .closed? = keychainError({ _ = try keychain.password(forService: "s", account: "a") }) else {
            Issue.record("a closed keychain must refuse reads"); return
        }
        guard case .closed? = keychainError({ try keychain.setPassword("w", forService: "s", account: "a") }) else {
            Issue.record("a closed keychain must refuse writes"); return
        }
        #expect(try open(dir, source).password(forService: "s", account: "a") == "v")
    }

    @Test func codableValues() throws {
        struct Token: Codable, Equatable { var access: String; var expires: Date; var scopes: [String] }
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        let token = Token(access: "abc", expires: Date(timeIntervalSince1970: 1_700_000_000), scopes: ["r", "w"])
        try keychain.set(token, forService: "api", account: "me")
        #expect(try keychain.value(Token.self, forService: "api", account: "me") == token)
        let wrong = keychainError { _ = try keychain.value([Int].self, forService: "api", account: "me") }
        #expect(wrong?.isCorrupted == true)
    }
}
