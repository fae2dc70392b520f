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

/// What comes before the payload of an age file, the header and the 16-byte nonce, and the
/// payload cipher they lead to. Writing: the bytes of a new header for recipients. Reading:
/// the file key unwrapped with identities, the header MAC checked, and the nonce read.
enum PayloadStart {
    /// A new header and nonce for `recipients` and the payload cipher that follows them.
    ///
    /// - Parameters:
    ///   - recipients: One or more recipients; a recipient that requires a sole stanza (scrypt)
    ///     must be alone.
    ///   - fileKey: The 16-byte file key.
    ///   - nonce: The 16-byte payload nonce.
    /// - Returns: The header and nonce bytes to write first, and the payload cipher.
    /// - Throws: ``AgeError/invalidArgument(_:)`` for no recipients, scrypt mixed with others or
    ///   a key or nonce of the wrong size; what a recipient's wrapping throws.
    static func make(recipients: [any AgeRecipient], fileKey: SecretBytes, nonce: [UInt8]) throws(AgeError) -> (bytes: [UInt8], cipher: PayloadCipher) {
        guard !recipients.isEmpty else { throw AgeError.invalidArgument("no recipients") }
        if recipients.contains(where: { $0.requiresSoleStanza }) && recipients.count > 1 {
            throw AgeError.invalidArgument("a passphrase (scrypt) recipient cannot be combined with other recipients")
        }
        guard fileKey.count == 16, nonce.count == PayloadCipher.nonceSize else {
            throw AgeError.invalidArgument("the file key and nonce are 16 bytes")
        }
        let stanzas = try wrap(fileKey, for: recipients)
        return (AgeHeader.encode(stanzas: stanzas, fileKey: fileKey) + nonce, try PayloadCipher(fileKey: fileKey, nonce: nonce))
    }

    /// Writes a new header and nonce for `recipients` (random file key and nonce) to `output`.
    /// - Returns: The payload cipher for what follows.
    /// - Throws: As ``make(recipients:fileKey:nonce:)``; ``AgeError/io(_:)`` for a failed write.
    static func write(to output: Int32, recipients: [any AgeRecipient]) throws(AgeError) -> PayloadCipher {
        let fileKey: SecretBytes
        do throws(CipherError) { fileKey = try SecretBytes.random(count: 16) } catch { throw .cipher(error) }
        defer { fileKey.wipe() }
        let nonce: [UInt8]
        do throws(CipherError) { nonce = try SecureRandom.bytes(PayloadCipher.nonceSize) } catch { throw .cipher(error) }
        let start = try make(recipients: recipients, fileKey: fileKey, nonce: nonce)
        try start.bytes.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try AgeIO.writeAll(output, bytes) }
        return start.cipher
    }

    /// Reads the header and nonce of a binary age file from `input` (with `read`, so pipes and
    /// sockets work), after the bytes `leading` already read from it.
    ///
    /// - Returns: The payload cipher, the payload bytes read past the nonce, and the length of
    ///   the header and nonce.
    /// - Throws: ``AgeError/headerFailure(_:)``, ``AgeError/noMatchingIdentity(_:)``,
    ///   ``AgeError/headerMACFailure``, ``AgeError/io(_:)``.
    static func read(from input: Int32, leading: [UInt8], identities: [any AgeIdentity]) throws(AgeError)
        -> (cipher: PayloadCipher, payloadPrefix: [UInt8], length: Int64) {
        var parser = AgeHeaderParser()
        var pending = leading
        var consumed: Int64 = 0
        var atEnd = false
        var piece = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            if !pending.isEmpty {
                let used = try pending.withBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try parser.feed(bytes) }
                consumed += Int64(used)
                pending.removeFirst(used)
                if parser.header != nil { break }
            }
            if atEnd { break }
            let n = try AgeIO.read(input, into: &piece)
            if n == 0 { atEnd = true } else { pending += piece[0..<n] }
        }
        try parser.finish()
        guard let header = parser.header else { throw AgeError.headerFailure("incomplete header") }
        while pending.count < PayloadCipher.nonceSize && !atEnd {
            let n = try AgeIO.read(input, into: &piece)
            if n == 0 { atEnd = true } else { pending += piece[0..<n] }
        }
        // The key is unwrapped (and the MAC checked) before the nonce is required, as the
        // push-mode decryptor does: a wrong identity is reported as such on a truncated file.
        let fileKey = try unwrapFileKey(header: header, identities: identities)
        defer { fileKey.wipe() }
        guard pending.count >= PayloadCipher.nonceSize else {
            throw AgeError.headerFailure("the file ends before the 16-byte payload nonce")
        }
        let cipher = try PayloadCipher(fileKey: fileKey, nonce: Array(pending[0..<PayloadCipher.nonceSize]))
        return (cipher, Array(pending[PayloadCipher.nonceSize...]), consumed + Int64(PayloadCipher.nonceSize))
    }

    /// The payload cipher of a parsed header and its nonce: the file key unwrapped with
    /// `identities`, the header MAC checked, the key wiped.
    /// - Throws: As ``unwrapFileKey(header:identities:)``.
    static func cipher(header: AgeHeader, nonce: [UInt8], identities: [any AgeIdentity]) throws(AgeError) -> PayloadCipher {
        let fileKey = try unwrapFileKey(header: header, identities: identities)
        defer { fileKey.wipe() }
        return try PayloadCipher(fileKey: fileKey, nonce: nonce)
    }

    /// Unwraps the file key and checks the header MAC.
    /// - Throws: ``AgeError/noMatchingIdentity(_:)``, ``AgeError/headerMACFailure``,
    ///   ``AgeError/headerFailure(_:)``; what an identity throws (``AgeError/wrap(_:)``).
    static func unwrapFileKey(header: AgeHeader, identities: [any AgeIdentity]) throws(AgeError) -> SecretBytes {
        if header.stanzas.contains(where: { $0.type == "scrypt" }) && header.stanzas.count != 1 {
            throw AgeError.headerFailure("an scrypt stanza must be the only stanza in the header")
        }
        var found: SecretBytes?
        for identity in identities {
            if let key = try unwrap(header.stanzas, with: identity) { found = key; break }
        }
        guard let fileKey = found else {
            let types = Set(header.stanzas.map(\.type)).sorted().joined(separator: ", ")
            throw AgeError.noMatchingIdentity("the file is for \(header.stanzas.count) recipient(s) of type \(types)")
        }
        guard fileKey.count == 16 else {
            fileKey.wipe()
            throw AgeError.headerFailure("the unwrapped file key is not 16 bytes")
        }
        let mac = AgeHeader.computeMAC(fileKey: fileKey, macInput: header.macInput)
        guard ConstantTime.equals(mac, header.mac) else {
            fileKey.wipe()
            throw AgeError.headerMACFailure
        }
        return fileKey
    }

    /// The stanzas of `recipients` for `fileKey`, in order. A recipient's error is thrown as an
    /// ``AgeError`` (``AgeError/wrap(_:)``: another module's recipient's error as
    /// ``AgeError/external(_:)``).
    static func wrap(_ fileKey: SecretBytes, for recipients: [any AgeRecipient]) throws(AgeError) -> [AgeStanza] {
        var stanzas = [AgeStanza]()
        for recipient in recipients {
            do { stanzas += try recipient.wrap(fileKey: fileKey) } catch { throw AgeError.wrap(error) }
        }
        return stanzas
    }

    /// What `identity` unwraps from `stanzas`; its error is thrown as an ``AgeError``
    /// (``AgeError/wrap(_:)``: another module's identity's error as ``AgeError/external(_:)``).
    static func unwrap(_ stanzas: [AgeStanza], with identity: any AgeIdentity) throws(AgeError) -> SecretBytes? {
        do { return try identity.unwrap(stanzas: stanzas) } catch { throw AgeError.wrap(error) }
    }
}
