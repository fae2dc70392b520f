import Foundation
import Testing
import Cipher
@testable import Vault

/// `CryptoManager`'s public functions throw `VaultError`: a caller switches over its cases with
/// no cast and no `default`.
@Suite("Vault typed throws")
struct VaultTypedThrowsTests {
    /// The exit-status-like class of a vault error, by an exhaustive switch.
    static func kind(_ error: VaultError) -> String {
        switch error {
        case .wrongPasscode, .wrongAnswers, .unverifiedAnswers, .wrongRecoveryKey, .wrongTokenPIN: return "wrong secret"
        case .tooManyAttempts, .attemptRecordDamaged: return "wait"
        case .erased, .notSetUp: return "no vault"
        case .locked, .classKeyUnavailable: return "locked"
        case .alreadySetUp: return "exists"
        case .noPasscode, .noSecurityQuestions, .noRecoveryKey, .invalidArgument, .tokenPINUnavailable: return "usage"
        case .corrupted, .rolledBack: return "damaged"
        case .insecurePermissions, .io: return "io"
        case .deviceKey, .crypto: return "failure"
        }
    }

    @Test func unlockWithAWrongPasscodeIsACaseOfVaultError() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        do {
            try manager.unlock(passcode: secret("pin"))
            Issue.record("unlocked a vault that is not set up")
        } catch {
            #expect(Self.kind(error) == "no vault")
            #expect(error == .notSetUp)
        }
        try manager.setUp(passcode: secret("pin"))
        do {
            try manager.setUp(passcode: secret("other"))
            Issue.record("set up twice")
        } catch {
            #expect(Self.kind(error) == "exists")
        }
        manager.lock()
        do {
            try manager.unlock(passcode: secret("wrong"))
            Issue.record("unlocked with a wrong passcode")
        } catch {
            #expect(Self.kind(error) == "wrong secret")
            guard case .wrongPasscode(let failures, _) = error else { Issue.record("\(error)"); return }
            #expect(failures == 1)
        }
        do {
            _ = try manager.encrypt([1, 2, 3])
            Issue.record("sealed while locked")
        } catch {
            #expect(Self.kind(error) == "locked")
        }
    }

    @Test func decryptOfDamagedBytesIsACaseOfVaultError() async throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        manager.lock()
        try await manager.unlock(passcode: secret("pin"))
        var sealed = try manager.encrypt([1, 2, 3], context: [9])
        sealed[sealed.count - 1] ^= 1
        do {
            _ = try manager.decrypt(sealed, context: [9])
            Issue.record("opened changed bytes")
        } catch {
            #expect(Self.kind(error) == "damaged")
        }
    }
}
