import Cipher
import Configuration
import Foundation
import KeychainConfiguration
import Testing
@testable import Keychain

/// Keychain items read through swift-configuration's `ConfigReader`.
@Suite struct KeychainConfigProviderTests {
    /// Collects what the configuration system reports about each access, as an application's
    /// access logger would print it.
    final class Reports: AccessReporter, @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func report(_ event: AccessEvent) { lock.withLock { lines.append("\(event)") } }
        var all: String { lock.withLock { lines.joined(separator: "\n") } }
    }

    @Test("values come from the keychain marked secret; a missing item is missing; a locked one is unavailable with the keychain's reason")
    func readsThroughConfigReader() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource(unlocked: true)
        let keychain = try open(dir, source)
        try keychain.setSecurePassword("correct horse battery", forService: "orders", account: "database.password")
        try keychain.setPassword(" 5432\n", forService: "orders", account: "database.port")
        try keychain.setPassword("yes", forService: "orders", account: "feature.enabled")
        try keychain.setSecurePasswordData(SecretBytes(copying: [0xff, 0x00, 0x80]), forService: "orders", account: "signing.key")
        let provider = KeychainConfigProvider(keychain: keychain, service: "orders")
        let reports = Reports()
        let config = ConfigReader(providers: [provider, InMemoryProvider(values: ["database.host": "db.internal"])],
                                  accessReporter: reports)

        #expect(try config.requiredString(forKey: "database.password") == "correct horse battery")
        #expect(config.int(forKey: "database.port") == 5432)
        #expect(config.bool(forKey: "feature.enabled") == true)
        #expect(config.bytes(forKey: "signing.key") == [0xff, 0x00, 0x80])
        // Not in the keychain: the next provider answers, or the default.
        #expect(config.string(forKey: "database.host") == "db.internal")
        #expect(config.string(forKey: "database.user", default: "orders") == "orders")
        // Bytes that are not UTF-8 are not a string: a typed error that does not show them.
        let mismatch = #expect(throws: KeychainConfigurationError.self) { try config.requiredString(forKey: "signing.key") }
        #expect("\(String(describing: mismatch))".contains("is not a string value"))
        // Every value is secret: the reports and the snapshot's description never show it.
        let value = try provider.value(forKey: AbsoluteConfigKey(["database", "password"]), type: .string)
        #expect(value.value?.isSecret == true)
        #expect(!"\(value)".contains("horse"))
        #expect(!reports.all.contains("horse") && !reports.all.contains("5432"), "\(reports.all)")

        // Locked: the class key is unavailable, so the value is unavailable, with the reason.
        source.setUnlocked(false)
        #expect(config.string(forKey: "database.password") == nil)
        #expect(config.string(forKey: "database.password", default: "fallback") == "fallback")
        do {
            _ = try config.requiredString(forKey: "database.password")
            Issue.record("a locked item was read")
        } catch let error as KeychainConfigurationError {
            guard case .unavailable(let key, .interactionNotAllowed(.whenUnlocked, .locked)) = error else {
                Issue.record("\(error)"); return
            }
            #expect(key == "database.password")
            #expect(error.description.contains("the vault is locked"))
        }
        // An item of the always class stays readable.
        #expect(config.int(forKey: "database.port") == 5432)
        #expect(reports.all.contains("locked"), "\(reports.all)")
        source.setUnlocked(true)
        #expect(config.string(forKey: "database.password") == "correct horse battery")
    }

    @Test("a minimum class refuses an item stored under a weaker one")
    func minimumClass() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource(unlocked: true))
        try keychain.setPassword("weak", forService: "svc", account: "token")   // the always class
        let config = ConfigReader(provider: KeychainConfigProvider(keychain: keychain, service: "svc", minimumAccessibility: .whenUnlocked))
        do {
            _ = try config.requiredString(forKey: "token")
            Issue.record("an item of a weaker class was read")
        } catch let error as KeychainConfigurationError {
            guard case .unavailable(_, .accessibilityTooWeak) = error else { Issue.record("\(error)"); return }
        }
    }

    @Test("a snapshot holds the service's items as they were; watching sees a change and a deletion", .timeLimit(.minutes(2)))
    func snapshotAndWatch() async throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource(unlocked: true)
        let keychain = try open(dir, source)
        try keychain.setSecurePassword("first", forService: "svc", account: "api.token")
        let provider = KeychainConfigProvider(keychain: keychain, service: "svc", pollInterval: .milliseconds(20))
        let snapshot = provider.snapshot()
        try keychain.setSecurePassword("second", forService: "svc", account: "api.token")
        #expect(try snapshot.value(forKey: AbsoluteConfigKey(["api", "token"]), type: .string).value?.content == .string("first"))
        #expect(try provider.value(forKey: AbsoluteConfigKey(["api", "token"]), type: .string).value?.content == .string("second"))
        #expect(!"\(snapshot)".contains("first"))

        // Taken while locked: the always item is there, the locked one is unavailable (its name
        // is sealed, so it is looked up by key), a key that is nowhere is missing.
        try keychain.setPassword("always-value", forService: "svc", account: "plain")
        source.setUnlocked(false)
        let lockedSnapshot = provider.snapshot()
        #expect(try lockedSnapshot.value(forKey: AbsoluteConfigKey(["plain"]), type: .string).value?.content == .string("always-value"))
        #expect(throws: KeychainConfigurationError.self) {
            try lockedSnapshot.value(forKey: AbsoluteConfigKey(["api", "token"]), type: .string)
        }
        #expect(try lockedSnapshot.value(forKey: AbsoluteConfigKey(["nowhere"]), type: .string).value == nil)
        source.setUnlocked(true)

        let config = ConfigReader(provider: provider)
        // Each step changes the item and waits (bounded) for the watcher to report it.
        let seen: [String] = try await config.watchString(forKey: "api.token") { updates in
            var seen: [String] = []
            var iterator = updates.makeAsyncIterator()
            func next() async throws -> String {
                guard let value = try await iterator.next() else { return "end" }
                return value ?? "nil"
            }
            seen.append(try await next())
            try keychain.setSecurePassword("third", forService: "svc", account: "api.token")
            seen.append(try await next())
            try keychain.deletePassword(forService: "svc", account: "api.token")
            seen.append(try await next())
            return seen
        }
        #expect(seen == ["second", "third", "nil"])
    }
}
