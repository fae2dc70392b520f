import Foundation
import TestSupport
import Testing

/// Runs the built `securefoundation encrypt/decrypt/keygen` and checks formats, bytes and exit codes.
@Suite("age commands")
struct AgeCLITests {
    struct Result {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// - Parameter stdinFile: A file to give as stdin (as the shell's `< FILE` does) instead of bytes.
    static func run(_ arguments: [String], stdin: [UInt8]? = nil, stdinFile: String? = nil) throws -> Result {
        let input: ChildProcess.Input = stdinFile.map { .file($0) } ?? stdin.map { .bytes($0) } ?? .nullDevice
        let result = try ChildProcess.run(try BuiltProducts.commandLine, arguments, stdin: input, timeout: .seconds(300))
        return Result(status: result.status, stdout: result.stdout, stderr: result.errorText)
    }

    static func bytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    /// Creates an identity file and returns (path, recipient).
    static func keygen(_ dir: String, name: String = "key.txt", pq: Bool = false) throws -> (String, String) {
        let path = dir + "/" + name
        let result = try run(["keygen", "-o", path] + (pq ? ["--pq"] : []))
        #expect(result.status == 0, "\(result.stderr)")
        let recipient = String(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Public key: ".count))
        return (path, recipient)
    }

    @Test("keygen writes age-keygen's format with mode 0600, and -y prints the recipient")
    func keygenFormat() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (path, recipient) = try Self.keygen(dir)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines[3].isEmpty)
        #expect(lines[0].wholeMatch(of: /# created: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)/) != nil, "\(lines[0])")
        #expect(lines[1] == "# public key: \(recipient)")
        #expect(recipient.wholeMatch(of: /age1[02-9ac-hj-np-z]{58}/) != nil)
        #expect(lines[2].wholeMatch(of: /AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}/) != nil)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let converted = try Self.run(["keygen", "-y", path])
        #expect(converted.status == 0 && converted.text == recipient + "\n")
        let fromStdin = try Self.run(["keygen", "-y"], stdin: Array(try String(contentsOfFile: path, encoding: .utf8).utf8))
        #expect(fromStdin.text == recipient + "\n")
        // An existing identity file is not overwritten.
        let again = try Self.run(["keygen", "-o", path])
        #expect(again.status == 1)
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains(recipient))
        // Post-quantum identities.
        let pq = try Self.run(["keygen", "--pq"])
        let pqLines = pq.text.split(separator: "\n")
        #expect(pq.status == 0 && pqLines.count == 3)
        #expect(pqLines[1].hasPrefix("# public key: age1pq1") && pqLines[2].hasPrefix("AGE-SECRET-KEY-PQ-1"))
    }

    @Test("encrypt/decrypt round trips: files, stdin/stdout, armor, several recipients, passphrase file, post-quantum")
    func roundTrip() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Self.keygen(dir)
        let (key2, recipient2) = try Self.keygen(dir, name: "key2.txt", pq: true)
        let plaintext = Self.bytes(200_000)
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/plain"))
        try "# team\n\(recipient2)\n".write(toFile: dir + "/recipients.txt", atomically: true, encoding: .utf8)

        let enc = try Self.run(["encrypt", "-r", recipient, "-R", dir + "/recipients.txt", "-o", dir + "/f.age", dir + "/plain"])
        #expect(enc.status == 0, "\(enc.stderr)")
        for k in [key, key2] {
            let dec = try Self.run(["decrypt", "-i", k, dir + "/f.age"])
            #expect(dec.status == 0 && dec.stdout == plaintext, "\(dec.stderr)")
        }
        let armored = try Self.run(["encrypt", "-a", "-r", recipient], stdin: plaintext)
        #expect(armored.status == 0 && armored.text.hasPrefix("-----BEGIN AGE ENCRYPTED FILE-----\n"))
        let dearmored = try Self.run(["decrypt", "-i", key, "-o", dir + "/out"], stdin: armored.stdout)
        #expect(dearmored.status == 0)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/out"))) == plaintext)
        // stdin to -o, binary.
        let fromStdin = try Self.run(["encrypt", "-r", recipient, "-o", dir + "/stdin.age"], stdin: plaintext)
        #expect(fromStdin.status == 0 && fromStdin.stdout.isEmpty, "\(fromStdin.stderr)")
        let backFromStdin = try Self.run(["decrypt", "-i", key, dir + "/stdin.age"])
        #expect(backFromStdin.status == 0 && backFromStdin.stdout == plaintext)

        try "a passphrase for tests\n".write(toFile: dir + "/pass.txt", atomically: true, encoding: .utf8)
        let penc = try Self.run(["encrypt", "--passphrase-file", dir + "/pass.txt", "-o", dir + "/p.age", dir + "/plain"])
        #expect(penc.status == 0, "\(penc.stderr)")
        #expect(try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir + "/p.age")).prefix(60), as: UTF8.self).contains("-> scrypt "))
        let pdec = try Self.run(["decrypt", "--passphrase-file", dir + "/pass.txt", dir + "/p.age"])
        #expect(pdec.status == 0 && pdec.stdout == plaintext)
    }

    @Test("encrypt -R - reads recipients from stdin; conflicting flags are refused; run-time errors print no usage")
    func recipientsFromStdinAndConflicts() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Self.keygen(dir)
        let plaintext = Self.bytes(5_000)
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/plain"))
        let enc = try Self.run(["encrypt", "-R", "-", "-o", dir + "/r.age", dir + "/plain"], stdin: Array("# from stdin\n\(recipient)\n".utf8))
        #expect(enc.status == 0, "\(enc.stderr)")
        let dec = try Self.run(["decrypt", "-i", key, dir + "/r.age"])
        #expect(dec.status == 0 && dec.stdout == plaintext)
        // stdin cannot be both the recipients and the input.
        let both = try Self.run(["encrypt", "-R", "-"], stdin: Array(recipient.utf8))
        #expect(both.status == 64 && both.stderr.contains("stdin cannot hold both the recipients"))
        try "pass phrase\n".write(toFile: dir + "/pass.txt", atomically: true, encoding: .utf8)
        // -p with a file: the passphrase comes from the file (as age's -p reads it from a terminal).
        let withFile = try Self.run(["encrypt", "-p", "--passphrase-file", dir + "/pass.txt", "-o", dir + "/p.age", dir + "/plain"])
        #expect(withFile.status == 0, "\(withFile.stderr)")
        let opened = try Self.run(["decrypt", "--passphrase-file", dir + "/pass.txt", dir + "/p.age"])
        #expect(opened.status == 0 && opened.stdout == plaintext, "\(opened.stderr)")
        // An empty passphrase file is a run-time error: the message alone, no usage text.
        try Data().write(to: URL(fileURLWithPath: dir + "/empty.txt"))
        let empty = try Self.run(["encrypt", "--passphrase-file", dir + "/empty.txt", "-o", dir + "/e.age", dir + "/plain"])
        #expect(empty.status == 1)
        #expect(empty.stderr == "securefoundation: error: the passphrase file \(dir)/empty.txt (--passphrase-file) is empty\n")
    }

    @Test("decrypt exit codes: 2 header, 3 MAC, 4 no match, 5 payload, 6 armor, 64 usage")
    func exitCodes() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Self.keygen(dir)
        let (otherKey, _) = try Self.keygen(dir, name: "other.txt")
        let plaintext = Self.bytes(100_000)
        let good = try Self.run(["encrypt", "-r", recipient], stdin: plaintext).stdout
        func decrypt(_ file: [UInt8], key: String = key, output: String? = nil) throws -> Result {
            try Data(file).write(to: URL(fileURLWithPath: dir + "/in.age"))
            return try Self.run(["decrypt", "-i", key] + (output.map { ["-o", $0] } ?? []) + [dir + "/in.age"])
        }
        #expect(try decrypt(good).status == 0)
        // 2 (damaged or tampered, docs/CLI.md): not an age header.
        #expect(try decrypt(Array("age-encryption.org/v2\n".utf8) + good).status == 2)
        // 2: header MAC changed (first character of the MAC stays canonical base64).
        var mac = good
        let macLine = try #require(String(decoding: good.prefix(400), as: UTF8.self).range(of: "\n--- "))
        let macIndex = String(decoding: good.prefix(400), as: UTF8.self).utf8.distance(from: String(decoding: good.prefix(400), as: UTF8.self).startIndex, to: macLine.upperBound)
        mac[macIndex] = mac[macIndex] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(try decrypt(mac).status == 2)
        // 3 (wrong secret): another identity.
        let noMatch = try decrypt(good, key: otherKey)
        #expect(noMatch.status == 3 && noMatch.stderr.contains("no identity matched"))
        // 2: a damaged last chunk; with -o nothing is written.
        var damaged = good
        damaged[damaged.count - 1] ^= 1
        let payload = try decrypt(damaged, output: dir + "/never")
        #expect(payload.status == 2)
        #expect(!FileManager.default.fileExists(atPath: dir + "/never"))
        // 2: armor with trailing garbage.
        let armored = try Self.run(["encrypt", "-a", "-r", recipient], stdin: plaintext).stdout
        #expect(try decrypt(armored + Array("garbage\n".utf8)).status == 2)
        // 64: usage error.
        #expect(try Self.run(["decrypt", "--no-such-flag"]).status == 64)
        #expect(try Self.run(["encrypt", "-p", "-r", recipient]).status == 64)
    }

    @Test("in place: encrypt -o INPUT (or -o FILE < FILE) replaces the plaintext and reports the shredding")
    func inPlace() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-cli")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (key, recipient) = try Self.keygen(dir)
        let plaintext = Self.bytes(70_000)
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/doc"))
        let result = try Self.run(["encrypt", "-r", recipient, "-o", dir + "/doc", dir + "/doc"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("in place"))
        let dec = try Self.run(["decrypt", "-i", key, dir + "/doc"])
        #expect(dec.status == 0 && dec.stdout == plaintext)

        // The same file on stdin (`encrypt -o doc < doc`) is encrypted in place too.
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/doc2"))
        let redirected = try Self.run(["encrypt", "-r", recipient, "-o", dir + "/doc2"], stdinFile: dir + "/doc2")
        #expect(redirected.status == 0, "\(redirected.stderr)")
        #expect(redirected.stderr.contains("\(dir)/doc2 in place"))
        let dec2 = try Self.run(["decrypt", "-i", key, dir + "/doc2"])
        #expect(dec2.status == 0 && dec2.stdout == plaintext)
    }
}
