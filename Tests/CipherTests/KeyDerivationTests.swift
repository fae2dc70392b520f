import Foundation
import Testing
@testable import Cipher

@Suite struct KeyDerivationTests {
    let password = SecretBytes(utf8: "password")
    let salt = Array("saltsaltsaltsalt".utf8)

    @Test func pbkdf2KnownAnswer() throws {
        // Python hashlib.pbkdf2_hmac('sha256', b'password', b'saltsaltsaltsalt', 210000).
        let key = try KeyDerivation.derive(password: password, salt: salt, parameters: .pbkdf2SHA256(rounds: 210_000))
        #expect(key.withUnsafeBytes { Encoding.hex($0) } == "5214cca59a9d598320d1f1c377891aa3a3efd1d61bc016d032f3c936599cdd6c")
    }

    @Test func scryptKnownAnswer() throws {
        // Python hashlib.scrypt(b'password', salt=b'saltsaltsaltsalt', n=2**15, r=8, p=1, dklen=32).
        let key = try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 15, r: 8, p: 1))
        #expect(key.withUnsafeBytes { Encoding.hex($0) } == "234f21946f762c3628325ffd54a7f4ce07cc44c3d78c5cd8937ad78c512cf395")
    }

    @Test func asyncVariantMatches() async throws {
        let key = try await KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 15, r: 8, p: 1))
        #expect(key.withUnsafeBytes { Encoding.hex($0) } == "234f21946f762c3628325ffd54a7f4ce07cc44c3d78c5cd8937ad78c512cf395")
    }

    @Test func hkdfKnownAnswer() throws {
        // RFC 5869 test case 3 (empty salt and info), truncated to 32 bytes.
        let ikm = SecretBytes(copying: [UInt8](repeating: 0x0b, count: 22))
        let okm = KeyDerivation.hkdf(ikm, info: "", outputLength: 42)
        #expect(okm.withUnsafeBytes { Encoding.hex($0) } ==
                "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    @Test func floorsAreRefused() {
        #expect(throws: CipherError.kdfParametersTooWeak("PBKDF2 with 209999 rounds is under 210000")) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .pbkdf2SHA256(rounds: 209_999))
        }
        #expect(throws: CipherError.kdfParametersTooWeak("scrypt N = 2^14 is under 2^15")) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 14, r: 8, p: 1))
        }
        #expect(throws: CipherError.self) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 16, r: 0, p: 1))
        }
    }

    @Test func ceilingsAreRefused() {
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^23 is over 2^22")) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 23, r: 8, p: 1))
        }
        #expect(throws: CipherError.self) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 16, r: 8, p: 1000))
        }
        #expect(throws: CipherError.self) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .pbkdf2SHA256(rounds: .max))
        }
    }

    @Test("the ceiling bounds scrypt memory (128·N·r ≤ 1 GiB) and work (N·r·p ≤ 2^23), and PBKDF2 at 32,000,000 rounds")
    func memoryAndWorkCeilings() throws {
        // 128·2^22·8 = 4 GiB: refused for memory (it was accepted before).
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^22, r = 8 needs 4096 MiB (128·N·r); at most 1024 MiB")) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 22, r: 8, p: 1))
        }
        // 2^16·32·16 = 2^25 work (26 s a guess on a small machine), 256 MiB: refused for work.
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^16, r = 32, p = 16 is work N·r·p = 2^25; at most 2^23")) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 16, r: 32, p: 16))
        }
        #expect(throws: CipherError.kdfParametersTooExpensive("scrypt N = 2^20, r = 8, p = 2 is work N·r·p = 2^24; at most 2^23")) {
            try KDFParameters.scrypt(logN: 20, r: 8, p: 2).validate()
        }
        #expect(throws: CipherError.kdfParametersTooExpensive("PBKDF2 with 32000001 rounds is over 32000000")) {
            try KDFParameters.pbkdf2SHA256(rounds: 32_000_001).validate()
        }
        // The largest accepted: exactly 1 GiB and 2^23, and 4 × fipsSensitive.
        try KDFParameters.scrypt(logN: 20, r: 8, p: 1).validate()
        try KDFParameters.scrypt(logN: 18, r: 8, p: 4).validate()
        try KDFParameters.pbkdf2SHA256(rounds: 32_000_000).validate()
        #expect(KDFParameters.pbkdf2MaximumRounds == 32_000_000)
        // The legacy ceiling admits what earlier versions admitted, no more.
        try KDFParameters.scrypt(logN: 22, r: 32, p: 16).validate(ceiling: .legacy)
        try KDFParameters.pbkdf2SHA256(rounds: 100_000_000).validate(ceiling: .legacy)
        #expect(throws: CipherError.self) { try KDFParameters.scrypt(logN: 23, r: 1, p: 1).validate(ceiling: .legacy) }
        #expect(throws: CipherError.self) { try KDFParameters.pbkdf2SHA256(rounds: 100_000_001).validate(ceiling: .legacy) }
    }

    @Test func badSaltAndLength() {
        #expect(throws: CipherError.invalidParameter("the salt is empty")) {
            try KeyDerivation.derive(password: password, salt: [], parameters: .scrypt(logN: 15, r: 8, p: 1))
        }
        #expect(throws: CipherError.self) {
            try KeyDerivation.derive(password: password, salt: salt, parameters: .scrypt(logN: 15, r: 8, p: 1), outputLength: 8)
        }
    }

    @Test func policiesAreAboveTheFloor() throws {
        for policy in [KDFPolicy.interactive, .sensitive, .fipsInteractive, .fipsSensitive] {
            try policy.parameters.validate()
        }
        #expect(KDFPolicy.interactive.parameters == .scrypt(logN: 16, r: 8, p: 1))
        #expect(KDFPolicy.sensitive.parameters == .scrypt(logN: 18, r: 8, p: 1))
    }
}
