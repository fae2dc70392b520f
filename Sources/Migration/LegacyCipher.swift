import Foundation
import Crypto
import CryptoExtras
import Cipher

/// Errors of the migration from iMAS Secure Foundation. Each says what to do.
public enum MigrationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A legacy blob did not decrypt: its padding or its checksum was wrong. The two give this
    /// one error, so a caller cannot learn which (no padding oracle). The key is wrong (a wrong
    /// passcode or answers) or the data was damaged.
    case legacyDataRejected
    /// A legacy blob whose length cannot be the legacy format (public: the length alone).
    case legacyFormat(String)
    /// The old passcode does not unwrap the legacy application key.
    case wrongPasscode
    /// The old answers do not unwrap the legacy application key.
    case wrongAnswers
    /// The GenItem secret (accounts `gen-item` and `gen-itemk`) does not open with the
    /// credentials given; the detail says which wrapping failed. The application key is not
    /// concerned: the original re-wrapped neither when the passcode or the answers changed.
    case genItemNotOpened(String)
    /// The legacy keychain lacks an entry the migration needs.
    case missingLegacyState(String)
    /// Something the caller gave is unusable.
    case invalidArgument(String)
    /// Items or files the migration could not read; nothing was written.
    case failed([Failure])

    /// One legacy secret or file that the migration could not read, and why.
    public struct Failure: Sendable, Equatable, CustomStringConvertible {
        /// What failed, for exit statuses and hints.
        public enum Kind: Sendable, Equatable {
            /// Damaged or tampered legacy data (a blob that does not decrypt under the right key,
            /// a length the format cannot have).
            case damaged
            /// The secrets given do not open it (the GenItem under a wrapping left stale).
            case notOpened
            /// A file that cannot be read (missing, refused).
            case io
            /// Anything else (an existing output of other content, an entry of the wrong type).
            case other
        }

        /// The item (`service/account`) or the file.
        public var subject: String
        /// Why, and what to do.
        public var reason: String
        public var kind: Kind

        /// - Parameters:
        ///   - subject: The item (`service/account`) or the file.
        ///   - reason: Why, and what to do.
        ///   - kind: What kind of problem it is.
        public init(_ subject: String, _ reason: String, kind: Kind) {
            self.subject = subject
            self.reason = reason
            self.kind = kind
        }

        /// A failure for `error`, of the kind its type says.
        init(_ subject: String, error: any Error) {
            let kind: Kind
            switch error {
            case MigrationError.legacyDataRejected, MigrationError.legacyFormat: kind = .damaged
            case MigrationError.genItemNotOpened: kind = .notOpened
            case is SecureFile.Failure: kind = .io
            default: kind = .other
            }
            self.init(subject, "\(error)", kind: kind)
        }

        public var description: String { "\(subject): \(reason)" }
    }

    /// The body of a legacy decoder with its failure as a ``MigrationError``: the decoders
    /// throw nothing else (anything else is reported as ``legacyFormat(_:)`` with its text).
    static func typing<T>(_ body: () throws -> T) throws(MigrationError) -> T {
        do { return try body() } catch let error as MigrationError { throw error } catch { throw .legacyFormat("\(error)") }
    }

    public var description: String {
        switch self {
        case .legacyDataRejected:
            return "legacy data rejected: it does not decrypt under this key (wrong passcode or answers, or the data was modified)"
        case .legacyFormat(let detail): return "not legacy iMAS data: \(detail)"
        case .wrongPasscode: return "the old passcode does not unlock the legacy crypto manager; give the passcode the application used"
        case .wrongAnswers:
            return "the old answers do not unlock the legacy crypto manager; give them exactly as entered in the application, one per line in question order"
        case .genItemNotOpened(let detail):
            return "the GenItem secret does not open: \(detail). Include it with the answers or the passcode it was made with (the GenItem passcode), or leave it out explicitly"
        case .missingLegacyState(let detail): return "the legacy keychain has no \(detail)"
        case .invalidArgument(let detail): return detail
        case .failed(let failures):
            return "nothing was migrated; fix or leave out these and run again:\n  " + failures.map(\.description).joined(separator: "\n  ")
        }
    }
}

/// The cipher of iMAS Secure Foundation (`IMSCryptoUtils`), for reading its data once during a
/// migration. Decryption only: nothing here writes the legacy format, and the key derivation
/// (1,000 PBKDF2 rounds) is reachable only from here, never for new data.
///
/// A legacy blob is `IV(16) ‖ AES-CBC(K, P ‖ c ‖ PKCS#7 padding)` where `c = −ΣP mod 256` is an
/// 8-bit checksum and K is 16, 24 or 32 bytes (AES-128/192/256). The format is unauthenticated:
/// it is treated as hostile input, and a padding error and a checksum error give the same error.
public enum LegacyCipher {
    /// The legacy PBKDF2-HMAC-SHA256 round count.
    public static let rounds = 1_000
    /// The largest legacy blob opened (the original held whole files in memory, up to 2 GiB).
    package static let maximumLength = 256 << 20

    /// The legacy key derivation: PBKDF2-HMAC-SHA256(secret, salt, 1,000 rounds, 32 bytes).
    /// - Parameters:
    ///   - secret: The passcode, or the joined answers.
    ///   - salt: The legacy salt (not empty).
    /// - Returns: The 32-byte key.
    /// - Throws: ``MigrationError/invalidArgument(_:)`` for an empty salt or a failed derivation.
    package static func deriveKey(_ secret: SecretBytes, salt: [UInt8]) throws(MigrationError) -> SecretBytes {
        guard !salt.isEmpty else { throw MigrationError.invalidArgument("the legacy salt is empty") }
        do {
            let key = try secret.withUnsafeBytes { bytes in
                try KDF.Insecure.PBKDF2.deriveKey(from: bytes, salt: salt, using: .sha256, outputByteCount: 32,
                                                  unsafeUncheckedRounds: rounds)
            }
            return SecretBytes(key)
        } catch {
            throw MigrationError.invalidArgument("the legacy key derivation failed: \(error)")
        }
    }

    /// Decrypts a legacy blob.
    /// - Parameters:
    ///   - blob: The encrypted blob, as the legacy format stores it.
    ///   - key: The 16-, 24- or 32-byte key.
    /// - Returns: The plaintext.
    /// - Throws: ``MigrationError/legacyFormat(_:)`` for a length the format cannot have or a key
    ///   that is not 16, 24 or 32 bytes; ``MigrationError/legacyDataRejected`` for bad padding or
    ///   a bad checksum (the same error for both).
    public static func open(_ blob: [UInt8], key: SecretBytes) throws(MigrationError) -> SecretBytes {
        guard [16, 24, 32].contains(key.count) else {
            throw MigrationError.legacyFormat("a legacy key is 16, 24 or 32 bytes, not \(key.count)")
        }
        guard blob.count <= maximumLength else {
            throw MigrationError.legacyFormat("\(blob.count) bytes is over the \(maximumLength)-byte limit")
        }
        guard blob.count >= 32, blob.count % 16 == 0 else {
            throw MigrationError.legacyFormat("\(blob.count) bytes is not a 16-byte IV and whole AES blocks")
        }
        let iv: AES._CBC.IV
        var padded: Data
        do {
            iv = try AES._CBC.IV(ivBytes: blob[0..<16])
            padded = try AES._CBC.decrypt(blob[16...], using: key.symmetricKey, iv: iv, noPadding: true)
        } catch {
            throw MigrationError.legacyFormat("AES-CBC refused the blob: \(error)")
        }
        defer { padded.resetBytes(in: 0..<padded.count) }
        let count = padded.count
        guard count == blob.count - 16 else { throw MigrationError.legacyDataRejected }
        // Without branches on the plaintext: the padding length, whether every padding byte is
        // right, and the checksum over the bytes before the padding.
        return try padded.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Result<SecretBytes, MigrationError> in
            let pad = Int(bytes[count - 1])
            var bad = UInt(0)
            bad |= UInt((pad &- 1) >> 8 & 1)                       // pad == 0
            bad |= UInt((16 &- pad) >> 8 & 1)                      // pad > 16
            for back in 1...16 {
                let byte = Int(bytes[count - back])
                let inPadding = ((back &- 1) &- pad) >> 63 & 1       // back <= pad
                bad |= UInt(inPadding & (((byte ^ pad) &+ 0xFF) >> 8 & 1))
            }
            let content = count - min(max(pad, 1), 16)              // P ‖ c
            var sum: UInt8 = 0
            for index in 0..<count {
                let mask = UInt8(truncatingIfNeeded: (index &- content) >> 63)   // 0xFF when index < content
                sum = sum &+ (bytes[index] & mask)
            }
            bad |= UInt((Int(sum) &+ 0xFF) >> 8 & 1)                 // sum != 0
            bad |= UInt((content &- 1) >> 63 & 1)                    // no checksum byte
            guard bad == 0 else { return .failure(.legacyDataRejected) }
            return .success(SecretBytes(count: content - 1) { target in
                if content > 1 { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<content - 1])) }
            })
        }.get()
    }
}
