#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher

/// Parsing of recipient strings, recipients files and identity files in age's formats.
public enum AgeKeys {
    /// Parses one recipient: `age1…` (X25519), `age1pq1…` (ML-KEM-768 + X25519), an SSH
    /// public key (`ssh-ed25519 AAAA…`, `ssh-rsa AAAA…`, with or without comment) or a plugin
    /// recipient `age1NAME1…` (handled by `age-plugin-NAME`).
    /// - Parameters:
    ///   - string: The recipient; spaces and tabs around it are ignored.
    ///   - ui: How plugins talk to the user.
    /// - Returns: The recipient of the matching kind.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public static func recipient(_ string: String, ui: AgePluginUI = .standardError) throws(AgeError) -> any AgeRecipient {
        // Foundation's `.whitespaces` (tab and the space separators), trimmed without it: the
        // CLI's start-up path stays clear of Foundation's character sets.
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
        let scalars = string.unicodeScalars
        let start = scalars.firstIndex(where: { !isSpace($0) }) ?? scalars.endIndex
        let end = scalars.lastIndex(where: { !isSpace($0) }).map { scalars.index(after: $0) } ?? start
        let text = String(scalars[start..<max(start, end)])
        if text.lowercased().hasPrefix("age1pq1") { return try MLKEM768X25519Recipient(text) }
        if text.lowercased().hasPrefix("age1") && !text.dropFirst(4).contains("1") { return try X25519Recipient(text) }
        if text.hasPrefix("ssh-") { return try sshRecipient(text) }
        if text.lowercased().hasPrefix("age1") { return try AgePluginRecipient(text, ui: ui) }
        if let type = sshKeyType(Substring(text)) {
            throw AgeError.invalidRecipient("SSH keys of type \(type.prefix(40).debugDescription) cannot be age recipients; use ssh-ed25519 or ssh-rsa")
        }
        if text.contains(" ssh-ed25519 ") || text.contains(" ssh-rsa ") {
            throw AgeError.invalidRecipient("options before the SSH key type (as in authorized_keys) are not accepted, as age does not accept them; give the key from its type on")
        }
        throw AgeError.invalidRecipient("\(text.prefix(24).debugDescription) is not an age1… or ssh- recipient")
    }

    /// Parses an SSH public key as age reads it: `TYPE BASE64 [COMMENT]` (a `.pub` file or an
    /// authorized_keys line without options), ssh-ed25519 or ssh-rsa of 2048 bits or more.
    /// - Parameter text: The public key line.
    /// - Returns: An ``SSHEd25519Recipient`` or an ``SSHRSARecipient``.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public static func sshRecipient(_ text: String) throws(AgeError) -> any AgeRecipient {
        switch SSHPublicKey.parse(authorizedKey: text) {
        case .ed25519(let key, let wire)?: return try SSHEd25519Recipient(ed25519: key, wire: wire)
        case .rsa(let n, let e, let wire)?: return try SSHRSARecipient(n: n, e: e, wire: wire)
        case .other(let type)?:
            throw AgeError.invalidRecipient("SSH keys of type \(type.prefix(40).debugDescription) cannot be age recipients; use ssh-ed25519 or ssh-rsa")
        case nil:
            throw AgeError.invalidRecipient("malformed SSH public key (expected `ssh-ed25519 AAAA… [comment]` or `ssh-rsa AAAA… [comment]`)")
        }
    }

    /// The key type of an SSH public key line whose first field names the type its encoding
    /// holds (age's test for keys to skip with a warning), or nil.
    static func sshKeyType(_ line: Substring) -> String? {
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 2, let wire = AgeBase64.decode(Array(fields[1].utf8), padded: true) else { return nil }
        var reader = SSHReader(wire)
        guard let type = reader.string(), String(decoding: type, as: UTF8.self) == fields[0] else { return nil }
        return String(fields[0])
    }

    /// The longest recipients-file line accepted (8 KiB, as sshd and age).
    static let maximumRecipientLine = 8 << 10

    /// Parses a recipients file: one recipient per line, `#` comments and empty lines ignored.
    /// An SSH public key of a type age cannot encrypt to (ecdsa, sk-…, RSA under 2048 bits) is
    /// skipped with a warning, as age does, so `~/.ssh/authorized_keys` files work.
    /// - Parameters:
    ///   - fileContents: The text of the recipients file.
    ///   - name: Names the file in errors and warnings.
    ///   - ui: How plugins talk to the user.
    ///   - warning: Receives the warnings (nil: dropped).
    /// - Returns: The recipients, in the file's order (at least one).
    /// - Throws: ``AgeError/invalidRecipient(_:)`` naming the line.
    public static func recipients(fileContents: String, name: String = "recipients file", ui: AgePluginUI = .standardError,
                                  warning: ((String) -> Void)? = nil) throws(AgeError) -> [any AgeRecipient] {
        var result = [any AgeRecipient]()
        for (number, rawLine) in fileContents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard line.utf8.count <= maximumRecipientLine else {
                throw AgeError.invalidRecipient("\(name) line \(number + 1) is longer than \(maximumRecipientLine) bytes")
            }
            do { result.append(try recipient(String(line), ui: ui)) } catch {
                if let type = sshKeyType(line) {
                    warning?("\(name): ignoring unsupported SSH key of type \(type.debugDescription) at line \(number + 1)")
                    continue
                }
                throw AgeError.invalidRecipient("\(name) line \(number + 1): \(error)")
            }
        }
        guard !result.isEmpty else { throw AgeError.invalidRecipient("\(name) holds no recipient") }
        return result
    }

    /// Parses an identity file held in locked memory, as age reads one:
    /// - `AGE-SECRET-KEY-1…`, `AGE-SECRET-KEY-PQ-1…` and `AGE-PLUGIN-NAME-1…` lines, `#`
    ///   comments and empty lines ignored;
    /// - an SSH private key (OpenSSH format, or PEM `RSA PRIVATE KEY`), ssh-ed25519 or ssh-rsa;
    /// - an age file encrypted with a passphrase (binary or armored) holding such lines, which
    ///   is decrypted with `passphrase` when a file is first decrypted with it
    ///   (``AgeEncryptedIdentityFile``).
    /// - Parameters:
    ///   - fileContents: The identity file's bytes.
    ///   - name: Names the file in errors.
    ///   - passphrase: Gives the passphrase of an encrypted identity file or a passphrase-protected
    ///     SSH key, when a file is first decrypted with it (nil: such files are refused).
    ///   - ui: How plugins talk to the user.
    /// - Returns: The identities the file holds.
    /// - Throws: ``AgeError/invalidIdentity(_:)`` naming the line.
    public static func identities(fileContents: SecretBytes, name: String = "identity file",
                                  passphrase: (@Sendable () throws -> SecretBytes)? = nil,
                                  ui: AgePluginUI = .standardError) throws(AgeError) -> [any AgeIdentity] {
        let start: Int = fileContents.withUnsafeBytes { b in
            if b.starts(with: Array("age-encryption".utf8)) || b.starts(with: Array("-----BEGIN AGE".utf8)) { return 1 }
            if b.starts(with: Array("-----BEGIN".utf8)) { return 2 }
            return 0
        }
        if start == 1 {
            guard let passphrase else {
                throw AgeError.invalidIdentity("\(name) is an encrypted identity file; give its passphrase")
            }
            let contents = fileContents.withUnsafeBytes { Array($0) }
            return [AgeEncryptedIdentityFile(contents: contents, name: name, passphrase: passphrase, ui: ui)]
        }
        if start == 2 {
            do { return [try SSHPrivateKeyFile.identity(fileContents, name: name, passphrase: passphrase)] } catch { throw AgeError.wrap(error) }
        }
        var lines = [Range<Int>]()
        fileContents.withUnsafeBytes { bytes in
            var start = 0
            for i in 0...bytes.count where i == bytes.count || bytes[i] == 0x0A {
                var end = i
                if end > start && bytes[end - 1] == 0x0D { end -= 1 }
                lines.append(start..<end)
                start = i + 1
            }
        }
        var result = [any AgeIdentity]()
        for (number, range) in lines.enumerated() {
            let line = fileContents.slice(range)
            defer { line.wipe() }
            let kind: Int = line.withUnsafeBytes { b in
                if b.isEmpty || b[0] == 0x23 { return 0 }
                if b.starts(with: Array("AGE-SECRET-KEY-PQ-1".utf8)) { return 2 }
                if b.starts(with: Array("AGE-SECRET-KEY-1".utf8)) { return 1 }
                if b.starts(with: Array("AGE-PLUGIN-".utf8)) { return 3 }
                return 4
            }
            do {
                switch kind {
                case 0: continue
                case 1: result.append(try X25519Identity(encoded: line))
                case 2: result.append(try MLKEM768X25519Identity(encoded: line))
                case 3: result.append(try AgePluginIdentity(line.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, ui: ui))
                default: throw AgeError.invalidIdentity("not an AGE-SECRET-KEY-1…, AGE-SECRET-KEY-PQ-1… or AGE-PLUGIN-… line")
                }
            } catch {
                throw AgeError.invalidIdentity("\(name) line \(number + 1): \(error)")
            }
        }
        guard !result.isEmpty else { throw AgeError.invalidIdentity("\(name) holds no identity") }
        return result
    }

    /// The recipient of an identity, if it has one (`age1…`, `age1pq1…`, `ssh-ed25519 …`, `ssh-rsa …`;
    /// also of a passphrase-protected SSH key, whose public key is in clear).
    /// - Parameter identity: The identity.
    /// - Returns: The recipient's text, or nil for the other kinds (passphrase, plugin, identity file).
    public static func recipient(of identity: any AgeIdentity) -> String? {
        if let x = identity as? X25519Identity { return x.recipient.description }
        if let pq = identity as? MLKEM768X25519Identity { return pq.recipient.description }
        if let ssh = identity as? SSHEd25519Identity { return ssh.recipient.description }
        if let ssh = identity as? SSHRSAIdentity { return ssh.recipient.description }
        if let ssh = identity as? EncryptedSSHIdentity { return ssh.publicKey }
        return nil
    }
}

/// An identity file that is itself an age file encrypted with a passphrase (`age -p`), as
/// `age -d -i` reads one. The passphrase is asked for when a file is first decrypted with it
/// (not when it is loaded); the identities it holds are then kept for later files.
public final class AgeEncryptedIdentityFile: AgeIdentity, @unchecked Sendable {
    /// Where the file came from, for messages.
    public let name: String
    let contents: [UInt8]
    let passphrase: @Sendable () throws -> SecretBytes
    let ui: AgePluginUI
    private let lock = Lock()
    private var loaded: [any AgeIdentity]?

    /// - Parameters:
    ///   - contents: The encrypted identity file (binary or armored).
    ///   - name: Where the file came from, for messages.
    ///   - passphrase: Gives its passphrase; called once, on first use.
    ///   - ui: How plugins talk to the user.
    init(contents: [UInt8], name: String, passphrase: @escaping @Sendable () throws -> SecretBytes, ui: AgePluginUI = .standardError) {
        self.contents = contents
        self.name = name
        self.passphrase = passphrase
        self.ui = ui
    }

    /// The identities inside (asks for the passphrase the first time).
    /// - Returns: The identities the decrypted file holds.
    /// - Throws: ``AgeError/noMatchingIdentity(_:)`` for a wrong passphrase,
    ///   ``AgeError/invalidIdentity(_:)`` for what the file holds, the decryption's errors; what
    ///   the passphrase function throws, as ``AgeError/external(_:)``.
    public func identities() throws(AgeError) -> [any AgeIdentity] {
        return try ageCall {
            lock.lock()
            defer { lock.unlock() }
            if let loaded { return loaded }
            let secret = try passphrase()
            defer { secret.wipe() }
            // The plaintext goes straight into locked memory (at most as long as the file).
            var length = 0
            let plain = try SecretBytes(count: contents.count) { buffer in
                let decryptor = AgeDecryptor(identities: [ScryptIdentity(passphrase: secret)], armor: .auto) { piece in
                    guard length + piece.count <= buffer.count else { throw AgeError.payloadFailure("longer than its file") }
                    (buffer.baseAddress! + length).copyMemory(from: piece.baseAddress!, byteCount: piece.count)
                    length += piece.count
                }
                do {
                    try decryptor.update(contents)
                    try decryptor.finish()
                } catch AgeError.noMatchingIdentity {
                    throw AgeError.noMatchingIdentity("the passphrase of the encrypted identity file \(name) is wrong (or it is not passphrase-encrypted)")
                }
            }
            defer { plain.wipe() }
            let inner = plain.slice(0..<length)
            defer { inner.wipe() }
            let result = try AgeKeys.identities(fileContents: inner, name: "\(name) (decrypted)", passphrase: nil, ui: ui)
            loaded = result
            return result
        }
    }

    /// Unwraps with the identities inside.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no identity inside matches.
    /// - Throws: As ``identities()``, and the identities' own unwrap errors.
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        return try ageCall {
            for identity in try identities() {
                if let key = try identity.unwrap(stanzas: stanzas) { return key }
            }
            return nil
        }
    }
}

/// An identity that asks for a passphrase only when the header holds an `scrypt` stanza
/// (as `age -d` does without `-i`).
public struct LazyPassphraseIdentity: AgeIdentity {
    let provider: @Sendable () throws -> SecretBytes

    /// - Parameter provider: Called at most once per unwrap, when an scrypt stanza is present.
    public init(provider: @escaping @Sendable () throws -> SecretBytes) { self.provider = provider }

    /// Unwraps an scrypt stanza with the passphrase from `provider`.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when the header has no scrypt stanza.
    /// - Throws: What `provider` throws, as ``AgeError/external(_:)`` (a `CipherError` as
    ///   ``AgeError/cipher(_:)``), and as ``ScryptIdentity/unwrap(stanzas:)``.
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        return try ageCall {
            guard stanzas.contains(where: { $0.type == "scrypt" }) else { return nil }
            let passphrase = try provider()
            defer { passphrase.wipe() }
            return try ScryptIdentity(passphrase: passphrase).unwrap(stanzas: stanzas)
        }
    }
}
