import Foundation
import Cipher

/// The state iMAS Secure Foundation's crypto manager (`IMSCryptoManager`) kept as plain entries
/// of its keychain file, under the service `org.mitre.imas.crypto-manager`, and the unwrapping of
/// its application key ("shared key") with the old passcode or answers.
public struct LegacyCryptoManager: Sendable {
    /// The legacy keychain service of the crypto manager's entries.
    public static let service = "org.mitre.imas.crypto-manager"

    /// The single 32-byte salt of every legacy key derivation (`salt`).
    public let salt: [UInt8]
    /// The application key wrapped under the passcode key (`shared-key.passcode`).
    public let passcodeWrappedKey: [UInt8]?
    /// The application key wrapped under the answers key (`shared-key.security-answers`).
    public let answersWrappedKey: [UInt8]?
    /// The security questions (`security-questions`: a JSON array, every byte XOR 0x9C).
    public let questions: [String]
    /// The GenItem secret (`gen-item`) and its key wrapped under the passcode key (`gen-itemk`).
    public let genItem: [UInt8]?
    public let genItemKey: [UInt8]?

    /// Reads the crypto manager's entries, keyed by account.
    /// - Parameter accounts: The legacy keychain entries of the crypto manager's service, by account.
    /// - Throws: ``MigrationError/missingLegacyState(_:)`` without a salt or any wrapped key;
    ///   ``MigrationError/legacyFormat(_:)`` for entries of impossible sizes or unreadable questions.
    public init(accounts: [String: [UInt8]]) throws(MigrationError) {
        guard let salt = accounts["salt"], !salt.isEmpty else {
            throw MigrationError.missingLegacyState("crypto-manager salt (service \(Self.service), account salt)")
        }
        guard salt.count <= 1024 else { throw MigrationError.legacyFormat("a salt of \(salt.count) bytes") }
        self.salt = salt
        passcodeWrappedKey = accounts["shared-key.passcode"]
        answersWrappedKey = accounts["shared-key.security-answers"]
        guard passcodeWrappedKey != nil || answersWrappedKey != nil else {
            throw MigrationError.missingLegacyState("wrapped application key (accounts shared-key.passcode and shared-key.security-answers)")
        }
        if let obfuscated = accounts["security-questions"], !obfuscated.isEmpty {
            let json = Data(obfuscated.map { $0 ^ 0x9C })
            guard let list = try? JSONSerialization.jsonObject(with: json, options: []) as? [Any],
                  let questions = list as? [String], list.count <= 64 else {
                throw MigrationError.legacyFormat("the security questions are not a JSON array of strings")
            }
            self.questions = questions
        } else {
            questions = []
        }
        genItem = accounts["gen-item"]
        genItemKey = accounts["gen-itemk"]
    }

    /// The legacy passcode key: PBKDF2-HMAC-SHA256(UTF-8 passcode, salt, 1,000 rounds).
    func passcodeKey(_ passcode: SecretBytes) throws -> SecretBytes {
        try LegacyCipher.deriveKey(passcode, salt: salt)
    }

    /// The legacy answers key: the answers joined without a separator, as the original did.
    func answersKey(_ answers: [SecretBytes]) throws -> SecretBytes {
        let total = answers.reduce(0) { $0 + $1.count }
        let joined = SecretBytes(count: total) { target in
            var offset = 0
            for answer in answers {
                answer.withUnsafeBytes { bytes in
                    if !bytes.isEmpty { UnsafeMutableRawBufferPointer(rebasing: target[offset..<offset + bytes.count]).copyMemory(from: bytes) }
                }
                offset += answer.count
            }
        }
        defer { joined.wipe() }
        return try LegacyCipher.deriveKey(joined, salt: salt)
    }

    /// Unwraps the legacy application key with the old passcode.
    /// - Parameter passcode: The passcode set in the legacy application.
    /// - Returns: The legacy application key.
    /// - Throws: ``MigrationError/wrongPasscode`` (also for a damaged wrapping: the two cannot be
    ///   told apart), ``MigrationError/missingLegacyState(_:)`` when no passcode was set.
    package func applicationKey(passcode: SecretBytes) throws(MigrationError) -> SecretBytes {
        return try MigrationError.typing {
            guard let wrapped = passcodeWrappedKey else {
                throw MigrationError.missingLegacyState("passcode wrapping of the application key (account shared-key.passcode); use the answers")
            }
            let kek = try passcodeKey(passcode)
            defer { kek.wipe() }
            return try unwrap(wrapped, kek, MigrationError.wrongPasscode)
        }
    }

    /// Unwraps the legacy application key with the old answers, in question order.
    /// - Parameter answers: The answers, one per question.
    /// - Returns: The legacy application key.
    /// - Throws: ``MigrationError/wrongAnswers``, ``MigrationError/missingLegacyState(_:)``.
    package func applicationKey(answers: [SecretBytes]) throws(MigrationError) -> SecretBytes {
        return try MigrationError.typing {
            guard let wrapped = answersWrappedKey else {
                throw MigrationError.missingLegacyState("answers wrapping of the application key (account shared-key.security-answers); use the passcode")
            }
            let kek = try answersKey(answers)
            defer { kek.wipe() }
            return try unwrap(wrapped, kek, MigrationError.wrongAnswers)
        }
    }

    /// The GenItem secret (`IMSCryptoManagerGenItemGet`), unwrapped with a passcode: the key of
    /// `gen-item` is wrapped under the passcode in force when the GenItem was made or last reset
    /// (`gen-itemk`); the original's passcode change never re-wrapped it.
    /// - Parameter passcode: The passcode in force when the GenItem was made or last reset.
    /// - Returns: nil when the legacy keychain has no GenItem.
    /// - Throws: ``MigrationError/genItemNotOpened(_:)`` when the passcode does not unwrap
    ///   `gen-itemk` (or there is none); ``MigrationError/legacyDataRejected`` when it does and
    ///   `gen-item` does not decrypt (damaged).
    package func genItemSecret(passcode: SecretBytes) throws(MigrationError) -> SecretBytes? {
        return try MigrationError.typing {
            guard let genItem else { return nil }
            guard let genItemKey else {
                throw MigrationError.genItemNotOpened("there is no GenItem key (account gen-itemk) for a passcode to unwrap")
            }
            let kek = try passcodeKey(passcode)
            defer { kek.wipe() }
            let itemKey = try unwrap(genItemKey, kek, MigrationError.genItemNotOpened(
                "this passcode does not unwrap the GenItem key (account gen-itemk), which stays under the passcode in force when the GenItem was made: the original's passcode change never re-wrapped it"))
            defer { itemKey.wipe() }
            return try LegacyCipher.open(genItem, key: itemKey)
        }
    }

    /// The GenItem secret opened with the answers, as `IMSCryptoManagerGenItemReset` does: its
    /// key is the answers key of the answers in force when it was made (the original's change
    /// of answers never re-encrypted it).
    /// - Parameter answers: The answers in force when the GenItem was made, in question order.
    /// - Returns: nil when the legacy keychain has no GenItem.
    /// - Throws: ``MigrationError/genItemNotOpened(_:)`` when the answers do not open it.
    package func genItemSecret(answers: [SecretBytes]) throws(MigrationError) -> SecretBytes? {
        return try MigrationError.typing {
            guard let genItem else { return nil }
            let key = try answersKey(answers)
            defer { key.wipe() }
            do {
                return try LegacyCipher.open(genItem, key: key)
            } catch MigrationError.legacyDataRejected {
                throw MigrationError.genItemNotOpened(
                    "these answers do not decrypt it (account gen-item): it stays under the answers in force when it was made, as the original's change of answers never re-encrypted it")
            }
        }
    }

    /// A wrapped key is a 64-byte blob holding exactly 32 bytes; anything else is `failure`
    /// (a wrong key passes the padding and checksum about once in 65,536 tries, and the length
    /// check catches most of those).
    private func unwrap(_ wrapped: [UInt8], _ kek: SecretBytes, _ failure: MigrationError) throws -> SecretBytes {
        let key: SecretBytes
        do {
            key = try LegacyCipher.open(wrapped, key: kek)
        } catch MigrationError.legacyDataRejected {
            throw failure
        }
        guard key.count == 32 else {
            key.wipe()
            throw failure
        }
        return key
    }
}
