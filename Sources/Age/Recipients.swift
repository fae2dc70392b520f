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
import Crypto
import CryptoExtras
import Cipher

/// Something a file key can be wrapped for: produces the recipient stanzas of a header.
public protocol AgeRecipient: Sendable {
    /// Wraps the 16-byte file key into one or more stanzas.
    /// - Parameter fileKey: The file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError`` or a random-generator failure. Untyped, as apps implement it; the
    ///   age functions pass on an error that is not an ``AgeError`` as ``AgeError/external(_:)``.
    func wrap(fileKey: SecretBytes) throws -> [AgeStanza]
    /// True when this recipient's stanza must be alone in the header (scrypt).
    var requiresSoleStanza: Bool { get }
}

extension AgeRecipient {
    /// Most recipient types can be mixed with others.
    public var requiresSoleStanza: Bool { false }
}

/// Something that can unwrap a file key from the header's stanzas.
public protocol AgeIdentity: Sendable {
    /// Looks for a stanza addressed to this identity and unwraps the file key from it.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError/headerFailure(_:)`` for a stanza of this identity's type that is
    ///   malformed. Untyped, as apps implement it; the age functions pass on an error that is not
    ///   an ``AgeError`` as ``AgeError/external(_:)``.
    func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes?
}

/// ChaCha20-Poly1305 with the all-zero nonce, used to wrap file keys.
enum KeyWrap {
    static func seal(_ fileKey: SecretBytes, key: SecretBytes) throws(AgeError) -> [UInt8] {
        do {
            let nonce = try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12))
            let box = try fileKey.withUnsafeBytes { try ChaChaPoly.seal($0, using: key.symmetricKey, nonce: nonce) }
            return Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw AgeError.wrap(error)
        }
    }

    /// Nil when authentication fails; checks the body is exactly 32 bytes first.
    static func open(_ body: [UInt8], key: SecretBytes) throws(AgeError) -> SecretBytes? {
        guard body.count == 32 else {
            throw AgeError.headerFailure("a wrapped file key is \(body.count) bytes, not 32")
        }
        guard let nonce = try? ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)),
              let box = try? ChaChaPoly.SealedBox(nonce: nonce, ciphertext: body[0..<16], tag: body[16..<32]),
              var plain = try? ChaChaPoly.open(box, using: key.symmetricKey) else { return nil }
        defer { plain.resetBytes(in: 0..<plain.count) }
        return SecretBytes(copying: plain)
    }
}
