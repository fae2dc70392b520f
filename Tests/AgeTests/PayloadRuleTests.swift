import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// The one rule that opens a payload chunk, as every reader applies it.
@Suite("age payload rule")
struct PayloadRuleTests {
    static func cipher() throws -> PayloadCipher {
        try PayloadCipher(fileKey: SecretBytes(copying: pattern(16, seed: 3)), nonce: pattern(16, seed: 4))
    }

    static func sealed(_ cipher: PayloadCipher, _ plain: [UInt8], counter: UInt64, final: Bool) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plain.count + PayloadCipher.tagSize)
        try plain.withUnsafeBytes { p in try out.withUnsafeMutableBytes { try cipher.seal(p, counter: counter, final: final, into: $0) } }
        return out
    }

    static func open(_ cipher: PayloadCipher, _ sealed: [UInt8], counter: UInt64, last: Bool) -> (count: Int, failure: AgeError?, plain: [UInt8]) {
        var out = [UInt8](repeating: 0, count: PayloadCipher.chunkSize)
        let result = sealed.withUnsafeBytes { s in out.withUnsafeMutableBytes { cipher.openChunk(s, counter: counter, last: last, into: $0) } }
        return (result.count, result.failure, Array(out[0..<result.count]))
    }

    @Test("openChunk: final flag, trailing data, truncation, empty chunks, damage")
    func openChunkRules() throws {
        let cipher = try Self.cipher()
        let full = pattern(PayloadCipher.chunkSize, seed: 5)
        let short = pattern(100, seed: 6)
        // A full non-final chunk followed by more: released, no failure.
        let middle = try Self.sealed(cipher, full, counter: 1, final: false)
        var opened = Self.open(cipher, middle, counter: 1, last: false)
        #expect(opened.failure == nil && opened.plain == full)
        // The same chunk with nothing after it: truncated, its verified plaintext released.
        opened = Self.open(cipher, middle, counter: 1, last: true)
        #expect(opened.failure == .payloadFailure("the file ends without a final chunk (truncated)") && opened.plain == full)
        // A final chunk with more after it: its plaintext released, then the failure.
        let final = try Self.sealed(cipher, short, counter: 2, final: true)
        opened = Self.open(cipher, final, counter: 2, last: false)
        #expect(opened.failure == .payloadFailure("data follows the final chunk") && opened.plain == short)
        opened = Self.open(cipher, final, counter: 2, last: true)
        #expect(opened.failure == nil && opened.plain == short)
        // An empty final chunk is valid only as the only chunk.
        #expect(Self.open(cipher, try Self.sealed(cipher, [], counter: 0, final: true), counter: 0, last: true).failure == nil)
        #expect(Self.open(cipher, try Self.sealed(cipher, [], counter: 3, final: true), counter: 3, last: true).failure
                == .payloadFailure("the final chunk is empty"))
        // Nothing at all, too short for a tag, the wrong counter, a flipped bit.
        #expect(Self.open(cipher, [], counter: 0, last: true).failure == .payloadFailure("the payload has no chunks"))
        #expect(Self.open(cipher, [1, 2, 3], counter: 4, last: true).failure == .payloadFailure("chunk 4 is truncated"))
        #expect(Self.open(cipher, middle, counter: 2, last: false).failure == .payloadFailure("chunk 2 does not authenticate"))
        var damaged = final
        damaged[5] ^= 1
        opened = Self.open(cipher, damaged, counter: 2, last: true)
        #expect(opened.failure == .payloadFailure("chunk 2 does not authenticate") && opened.count == 0)
    }

    @Test("random access reports a file cut at a chunk boundary as the streams do")
    func randomAccessTruncation() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = pattern(3 * PayloadCipher.chunkSize + 10)
        // Drop the final chunk (10 bytes + tag): the file now ends on a full, non-final chunk.
        let cut = Array(try Age.encrypt(plaintext, recipients: [identity.recipient]).dropLast(10 + PayloadCipher.tagSize))
        let path = dir + "/cut.age"
        try SecureFile.writeAtomically(cut, to: path)
        let expected = AgeError.payloadFailure("the file ends without a final chunk (truncated)")
        #expect(throws: expected) { try Age.decrypt(cut, identities: [identity]) }
        #expect(throws: expected) { try AgeRandomAccessReader(path: path, identities: [identity]) }
        // Data after a full-size final chunk: the streams open it as final where more follows.
        let whole = try Age.encrypt(pattern(2 * PayloadCipher.chunkSize), recipients: [identity.recipient])
        let extended = whole + pattern(20)
        try SecureFile.writeAtomically(extended, to: path)
        #expect(throws: AgeError.payloadFailure("data follows the final chunk")) { try Age.decrypt(extended, identities: [identity]) }
        // By size the file has a third chunk, of 20 bytes, which does not authenticate.
        #expect(throws: AgeError.payloadFailure("chunk 2 does not authenticate")) { try AgeRandomAccessReader(path: path, identities: [identity]) }
    }

    @Test("descriptor helpers: standard input for nil or -, the same file through a path or /dev/fd")
    func descriptorHelpers() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        #expect(try AgeIO.openInput(nil) == 0)
        #expect(try AgeIO.openInput("-") == 0)
        #expect(throws: AgeError.self) { try AgeIO.openInput(dir + "/missing") }
        try SecureFile.writeAtomically(pattern(10), to: dir + "/a")
        try SecureFile.writeAtomically(pattern(10), to: dir + "/b")
        #expect(symlink(dir + "/a", dir + "/link") == 0)
        let fd = try AgeIO.openInput(dir + "/a")
        defer { close(fd) }
        #expect(AgeIO.isSameFile(fd, dir + "/a"))
        // A writable descriptor on the same file, named as /dev/fd/N.
        let writable = Foundation.open(dir + "/a", O_WRONLY | O_CLOEXEC)
        defer { close(writable) }
        #expect(AgeIO.isSameFile(fd, "/dev/fd/\(writable)"))
        #expect(!AgeIO.isSameFile(fd, dir + "/b"))
        #expect(!AgeIO.isSameFile(fd, dir + "/link"))
        #expect(!AgeIO.isSameFile(fd, dir + "/missing"))
    }
}
