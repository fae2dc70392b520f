import Foundation
import Testing
@testable import Cipher

@Suite struct SecretBytesTests {
    @Test func holdsAndWipes() {
        let secret = SecretBytes(copying: [1, 2, 3, 4])
        #expect(secret.count == 4)
        #expect(secret.withUnsafeBytes { Array($0) } == [1, 2, 3, 4])
        secret.wipe()
        #expect(secret.count == 0)
        #expect(secret.isEmpty)
        #expect(secret.withUnsafeBytes { Array($0) } == [])
    }

    @Test func copiesFromEveryKindOfSequence() {
        let bytes: [UInt8] = [9, 8, 7, 6, 5]
        #expect(SecretBytes(copying: bytes[1..<4]).withUnsafeBytes { Array($0) } == [8, 7, 6])
        #expect(bytes.withUnsafeBytes { SecretBytes(copying: $0[2...]) }.withUnsafeBytes { Array($0) } == [7, 6, 5])
        #expect(SecretBytes(copying: bytes.lazy.map { $0 + 1 }).withUnsafeBytes { Array($0) } == [10, 9, 8, 7, 6])
        #expect(SecretBytes(copying: [UInt8]()).count == 0)
        #expect(SecretBytes(copying: EmptyCollection<UInt8>()).count == 0)
    }

    @Test func wipeZeroesTheUnderlyingMemory() {
        let secret = SecretBytes(copying: [UInt8](repeating: 0xAB, count: 64))
        let address = secret.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
        secret.wipe()
        // The storage stays allocated until deinit, so it can be inspected after the wipe.
        let after = Array(UnsafeRawBufferPointer(start: address, count: 64))
        #expect(after == [UInt8](repeating: 0, count: 64))
    }

    @Test func neverShowsItsBytes() {
        let secret = SecretBytes(utf8: "hunter2-correct-horse")
        #expect(secret.description == "SecretBytes(21 bytes, redacted)")
        #expect(secret.debugDescription == secret.description)
        #expect(!"\(secret)".contains("hunter2"))
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!dumped.contains("104")) // 'h' as a byte value
        #expect(Mirror(reflecting: secret).children.isEmpty)
    }

    @Test func equalityComparesContents() {
        #expect(SecretBytes(copying: [1, 2, 3]) == SecretBytes(copying: [1, 2, 3]))
        #expect(SecretBytes(copying: [1, 2, 3]) != SecretBytes(copying: [1, 2, 4]))
        #expect(SecretBytes(copying: [1, 2, 3]) != SecretBytes(copying: [1, 2]))
    }

    @Test func randomHasExactLength() throws {
        for count in [0, 1, 31, 32, 4097] {
            #expect(try SecretBytes.random(count: count).count == count)
        }
        #expect(try SecretBytes.random(count: 32) != SecretBytes.random(count: 32))
        #expect(throws: CipherError.self) { try SecretBytes.random(count: -1) }
        #expect(throws: CipherError.self) { try SecretBytes.random(count: 1 << 40) }
    }

    @Test func memoryIsPageLockedWhereAllowed() {
        // As root (CI and this machine) mlock always succeeds; elsewhere RLIMIT_MEMLOCK may forbid it.
        let secret = SecretBytes(copying: [1])
        if geteuid() == 0 { #expect(secret.isMemoryLocked) }
    }

    @Test func smallSecretsComeFromLockedPoolSlotsThatAreZeroedOnRelease() throws {
        // Sizes on both sides of every slot size, and one past the pool (pages of its own).
        for count in [0, 1, 32, 33, 64, 65, 200, 512, 1000, 1024, 1025] {
            var address: UnsafeRawPointer?
            do {
                let secret = SecretBytes(copying: [UInt8](repeating: 0xC5, count: count))
                #expect(secret.withUnsafeBytes { Array($0) } == [UInt8](repeating: 0xC5, count: count))
                if geteuid() == 0 { #expect(secret.isMemoryLocked, "\(count) bytes") }
                if count > 0, count <= SecretPool.largestSlot { address = secret.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) } }
            }
            // Pool arenas are never unmapped, so a released slot can be read: it must be zero.
            if let address {
                #expect(Array(UnsafeRawBufferPointer(start: address, count: count)) == [UInt8](repeating: 0, count: count), "\(count) bytes")
            }
        }
        // Many live secrets at once (several arenas), each keeping its own bytes.
        let many = (0..<5000).map { index in SecretBytes(copying: [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 48)) }
        for (index, secret) in many.enumerated() {
            #expect(secret.withUnsafeBytes { $0.allSatisfy { $0 == UInt8(truncatingIfNeeded: index) } })
        }
        #expect(Set(many.map { $0.withUnsafeBytes { Int(bitPattern: $0.baseAddress!) } }).count == many.count)
    }

    @Test func sliceAndAppend() {
        let secret = SecretBytes(copying: [0, 1, 2, 3, 4, 5])
        #expect(secret.slice(2..<5).withUnsafeBytes { Array($0) } == [2, 3, 4])
        let joined = SecretBytes(copying: [1]).appending(SecretBytes(copying: [2, 3]))
        #expect(joined.withUnsafeBytes { Array($0) } == [1, 2, 3])
    }

    @Test func readsFilesAndDropsOneNewline() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/pass"
        try Data("secret pass\r\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SecretBytes(contentsOfFile: path) == SecretBytes(utf8: "secret pass"))
        try Data("two\n\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SecretBytes(contentsOfFile: path) == SecretBytes(utf8: "two\n"))
        try Data(repeating: 0x41, count: 100).write(to: URL(fileURLWithPath: path))
        #expect(throws: CipherError.self) { try SecretBytes(contentsOfFile: path, maxLength: 99) }
        #expect(throws: CipherError.self) { try SecretBytes(contentsOfFile: directory.path + "/missing") }
    }

    @Test func symmetricKeyRoundTrip() throws {
        let secret = try SecretBytes.random(count: 32)
        #expect(SecretBytes(secret.symmetricKey) == secret)
    }
}
