import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// Interoperability with the reference `age` command (Debian package `age`).
enum AgeTool {
    static let path: String? = {
        for candidate in ["/usr/bin/age", "/usr/local/bin/age"] where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        return nil
    }()
    static var available: Bool { path != nil }
    static let script: String? = FileManager.default.isExecutableFile(atPath: "/usr/bin/script") ? "/usr/bin/script" : nil

    @discardableResult
    static func run(_ arguments: [String], stdin: String? = nil) throws -> (status: Int32, stderr: String) {
        let result = try ChildProcess.run(try #require(path, "age is not installed"), arguments, stdin: stdin.map { .file($0) } ?? .nullDevice)
        return (result.status, result.errorText)
    }

    /// Runs `age` under a pseudo-terminal (util-linux `script`), typing `lines` with pauses,
    /// since `age -p` reads passphrases only from the terminal.
    static func runWithTerminal(_ command: String, lines: [String]) throws -> Int32 {
        let typing = lines.map { "sleep 1; printf '%s\\n' '\($0)'" }.joined(separator: "; ")
        return try ChildProcess.run("/bin/sh", ["-c", "(\(typing); sleep 4) | \(try #require(script)) -qec '\(command)' /dev/null"]).status
    }
}

@Suite("interop with the age command", .enabled(if: AgeTool.available, "the age command is not installed (apt-get install age); interop tests skipped"))
struct InteropTests {
    static let sizes = [0, 1, 65535, 65536, 65537, (1 << 20) + 7]

    @Test("files we write decrypt with age -d (binary and armored)", arguments: sizes)
    func ageDecryptsOurs(size: Int) throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        try SecureFile.replaceAtomically(dir + "/key.txt") { fd in
            try identity.encoded.withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
            try [UInt8]([0x0A]).withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
        }
        let plaintext = pattern(size, seed: 3)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        for armor in [false, true] {
            try Age.encryptFile(at: dir + "/plain", to: dir + "/ours.age", recipients: [identity.recipient], armor: armor)
            let result = try AgeTool.run(["-d", "-i", dir + "/key.txt", "-o", dir + "/out", dir + "/ours.age"])
            #expect(result.status == 0, "age -d failed: \(result.stderr)")
            // age creates its output lazily: an empty plaintext leaves no file.
            let out = FileManager.default.fileExists(atPath: dir + "/out") ? try SecureFile.read(dir + "/out") : []
            #expect(out == plaintext)
            try? FileManager.default.removeItem(atPath: dir + "/out")
        }
    }

    @Test("files age writes (binary and armored) decrypt with ours", arguments: sizes)
    func weDecryptAges(size: Int) throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let other = X25519Identity.generate()
        let plaintext = pattern(size, seed: 5)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        for armor in [false, true] {
            var arguments = ["-r", identity.recipient.description, "-r", other.recipient.description, "-o", dir + "/theirs.age"]
            if armor { arguments.append("-a") }
            let result = try AgeTool.run(arguments + [dir + "/plain"])
            #expect(result.status == 0, "age failed: \(result.stderr)")
            try Age.decryptFile(at: dir + "/theirs.age", to: dir + "/out", identities: [identity])
            #expect(try SecureFile.read(dir + "/out") == plaintext)
            // Seekable reads of age's binary output.
            if !armor && size > 0 {
                let reader = try AgeRandomAccessReader(path: dir + "/theirs.age", identities: [other])
                #expect(reader.plaintextSize == Int64(size))
                #expect(try reader.read(offset: Int64(size / 2), count: 100) == Array(plaintext[(size / 2)..<min(size, size / 2 + 100)]))
            }
        }
    }

    @Test("age-keygen identities work with ours, and our identities with age")
    func keygenInterop() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try ChildProcess.run("/usr/bin/age-keygen", ["-o", dir + "/k.txt"])
        let text = String(decoding: try SecureFile.read(dir + "/k.txt"), as: UTF8.self)
        let secret = text.split(separator: "\n").first { $0.hasPrefix("AGE-SECRET-KEY-1") }.map(String.init)
        let publicLine = text.split(separator: "\n").first { $0.hasPrefix("# public key: ") }.map { String($0.dropFirst(14)) }
        let identity = try X25519Identity(try #require(secret))
        #expect(identity.recipient.description == publicLine)
    }

    @Test("scrypt passphrase files interoperate both ways (age under a pseudo-terminal)",
          .enabled(if: AgeTool.script != nil, "util-linux script is not installed; scrypt interop skipped"))
    func scryptInterop() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let plaintext = pattern(70_000, seed: 9)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        let passphrase = SecretBytes(utf8: "tr0ub4dor-and-3")
        // Ours → age.
        try Age.encryptFile(at: dir + "/plain", to: dir + "/ours.age", recipients: [try ScryptRecipient(passphrase: passphrase, policy: .interactive)])
        let status = try AgeTool.runWithTerminal("\(AgeTool.path!) -d -o \(dir)/out1 \(dir)/ours.age", lines: ["tr0ub4dor-and-3"])
        #expect(status == 0)
        #expect((try? SecureFile.read(dir + "/out1")) == plaintext)
        // age → ours.
        let status2 = try AgeTool.runWithTerminal("\(AgeTool.path!) -p -o \(dir)/theirs.age \(dir)/plain", lines: ["tr0ub4dor-and-3", "tr0ub4dor-and-3"])
        #expect(status2 == 0)
        try Age.decryptFile(at: dir + "/theirs.age", to: dir + "/out2", identities: [ScryptIdentity(passphrase: passphrase)])
        #expect(try SecureFile.read(dir + "/out2") == plaintext)
    }
}
