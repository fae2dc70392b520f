import Foundation
import Testing
import Cipher
import EmbeddedSecrets

/// The reader's and the format's public functions throw `EmbeddedSecretsError`: a caller
/// switches over its cases with no cast and no `default`.
@Suite("EmbeddedSecrets typed throws")
struct EmbeddedSecretsTypedThrowsTests {
    /// The class of an embedded-secrets error, by an exhaustive switch.
    static func kind(_ error: EmbeddedSecretsError) -> String {
        switch error {
        case .tampered: return "tampered"
        case .runtimeShareMissing, .runtimeShareWrong: return "share"
        case .notFound, .invalidValue: return "generated code"
        case .cipher: return "cipher"
        }
    }

    @Test func aReaderWithMalformedSharesThrowsACaseOfEmbeddedSecretsError() {
        let reader = EmbeddedSecretsReader(blob: "", shares: [{ [1, 2, 3] }], runtimeShare: nil, namespace: "Secrets")
        do {
            _ = try reader.string("apiToken")
            Issue.record("read a secret with malformed key shares")
        } catch {
            #expect(Self.kind(error) == "tampered")
        }
    }

    @Test func sealingWithASaltOfTheWrongSizeIsItsCipherCase() {
        do {
            _ = try SealedSecretsFormat.seal([], manifestVersion: 1, buildKey: SecretBytes(copying: [UInt8](repeating: 7, count: 32)),
                                             runtimeShare: nil, salt: [1, 2, 3], nonces: [])
            Issue.record("sealed with a 3-byte salt")
        } catch {
            #expect(Self.kind(error) == "cipher")
            #expect("\(error)" == "invalid parameter: a salt of 16 bytes and one 12-byte nonce per secret are needed")
        }
    }
}
