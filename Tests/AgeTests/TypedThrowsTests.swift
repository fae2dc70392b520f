import Foundation
import Testing
import Cipher
import Age

/// The age module's public functions throw `AgeError`: a caller switches over its cases with no
/// cast and no `default`.
@Suite("Age typed throws")
struct AgeTypedThrowsTests {
    /// The class of an age error, by an exhaustive switch.
    static func kind(_ error: AgeError) -> String {
        switch error {
        case .headerFailure, .headerMACFailure, .payloadFailure, .armorFailure: return "damaged"
        case .noMatchingIdentity: return "wrong secret"
        case .invalidRecipient, .invalidIdentity, .invalidArgument: return "invalid"
        case .io, .plaintextNotShredded: return "io"
        case .cipher: return "cipher"
        case .external: return "external"
        }
    }

    struct PromptFailed: Error, CustomStringConvertible {
        var description: String { "no terminal" }
    }

    @Test func decryptingWithAWrongKeyIsACaseOfAgeError() throws {
        let file = try Age.encrypt(Array("hello".utf8), recipients: [X25519Identity.generate().recipient])
        do {
            _ = try Age.decrypt(file, identities: [X25519Identity.generate()])
            Issue.record("decrypted with another key")
        } catch {
            #expect(Self.kind(error) == "wrong secret")
        }
    }

    @Test func aPassphraseProvidersErrorIsPassedOnAsExternalWithItsText() throws {
        let passphrase = SecretBytes(utf8: "correct horse")
        let file = try Age.encrypt(Array("hello".utf8), recipients: [ScryptRecipient(passphrase: passphrase, policy: .interactive)])
        do {
            _ = try Age.decrypt(file, identities: [LazyPassphraseIdentity { throw PromptFailed() }])
            Issue.record("decrypted without a passphrase")
        } catch {
            #expect(Self.kind(error) == "external")
            #expect("\(error)" == "no terminal")
            guard case .external(let inner) = error else { return }
            #expect(inner.error is PromptFailed)
        }
    }
}
