import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// Counts how often a passphrase is asked for.
final class PassphraseCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var asked = 0
    let passphrase: String
    init(_ passphrase: String) { self.passphrase = passphrase }
    var count: Int { lock.withLock { asked } }
    var provider: @Sendable () throws -> SecretBytes {
        { self.lock.withLock { self.asked += 1 }; return SecretBytes(utf8: self.passphrase) }
    }
}

@Suite("age: passphrase-encrypted identity files")
struct EncryptedIdentityTests {
    /// An identity file encrypted with `passphrase` (scrypt 2^10, for speed).
    static func encryptedFile(_ text: String, passphrase: String, armor: Bool) throws -> [UInt8] {
        try Age.encrypt(Array(text.utf8), recipients: [ScryptRecipient(passphrase: SecretBytes(utf8: passphrase), logN: 10)], armor: armor)
    }

    @Test("an encrypted identity file (binary or armored) decrypts files for the identities inside; the passphrase is asked once, on first use", arguments: [false, true])
    func decrypts(armor: Bool) throws {
        let inner = X25519Identity.generate()
        let pq = try MLKEM768X25519Identity.generate()
        let text = "# created: now\n" + String(decoding: inner.encoded.withUnsafeBytes { Array($0) }, as: UTF8.self) + "\n"
            + String(decoding: pq.encoded.withUnsafeBytes { Array($0) }, as: UTF8.self) + "\n"
        let file = try Self.encryptedFile(text, passphrase: "correct horse", armor: armor)
        let counter = PassphraseCounter("correct horse")
        let identities = try AgeKeys.identities(fileContents: SecretBytes(copying: file), name: "key.age", passphrase: counter.provider)
        #expect(identities.count == 1 && identities[0] is AgeEncryptedIdentityFile)
        #expect(counter.count == 0)
        let one = try Age.encrypt([1], recipients: [inner.recipient])
        let two = try Age.encrypt([2], recipients: [pq.recipient])
        #expect(try Age.decrypt(one, identities: identities) == [1])
        #expect(try Age.decrypt(two, identities: identities) == [2])
        #expect(counter.count == 1)
        #expect(try (identities[0] as? AgeEncryptedIdentityFile)?.identities().count == 2)
    }

    @Test("a wrong passphrase is a wrong secret; without a passphrase source the file is refused; its contents must be identities")
    func refusals() throws {
        let inner = X25519Identity.generate()
        let file = try Self.encryptedFile(String(decoding: inner.encoded.withUnsafeBytes { Array($0) }, as: UTF8.self), passphrase: "right", armor: true)
        let wrong = try AgeKeys.identities(fileContents: SecretBytes(copying: file), name: "key.age", passphrase: { SecretBytes(utf8: "wrong") })
        let sealed = try Age.encrypt([1], recipients: [inner.recipient])
        #expect(throws: AgeError.noMatchingIdentity("the passphrase of the encrypted identity file key.age is wrong (or it is not passphrase-encrypted)")) {
            try Age.decrypt(sealed, identities: wrong)
        }
        #expect(throws: AgeError.invalidIdentity("key.age is an encrypted identity file; give its passphrase")) {
            try AgeKeys.identities(fileContents: SecretBytes(copying: file), name: "key.age")
        }
        let junk = try Self.encryptedFile("not a key\n", passphrase: "p", armor: false)
        let identities = try AgeKeys.identities(fileContents: SecretBytes(copying: junk), name: "junk.age", passphrase: { SecretBytes(utf8: "p") })
        #expect(throws: AgeError.invalidIdentity("junk.age (decrypted) line 1: invalid identity: not an AGE-SECRET-KEY-1…, AGE-SECRET-KEY-PQ-1… or AGE-PLUGIN-… line")) {
            try Age.decrypt(sealed, identities: identities)
        }
    }
}

@Suite("age: encrypted identity files with the age command", .enabled(if: AgeTool.available && AgeTool.script != nil, "age or script (util-linux) is not installed"))
struct EncryptedIdentityInteropTests {
    @Test("an identity file age encrypted with -p decrypts files here")
    func agesEncryptedIdentity() throws {
        let temporary = try TemporaryDirectory(prefix: "age-encid")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let inner = X25519Identity.generate()
        try SecureFile.writeAtomically(inner.encoded.withUnsafeBytes { Array($0) } + [0x0A], to: dir + "/key.txt")
        let status = try AgeTool.runWithTerminal("\(AgeTool.path!) -p -a -o \(dir)/key.age \(dir)/key.txt", lines: ["pass word", "pass word"])
        try #require(status == 0)
        let file = try SecureFile.read(dir + "/key.age")
        #expect(file.starts(with: Array("-----BEGIN AGE ENCRYPTED FILE-----".utf8)))
        let identities = try AgeKeys.identities(fileContents: SecretBytes(copying: file), name: "key.age", passphrase: { SecretBytes(utf8: "pass word") })
        #expect(try Age.decrypt(try Age.encrypt([3, 4], recipients: [inner.recipient]), identities: identities) == [3, 4])
    }
}
