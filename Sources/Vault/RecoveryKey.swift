import Foundation
import Crypto
import Cipher

/// A vault's recovery key: 160 random bits that unlock the vault (and allow a re-binding to a new
/// device key) when the passcode and the answers are lost, as `systemd-cryptenroll
/// --recovery-key` and FileVault's recovery key do.
///
/// A person sees it once, as 40 characters of Crockford's base32 in eight groups of five
/// (`7KQ2M-…`): the 20 random bytes followed by a 5-byte checksum, so a mistyped character is
/// caught when the text is read, before any attempt is counted. Reading is forgiving where
/// people slip: case, spaces and dashes are ignored, `O` reads as `0`, `I` and `L` as `1`.
///
/// The vault keeps no verifier: a wrapping of the application key under a KEK derived from it
/// (so only the holder of the recovery key, or of the application key, can make one it opens),
/// and that KEK sealed under the application key, for key rotations (docs/FORMATS.md, "Recovery
/// key"). Thread safety: the value owns its bytes; ``wipe()`` must not race other calls.
public final class RecoveryKey: @unchecked Sendable, CustomStringConvertible {
    /// The random part's length in bytes (160 bits).
    public static let seedLength = 20
    static let checksumLength = 5
    /// The characters written, in value order (Crockford's base32: no I, L, O or U).
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    static let groupLength = 5

    let seed: SecretBytes

    init(seed: SecretBytes) { self.seed = seed }

    deinit { seed.wipe() }

    /// A new random recovery key.
    /// - Returns: The key (show ``text()`` to the person once, then wipe it).
    /// - Throws: ``VaultError/crypto(_:)`` when the system random generator fails.
    public static func generate() throws(VaultError) -> RecoveryKey {
        do {
            return RecoveryKey(seed: try SecretBytes.random(count: seedLength))
        } catch {
            throw VaultError.crypto("the system random generator failed: \(error)")
        }
    }

    /// Reads a recovery key as a person typed it.
    /// - Parameter text: The 40 characters (dashes, spaces, a trailing newline and case are ignored).
    /// - Throws: ``VaultError/invalidArgument(_:)`` naming what is wrong: a character outside the
    ///   alphabet, too few or too many characters, or a checksum that does not match (a typo).
    public init(text: SecretBytes) throws(VaultError) {
        var symbols = [UInt8](repeating: 0, count: 40)
        defer { for index in symbols.indices { symbols[index] = 0 } }
        let count: Int = try text.withUnsafeBytes { (bytes) throws(VaultError) -> Int in
            var count = 0
            for byte in bytes {
                switch byte {
                case 0x2D, 0x20, 0x0A, 0x0D, 0x09: continue
                default: break
                }
                guard let value = RecoveryKey.value(of: byte) else {
                    throw VaultError.invalidArgument("the recovery key holds a character that is not in its alphabet (0-9 and A-Z without U): check what was typed")
                }
                if count < symbols.count { symbols[count] = value }
                count += 1
            }
            return count
        }
        guard count == 40 else {
            throw VaultError.invalidArgument("the recovery key has \(count) characters, not 40 (eight groups of five): check what was typed")
        }
        var bits = 0, accumulator: UInt64 = 0
        var raw = [UInt8]()
        raw.reserveCapacity(RecoveryKey.seedLength + RecoveryKey.checksumLength + 1)
        defer { for index in raw.indices { raw[index] = 0 }; accumulator = 0 }
        for symbol in symbols {
            accumulator = (accumulator << 5) | UInt64(symbol)
            bits += 5
            if bits >= 8 {
                bits -= 8
                raw.append(UInt8(truncatingIfNeeded: accumulator >> UInt64(bits)))
            }
        }
        // The seed goes straight from `raw` (reserved once, so never reallocated) into locked memory.
        let candidate = raw.withUnsafeBytes { bytes in
            SecretBytes(count: RecoveryKey.seedLength) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<RecoveryKey.seedLength])) }
        }
        guard ConstantTime.equals(RecoveryKey.checksum(of: candidate), Array(raw[RecoveryKey.seedLength...])) else {
            candidate.wipe()
            throw VaultError.invalidArgument("the recovery key's checksum does not match: a character was mistyped (nothing was tried against the vault)")
        }
        seed = candidate
    }

    /// Reads a recovery key from a `String` (its storage cannot be wiped; prefer ``init(text:)`` with `SecretBytes`).
    /// - Parameter text: The 40 characters.
    /// - Throws: ``VaultError/invalidArgument(_:)``, as ``init(text:)``.
    public convenience init(text: String) throws(VaultError) {
        let bytes = SecretBytes(utf8: text)
        defer { bytes.wipe() }
        let parsed = try RecoveryKey(text: bytes)
        self.init(seed: parsed.seed.copy())
    }

    /// The key as a person writes it down: eight groups of five characters joined by dashes
    /// (47 bytes, no newline), in locked memory.
    /// - Returns: The text (wipe it when shown).
    public func text() -> SecretBytes {
        // Every buffer is reserved at its final size (no reallocation leaves a copy behind) and
        // zeroed before it is freed.
        var raw = [UInt8](repeating: 0, count: RecoveryKey.seedLength + RecoveryKey.checksumLength)
        seed.withUnsafeBytes { source in raw.withUnsafeMutableBytes { $0.copyMemory(from: source) } }
        let checksum = RecoveryKey.checksum(of: seed)
        for index in 0..<RecoveryKey.checksumLength { raw[RecoveryKey.seedLength + index] = checksum[index] }
        let length = 40 + 40 / RecoveryKey.groupLength - 1
        let result = SecretBytes(count: length) { out in
            var bits = 0, accumulator: UInt64 = 0, written = 0, symbols = 0
            for byte in raw {
                accumulator = (accumulator << 8) | UInt64(byte)
                bits += 8
                while bits >= 5 {
                    bits -= 5
                    if symbols > 0 && symbols % RecoveryKey.groupLength == 0 {
                        out[written] = 0x2D
                        written += 1
                    }
                    out[written] = RecoveryKey.alphabet[Int((accumulator >> UInt64(bits)) & 31)]
                    written += 1
                    symbols += 1
                }
            }
            accumulator = 0
        }
        for index in raw.indices { raw[index] = 0 }
        return result
    }

    /// Wipes the key.
    public func wipe() { seed.wipe() }

    public var description: String { "RecoveryKey(redacted)" }

    /// The first 5 bytes of SHA-256("securefoundation recovery key v1\n" ‖ seed).
    static func checksum(of seed: SecretBytes) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: Array("securefoundation recovery key v1\n".utf8))
        seed.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return Array(hasher.finalize().prefix(checksumLength))
    }

    /// The value of a typed character, or nil.
    static func value(of byte: UInt8) -> UInt8? {
        var upper = byte
        if (0x61...0x7A).contains(upper) { upper -= 0x20 }
        switch upper {
        case 0x4F: return 0          // O reads as 0
        case 0x49, 0x4C: return 1    // I and L read as 1
        default: break
        }
        guard let index = alphabet.firstIndex(of: upper) else { return nil }
        return UInt8(index)
    }

    /// The KEK of a recovery wrapping: HKDF-SHA256(seed, salt, info "securefoundation vault v4 recovery kek").
    func kek(salt: Data) -> SecretBytes {
        KeyDerivation.hkdf(seed, salt: Array(salt), info: "securefoundation vault v4 recovery kek")
    }

    /// The key that seals the recovery KEK: HKDF-SHA256(application key, info "securefoundation vault v4 recovery kek seal").
    static func sealingKey(appKey: SecretBytes) -> SecretBytes {
        KeyDerivation.hkdf(appKey, info: "securefoundation vault v4 recovery kek seal")
    }

    /// The wrappings of a new recovery key (this one, with a new salt) for `appKey` in `state`.
    func wrap(_ appKey: SecretBytes, state: VaultState) throws(VaultError) -> VaultState.RecoveryWrap {
        let salt: [UInt8]
        do { salt = try SecureRandom.bytes(16) } catch { throw VaultError.crypto("the system random generator failed: \(error)") }
        let kek = kek(salt: Data(salt))
        defer { kek.wipe() }
        return try RecoveryKey.wrap(appKey, kek: kek, salt: Data(salt), state: state)
    }

    /// Wraps `appKey` under `kek` and seals `kek` under `appKey` (for `state`'s vault and key ids).
    static func wrap(_ appKey: SecretBytes, kek: SecretBytes, salt: Data, state: VaultState) throws(VaultError) -> VaultState.RecoveryWrap {
        let sealing = sealingKey(appKey: appKey)
        defer { sealing.wipe() }
        do {
            let wrapped = try KeyWrap.wrap(appKey, under: kek, aad: state.recoveryAAD())
            let sealed = try KeyWrap.wrap(kek, under: sealing, aad: state.recoveryKEKAAD())
            return VaultState.RecoveryWrap(salt: salt, wrapped: Data(wrapped), sealedKEK: Data(sealed))
        } catch {
            throw VaultError.crypto("wrapping the application key to the recovery key failed: \(error)")
        }
    }

    /// The recovery wrapping of `state` renewed for a new application key `newKey` in `next`,
    /// with the KEK unsealed under the current key `appKey` (no recovery key needed).
    static func rewrap(_ wrap: VaultState.RecoveryWrap, from appKey: SecretBytes, state: VaultState,
                       to newKey: SecretBytes, next: VaultState) throws(VaultError) -> VaultState.RecoveryWrap {
        let sealing = sealingKey(appKey: appKey)
        defer { sealing.wipe() }
        let kek: SecretBytes
        do {
            kek = try KeyWrap.unwrap(Array(wrap.sealedKEK), under: sealing, aad: state.recoveryKEKAAD())
        } catch {
            throw VaultError.corrupted("the recovery key's sealed KEK does not open under the application key: the state was altered")
        }
        defer { kek.wipe() }
        return try RecoveryKey.wrap(newKey, kek: kek, salt: wrap.salt, state: next)
    }

    /// The application key if this recovery key opens `state`'s recovery wrapping, else nil.
    func open(_ state: VaultState) -> SecretBytes? {
        guard let wrap = state.recovery else { return nil }
        let kek = kek(salt: wrap.salt)
        defer { kek.wipe() }
        return try? KeyWrap.unwrap(Array(wrap.wrapped), under: kek, aad: state.recoveryAAD())
    }
}
