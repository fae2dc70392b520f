import Foundation
import Testing
@testable import Cipher

@Suite struct HashingTests {
    @Test func knownAnswers() {
        let abc = Array("abc".utf8)
        #expect(Encoding.hex(Hashing.sha256(abc)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Encoding.hex(Hashing.sha384(abc)) == "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7")
        #expect(Encoding.hex(Hashing.sha512(abc)) == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
        #expect(Encoding.hex(Hashing.Insecure.md5(abc)) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Encoding.hex(Hashing.Insecure.sha1(abc)) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }

    @Test func filesAndStreamsMatchBytes() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/data"
        let bytes = try SecureRandom.bytes(Hashing.chunkSize * 2 + 123)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        for algorithm in HashAlgorithm.allCases {
            let expected = Hashing.digest(algorithm, of: bytes)
            #expect(expected.count == algorithm.byteCount)
            #expect(try Hashing.digest(algorithm, ofFile: path) == expected)
            let chunks = AsyncStream<[UInt8]> { continuation in
                var index = 0
                while index < bytes.count {
                    continuation.yield(Array(bytes[index..<min(index + 1000, bytes.count)]))
                    index += 1000
                }
                continuation.finish()
            }
            #expect(await Hashing.digest(algorithm, of: chunks) == expected)  // AsyncStream never fails: no try
        }
        #expect(throws: CipherError.self) { try Hashing.digest(.sha256, ofFile: directory.path + "/missing") }
    }

    struct Record: Codable { var b: Int; var a: String; var nested: [String: Double] }

    @Test func codableDigestIsCanonical() throws {
        let one = Record(b: 1, a: "x/y", nested: ["z": 1.5, "y": 2])
        // Key order in the source dictionary must not matter.
        let two = Record(b: 1, a: "x/y", nested: ["y": 2, "z": 1.5])
        #expect(try Hashing.digest(.sha256, ofValue: one) == Hashing.digest(.sha256, ofValue: two))
        #expect(String(decoding: try CanonicalEncoding.encode(one), as: UTF8.self) == #"{"a":"x/y","b":1,"nested":{"y":2,"z":1.5}}"#)
        // Known answer: sha256 of the canonical JSON above.
        #expect(Encoding.hex(try Hashing.digest(.sha256, ofValue: one)) ==
                Encoding.hex(Hashing.sha256(Array(#"{"a":"x/y","b":1,"nested":{"y":2,"z":1.5}}"#.utf8))))
        #expect(throws: CipherError.self) { try CanonicalEncoding.encode(Double.nan) }
    }
}
