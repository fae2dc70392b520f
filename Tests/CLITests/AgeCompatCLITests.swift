import Foundation
import TestSupport
import Testing
import Cipher

/// What age users type: SSH keys, plugins, encrypted identity files, -e/-d, -pq, inspect.
@Suite("age commands: SSH keys, plugins, encrypted identity files, age's flags, inspect")
struct AgeCompatCLITests {
    typealias Result = AgeCLITests.Result

    static func run(_ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:]) throws -> Result {
        let input: ChildProcess.Input = stdin.map { .bytes($0) } ?? .nullDevice
        let result = try ChildProcess.run(try BuiltProducts.commandLine, arguments, stdin: input, environment: environment, timeout: .seconds(300))
        return Result(status: result.status, stdout: result.stdout, stderr: result.errorText)
    }

    static let sshKeygen = FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-keygen")
    static let age = FileManager.default.isExecutableFile(atPath: "/usr/bin/age")
    static let script = FileManager.default.isExecutableFile(atPath: "/usr/bin/script")

    static func sshKey(_ dir: String, _ name: String, type: String, passphrase: String = "") throws -> String {
        let result = try ChildProcess.run("/usr/bin/ssh-keygen", ["-q", "-t", type, "-N", passphrase, "-C", "me@host", "-f", dir + "/" + name])
        try #require(result.status == 0, "\(result.errorText)")
        return dir + "/" + name
    }

    @Test("encrypt -r/-R to SSH keys and decrypt -i with them; age decrypts it; authorized_keys warnings; a passphrase-protected key is refused with what to do",
          .enabled(if: sshKeygen))
    func ssh() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let ed = try Self.sshKey(dir, "ed", type: "ed25519")
        let rsa = try Self.sshKey(dir, "rsa", type: "rsa")
        let ec = try Self.sshKey(dir, "ec", type: "ecdsa")
        let plain = AgeCLITests.bytes(100_000)
        try SecureFile.writeAtomically(plain, to: dir + "/plain")
        let edLine = try String(contentsOfFile: ed + ".pub", encoding: .utf8).trimmingCharacters(in: .newlines)
        try SecureFile.writeAtomically(Array((try String(contentsOfFile: ec + ".pub", encoding: .utf8) + "# me\n" + (try String(contentsOfFile: rsa + ".pub", encoding: .utf8))).utf8),
                                       to: dir + "/authorized_keys")
        let encrypted = try Self.run(["encrypt", "-e", "-r", edLine, "-R", dir + "/authorized_keys", "-o", dir + "/f.age", dir + "/plain"])
        #expect(encrypted.status == 0)
        #expect(encrypted.stderr == "securefoundation: warning: \(dir)/authorized_keys: ignoring unsupported SSH key of type \"ecdsa-sha2-nistp256\" at line 1\n")
        for key in [ed, rsa] {
            let decrypted = try Self.run(["decrypt", "-d", "-i", key, dir + "/f.age"])
            #expect(decrypted.status == 0 && decrypted.stdout == plain, "\(decrypted.stderr)")
        }
        let inspected = try Self.run(["inspect", dir + "/f.age"])
        #expect(inspected.text.contains("  - \"ssh-ed25519\"\n  - \"ssh-rsa\"\n"))
        // keygen -y prints an SSH key's public key.
        let converted = try Self.run(["keygen", "-y", ed])
        #expect(converted.status == 0 && edLine.hasPrefix(converted.text.trimmingCharacters(in: .newlines)))
        if Self.age {
            let result = try ChildProcess.run("/usr/bin/age", ["-d", "-i", rsa, dir + "/f.age"])
            #expect(result.status == 0 && result.stdout == plain, "\(result.errorText)")
        }
        // A passphrase-protected key: opened with --passphrase-file (ssh-keygen decrypts it in
        // memory); a wrong passphrase exits 3; without a terminal or a file, refused.
        let locked = try Self.sshKey(dir, "locked", type: "ed25519", passphrase: "secret")
        try SecureFile.writeAtomically(Array("secret\n".utf8), to: dir + "/pass")
        try SecureFile.writeAtomically(Array("wrong\n".utf8), to: dir + "/wrong")
        #expect(try Self.run(["encrypt", "-R", locked + ".pub", "-o", dir + "/l.age", dir + "/plain"]).status == 0)
        let opened = try Self.run(["decrypt", "-i", locked, "--passphrase-file", dir + "/pass", "-o", dir + "/out", dir + "/l.age"])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(try SecureFile.read(dir + "/out") == plain)
        try FileManager.default.removeItem(atPath: dir + "/out")
        let wrong = try Self.run(["decrypt", "-i", locked, "--passphrase-file", dir + "/wrong", "-o", dir + "/out", dir + "/l.age"])
        #expect(wrong.status == 3 && wrong.stderr.contains("the passphrase of the SSH key \(locked) is wrong"), "\(wrong.stderr)")
        let refused = try Self.run(["decrypt", "-i", locked, "-o", dir + "/out", dir + "/l.age"])
        #expect(refused.status == 64 && refused.stderr.contains("no terminal to read the passphrase from; give it with --passphrase-file FILE"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out"))
        if Self.age && Self.script {
            // The same file, by age with the same key (its passphrase typed on a terminal).
            let command = "/usr/bin/age -d -i \(locked) -o \(dir)/age-out \(dir)/l.age"
            let result = try ChildProcess.run("/bin/sh", ["-c", "(sleep 1; printf '%s\\n' 'secret'; sleep 4) | /usr/bin/script -qec '\(command)' /dev/null"])
            #expect(result.status == 0, "\(result.errorText)")
            #expect(try SecureFile.read(dir + "/age-out") == plain)
        }
        // ... and passed over for a file that is not.
        #expect(try Self.run(["decrypt", "-i", locked, "-i", ed, dir + "/f.age"]).stdout == plain)
        // Options before the key type are refused, as age refuses them.
        let options = try Self.run(["encrypt", "-r", "no-pty " + edLine, dir + "/plain"])
        #expect(options.status == 1 && options.stderr.contains("options before the SSH key type"))
    }

    @Test("keygen -pq as age-keygen spells it; -e and -d accepted; decrypt -e and encrypt -d are usage errors")
    func ageSpellings() throws {
        let pq = try Self.run(["keygen", "-pq"])
        #expect(pq.status == 0)
        #expect(pq.text.split(separator: "\n").last?.hasPrefix("AGE-SECRET-KEY-PQ-1") == true)
        let temporary = try TemporaryDirectory(prefix: "sf-age-flags")
        defer { withExtendedLifetime(temporary) {} }
        let (key, recipient) = try AgeCLITests.keygen(temporary.path)
        let sealed = try Self.run(["encrypt", "-e", "-a", "-r", recipient], stdin: [1, 2, 3])
        #expect(sealed.status == 0)
        let opened = try Self.run(["decrypt", "--decrypt", "-i", key], stdin: sealed.stdout)
        #expect(opened.status == 0 && opened.stdout == [1, 2, 3])
        #expect(try Self.run(["decrypt", "-e", "-i", key], stdin: sealed.stdout).status == 64)
        #expect(try Self.run(["encrypt", "-d", "-r", recipient], stdin: [1]).status == 64)
    }

    @Test("inspect: stanza types, armor and sizes without a key; --json; exit 2 for what is not an age file")
    func inspect() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-inspect")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let (_, recipient) = try AgeCLITests.keygen(dir)
        let (_, pq) = try AgeCLITests.keygen(dir, name: "pq.txt", pq: true)
        try SecureFile.writeAtomically(AgeCLITests.bytes(200_000), to: dir + "/plain")
        #expect(try Self.run(["encrypt", "-r", recipient, "-o", dir + "/x.age", dir + "/plain"]).status == 0)
        let size = try SecureFile.read(dir + "/x.age").count
        let json = try Self.run(["inspect", "--json", dir + "/x.age"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])
        #expect(object["stanzaTypes"] as? [String] == ["X25519"])
        #expect(object["armored"] as? Bool == false && object["postQuantum"] as? Bool == false)
        #expect(object["payloadSize"] as? Int == 200_000 && object["totalSize"] as? Int == size)
        // 16-byte nonce and four 16-byte tags (200,000 bytes are four 64 KiB chunks).
        #expect(object["overheadSize"] as? Int == 16 + 4 * 16)
        #expect(object["headerSize"] as? Int == size - 200_000 - 80)
        let text = try Self.run(["inspect", dir + "/x.age"])
        #expect(text.status == 0)
        #expect(text.text.hasPrefix("\(dir)/x.age is an age file, version \"age-encryption.org/v1\".\n\nThis file is encrypted to the following recipient types:\n  - \"X25519\"\n"))
        #expect(text.text.contains("    Payload                     200000 bytes\n"))
        // Armored, post-quantum, from stdin.
        let armored = try Self.run(["encrypt", "-a", "-r", pq], stdin: [9])
        let fromStdin = try Self.run(["inspect", "--json"], stdin: armored.stdout)
        let second = try #require(try JSONSerialization.jsonObject(with: Data(fromStdin.stdout)) as? [String: Any])
        #expect(second["armored"] as? Bool == true && second["postQuantum"] as? Bool == true && second["payloadSize"] as? Int == 1)
        #expect(second["stanzaTypes"] as? [String] == ["mlkem768x25519"])
        let notAge = try Self.run(["inspect"], stdin: Array("hello\n".utf8))
        #expect(notAge.status == 2)
        #expect(notAge.stderr.contains("not an age file"))
    }

    @Test("keygen --passphrase-file writes an encrypted identity file; decrypt -i reads it with --passphrase-file; a wrong one exits 3")
    func encryptedIdentityFile() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-encid")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try SecureFile.writeAtomically(Array("pass word\n".utf8), to: dir + "/pass")
        try SecureFile.writeAtomically(Array("wrong\n".utf8), to: dir + "/wrong")
        let made = try Self.run(["keygen", "--passphrase-file", dir + "/pass", "-o", dir + "/key.age"])
        #expect(made.status == 0)
        let recipient = String(made.stderr.trimmingCharacters(in: .newlines).dropFirst("Public key: ".count))
        #expect(recipient.hasPrefix("age1"))
        let file = try SecureFile.read(dir + "/key.age")
        #expect(file.starts(with: Array("-----BEGIN AGE ENCRYPTED FILE-----\n".utf8)))
        var info = stat()
        #expect(stat(dir + "/key.age", &info) == 0 && info.st_mode & 0o777 == 0o600)
        let sealed = try Self.run(["encrypt", "-r", recipient, "-o", dir + "/m.age"], stdin: [4, 2])
        #expect(sealed.status == 0)
        let opened = try Self.run(["decrypt", "-i", dir + "/key.age", "--passphrase-file", dir + "/pass", dir + "/m.age"])
        #expect(opened.status == 0 && opened.stdout == [4, 2], "\(opened.stderr)")
        let wrong = try Self.run(["decrypt", "-i", dir + "/key.age", "--passphrase-file", dir + "/wrong", dir + "/m.age"])
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("the passphrase of the encrypted identity file \(dir)/key.age is wrong"))
        // Without a terminal and without --passphrase-file, the passphrase cannot be asked.
        let noTerminal = try Self.run(["decrypt", "-i", dir + "/key.age", dir + "/m.age"])
        #expect(noTerminal.status == 64 && noTerminal.stderr.contains("no terminal to read the passphrase from"), "\(noTerminal.stderr)")
        let converted = try Self.run(["keygen", "-y", "--passphrase-file", dir + "/pass", dir + "/key.age"])
        #expect(converted.status == 0 && converted.text == recipient + "\n")
        // age reads it too, asking for the passphrase on its terminal.
        if Self.age && Self.script {
            let command = "/usr/bin/age -d -i \(dir)/key.age -o \(dir)/out \(dir)/m.age"
            let result = try ChildProcess.run("/bin/sh", ["-c", "(sleep 1; printf '%s\\n' 'pass word'; sleep 4) | /usr/bin/script -qec '\(command)' /dev/null"])
            #expect(result.status == 0, "\(result.errorText)")
            #expect(try SecureFile.read(dir + "/out") == [4, 2])
        }
    }

    @Test("encrypt -e -i encrypts to the recipients of identity files (age keys, SSH keys); age decrypts with the same files; an identity without a recipient and stdin twice are refused",
          .enabled(if: sshKeygen))
    func encryptToIdentityFiles() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-ei")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        #expect(try Self.run(["keygen", "-o", dir + "/key.txt"]).status == 0)
        #expect(try Self.run(["keygen", "-pq", "-o", dir + "/pq.txt"]).status == 0)
        let ed = try Self.sshKey(dir, "ed", type: "ed25519")
        let plain = AgeCLITests.bytes(70_000)
        try SecureFile.writeAtomically(plain, to: dir + "/plain")
        let sealed = try Self.run(["encrypt", "-e", "-i", dir + "/key.txt", "-i", ed, "-i", dir + "/pq.txt", "-o", dir + "/f.age", dir + "/plain"])
        #expect(sealed.status == 0, "\(sealed.stderr)")
        let inspected = try Self.run(["inspect", dir + "/f.age"])
        #expect(inspected.text.contains("\"X25519\"") && inspected.text.contains("\"ssh-ed25519\"") && inspected.text.contains("\"mlkem768x25519\""), "\(inspected.text)")
        for key in [dir + "/key.txt", ed, dir + "/pq.txt"] {
            let opened = try Self.run(["decrypt", "-i", key, dir + "/f.age"])
            #expect(opened.status == 0 && opened.stdout == plain, "\(key): \(opened.stderr)")
        }
        if Self.age {
            for key in [dir + "/key.txt", ed] {
                let result = try ChildProcess.run("/usr/bin/age", ["-d", "-i", key, dir + "/f.age"])
                #expect(result.status == 0 && result.stdout == plain, "\(result.errorText)")
            }
            // And the other way: age -e -i, our decrypt.
            let theirs = try ChildProcess.run("/usr/bin/age", ["-e", "-i", dir + "/key.txt", "-o", dir + "/g.age", dir + "/plain"])
            #expect(theirs.status == 0, "\(theirs.errorText)")
            let opened = try Self.run(["decrypt", "-i", dir + "/key.txt", dir + "/g.age"])
            #expect(opened.status == 0 && opened.stdout == plain)
        }
        // Identities from stdin, the input named.
        let key = try SecureFile.read(dir + "/key.txt")
        #expect(try Self.run(["encrypt", "-i", "-", "-o", dir + "/h.age", dir + "/plain"], stdin: key).status == 0)
        #expect(try Self.run(["decrypt", "-i", dir + "/key.txt", dir + "/h.age"]).stdout == plain)
        // stdin cannot be both; -i with -p is a usage error; a file of no identity is refused.
        #expect(try Self.run(["encrypt", "-i", "-", "-o", dir + "/x.age"], stdin: key).status == 64)
        #expect(try Self.run(["encrypt", "-i", dir + "/key.txt", "--passphrase-file", dir + "/key.txt", "-o", dir + "/x.age", dir + "/plain"]).status == 64)
        try SecureFile.writeAtomically(Array("not a key\n".utf8), to: dir + "/junk.txt")
        let junk = try Self.run(["encrypt", "-i", dir + "/junk.txt", "-o", dir + "/x.age", dir + "/plain"])
        #expect(junk.status != 0 && !FileManager.default.fileExists(atPath: dir + "/x.age"))
    }

    /// python3 with the cryptography package, which the Python plugin needs.
    static let python: Bool = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        && (try? ChildProcess.run("/usr/bin/python3", ["-c", "import cryptography.hazmat.primitives.ciphers.aead"]).status) == 0

    @Test("plugins from the PATH: encrypt -r age1sfpy1…, decrypt -i with its identity and -j sfpy",
          .enabled(if: python, "python3-cryptography is not installed"))
    func plugins() throws {
        let temporary = try TemporaryDirectory(prefix: "sf-age-plugin")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("AgePluginFixture/age-plugin-sfpy").path
        try FileManager.default.createSymbolicLink(atPath: dir + "/age-plugin-sfpy", withDestinationPath: script)
        let generated = try ChildProcess.run(dir + "/age-plugin-sfpy", ["--generate"])
        try #require(generated.status == 0, "\(generated.errorText)")
        let lines = generated.text.split(separator: "\n").map(String.init)
        try SecureFile.writeAtomically(Array((lines[0] + "\n").utf8), to: dir + "/identity.txt")
        try SecureFile.writeAtomically(Array(lines[2].utf8), to: dir + "/sfpy-default.key")
        let environment = ["PATH": dir + ":/usr/bin:/bin"]
        let sealed = try Self.run(["encrypt", "-r", lines[1], "-o", dir + "/p.age"], stdin: [7, 7], environment: environment)
        #expect(sealed.status == 0, "\(sealed.stderr)")
        for arguments in [["-i", dir + "/identity.txt"], ["-j", "sfpy"]] {
            let opened = try Self.run(["decrypt"] + arguments + [dir + "/p.age"], environment: environment)
            #expect(opened.status == 0 && opened.stdout == [7, 7], "\(arguments): \(opened.stderr)")
            #expect(opened.stderr == "[age-plugin-sfpy] sfpy is unwrapping\n")
        }
        // Not on the PATH: the message says which program is missing.
        let missing = try Self.run(["decrypt", "-j", "sfpy", dir + "/p.age"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(missing.status == 1 && missing.stderr.contains("age-plugin-sfpy is not on the PATH"))
    }
}
