import Foundation
import Testing
import Cipher
@testable import Vault

/// The recovery key: its text (known answer, checksum, forgiving reading), its place among the
/// credentials (unlock, a counted wrong attempt, a passcode reset, rotation, revocation) and the
/// state's version-4 fields.
@Suite struct RecoveryKeyTests {
    /// Seed 00 01 … 13: checksum SHA-256("securefoundation recovery key v1\n" ‖ seed)[0..<5],
    /// the 25 bytes in Crockford's base32, eight groups of five.
    static let knownText = "000G4-0R40M-30E20-9185G-R38E1-W8124-GKKF6-KZHNR"

    static func knownKey() -> RecoveryKey {
        RecoveryKey(seed: SecretBytes(count: 20) { target in for index in 0..<20 { target[index] = UInt8(index) } })
    }

    static func text(_ key: RecoveryKey) -> String {
        let bytes = key.text()
        defer { bytes.wipe() }
        return bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test func knownAnswer() throws {
        let known = Self.knownKey()
        #expect(Self.text(known) == Self.knownText)
        let parsed = try RecoveryKey(text: Self.knownText)
        #expect(parsed.seed == known.seed)
    }

    @Test func readingIsForgivingWhereTypingSlips() throws {
        // Lower case, no dashes, spaces, a trailing newline; O for 0 and l / I for 1.
        let variants = [
            Self.knownText.lowercased(),
            Self.knownText.replacingOccurrences(of: "-", with: ""),
            Self.knownText.replacingOccurrences(of: "-", with: " ") + "\n",
            Self.knownText.replacingOccurrences(of: "0", with: "O"),
            Self.knownText.replacingOccurrences(of: "1", with: "l"),
            Self.knownText.replacingOccurrences(of: "1", with: "I"),
        ]
        let known = Self.knownKey()
        for variant in variants {
            let parsed = try RecoveryKey(text: variant)
            #expect(parsed.seed == known.seed, "\(variant)")
        }
    }

    @Test func everyMistypedCharacterIsCaughtByTheChecksum() throws {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        let symbols = Array(Self.knownText.replacingOccurrences(of: "-", with: ""))
        var tried = 0
        for position in symbols.indices {
            for replacement in alphabet where replacement != symbols[position] {
                var typed = symbols
                typed[position] = replacement
                #expect(throws: VaultError.self) { try RecoveryKey(text: String(typed)) }
                tried += 1
            }
        }
        #expect(tried == 40 * 31)
        // Two neighbours swapped, a character missing, one too many, one outside the alphabet.
        var swapped = symbols
        swapped.swapAt(3, 4)
        for bad in [String(swapped), String(symbols.dropLast()), String(symbols) + "0", "U" + String(symbols.dropFirst())] {
            do {
                _ = try RecoveryKey(text: bad)
                Issue.record("\(bad) was accepted")
            } catch {
                guard case .invalidArgument = error else { Issue.record("\(bad): \(error)"); continue }
            }
        }
    }

    @Test func generatedKeysRoundTripAndDiffer() throws {
        let first = try RecoveryKey.generate(), second = try RecoveryKey.generate()
        let text = Self.text(first)
        #expect(text.count == 47 && text.split(separator: "-").count == 8)
        let parsed = try RecoveryKey(text: text)
        #expect(parsed.seed == first.seed)
        #expect(Self.text(second) != text)
        #expect(!"\(first)".contains(text.prefix(5)))
    }

    @Test func unlocksResetsThePasscodeAndIsRevokedByItsReplacement() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        #expect(try !manager.hasRecoveryKey)
        let key = try manager.createRecoveryKey()
        #expect(try manager.hasRecoveryKey)
        manager.lock()

        try manager.unlock(recoveryKey: key)
        #expect(manager.isUnlocked)
        manager.lock()

        // Another key: a counted failed attempt, as a wrong passcode.
        let stranger = try RecoveryKey.generate()
        #expect(throws: VaultError.wrongRecoveryKey(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(recoveryKey: stranger) }
        #expect(try manager.failedAttempts == 1)

        // The passcode and the answers are lost: the recovery key sets a new passcode.
        try manager.resetPasscode(recoveryKey: key, new: secret("new-pin"))
        manager.lock()
        #expect(throws: VaultError.self) { try manager.unlock(passcode: secret("pin")) }
        try manager.unlock(passcode: secret("new-pin"))

        // A key rotation keeps the recovery key valid (the new key is wrapped to its public key).
        try manager.rotateKey(passcode: secret("new-pin"))
        manager.lock()
        try manager.unlock(recoveryKey: key)

        // A new recovery key revokes the old one.
        let replacement = try manager.createRecoveryKey()
        manager.lock()
        #expect(throws: VaultError.wrongRecoveryKey(failures: 1, nextAttemptAfter: nil)) { try manager.unlock(recoveryKey: key) }
        try manager.unlock(recoveryKey: replacement)

        // Removed: nothing opens with it, and the error says there is none.
        try manager.removeRecoveryKey()
        manager.lock()
        #expect(throws: VaultError.noRecoveryKey) { try manager.unlock(recoveryKey: replacement) }
    }

    @Test func theRecoveryWrappingIsAuthenticatedWithThePublicFields() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.manager()
        try manager.setUp(passcode: secret("pin"))
        let key = try manager.createRecoveryKey()
        manager.lock()
        let state = try #require(try VaultState.load(directory: fixture.home))
        #expect(state.version == 4 && state.recovery != nil)
        // Someone who can write the data directory removes the recovery wrapping, or puts in one
        // of their own: the secret section no longer opens (the passcode still counts as right).
        let attacker = try RecoveryKey.generate()
        var planted = state
        planted.recovery = try attacker.wrap(try SecretBytes.random(count: 32), state: state)
        for variant in [planted, { var s = state; s.recovery = nil; return s }()] {
            try SecureFile.writeAtomically(try variant.encoded(), to: fixture.statePath)
            let fresh = try fixture.manager()
            #expect(throws: VaultError.self) { try fresh.unlock(passcode: secret("pin")) }
            #expect(!fresh.isUnlocked)
        }
        // A state of their own, built from the public fields (vault id, key id, the salt of the
        // recovery wrapping) with an application key they chose: the user's recovery key does
        // not open it, since the wrapping needs the KEK only the recovery key gives.
        let chosen = try SecretBytes.random(count: 32)
        var forged = state
        let guessedKEK = try SecretBytes.random(count: 32)
        forged.recovery = try RecoveryKey.wrap(chosen, kek: guessedKEK, salt: try #require(state.recovery?.salt), state: state)
        try SecureFile.writeAtomically(try forged.encoded(), to: fixture.statePath)
        #expect(throws: VaultError.wrongRecoveryKey(failures: 1, nextAttemptAfter: nil)) { try fixture.manager().unlock(recoveryKey: key) }
        try SecureFile.writeAtomically(try state.encoded(), to: fixture.statePath)
        try fixture.manager().unlock(recoveryKey: key)
    }
}
