import Foundation
import Testing
@testable import Cipher

/// The key schedule kept with a key's bytes (AEADSchedule) and the nonces that sealing draws.
@Suite struct SealScheduleTests {
    func fixedKey() throws -> SealingKey {
        try SealingKey(key: SecretBytes(copying: Array(1...32)), id: [0xAA, 0xBB])
    }

    @Test("a wiped key neither seals nor opens any more, though it sealed before", arguments: SealAlgorithm.allCases)
    func wipedKeyIsRefused(algorithm: SealAlgorithm) throws {
        let key = try SealingKey.generate()
        let sealed = try Sealed.seal(Array("before".utf8), with: key, algorithm: algorithm)
        #expect(try Sealed.open(sealed, with: key) == Array("before".utf8))
        key.key.wipe()
        let refused = CipherError.invalidParameter("a sealing key is 32 bytes, not 0 (was it wiped?)")
        #expect(throws: refused) { try Sealed.seal(Array("after".utf8), with: key, algorithm: algorithm) }
        #expect(throws: refused) { try Sealed.open(sealed, with: key) }
    }

    @Test("the same key bytes in another SecretBytes open what the first sealed, under each algorithm", arguments: SealAlgorithm.allCases)
    func schedulesAreMadeFromTheBytes(algorithm: SealAlgorithm) throws {
        let first = try fixedKey()
        let sealed = try Sealed.seal(Array("hello".utf8), with: first, algorithm: algorithm)
        let second = try fixedKey()
        #expect(try Sealed.open(sealed, with: second) == Array("hello".utf8))
        // Both algorithms under one key: each has its own schedule.
        let other: SealAlgorithm = algorithm == .aes256GCM ? .chaCha20Poly1305 : .aes256GCM
        let sealedOther = try Sealed.seal(Array("world".utf8), with: first, algorithm: other)
        #expect(try Sealed.open(sealedOther, with: second) == Array("world".utf8))
        #expect(try Sealed.open(sealed, with: first) == Array("hello".utf8))
    }

    @Test("plaintext in several regions seals to the same bytes as one contiguous array")
    func discontiguousPlaintext() throws {
        let key = try fixedKey()
        let nonce = [UInt8](repeating: 0, count: 12)
        var pieces = DispatchData.empty
        for part in ["hel", "lo"] {
            Array(part.utf8).withUnsafeBytes { pieces.append(DispatchData(bytes: $0)) }
        }
        #expect(pieces.regions.count == 2)
        let fromPieces = try Sealed.seal(pieces, with: key, algorithm: .aes256GCM, context: Array("ctx".utf8), nonce: nonce)
        let fromArray = try Sealed.seal(Array("hello".utf8), with: key, algorithm: .aes256GCM, context: Array("ctx".utf8), nonce: nonce)
        #expect(fromPieces == fromArray)
        #expect(Encoding.hex(fromArray) == "5346534401010102aabb000000000000000000000000ae1cb775d2f5a20d48e3f166e5ce207c37c75c493c")
    }

    @Test("a nonce that is not 12 bytes is refused")
    func wrongNonceLength() throws {
        let key = try fixedKey()
        #expect(throws: CipherError.invalidParameter("a nonce is 12 bytes, not 8")) {
            try Sealed.seal(Array("x".utf8), with: key, algorithm: .aes256GCM, context: [], nonce: [UInt8](repeating: 0, count: 8))
        }
    }

    @Test("a failed open returns nothing, and a Data plaintext seals like an array")
    func failedOpenAndData() throws {
        let key = try SealingKey.generate()
        let sealed = try Sealed.seal(Data("secret".utf8), with: key, context: Array("a".utf8))
        #expect(throws: CipherError.tampered) { try Sealed.open(sealed, with: key, context: Array("b".utf8)) }
        #expect(try Sealed.open(sealed, with: key, context: Array("a".utf8)) == Array("secret".utf8))
    }

    @Test("many threads sealing under one key get distinct nonces and every envelope opens")
    func concurrentSealsUnderOneKey() async throws {
        let key = try SealingKey.generate()
        let perTask = 200
        let envelopes = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for task in 0..<8 {
                group.addTask {
                    try (0..<perTask).map { index in try Sealed.seal(Array("\(task)-\(index)".utf8), with: key) }
                }
            }
            var all: [[UInt8]] = []
            for try await part in group { all += part }
            return all
        }
        #expect(envelopes.count == 8 * perTask)
        var nonces = Set<[UInt8]>()
        for envelope in envelopes {
            let header = try Sealed.parseHeader(envelope)
            nonces.insert(header.nonce)
            _ = try Sealed.open(envelope, with: key)
        }
        #expect(nonces.count == envelopes.count)
    }

    @Test("random bytes drawn from many threads at once are all distinct")
    func concurrentRandom() async throws {
        let draws = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<16 {
                group.addTask { try (0..<500).map { _ in try SecureRandom.bytes(16) } }
            }
            var all: [[UInt8]] = []
            for try await part in group { all += part }
            return all
        }
        #expect(draws.count == 16 * 500)
        #expect(Set(draws).count == draws.count)
        // Lengths across the vDSO's block size and beyond one page.
        for count in [0, 1, 31, 32, 33, 255, 256, 257, 4097, 1 << 20] {
            let bytes = try SecureRandom.bytes(count)
            #expect(bytes.count == count)
            if count >= 32 { #expect(Set(bytes).count > 1) }
        }
    }
}
