import Foundation
import Testing
import Cipher
import Vault
import TestSupport

/// `Hashing.digest(_:of: InputStream)`, which Vault adds (Cipher has FoundationEssentials only).
@Suite struct HashingStreamTests {
    @Test func streamMatchesBytes() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/data"
        let bytes = try SecureRandom.bytes(Hashing.chunkSize * 2 + 123)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        for algorithm in HashAlgorithm.allCases {
            #expect(try Hashing.digest(algorithm, of: InputStream(fileAtPath: path)!) == Hashing.digest(algorithm, of: bytes))
        }
        #expect(throws: CipherError.self) { try Hashing.digest(.sha256, of: InputStream(fileAtPath: directory.path + "/missing")!) }
    }
}
