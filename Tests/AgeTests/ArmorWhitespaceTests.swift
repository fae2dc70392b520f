import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// Whitespace around the armor, as the specification and age's reference implementation allow
/// it: whole lines before BEGIN (up to 1024 bytes), under 1024 bytes after END, none on the
/// BEGIN line itself.
@Suite struct ArmorWhitespaceTests {
    let identity = X25519Identity.generate()
    let plaintext = Array("armored".utf8)

    func armored() throws -> [UInt8] { try Age.encrypt(plaintext, recipients: [identity.recipient], armor: true) }

    @Test("whitespace in front of -----BEGIN on its own line is refused (spaces, a tab, after a blank line)")
    func whitespaceOnTheBeginLineIsRefused() throws {
        let file = try armored()
        for prefix in ["   ", "\t", "\n ", "\r\n\t  ", " \r\n "] {
            #expect(throws: AgeError.armorFailure("the first line is not -----BEGIN AGE ENCRYPTED FILE----- (starting in the first column)"),
                    "\(prefix.debugDescription)") {
                try Age.decrypt(Array(prefix.utf8) + file, identities: [identity])
            }
            #expect(throws: AgeError.self) {
                try Age.decrypt(Array(prefix.utf8) + file, identities: [identity], armor: .required)
            }
        }
    }

    @Test("whole lines of whitespace before BEGIN are accepted up to 1024 bytes, whitespace after END under 1024")
    func whitespaceLinesAroundTheBlock() throws {
        let file = try armored()
        #expect(try Age.decrypt(Array("\n\r\n   \t\n".utf8) + file, identities: [identity]) == plaintext)
        #expect(try Age.decrypt([UInt8](repeating: 0x0A, count: 1024) + file, identities: [identity]) == plaintext)
        #expect(throws: AgeError.armorFailure("more than 1024 bytes of whitespace before the BEGIN line")) {
            try Age.decrypt([UInt8](repeating: 0x0A, count: 1025) + file, identities: [identity])
        }
        #expect(throws: AgeError.armorFailure("more than 1024 bytes of whitespace before the BEGIN line")) {
            try Age.decrypt([UInt8](repeating: 0x20, count: 1100) + [0x0A] + file, identities: [identity])
        }
        #expect(try Age.decrypt(file + [UInt8](repeating: 0x20, count: 1023), identities: [identity]) == plaintext)
        #expect(throws: AgeError.armorFailure("1024 bytes or more of whitespace after the END line")) {
            try Age.decrypt(file + [UInt8](repeating: 0x20, count: 1024), identities: [identity])
        }
    }

    @Test("the streaming descriptor path refuses indented armor too")
    func descriptorPath() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try SecureFile.writeAtomically(Array("  ".utf8) + (try armored()), to: dir + "/in.age")
        let input = open(dir + "/in.age", O_RDONLY | O_CLOEXEC)
        #expect(input >= 0)
        defer { close(input) }
        let output = open(dir + "/out", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(output) }
        #expect(throws: AgeError.armorFailure("the first line is not -----BEGIN AGE ENCRYPTED FILE----- (starting in the first column)")) {
            try Age.decrypt(from: input, to: output, identities: [identity])
        }
        var info = stat()
        #expect(fstat(output, &info) == 0 && info.st_size == 0)
    }
}
