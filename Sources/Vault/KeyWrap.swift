import Foundation
import Crypto
import Cipher

/// AES-256-GCM key wrapping into and out of `SecretBytes`.
///
/// A wrapped key is `nonce (12) ‖ ciphertext (len(key)) ‖ tag (16)`; the associated data is the
/// caller's header (what the key is, which vault, which key id, which questions), so a wrapped
/// key moved to another place in the state does not open.
package enum KeyWrap {
    static let nonceLength = 12
    static let tagLength = 16

    package static func wrap(_ key: SecretBytes, under kek: SecretBytes, aad: [UInt8]) throws -> [UInt8] {
        let nonce = try SecureRandom.bytes(nonceLength)
        defer { HeapScrub.scrubRecentlyFreed() }
        let box: AES.GCM.SealedBox = try key.withUnsafeBytes { plaintext in
            try AES.GCM.seal(plaintext, using: kek.symmetricKey, nonce: AES.GCM.Nonce(data: nonce), authenticating: aad)
        }
        return nonce + Array(box.ciphertext) + Array(box.tag)
    }

    /// Unwraps into locked memory; the intermediate plaintext buffer is zeroed.
    /// - Throws: ``VaultError/corrupted(_:)`` for a malformed blob, `WrongKey` when authentication fails.
    package static func unwrap(_ wrapped: [UInt8], under kek: SecretBytes, aad: [UInt8]) throws -> SecretBytes {
        guard wrapped.count > nonceLength + tagLength else {
            throw VaultError.corrupted("a wrapped key of \(wrapped.count) bytes is too short")
        }
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: wrapped[0..<nonceLength]),
                                        ciphertext: wrapped[nonceLength..<(wrapped.count - tagLength)],
                                        tag: wrapped[(wrapped.count - tagLength)...])
        } catch {
            throw VaultError.corrupted("a wrapped key is malformed: \(error)")
        }
        defer { HeapScrub.scrubRecentlyFreed() }
        var plaintext: Data
        do {
            plaintext = try AES.GCM.open(box, using: kek.symmetricKey, authenticating: aad)
        } catch {
            throw WrongKey()
        }
        defer { plaintext.resetBytes(in: 0..<plaintext.count) }
        return plaintext.withUnsafeBytes { source in SecretBytes(count: source.count) { $0.copyMemory(from: source) } }
    }

    /// Authentication failed: wrong key, or the blob or its header was changed.
    package struct WrongKey: Error {}
}

extension SecretBytes {
    /// A copy taken while holding the instance's lock, so a concurrent `wipe()` yields an empty
    /// copy instead of a failed range check.
    func copy() -> SecretBytes {
        withUnsafeBytes { source in
            SecretBytes(count: source.count) { target in
                if source.count > 0 { target.copyMemory(from: source) }
            }
        }
    }

    /// A copy of a 32-byte key; ``VaultError/locked`` when it was wiped meanwhile (a concurrent lock).
    func copyKey() throws -> SecretBytes {
        let result = copy()
        guard result.count == 32 else {
            result.wipe()
            throw VaultError.locked
        }
        return result
    }
}
