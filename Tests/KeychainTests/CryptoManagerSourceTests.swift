import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct CryptoManagerSourceTests {
    @Test func cryptoManagerIsAKeySource() throws {
        let dir = try TemporaryDirectory()
        let manager = try CryptoManager(directory: dir.sub("vault"), deviceKeyProvider: FileDeviceKeyProvider(path: dir.sub("device.key")),
                                        attemptPolicy: .unlimited)
        try manager.storeTemporaryPasscode(SecretBytes(utf8: "1234"))
        try manager.finalize()
        let keychain = try Keychain(manager: manager)
        #expect(keychain.path == dir.sub("vault/keychain.sqlite"))
        try keychain.setSecurePassword("secure", forService: "s", account: "a")
        try keychain.setPassword("plain", forService: "s", account: "b")
        try keychain.flush()
        manager.lock()

        // Locked: the Vault's classKeyUnavailable comes out as interactionNotAllowed.
        let error = keychainError { _ = try keychain.securePassword(forService: "s", account: "a") }
        guard case .interactionNotAllowed(let accessibility, let reason)? = error else {
            Issue.record("got \(String(describing: error))"); return
        }
        #expect(accessibility == .whenUnlocked && reason == .locked)
        #expect(try keychain.password(forService: "s", account: "b") == "plain")

        // Another manager with the same device key finds the items (same blind-index key).
        try manager.unlock(passcode: SecretBytes(utf8: "1234"))
        let second = try Keychain(directory: dir.sub("vault"), keySource: manager)
        #expect(try second.securePassword(forService: "s", account: "a") == "secure")

        // A different device key cannot open the keychain's names.
        let other = try CryptoManager(directory: dir.sub("vault2"), deviceKeyProvider: FileDeviceKeyProvider(path: dir.sub("device2.key")))
        guard case .keyUnavailable? = keychainError({ _ = try Keychain(directory: dir.sub("vault"), keySource: other) }) else {
            Issue.record("a keychain opened with another device key must be refused"); return
        }
    }
}
