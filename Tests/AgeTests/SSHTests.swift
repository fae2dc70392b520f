import Foundation
import TestSupport
import Testing
import Cipher
import Crypto
@testable import Age

/// OpenSSH's ssh-keygen (Debian package openssh-client), which makes the test keys.
enum SSHKeygen {
    static let path: String? = FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-keygen") ? "/usr/bin/ssh-keygen" : nil
    static var available: Bool { path != nil }

    /// Makes `dir/name` and `dir/name.pub`: `type` ed25519 or rsa, `bits` for RSA, a passphrase
    /// (empty: none), `pem` for the older PEM format.
    static func make(_ dir: String, _ name: String, type: String, bits: Int = 2048, passphrase: String = "", pem: Bool = false) throws -> String {
        var arguments = ["-q", "-t", type, "-N", passphrase, "-C", "test@\(name)", "-f", dir + "/" + name]
        if type == "rsa" { arguments += ["-b", String(bits)] }
        if pem { arguments += ["-m", "PEM"] }
        let result = try ChildProcess.run(try #require(path, "ssh-keygen is not installed"), arguments)
        try #require(result.status == 0, "ssh-keygen failed: \(result.errorText)")
        return dir + "/" + name
    }

    static func identity(_ path: String, passphrase: String? = nil) throws -> any AgeIdentity {
        let contents = try SecretBytes(contentsOfFile: path)
        defer { contents.wipe() }
        let source: (@Sendable () throws -> SecretBytes)? = passphrase.map { text in { @Sendable in SecretBytes(utf8: text) } }
        let identities = try AgeKeys.identities(fileContents: contents, name: path, passphrase: source)
        return try #require(identities.first)
    }

    static func publicKey(_ path: String) throws -> String {
        String(decoding: try SecureFile.read(path + ".pub"), as: UTF8.self)
    }
}

extension AgeFileHeader {
    /// The stanzas of a binary age file held in memory.
    static func read(fromBytes bytes: [UInt8]) throws -> [AgeStanza] {
        var parser = AgeHeaderParser()
        _ = try bytes.withUnsafeBytes { try parser.feed($0) }
        return try #require(parser.header).stanzas
    }
}

@Suite("age: SSH recipients and identities (ssh-ed25519, ssh-rsa)", .enabled(if: SSHKeygen.available, "ssh-keygen is not installed (apt-get install openssh-client)"))
struct SSHTests {
    @Test("ssh-ed25519 and ssh-rsa keys from ssh-keygen round-trip, each with its own stanza and tag")
    func roundTrip() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let ed = try SSHKeygen.make(temporary.path, "ed", type: "ed25519")
        let rsa = try SSHKeygen.make(temporary.path, "rsa", type: "rsa")
        let edRecipient = try AgeKeys.recipient(try SSHKeygen.publicKey(ed))
        let rsaRecipient = try AgeKeys.recipient(try SSHKeygen.publicKey(rsa))
        #expect(edRecipient is SSHEd25519Recipient)
        #expect(rsaRecipient is SSHRSARecipient)
        let plaintext = pattern(70_000, seed: 9)
        let file = try Age.encrypt(plaintext, recipients: [edRecipient, rsaRecipient])
        let header = try AgeFileHeader.read(fromBytes: file)
        #expect(header.map(\.type) == ["ssh-ed25519", "ssh-rsa"])
        #expect(header[0].arguments.count == 2 && header[1].arguments.count == 1)
        #expect(header[0].arguments[0] == (edRecipient as? SSHEd25519Recipient)?.tag)
        #expect(header[1].body.count == 256)
        #expect(try Age.decrypt(file, identities: [try SSHKeygen.identity(ed)]) == plaintext)
        #expect(try Age.decrypt(file, identities: [try SSHKeygen.identity(rsa)]) == plaintext)
        // The recipient of an identity is its public key (as `keygen -y` prints it).
        #expect(AgeKeys.recipient(of: try SSHKeygen.identity(ed)) == (edRecipient as? SSHEd25519Recipient)?.description)
        #expect(try SSHKeygen.publicKey(ed).hasPrefix(AgeKeys.recipient(of: try SSHKeygen.identity(ed))!))
    }

    @Test("another SSH key of the same type is no match; a stanza whose tag is not the key's is skipped")
    func otherKeys() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let a = try SSHKeygen.make(temporary.path, "a", type: "ed25519")
        let b = try SSHKeygen.make(temporary.path, "b", type: "ed25519")
        let file = try Age.encrypt([1, 2, 3], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(a))])
        #expect(throws: AgeError.noMatchingIdentity("the file is for 1 recipient(s) of type ssh-ed25519")) {
            try Age.decrypt(file, identities: [try SSHKeygen.identity(b)])
        }
        // Same stanza relabelled with b's tag: b tries it and the wrap does not open.
        let identityB = try #require(try SSHKeygen.identity(b) as? SSHEd25519Identity)
        var stanza = try AgeFileHeader.read(fromBytes: file)[0]
        stanza.arguments[0] = identityB.recipient.tag
        #expect(try identityB.unwrap(stanzas: [stanza]) == nil)
    }

    @Test("the older PEM RSA format (ssh-keygen -m PEM) is read")
    func pemRSA() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let rsa = try SSHKeygen.make(temporary.path, "rsa", type: "rsa", pem: true)
        #expect(try SecureFile.read(rsa).starts(with: Array("-----BEGIN RSA PRIVATE KEY-----".utf8)))
        let file = try Age.encrypt([7], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(rsa))])
        #expect(try Age.decrypt(file, identities: [try SSHKeygen.identity(rsa)]) == [7])
    }

    @Test("RSA keys under 2048 bits are refused as recipients and identities, as age refuses them")
    func smallRSA() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let rsa = try SSHKeygen.make(temporary.path, "rsa", type: "rsa", bits: 1024)
        #expect(throws: AgeError.invalidRecipient("the ssh-rsa key has 1024 bits or fewer; age needs at least 2048")) {
            try AgeKeys.recipient(try SSHKeygen.publicKey(rsa))
        }
        #expect(throws: AgeError.invalidIdentity("the RSA key has fewer than 2048 bits, which age does not accept")) {
            try SSHKeygen.identity(rsa)
        }
    }

    @Test("a passphrase-protected key is recognised by its public key, decrypted by ssh-keygen in memory with the passphrase given, refused without one, and passed over for a stanza not addressed to it")
    func encryptedKey() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let locked = try SSHKeygen.make(temporary.path, "locked", type: "ed25519", passphrase: "pass phrase")
        let plain = try SSHKeygen.make(temporary.path, "plain", type: "ed25519")
        let lockedIdentity = try SSHKeygen.identity(locked)
        #expect(lockedIdentity is EncryptedSSHIdentity)
        // Its public key is readable without the passphrase (keygen -y prints it).
        #expect(try SSHKeygen.publicKey(locked).hasPrefix(try #require(AgeKeys.recipient(of: lockedIdentity)) + " test@locked"))
        let forLocked = try Age.encrypt([1], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(locked))])
        // Without a passphrase source: refused, saying what to do.
        #expect(throws: EncryptedSSHIdentity.refusal(locked)) {
            try Age.decrypt(forLocked, identities: [lockedIdentity])
        }
        #expect("\(EncryptedSSHIdentity.refusal(locked))".contains("ssh-keygen -p -N \"\" -f COPY"))
        // With the passphrase: decrypted by ssh-keygen (in memory), and kept for the next file.
        let unlocked = try SSHKeygen.identity(locked, passphrase: "pass phrase")
        #expect(try Age.decrypt(forLocked, identities: [unlocked]) == [1])
        let again = try Age.encrypt([3], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(locked))])
        #expect(try Age.decrypt(again, identities: [unlocked]) == [3])
        // A wrong passphrase: no matching identity, saying so.
        #expect(throws: AgeError.noMatchingIdentity("the passphrase of the SSH key \(locked) is wrong")) {
            try Age.decrypt(forLocked, identities: [try SSHKeygen.identity(locked, passphrase: "wrong")])
        }
        // The passphrase is asked only for a stanza addressed to the key.
        let forPlain = try Age.encrypt([2], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(plain))])
        let asked = Counter()
        let counting = try AgeKeys.identities(fileContents: SecretBytes(contentsOfFile: locked), name: locked,
                                              passphrase: { asked.add(); return SecretBytes(utf8: "pass phrase") })
        #expect(try Age.decrypt(forPlain, identities: counting + [try SSHKeygen.identity(plain)]) == [2])
        #expect(asked.value == 0)
        // Encrypted RSA keys too.
        let lockedRSA = try SSHKeygen.make(temporary.path, "lockedrsa", type: "rsa", passphrase: "pw")
        #expect(try SSHKeygen.identity(lockedRSA) is EncryptedSSHIdentity)
        let forRSA = try Age.encrypt([4], recipients: [try AgeKeys.recipient(try SSHKeygen.publicKey(lockedRSA))])
        #expect(try Age.decrypt(forRSA, identities: [try SSHKeygen.identity(lockedRSA, passphrase: "pw")]) == [4])
        // ssh-keygen is looked up on the PATH only (a directory without it: none).
        #expect(SSHKeyDecryption.locate(searchPath: temporary.path) == nil)
        #expect(SSHKeyDecryption.locate(searchPath: "/usr/bin") == "/usr/bin/ssh-keygen")
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    @Test("authorized_keys files: comments and blank lines skipped, other SSH key types skipped with a warning, options refused as age refuses them")
    func authorizedKeys() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let ed = try SSHKeygen.make(temporary.path, "ed", type: "ed25519")
        let ecdsa = try SSHKeygen.make(temporary.path, "ec", type: "ecdsa")
        let small = try SSHKeygen.make(temporary.path, "small", type: "rsa", bits: 1024)
        let edLine = try SSHKeygen.publicKey(ed).trimmingCharacters(in: .newlines)
        let contents = "# keys\n\n\(try SSHKeygen.publicKey(ecdsa))\(edLine)\n\(try SSHKeygen.publicKey(small))"
        var warnings = [String]()
        let recipients = try AgeKeys.recipients(fileContents: contents, name: "authorized_keys") { warnings.append($0) }
        #expect(recipients.count == 1)
        #expect(warnings == ["authorized_keys: ignoring unsupported SSH key of type \"ecdsa-sha2-nistp256\" at line 3",
                             "authorized_keys: ignoring unsupported SSH key of type \"ssh-rsa\" at line 5"])
        // A key with options (from=…, command=…) is a malformed line for age too.
        #expect(throws: AgeError.invalidRecipient("authorized_keys line 1: invalid recipient: options before the SSH key type (as in authorized_keys) are not accepted, as age does not accept them; give the key from its type on")) {
            try AgeKeys.recipients(fileContents: "no-pty \(edLine)\n", name: "authorized_keys")
        }
        // Key lines may carry a comment with spaces, and tabs between fields.
        let tabbed = edLine.replacingOccurrences(of: " ", with: "\t") + " a comment with spaces"
        #expect(try AgeKeys.recipients(fileContents: tabbed, name: "f").count == 1)
        #expect(throws: AgeError.invalidRecipient("SSH keys of type \"ecdsa-sha2-nistp256\" cannot be age recipients; use ssh-ed25519 or ssh-rsa")) {
            try AgeKeys.recipient(try SSHKeygen.publicKey(ecdsa))
        }
        #expect(throws: AgeError.invalidRecipient("f line 1 is longer than 8192 bytes")) {
            try AgeKeys.recipients(fileContents: String(repeating: "a", count: 8193), name: "f")
        }
    }

    @Test("malformed SSH public keys and stanzas are refused with the error that says what is wrong")
    func malformed() throws {
        #expect(throws: AgeError.invalidRecipient("malformed SSH public key (expected `ssh-ed25519 AAAA… [comment]` or `ssh-rsa AAAA… [comment]`)")) {
            try AgeKeys.recipient("ssh-ed25519 not-base64!")
        }
        // A 32-byte value that is not a point of the curve (y = 2 has no x).
        var notAPoint = [UInt8](repeating: 0, count: 32)
        notAPoint[0] = 2
        let wire = SSHWire.string(Array("ssh-ed25519".utf8)) + SSHWire.string(notAPoint)
        #expect(throws: AgeError.invalidRecipient("the ssh-ed25519 public key is not a valid Ed25519 point")) {
            try AgeKeys.recipient("ssh-ed25519 " + String(decoding: AgeBase64.encode(wire, padded: true), as: UTF8.self))
        }
        let identity = try SSHEd25519Identity(privateKey: .init())
        let tag = identity.recipient.tag
        #expect(throws: AgeError.headerFailure("an ssh-ed25519 stanza must have exactly three arguments")) {
            try identity.unwrap(stanzas: [AgeStanza(type: "ssh-ed25519", arguments: [tag], body: [UInt8](repeating: 0, count: 32))])
        }
        #expect(throws: AgeError.headerFailure("an ssh-ed25519 share must be canonical base64 of 32 bytes")) {
            try identity.unwrap(stanzas: [AgeStanza(type: "ssh-ed25519", arguments: [tag, "AAAA"], body: [UInt8](repeating: 0, count: 32))])
        }
        #expect(throws: AgeError.headerFailure("the ssh-ed25519 share is a low-order point (all-zero shared secret)")) {
            try identity.unwrap(stanzas: [AgeStanza(type: "ssh-ed25519", arguments: [tag, AgeBase64.encodeString([UInt8](repeating: 0, count: 32))],
                                                    body: [UInt8](repeating: 0, count: 32))])
        }
        #expect(throws: AgeError.headerFailure("an ssh-ed25519 stanza body must be 32 bytes")) {
            try identity.unwrap(stanzas: [AgeStanza(type: "ssh-ed25519", arguments: [tag, AgeBase64.encodeString([UInt8](repeating: 9, count: 32))], body: [1])])
        }
        // Not a private key, a truncated one, a key of another type.
        for (text, error) in [
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "k is a malformed OpenSSH private key"),
            ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "k is not an OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`) or a PEM RSA private key"),
        ] {
            #expect(throws: AgeError.invalidIdentity(error)) { try AgeKeys.identities(fileContents: SecretBytes(utf8: text), name: "k") }
        }
    }

    @Test("mutated SSH private keys, public keys and recipients files are refused or read, never a crash (bounded: 3,000 mutations)")
    func mutations() throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let ed = try SSHKeygen.make(temporary.path, "ed", type: "ed25519")
        let rsa = try SSHKeygen.make(temporary.path, "rsa", type: "rsa", pem: true)
        let seeds = [try SecureFile.read(ed), try SecureFile.read(rsa), try SecureFile.read(ed + ".pub")]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3000 {
            var bytes = seeds[round % 3]
            // Decode, flip, re-encode the base64 body for the private keys, so the binary parser is reached.
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0x2b...0x7a, using: &generator)
                case 1: bytes.remove(at: index)
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                }
            }
            if round % 3 == 2 {
                _ = try? AgeKeys.recipients(fileContents: String(decoding: bytes, as: UTF8.self), name: "f")
            } else {
                _ = try? AgeKeys.identities(fileContents: SecretBytes(copying: bytes), name: "k")
            }
        }
        // Binary-level mutations of the OpenSSH structure itself.
        let text = String(decoding: seeds[0], as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let blob = try #require(Data(base64Encoded: text).map { [UInt8]($0) })
        for round in 0..<1000 {
            var mutated = blob
            let index = Int.random(in: 0..<mutated.count, using: &generator)
            mutated[index] ^= UInt8.random(in: 1...255, using: &generator)
            if round % 4 == 0 { mutated = Array(mutated.prefix(Int.random(in: 0..<mutated.count, using: &generator))) }
            let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + Data(mutated).base64EncodedString() + "\n-----END OPENSSH PRIVATE KEY-----\n"
            _ = try? AgeKeys.identities(fileContents: SecretBytes(utf8: pem), name: "k")
        }
    }

    @Test("a library Ed25519 key round-trips through SSHEd25519Recipient and SSHEd25519Identity")
    func libraryKeys() throws {
        let signing = Curve25519.Signing.PrivateKey()
        let identity = try SSHEd25519Identity(privateKey: signing)
        let recipient = try SSHEd25519Recipient(publicKey: signing.publicKey)
        #expect(recipient == identity.recipient)
        let file = try Age.encrypt(pattern(1000), recipients: [recipient], armor: true)
        #expect(try Age.decrypt(file, identities: [identity]) == pattern(1000))
        #expect(try SSHEd25519Recipient(recipient.description + " comment") == recipient)
    }
}

@Suite("age: SSH interop with the age command", .enabled(if: AgeTool.available && SSHKeygen.available, "age or ssh-keygen is not installed"))
struct SSHInteropTests {
    @Test("age decrypts with an SSH key what we encrypt to it, and we decrypt what age encrypts to it", arguments: ["ed25519", "rsa"])
    func bothWays(type: String) throws {
        let temporary = try TemporaryDirectory(prefix: "age-ssh")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let key = try SSHKeygen.make(dir, "key", type: type)
        let recipient = try AgeKeys.recipient(try SSHKeygen.publicKey(key))
        let identity = try SSHKeygen.identity(key)
        for size in InteropTests.sizes {
            let plaintext = pattern(size, seed: UInt8(size % 251))
            try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
            for armor in [false, true] {
                try Age.encryptFile(at: dir + "/plain", to: dir + "/ours.age", recipients: [recipient], armor: armor)
                let result = try AgeTool.run(["-d", "-i", key, "-o", dir + "/out", dir + "/ours.age"])
                #expect(result.status == 0, "age -d failed (\(type), \(size) bytes): \(result.stderr)")
                let out = FileManager.default.fileExists(atPath: dir + "/out") ? try SecureFile.read(dir + "/out") : []
                #expect(out == plaintext, "\(type), \(size) bytes")
                try? FileManager.default.removeItem(atPath: dir + "/out")

                var arguments = ["-R", key + ".pub", "-o", dir + "/theirs.age"]
                if armor { arguments.append("-a") }
                let encrypted = try AgeTool.run(arguments + [dir + "/plain"])
                #expect(encrypted.status == 0, "age failed: \(encrypted.stderr)")
                try Age.decryptFile(at: dir + "/theirs.age", to: dir + "/out", identities: [identity])
                #expect(try SecureFile.read(dir + "/out") == plaintext, "\(type), \(size) bytes")
                try? FileManager.default.removeItem(atPath: dir + "/out")
            }
        }
    }
}
