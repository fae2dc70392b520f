import Foundation
import Testing
@testable import Cipher

@Suite struct RandomTests {
    @Test func exactByteCounts() throws {
        for count in [0, 1, 16, 255, 256, 257, 100_000] {
            #expect(try SecureRandom.bytes(count).count == count)
        }
        #expect(throws: CipherError.invalidParameter("byte count -1 is negative")) { try SecureRandom.bytes(-1) }
    }

    @Test func bytesDiffer() throws {
        #expect(try SecureRandom.bytes(32) != SecureRandom.bytes(32))
    }

    @Test func stringsUseOnlyTheAlphabetAndCoverIt() throws {
        let text = try SecureRandom.string(length: 4000, alphabet: Array("abc"))
        #expect(text.count == 4000)
        #expect(Set(text) == Set("abc"))
        // Uniformity, loosely: each of three letters appears 1333 ± 200 times.
        for letter in "abc" {
            let n = text.filter { $0 == letter }.count
            #expect((1133...1533).contains(n))
        }
        #expect(try SecureRandom.string(length: 0) == "")
        #expect(throws: CipherError.self) { try SecureRandom.string(length: 5, alphabet: []) }
        #expect(throws: CipherError.self) { try SecureRandom.string(length: -1) }
    }

    @Test func fullAlphabetIsPrintableASCII() {
        #expect(SecureRandom.fullAlphabet.count == 94)
        #expect(Set(SecureRandom.fullAlphabet).count == 94)
    }

    @Test func uniformStaysInRange() throws {
        for _ in 0..<1000 { #expect(try SecureRandom.uniform(below: 7) < 7) }
        #expect(throws: CipherError.self) { try SecureRandom.uniform(below: 0) }
    }
}

@Suite struct EncodingTests {
    @Test func base64KnownAnswers() throws {
        // RFC 4648 §10.
        let cases: [(String, String)] = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in cases {
            #expect(Encoding.base64(Array(plain.utf8)) == encoded)
            #expect(try Encoding.fromBase64(encoded) == Array(plain.utf8))
        }
        #expect(throws: CipherError.self) { try Encoding.fromBase64("Zg=") }
        #expect(throws: CipherError.self) { try Encoding.fromBase64("Z!==") }
    }

    @Test func base64URLHasNoPadding() throws {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF, 0x01]
        #expect(Encoding.base64URL(bytes) == "-_-_AQ")
        #expect(try Encoding.fromBase64URL("-_-_AQ") == bytes)
        #expect(throws: CipherError.self) { try Encoding.fromBase64URL("-_-_AQ==") }
        #expect(throws: CipherError.self) { try Encoding.fromBase64URL("+/+/AQ") }
        #expect(throws: CipherError.self) { try Encoding.fromBase64URL("AR") } // non-canonical trailing bits
        #expect(throws: CipherError.self) { try Encoding.fromBase64URL("A") }
    }

    @Test func hexRoundTrip() throws {
        #expect(Encoding.hex([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(try Encoding.fromHex("000FA5ff") == [0x00, 0x0f, 0xa5, 0xff])
        #expect(throws: CipherError.self) { try Encoding.fromHex("abc") }
        #expect(throws: CipherError.self) { try Encoding.fromHex("zz") }
    }

    @Test func percentEncoding() throws {
        #expect(Encoding.percentEncode("a b+c/é~") == "a%20b%2Bc%2F%C3%A9~")
        #expect(try Encoding.percentDecode("a%20b%2Bc%2F%C3%A9~") == "a b+c/é~")
        #expect(throws: CipherError.self) { try Encoding.percentDecode("%2") }
        #expect(throws: CipherError.self) { try Encoding.percentDecode("%zz") }
        #expect(throws: CipherError.self) { try Encoding.percentDecode("%FF") }
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
    }
}
