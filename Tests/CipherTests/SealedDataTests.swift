import Foundation
import Testing
@testable import Cipher

@Suite struct SealedDataTests {
    /// A cheap but valid passphrase policy so the suite stays fast.
    let fastPolicy = KDFPolicy(parameters: .scrypt(logN: 15, r: 8, p: 1))

    func fixedKey() throws -> SealingKey {
        try SealingKey(key: SecretBytes(copying: Array(1...32)), id: [0xAA, 0xBB])
    }

    @Test(arguments: [
        (SealAlgorithm.aes256GCM, "5346534401010102aabb000000000000000000000000ae1cb775d2f5a20d48e3f166e5ce207c37c75c493c"),
        (SealAlgorithm.chaCha20Poly1305, "5346534401020102aabb0000000000000000000000000befbb7a0836467ec7edd8ba901b5b714a429bcae5"),
    ])
    func knownAnswerBytes(algorithm: SealAlgorithm, expected: String) throws {
        // Computed independently with Python's `cryptography` (AESGCM / ChaCha20Poly1305),
        // AAD = header bytes || context, as docs/FORMATS.md specifies.
        let key = try fixedKey()
        let sealed = try Sealed.seal(Array("hello".utf8), with: key, algorithm: algorithm,
                                     context: Array("ctx".utf8), nonce: [UInt8](repeating: 0, count: 12))
        #expect(Encoding.hex(sealed) == expected)
        #expect(try Sealed.open(try Encoding.fromHex(expected), with: key, context: Array("ctx".utf8)) == Array("hello".utf8))
    }

    @Test(arguments: SealAlgorithm.allCases, [0, 1, 15, 16, 17, 65536])
    func roundTrip(algorithm: SealAlgorithm, size: Int) throws {
        let key = try SealingKey.generate()
        let plaintext = try SecureRandom.bytes(size)
        let sealed = try Sealed.seal(plaintext, with: key, algorithm: algorithm)
        #expect(sealed.count == 4 + 4 + key.id.count + 12 + size + 16)
        let header = try Sealed.parseHeader(sealed)
        #expect(header.algorithm == algorithm)
        #expect(header.keySource == .key(id: key.id))
        #expect(try Sealed.open(sealed, with: key) == plaintext)
    }

    @Test func contextIsBound() throws {
        let key = try SealingKey.generate()
        let sealed = try Sealed.seal(Array("v".utf8), with: key, context: Array("service=a".utf8))
        #expect(throws: CipherError.tampered) { try Sealed.open(sealed, with: key, context: Array("service=b".utf8)) }
        #expect(throws: CipherError.tampered) { try Sealed.open(sealed, with: key) }
    }

    @Test func everyFlippedByteIsDetected() throws {
        let key = try SealingKey.generate()
        let sealed = try Sealed.seal(Array("attack at dawn".utf8), with: key)
        for index in sealed.indices {
            var copy = sealed
            copy[index] ^= 0x01
            #expect(throws: CipherError.self) { try Sealed.open(copy, with: key) }
        }
    }

    @Test func everyTruncationIsAnError() throws {
        let key = try SealingKey.generate()
        let sealed = try Sealed.seal(Array("attack at dawn".utf8), with: key)
        for length in 0..<sealed.count {
            #expect(throws: CipherError.self) { try Sealed.open(Array(sealed[0..<length]), with: key) }
        }
        #expect(throws: CipherError.truncated("needed 12 bytes at offset 16, 0 left")) {
            try Sealed.open(Array(sealed[0..<16]), with: key)
        }
    }

    @Test func exactErrorCases() throws {
        let key = try SealingKey.generate()
        var sealed = try Sealed.seal([1, 2, 3], with: key)
        #expect(throws: CipherError.truncated("no SFSD magic: this is not sealed data")) {
            try Sealed.open(Array("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX".utf8), with: key)
        }
        sealed[4] = 9
        #expect(throws: CipherError.unknownVersion(9)) { try Sealed.open(sealed, with: key) }
        sealed[4] = 1
        sealed[5] = 7
        #expect(throws: CipherError.unsupportedAlgorithm("AEAD id 7")) { try Sealed.open(sealed, with: key) }
        sealed[5] = 1
        let other = try SealingKey.generate()
        #expect(throws: CipherError.wrongKey("no key in the keyring has key id \(Encoding.hex(key.id))")) {
            try Sealed.open(sealed, with: other)
        }
        // Same id, different bytes: authentication fails.
        let impostor = try SealingKey(key: SecretBytes.random(count: 32), id: key.id)
        #expect(throws: CipherError.tampered) { try Sealed.open(sealed, with: impostor) }
    }

    @Test func randomInputNeverCrashes() throws {
        let key = try SealingKey.generate()
        for size in 0..<200 {
            var junk = try SecureRandom.bytes(size)
            if size >= 4 { junk.replaceSubrange(0..<4, with: Sealed.magic) }
            if size >= 5 { junk[4] = 1 }
            #expect(throws: CipherError.self) { try Sealed.open(junk, with: key) }
            #expect(throws: CipherError.self) { try Sealed.open(junk, passphrase: SecretBytes(utf8: "x")) }
        }
    }

    @Test func keyringOpensWhatAnyKeySealed() throws {
        let old = try SealingKey.generate()
        var ring = try Keyring([old])
        let sealedOld = try Sealed.seal(Array("old".utf8), with: ring)
        let new = try SealingKey.generate()
        try ring.rotate(to: new)
        #expect(ring.primary.id == new.id)
        let sealedNew = try Sealed.seal(Array("new".utf8), with: ring)
        #expect(try Sealed.parseHeader(sealedNew).keySource == .key(id: new.id))
        #expect(try Sealed.open(sealedOld, with: ring) == Array("old".utf8))
        #expect(try Sealed.open(sealedNew, with: ring) == Array("new".utf8))
        #expect(throws: CipherError.self) { try ring.rotate(to: new) }
        #expect(throws: CipherError.self) { try Keyring([]) }
    }

    @Test func passphraseRoundTripAndHeader() throws {
        let passphrase = SecretBytes(utf8: "correct horse battery staple")
        let sealed = try Sealed.seal(Array("secret".utf8), passphrase: passphrase, policy: fastPolicy,
                                     algorithm: .chaCha20Poly1305, context: [7])
        let header = try Sealed.parseHeader(sealed)
        guard case let .passphrase(parameters, salt) = header.keySource else {
            Issue.record("expected a passphrase header"); return
        }
        #expect(parameters == .scrypt(logN: 15, r: 8, p: 1))
        #expect(salt.count == 16)
        // magic, version, algorithm, mode, kdf id, logN, r, p, salt length.
        #expect(Array(sealed[0..<18]) == Sealed.magic + [1, 2, 2, 1, 15, 0, 0, 0, 8, 0, 0, 0, 1, 16])
        #expect(try Sealed.open(sealed, passphrase: passphrase, context: [7]) == Array("secret".utf8))
        #expect(throws: CipherError.wrongKey("the passphrase is wrong, or the data or its context was modified")) {
            try Sealed.open(sealed, passphrase: SecretBytes(utf8: "wrong"), context: [7])
        }
    }

    @Test func pbkdf2PassphraseVariant() throws {
        let passphrase = SecretBytes(utf8: "pw")
        let policy = KDFPolicy(parameters: .pbkdf2SHA256(rounds: 210_000))
        let sealed = try Sealed.seal([9, 9], passphrase: passphrase, policy: policy)
        #expect(Array(sealed[7...11]) == [2, 0, 3, 0x34, 0x50])
        #expect(try Sealed.open(sealed, passphrase: passphrase) == [9, 9])
    }

    @Test func hostileKDFParametersAreRefusedBeforeWork() throws {
        let passphrase = SecretBytes(utf8: "pw")
        var sealed = try Sealed.seal([1], passphrase: passphrase, policy: fastPolicy)
        sealed[8] = 30 // logN = 30 would need 128 GiB
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^30 is over 2^22")) {
            try Sealed.open(sealed, passphrase: passphrase)
        }
        sealed[8] = 10
        #expect(throws: CipherError.kdfParametersTooWeak("scrypt N = 2^10 is under 2^15")) {
            try Sealed.open(sealed, passphrase: passphrase)
        }
    }

    @Test("a hostile header asking for 16 GiB or 2^25 scrypt work, or 100,000,000 PBKDF2 rounds, is refused before any work")
    func hostileMemoryAndWorkAreRefused() throws {
        let passphrase = SecretBytes(utf8: "pw")
        var sealed = try Sealed.seal([1], passphrase: passphrase, policy: fastPolicy)
        // logN at offset 8, r at 9...12, p at 13...16 (big-endian).
        sealed[8] = 22; sealed[9...12] = [0, 0, 0, 32]; sealed[13...16] = [0, 0, 0, 16]
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^22, r = 32 needs 16384 MiB (128·N·r); at most 1024 MiB")) {
            try Sealed.open(sealed, passphrase: passphrase)
        }
        sealed[8] = 16
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^16, r = 32, p = 16 is work N·r·p = 2^25; at most 2^23")) {
            try Sealed.open(sealed, passphrase: passphrase)
        }
        var pbkdf2 = try Sealed.seal([1], passphrase: passphrase, policy: KDFPolicy(parameters: .pbkdf2SHA256(rounds: 210_000)))
        pbkdf2[8...11] = [0x05, 0xF5, 0xE1, 0x00] // 100,000,000
        #expect(throws: CipherError.kdfParametersTooExpensive("PBKDF2 with 100000000 rounds is over 32000000")) {
            try Sealed.open(pbkdf2, passphrase: passphrase)
        }
    }

    @Test func keyAndPassphraseModesDoNotMix() throws {
        let key = try SealingKey.generate()
        let byKey = try Sealed.seal([1], with: key)
        #expect(throws: CipherError.self) { try Sealed.open(byKey, passphrase: SecretBytes(utf8: "pw")) }
        let byPassphrase = try Sealed.seal([1], passphrase: SecretBytes(utf8: "pw"), policy: fastPolicy)
        #expect(throws: CipherError.wrongKey("the data was sealed with a passphrase, not a key")) {
            try Sealed.open(byPassphrase, with: key)
        }
    }

    struct Card: Codable, Equatable {
        var holder: String
        var number: String
        var expires: Date
        var tags: [String: Int]
    }

    @Test func codableValues() throws {
        let ring = try Keyring([SealingKey.generate()])
        let card = Card(holder: "Ada", number: "4111 1111 1111 1111", expires: Date(timeIntervalSince1970: 1_900_000_000), tags: ["b": 2, "a": 1])
        let sealed = try Sealed.seal(value: card, with: ring, context: Array("cards".utf8))
        #expect(try Sealed.open(Card.self, from: sealed, with: ring, context: Array("cards".utf8)) == card)
        #expect(throws: CipherError.self) { try Sealed.open([String].self, from: sealed, with: ring, context: Array("cards".utf8)) }
        let byPassphrase = try Sealed.seal(value: card, passphrase: SecretBytes(utf8: "pw"), policy: fastPolicy)
        #expect(try Sealed.open(Card.self, from: byPassphrase, passphrase: SecretBytes(utf8: "pw")) == card)
    }

    @Test func keyIDIsAFingerprint() throws {
        let secret = SecretBytes(copying: Array(1...32))
        let key = try SealingKey(key: secret)
        #expect(key.id.count == 8)
        #expect(key.id == SealingKey.fingerprint(of: secret))
        #expect(throws: CipherError.self) { try SealingKey(key: SecretBytes(copying: [1, 2, 3])) }
        #expect(throws: CipherError.self) { try SealingKey(key: secret, id: []) }
    }
}

/// Passphrase-mode known answers, computed independently (Python's hashlib.scrypt /
/// pbkdf2_hmac and `cryptography`'s AESGCM / ChaCha20Poly1305), and documented in
/// docs/FORMATS.md byte for byte.
@Suite struct SealedPassphraseKnownAnswers {
    static let passphrase = "correct horse battery staple"
    static let salt: [UInt8] = Array(0x00...0x0F)
    static let nonce: [UInt8] = Array(0x10...0x1B)
    static let vectors: [(name: String, policy: KDFPolicy, algorithm: SealAlgorithm, key: String, sealed: String)] = [
        ("scrypt AES-256-GCM", KDFPolicy(parameters: .scrypt(logN: 15, r: 8, p: 1)), .aes256GCM,
         "7a8e34241db898d59175c696538c417467a975ffe569068425f16188d3159c58",
         "53465344010102010f000000080000000110000102030405060708090a0b0c0d0e0f101112131415161718191a1bfd809dc6abc4e98f7bb102813508cb6db48793ff8a"),
        ("PBKDF2 ChaCha20-Poly1305", KDFPolicy(parameters: .pbkdf2SHA256(rounds: 210_000)), .chaCha20Poly1305,
         "18465cade096c185b5f60765891fca3f74477e23fd9b6fc88faf7831a91753ac",
         "53465344010202020003345010000102030405060708090a0b0c0d0e0f101112131415161718191a1bfb0175ce79b4e2ab205dff94dbbd249f9d340af0c0"),
    ]

    @Test("seal with the documented passphrase, salt and nonce gives the documented bytes, and they open", arguments: 0..<2)
    func vector(_ index: Int) throws {
        let vector = Self.vectors[index]
        let passphrase = SecretBytes(utf8: Self.passphrase)
        let key = try KeyDerivation.derive(password: passphrase, salt: Self.salt, parameters: vector.policy.parameters)
        #expect(key.withUnsafeBytes { Encoding.hex($0) } == vector.key)
        let sealed = try Sealed.seal(Array("hello".utf8), passphrase: passphrase, policy: vector.policy, algorithm: vector.algorithm,
                                     context: Array("ctx".utf8), salt: Self.salt, nonce: Self.nonce)
        #expect(Encoding.hex(sealed) == vector.sealed)
        #expect(try Sealed.open(try Encoding.fromHex(vector.sealed), passphrase: passphrase, context: Array("ctx".utf8)) == Array("hello".utf8))
        // A wrong passphrase and a changed byte fail alike: passphrase mode cannot tell them apart.
        let wrong = CipherError.wrongKey("the passphrase is wrong, or the data or its context was modified")
        #expect(throws: wrong) { try Sealed.open(sealed, passphrase: SecretBytes(utf8: "wrong"), context: Array("ctx".utf8)) }
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(throws: wrong) { try Sealed.open(tampered, passphrase: passphrase, context: Array("ctx".utf8)) }
    }

    @Test("docs/FORMATS.md shows every known-answer vector byte for byte")
    func documented() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/FORMATS.md").path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            print("skipping: docs/FORMATS.md is not beside the tests (\(path))")
            return
        }
        for vector in Self.vectors {
            #expect(text.contains(vector.sealed), "\(vector.name) sealed bytes")
            #expect(text.contains(vector.key), "\(vector.name) key")
        }
        #expect(text.contains("5346534401010102aabb000000000000000000000000ae1cb775d2f5a20d48e3f166e5ce207c37c75c493c"))
        #expect(text.contains("5346534401020102aabb0000000000000000000000000befbb7a0836467ec7edd8ba901b5b714a429bcae5"))
    }
}
