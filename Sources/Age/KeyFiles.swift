import Foundation
import Cipher

/// Parsing of recipient strings, recipients files and identity files in age's formats.
public enum AgeKeys {
    /// Parses one recipient: `age1…` (X25519) or `age1pq1…` (ML-KEM-768 + X25519).
    /// - Throws: ``AgeError/invalidRecipient(_:)``; SSH keys and plugin recipients are not supported.
    public static func recipient(_ string: String) throws -> any AgeRecipient {
        // Foundation's `.whitespaces` (tab and the space separators), trimmed without it: the
        // CLI's start-up path stays clear of Foundation's character sets.
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
        let scalars = string.unicodeScalars
        let start = scalars.firstIndex(where: { !isSpace($0) }) ?? scalars.endIndex
        let end = scalars.lastIndex(where: { !isSpace($0) }).map { scalars.index(after: $0) } ?? start
        let text = String(scalars[start..<max(start, end)])
        if text.lowercased().hasPrefix("age1pq1") { return try MLKEM768X25519Recipient(text) }
        if text.lowercased().hasPrefix("age1") && !text.dropFirst(4).contains("1") { return try X25519Recipient(text) }
        if text.hasPrefix("ssh-") { throw AgeError.invalidRecipient("SSH public keys are not supported; use an age1… recipient") }
        if text.lowercased().hasPrefix("age1") { throw AgeError.invalidRecipient("\(text.prefix(24))… is a plugin or unknown recipient type, which is not supported") }
        throw AgeError.invalidRecipient("\(text.prefix(24).debugDescription) is not an age1… recipient")
    }

    /// Parses a recipients file: one recipient per line, `#` comments and empty lines ignored.
    /// - Throws: ``AgeError/invalidRecipient(_:)`` naming the line.
    public static func recipients(fileContents: String, name: String = "recipients file") throws -> [any AgeRecipient] {
        var result = [any AgeRecipient]()
        for (number, rawLine) in fileContents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.isEmpty || line.hasPrefix("#") { continue }
            do { result.append(try recipient(String(line))) } catch let error as AgeError {
                throw AgeError.invalidRecipient("\(name) line \(number + 1): \(error)")
            }
        }
        guard !result.isEmpty else { throw AgeError.invalidRecipient("\(name) holds no recipient") }
        return result
    }

    /// Parses an identity file held in locked memory: `AGE-SECRET-KEY-1…` and
    /// `AGE-SECRET-KEY-PQ-1…` lines, `#` comments and empty lines ignored.
    /// - Throws: ``AgeError/invalidIdentity(_:)`` naming the line.
    public static func identities(fileContents: SecretBytes, name: String = "identity file") throws -> [any AgeIdentity] {
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
                if b.starts(with: Array("age-encryption.org/".utf8)) || b.starts(with: Array("-----BEGIN AGE".utf8)) { return 3 }
                return 4
            }
            do {
                switch kind {
                case 0: continue
                case 1: result.append(try X25519Identity(encoded: line))
                case 2: result.append(try MLKEM768X25519Identity(encoded: line))
                case 3: throw AgeError.invalidIdentity("passphrase-protected identity files are not supported; decrypt it first")
                default: throw AgeError.invalidIdentity("not an AGE-SECRET-KEY-1… line (SSH keys and plugin identities are not supported)")
                }
            } catch let error as AgeError {
                if kind == 3 { throw AgeError.invalidIdentity("\(name): passphrase-protected identity files are not supported") }
                throw AgeError.invalidIdentity("\(name) line \(number + 1): \(error)")
            }
        }
        guard !result.isEmpty else { throw AgeError.invalidIdentity("\(name) holds no identity") }
        return result
    }

    /// The recipient of an identity, if it has one (`age1…` or `age1pq1…`).
    public static func recipient(of identity: any AgeIdentity) -> String? {
        if let x = identity as? X25519Identity { return x.recipient.description }
        if let pq = identity as? MLKEM768X25519Identity { return pq.recipient.description }
        return nil
    }
}

/// An identity that asks for a passphrase only when the header holds an `scrypt` stanza
/// (as `age -d` does without `-i`).
public struct LazyPassphraseIdentity: AgeIdentity {
    let provider: @Sendable () throws -> SecretBytes

    /// - Parameter provider: Called at most once per unwrap, when an scrypt stanza is present.
    public init(provider: @escaping @Sendable () throws -> SecretBytes) { self.provider = provider }

    /// Unwraps an scrypt stanza with the passphrase from `provider`.
    public func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? {
        guard stanzas.contains(where: { $0.type == "scrypt" }) else { return nil }
        let passphrase = try provider()
        defer { passphrase.wipe() }
        return try ScryptIdentity(passphrase: passphrase).unwrap(stanzas: stanzas)
    }
}
