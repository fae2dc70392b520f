import Foundation
import Testing
@testable import EmbeddedSecrets
import Cipher

/// The sealed-secrets blob ("SFES" version 1): known answers computed independently (Python,
/// `cryptography`'s HKDF and ChaCha20-Poly1305, from docs/FORMATS.md), tamper detection and the
/// run-time share.
@Suite struct SealedSecretsFormatTests {
    static let buildKey = SecretBytes(copying: Array(0..<32).map { UInt8($0) })
    static let salt = Array(0x20..<0x30).map { UInt8($0) }
    static let nonces = (0..<3).map { [UInt8](repeating: UInt8(0x40 + $0), count: 12) }

    static var entries: [SealedSecretsFormat.Entry] {
        [
            .init(name: "apiToken", type: .string, value: SecretBytes(utf8: "tok-123")),
            .init(name: "retries", type: .int, value: SecretBytes(copying: EmbeddedSecretsReader.encodeInt(-5))),
            .init(name: "debug", type: .bool, value: SecretBytes(copying: [1])),
        ]
    }

    static let vectorWithoutShare = "53464553010000000007202122232425262728292a2b2c2d2e2f000308617069546f6b656e0140404040404040404040404000000007978938aeb2ccb20ad5041f64829a71febf0906a20ded8f0772657472696573024141414141414141414141410000000898090f197a5ac3b3cc5c628f56b388fbd810d17b29a9d20305646562756703424242424242424242424242000000018d24f6fd477f691c83504e06a625448a7a6eb01a7c073e4a0c695cb6c7e9fdb9c376fe60733089bee4bce9b82ded805f714ac76544c939e6ff0466ef898b3bd1d762fd943e70cf019f237bdaa4ff458a70"
    static let vectorWithShare = "53464553010100000007202122232425262728292a2b2c2d2e2f000108617069546f6b656e014040404040404040404040400000000790d9266ccf44ac44c164c832996e9c90c2da07e510b0ddf2a7c2c93b22c11328ee291f453cf2d0e4288b10c12d8379ed0a271c49f48dd4d85f511c72f8042ea8a9cedc81ab9351a92fa02773147d4e7ca7046d644a2165"
    static let share = "run-time share 0123456789"

    func text(_ value: SecretBytes?) -> String? {
        value.map { v in v.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func knownAnswerWithoutRuntimeShare() throws {
        let blob = try SealedSecretsFormat.seal(Self.entries, manifestVersion: 7, buildKey: Self.buildKey, runtimeShare: nil,
                                                salt: Self.salt, nonces: Self.nonces)
        #expect(Encoding.hex(blob) == Self.vectorWithoutShare)
        let vector = try Encoding.fromHex(Self.vectorWithoutShare)
        let token = try SealedSecretsFormat.open(vector, name: "apiToken", type: .string, buildKey: Self.buildKey) { nil }
        #expect(text(token) == "tok-123")
        let retries = try #require(try SealedSecretsFormat.open(vector, name: "retries", type: .int, buildKey: Self.buildKey) { nil })
        #expect(try EmbeddedSecretsReader.decodeInt(retries, name: "retries") == -5)
        #expect(SealedSecretsFormat.needsRuntimeShare(vector) == false)
        #expect(SealedSecretsFormat.manifestVersion(vector) == 7)
    }

    @Test func knownAnswerWithRuntimeShare() throws {
        let blob = try SealedSecretsFormat.seal(Array(Self.entries.prefix(1)), manifestVersion: 7, buildKey: Self.buildKey,
                                                runtimeShare: SecretBytes(utf8: Self.share), salt: Self.salt,
                                                nonces: Array(Self.nonces.prefix(1)))
        #expect(Encoding.hex(blob) == Self.vectorWithShare)
        let vector = try Encoding.fromHex(Self.vectorWithShare)
        #expect(SealedSecretsFormat.needsRuntimeShare(vector) == true)
        let token = try SealedSecretsFormat.open(vector, name: "apiToken", type: .string, buildKey: Self.buildKey) {
            SecretBytes(utf8: Self.share)
        }
        #expect(text(token) == "tok-123")
    }

    @Test func runtimeShareMissingOrWrongIsTypedError() throws {
        let vector = try Encoding.fromHex(Self.vectorWithShare)
        #expect(throws: EmbeddedSecretsError.runtimeShareMissing("the secrets were sealed with a run-time share and none was supplied")) {
            _ = try SealedSecretsFormat.open(vector, name: "apiToken", type: .string, buildKey: Self.buildKey) { nil }
        }
        #expect(throws: EmbeddedSecretsError.runtimeShareWrong("the share does not open these secrets")) {
            _ = try SealedSecretsFormat.open(vector, name: "apiToken", type: .string, buildKey: Self.buildKey) {
                SecretBytes(utf8: "run-time share 0123456788")
            }
        }
    }

    /// Every single-bit change anywhere in the blob, with and without a run-time share, is
    /// refused as tampering (never a wrong value, never a crash).
    @Test func everyFlippedByteIsDetected() throws {
        for (hex, share) in [(Self.vectorWithoutShare, nil as String?), (Self.vectorWithShare, Self.share)] {
            let vector = try Encoding.fromHex(hex)
            #expect(vector.count < 1024)
            for index in vector.indices {
                var altered = vector
                altered[index] ^= 0x01
                do {
                    _ = try SealedSecretsFormat.open(altered, name: "apiToken", type: .string, buildKey: Self.buildKey) {
                        share.map { SecretBytes(utf8: $0) }
                    }
                    Issue.record("byte \(index) flipped was not detected")
                } catch let error as EmbeddedSecretsError {
                    guard case .tampered = error else { Issue.record("byte \(index): \(error)"); continue }
                }
            }
        }
    }

    @Test func alteredBuildKeyIsTampering() throws {
        let vector = try Encoding.fromHex(Self.vectorWithoutShare)
        let key = SecretBytes(copying: Array(0..<32).map { UInt8($0) ^ ($0 == 31 ? 0x80 : 0) })
        #expect(throws: EmbeddedSecretsError.tampered("the integrity tag does not match")) {
            _ = try SealedSecretsFormat.open(vector, name: "apiToken", type: .string, buildKey: key) { nil }
        }
    }

    @Test func truncatedAndForeignBlobsAreRefused() throws {
        let vector = try Encoding.fromHex(Self.vectorWithoutShare)
        for length in [0, 3, 4, 10, 30, vector.count - 1] {
            #expect(throws: EmbeddedSecretsError.self) {
                _ = try SealedSecretsFormat.open(Array(vector.prefix(length)), name: "apiToken", type: .string, buildKey: Self.buildKey) { nil }
            }
        }
        var future = vector
        future[4] = 2
        #expect(throws: EmbeddedSecretsError.tampered("sealed-secrets version 2; this library reads version 1")) {
            _ = try SealedSecretsFormat.open(future, name: "apiToken", type: .string, buildKey: Self.buildKey) { nil }
        }
        #expect(throws: EmbeddedSecretsError.tampered("3 bytes after the end")) {
            _ = try SealedSecretsFormat.open(vector + [0, 0, 0], name: "apiToken", type: .string, buildKey: Self.buildKey) { nil }
        }
    }

    @Test func wrongTypeOrUnknownName() throws {
        let vector = try Encoding.fromHex(Self.vectorWithoutShare)
        #expect(throws: EmbeddedSecretsError.notFound("apiToken")) {
            _ = try SealedSecretsFormat.open(vector, name: "apiToken", type: .data, buildKey: Self.buildKey) { nil }
        }
        #expect(try SealedSecretsFormat.open(vector, name: "absent", type: .string, buildKey: Self.buildKey) { nil } == nil)
    }

    @Test func shortRuntimeShareIsRefusedWhenSealing() {
        #expect(throws: EmbeddedSecretsError.self) {
            _ = try SealedSecretsFormat.seal(Self.entries, manifestVersion: 1, buildKey: Self.buildKey,
                                             runtimeShare: SecretBytes(utf8: "short"))
        }
    }
}
