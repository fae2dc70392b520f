import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

/// The keychain's public functions throw `KeychainError`: a caller switches over its cases with
/// no cast and no `default`, and a vault failure below arrives as one of them.
@Suite("Keychain typed throws")
struct KeychainTypedThrowsTests {
    /// The exit-status-like class of a keychain error, by an exhaustive switch.
    static func kind(_ error: KeychainError) -> String {
        switch error {
        case .itemNotFound: return "not found"
        case .duplicateItem: return "exists"
        case .interactionNotAllowed: return "locked"
        case .corrupted, .damagedItems, .legacyFormat: return "damaged"
        case .permissionDenied, .insecurePermissions, .diskFull, .file: return "io"
        case .invalidArgument, .notUTF8, .accessibilityTooWeak: return "refused"
        case .keyUnavailable, .database, .closed: return "failure"
        case .vault(let inner): return "vault: \(inner)"
        }
    }

    @Test func readsWritesAndALockedVaultAreCasesOfKeychainError() throws {
        let directory = try TemporaryDirectory(prefix: "typed-keychain")
        let manager = try CryptoManager(directory: directory.path("home"), deviceKeyProvider: StaticDeviceKeyProvider(key: SecretBytes(copying: try SecureRandom.bytes(32))),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: SecretBytes(utf8: "1234"))
        if !manager.isUnlocked { try manager.unlock(passcode: SecretBytes(utf8: "1234")) }
        let keychain = try Keychain(manager: manager)
        do {
            _ = try keychain.password(forService: "svc", account: "nobody")
            Issue.record("read an item that was never stored")
        } catch {
            #expect(Self.kind(error) == "not found")
        }
        try keychain.add(SecretBytes(utf8: "v"), for: .generic(service: "svc", account: "a"))
        do {
            try keychain.add(SecretBytes(utf8: "w"), for: .generic(service: "svc", account: "a"))
            try keychain.flush()
            Issue.record("added an item twice")
        } catch {
            #expect(Self.kind(error) == "exists")
        }
        manager.lock()
        do {
            _ = try keychain.securePassword(forService: "svc", account: "a")
            Issue.record("read a whenUnlocked item while locked")
        } catch {
            #expect(Self.kind(error) == "locked")
        }
        try keychain.close()
        do {
            _ = try keychain.accounts(forService: "svc")
            Issue.record("listed a closed keychain")
        } catch {
            guard case .closed = error else { Issue.record("\(error)"); return }
        }
    }

    @Test func aMissingLegacyFileIsAFileErrorAndDamagedBytesALegacyFormatError() throws {
        do {
            _ = try Keychain.readLegacyKeychain(at: "/nonexistent/IMSKeychain")
            Issue.record("read a missing file")
        } catch {
            guard case .file(.system(_, _, let code)) = error else { Issue.record("\(error)"); return }
            #expect(code == ENOENT)
            #expect(Self.kind(error) == "io")
        }
        do {
            _ = try Keychain.parseLegacyKeychain(Array("not a property list".utf8))
            Issue.record("parsed bytes that are not a property list")
        } catch {
            #expect(Self.kind(error) == "damaged")
        }
    }
}
