import Foundation
import Testing
import Cipher
import Vault
@testable import UnlockAgent

/// The class rules as the agent applies them: its own unlock decides, whatever the process
/// that embeds it did with the vault.
@Suite("Unlock agent class rules", .serialized)
struct AgentClassRuleTests {
    static let whenUnlocked: [Accessibility] = [.whenUnlocked, .whenUnlockedThisDeviceOnly]
    static let afterFirstUnlock: [Accessibility] = [.afterFirstUnlock, .afterFirstUnlockThisDeviceOnly]

    /// The fixture's set-up unlocked the vault in this process, so the process keeps its
    /// afterFirstUnlock keys; an agent started here but never unlocked must still refuse them.
    @Test func agentNeverUnlockedServesNoClassKey() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let vaultID = try #require(try fixture.manager().vaultID)
        #expect(try client.status().firstUnlockDone == false)
        for accessibility in Self.whenUnlocked {
            #expect(throws: AgentError.vault(.classKeyUnavailable(accessibility, .locked))) { try client.classKeys(for: accessibility, vaultID: vaultID) }
        }
        for accessibility in Self.afterFirstUnlock {
            #expect(throws: AgentError.vault(.classKeyUnavailable(accessibility, .noFirstUnlockYet))) { try client.classKeys(for: accessibility, vaultID: vaultID) }
        }
        #expect(client.unlockedClassKeys(.afterFirstUnlock, vaultID: vaultID) == nil)
        #expect(client.unlockedClassKeys(.whenUnlocked, vaultID: vaultID) == nil)
    }

    /// After an unlock and a lock: afterFirstUnlock keys (the vault's own) still, whenUnlocked not.
    @Test func afterUnlockAndLockOnlyAfterFirstUnlockIsServed() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        let vaultID = try #require(try fixture.manager().vaultID)
        _ = try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        for accessibility in Self.whenUnlocked + Self.afterFirstUnlock {
            #expect(try client.classKeys(for: accessibility, vaultID: vaultID).count == 1)
        }
        try client.lock()
        #expect(try client.status().state == .locked)
        for accessibility in Self.whenUnlocked {
            #expect(throws: AgentError.vault(.classKeyUnavailable(accessibility, .locked))) { try client.classKeys(for: accessibility, vaultID: vaultID) }
        }
        let direct = try fixture.manager()
        try direct.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        defer { direct.lock() }
        for accessibility in Self.afterFirstUnlock {
            let served = try client.classKeys(for: accessibility, vaultID: vaultID)
            #expect(served.count == 1)
            #expect(hex(served[0]) == hex(try direct.classKey(for: accessibility)))
        }
        // A locked manager taking keys from the agent: afterFirstUnlock yes, whenUnlocked no.
        let viaAgent = try fixture.manager(source: client)
        #expect(throws: VaultError.classKeyUnavailable(.whenUnlockedThisDeviceOnly, .locked)) { try viaAgent.classKey(for: .whenUnlockedThisDeviceOnly) }
    }

    /// A source that records every request.
    final class RecordingSource: UnlockedClassKeySource, @unchecked Sendable {
        private let lock = NSLock()
        private var asked: [ProtectionClass] = []
        var requests: [ProtectionClass] { lock.withLock { asked } }
        func unlockedClassKeys(_ protectionClass: ProtectionClass, vaultID: Data) -> [SecretBytes]? {
            lock.withLock { asked.append(protectionClass) }
            return nil
        }
    }

    /// always and alwaysThisDeviceOnly keys come from the data directory and the device key: a
    /// manager never unlocked, with a key source that has nothing (or no agent at all), has them
    /// without asking the source; the agent refuses to serve them.
    @Test func alwaysItemsNeverNeedTheAgent() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let source = RecordingSource()
        let manager = try fixture.manager(source: source)
        #expect(!manager.isUnlocked)
        let always = try manager.classKey(for: .always)
        let bound = try manager.classKey(for: .alwaysThisDeviceOnly)
        #expect(always.count == 32 && bound.count == 32 && hex(always) != hex(bound))
        _ = try manager.retiredClassKeys(for: .alwaysThisDeviceOnly)
        #expect(source.requests.isEmpty)
        // No agent running at all.
        let absent = try fixture.manager(source: AgentClient(socketPath: fixture.root + "/none.sock", timeout: 2))
        #expect(hex(try absent.classKey(for: .alwaysThisDeviceOnly)) == hex(bound))
        // The agent does not serve the always class.
        let client = try fixture.start()
        let vaultID = try #require(try manager.vaultID)
        _ = try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        #expect(throws: AgentError.self) { try client.classKeys(for: .always, vaultID: vaultID) }
        #expect(client.unlockedClassKeys(.always, vaultID: vaultID) == nil)
    }
}
