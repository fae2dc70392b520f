import Foundation
import Crypto
import Cipher

/// The type of an embedded secret, as declared in the manifest.
public enum EmbeddedSecretType: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// UTF-8 text.
    case string = 1
    /// A signed 64-bit integer, stored big-endian.
    case int = 2
    /// One byte, 0 or 1.
    case bool = 3
    /// Raw bytes.
    case data = 4

    /// The name used in `secrets.json`: `String`, `Int`, `Bool` or `Data`.
    public var manifestName: String {
        switch self {
        case .string: return "String"
        case .int: return "Int"
        case .bool: return "Bool"
        case .data: return "Data"
        }
    }

    /// The type named `name` in a manifest, or nil.
    /// - Parameter name: The type's name in the manifest (`String`, `Int`, `Bool` or `Data`).
    public init?(manifestName name: String) {
        guard let match = Self.allCases.first(where: { $0.manifestName == name }) else { return nil }
        self = match
    }

    public var description: String { manifestName }
}

/// The sealed-secrets blob (format "SFES", version 1; see docs/FORMATS.md).
///
/// ```
/// body  = "SFES" ‖ version (1) ‖ flags (1; bit 0: run-time share) ‖ manifest version (u32 BE)
///         ‖ salt (16) ‖ count (u16 BE) ‖ count × record
/// record = name length (u8) ‖ name (UTF-8) ‖ type (u8) ‖ nonce (12) ‖ length (u32 BE)
///          ‖ ciphertext (length) ‖ tag (16)
/// blob  = body ‖ check (32) ‖ integrity (32)
/// ```
///
/// Keys, with B the per-build key (32 bytes, the XOR of the shares in the binary) and R the
/// optional run-time share:
/// - master `M = HKDF-SHA256(B, salt, "SFES v1 master")`, or with a run-time share
///   `M = HKDF-SHA256(B ‖ R, salt, "SFES v1 master with run-time share")`;
/// - check key `C = HKDF-SHA256(M, salt, "SFES v1 check")`, check = HMAC-SHA256(C, body);
/// - integrity key `I = HKDF-SHA256(B, salt, "SFES v1 integrity")`, integrity = HMAC-SHA256(I, body ‖ check),
///   so any change to the blob is tampering, told apart from a wrong run-time share;
/// - secret key `K = HKDF-SHA256(M, salt, "SFES v1 secret " ‖ name)`, ChaCha20-Poly1305 with
///   associated data `"SFES" ‖ 0x01 ‖ name length (u8) ‖ name ‖ type (u8) ‖ manifest version (u32 BE)`.
public enum SealedSecretsFormat {
    /// `"SFES"`.
    public static let magic: [UInt8] = Array("SFES".utf8)
    /// The format version this library writes and reads.
    public static let version: UInt8 = 1
    /// Flag bit: the master key also depends on a run-time share.
    public static let flagRuntimeShare: UInt8 = 0x01
    public static let keyLength = 32
    public static let saltLength = 16
    public static let nonceLength = 12
    public static let tagLength = 16
    public static let macLength = 32
    /// The shortest run-time share accepted (128 bits if random).
    public static let minimumRuntimeShareLength = 16
    /// The most secrets in one blob.
    public static let maximumCount = 1024
    /// The largest value of one secret.
    package static let maximumValueLength = 1 << 20
    /// The longest secret name, in UTF-8 bytes.
    static let maximumNameLength = 255

    /// One secret to seal.
    public struct Entry: Sendable {
        public let name: String
        public let type: EmbeddedSecretType
        /// The value's bytes (UTF-8 for String, 8 bytes big-endian for Int, one byte for Bool).
        public let value: SecretBytes
        /// - Parameters:
        ///   - name: The secret's name in the manifest.
        ///   - type: Its declared type.
        ///   - value: Its bytes, as the type is sealed.
        public init(name: String, type: EmbeddedSecretType, value: SecretBytes) {
            self.name = name
            self.type = type
            self.value = value
        }
    }

    /// Seals `entries` under `buildKey` (and `runtimeShare`, if given), with a new random salt and nonces.
    /// - Parameters:
    ///   - entries: The secrets, with their names and types.
    ///   - manifestVersion: The manifest's version, recorded in the blob.
    ///   - buildKey: The 32-byte per-build key.
    ///   - runtimeShare: The share the program must be given at run time to open the blob (nil: none).
    /// - Returns: The sealed blob.
    /// - Throws: ``EmbeddedSecretsError`` for a value out of range (``EmbeddedSecretsError/cipher(_:)``
    ///   for a name or value too long, or if the system random generator fails).
    public static func seal(_ entries: [Entry], manifestVersion: UInt32, buildKey: SecretBytes,
                            runtimeShare: SecretBytes?) throws(EmbeddedSecretsError) -> [UInt8] {
        let salt: [UInt8]
        var nonces = [[UInt8]]()
        do throws(CipherError) {
            salt = try SecureRandom.bytes(saltLength)
            for _ in entries { nonces.append(try SecureRandom.bytes(nonceLength)) }
        } catch {
            throw .cipher(error)
        }
        return try seal(entries, manifestVersion: manifestVersion, buildKey: buildKey, runtimeShare: runtimeShare,
                        salt: salt, nonces: nonces)
    }

    /// Seals with a given salt and nonces: for known-answer tests only. Reusing a nonce under
    /// the same key breaks ChaCha20-Poly1305; the other `seal` draws fresh ones.
    /// - Parameters:
    ///   - entries: The secrets, with their names and types.
    ///   - manifestVersion: The manifest's version, recorded in the blob.
    ///   - buildKey: The 32-byte per-build key.
    ///   - runtimeShare: The share the program must be given at run time to open the blob (nil: none).
    ///   - salt: The 16-byte salt.
    ///   - nonces: One 12-byte nonce per entry.
    /// - Returns: The sealed blob.
    /// - Throws: ``EmbeddedSecretsError`` for a key or value out of range,
    ///   ``EmbeddedSecretsError/cipher(_:)`` for a salt or nonces of the wrong sizes, too many
    ///   secrets, a name or value too long.
    public static func seal(_ entries: [Entry], manifestVersion: UInt32, buildKey: SecretBytes,
                            runtimeShare: SecretBytes?, salt: [UInt8], nonces: [[UInt8]]) throws(EmbeddedSecretsError) -> [UInt8] {
        guard buildKey.count == keyLength else { throw EmbeddedSecretsError.tampered("the per-build key is \(buildKey.count) bytes, not 32") }
        guard salt.count == saltLength, nonces.count == entries.count, nonces.allSatisfy({ $0.count == nonceLength }) else {
            throw .cipher(.invalidParameter("a salt of 16 bytes and one 12-byte nonce per secret are needed"))
        }
        guard entries.count <= maximumCount else {
            throw .cipher(.invalidParameter("\(entries.count) secrets; at most \(maximumCount)"))
        }
        if let runtimeShare, runtimeShare.count < minimumRuntimeShareLength {
            throw EmbeddedSecretsError.runtimeShareWrong("a run-time share of \(runtimeShare.count) bytes is too short; use at least \(minimumRuntimeShareLength) random bytes")
        }
        let flags: UInt8 = runtimeShare == nil ? 0 : flagRuntimeShare
        let master = masterKey(buildKey: buildKey, runtimeShare: runtimeShare, salt: salt)
        defer { master.wipe() }
        var body = ByteWriter(magic + [version, flags])
        body.uint32(manifestVersion)
        body.raw(salt)
        body.uint16(UInt16(entries.count))
        for (index, entry) in entries.enumerated() {
            let nameBytes = Array(entry.name.utf8)
            guard (1...maximumNameLength).contains(nameBytes.count) else {
                throw .cipher(.invalidParameter("the secret name \"\(entry.name)\" must be 1...\(maximumNameLength) bytes"))
            }
            guard entry.value.count <= maximumValueLength else {
                throw .cipher(.invalidParameter("the secret \"\(entry.name)\" is larger than \(maximumValueLength) bytes"))
            }
            let key = secretKey(master: master, salt: salt, name: entry.name)
            defer { key.wipe() }
            let ad = associatedData(name: nameBytes, type: entry.type, manifestVersion: manifestVersion)
            let box: ChaChaPoly.SealedBox
            do {
                box = try entry.value.withUnsafeBytes { plain in
                    try ChaChaPoly.seal(plain, using: key.symmetricKey, nonce: ChaChaPoly.Nonce(data: nonces[index]), authenticating: ad)
                }
            } catch {
                // The key and nonce are of the right sizes: not reached.
                throw .cipher(.invalidParameter("ChaCha20-Poly1305 sealing failed: \(error)"))
            }
            do throws(CipherError) { try body.shortField(nameBytes, "secret name") } catch { throw .cipher(error) }
            body.byte(entry.type.rawValue)
            body.raw(nonces[index])
            body.field(box.ciphertext)
            body.raw(box.tag)
        }
        let integrityKey = KeyDerivation.hkdf(buildKey, salt: salt, info: "SFES v1 integrity")
        defer { integrityKey.wipe() }
        let checkKey = KeyDerivation.hkdf(master, salt: salt, info: "SFES v1 check")
        defer { checkKey.wipe() }
        let check = mac(checkKey, body.bytes)
        return body.bytes + check + mac(integrityKey, body.bytes + check)
    }

    /// A parsed blob whose integrity tag matched the per-build key.
    struct Parsed {
        struct Record {
            let name: [UInt8]
            let type: EmbeddedSecretType
            let nonce: [UInt8]
            let ciphertext: [UInt8]
            let tag: [UInt8]
        }
        let flags: UInt8
        let manifestVersion: UInt32
        let salt: [UInt8]
        let records: [Record]
        let body: [UInt8]
        let integrity: [UInt8]
        let check: [UInt8]
        var needsRuntimeShare: Bool { flags & flagRuntimeShare != 0 }
    }

    /// Whether `blob` declares that it needs a run-time share (nil if it is not a blob of this format).
    /// - Parameter blob: The sealed blob.
    /// - Returns: Whether a share is needed, or nil.
    public static func needsRuntimeShare(_ blob: [UInt8]) -> Bool? {
        guard let parsed = try? parse(blob) else { return nil }
        return parsed.needsRuntimeShare
    }

    /// The manifest version recorded in `blob` (nil if it is not a blob of this format).
    /// - Parameter blob: The sealed blob.
    /// - Returns: The version, or nil.
    public static func manifestVersion(_ blob: [UInt8]) -> UInt32? {
        (try? parse(blob))?.manifestVersion
    }

    /// Parses without any key: every length is checked, nothing is trusted yet.
    static func parse(_ blob: [UInt8]) throws(EmbeddedSecretsError) -> Parsed {
        do {
            return try parseFields(blob)
        } catch {
            if let failure = error as? EmbeddedSecretsError { throw failure }
            guard let failure = error as? CipherError else { throw .tampered("\(error)") }
            if case .truncated = failure { throw .tampered("the sealed data is truncated") }
            throw .cipher(failure)
        }
    }

    /// Untyped: it throws ``EmbeddedSecretsError`` and `CipherError` (the reader's), which
    /// ``parse(_:)`` tells apart.
    private static func parseFields(_ blob: [UInt8]) throws -> Parsed {
        var reader = ByteReader(blob)
        guard try reader.take(4).elementsEqual(magic) else { throw EmbeddedSecretsError.tampered("not sealed secrets (no SFES magic)") }
        let blobVersion = try reader.byte("version")
        guard blobVersion == version else {
            throw EmbeddedSecretsError.tampered("sealed-secrets version \(blobVersion); this library reads version \(version)")
        }
        let flags = try reader.byte("flags")
        guard flags & ~flagRuntimeShare == 0 else { throw EmbeddedSecretsError.tampered("unknown flags \(flags)") }
        let manifestVersion = try reader.uint32("manifest version")
        let salt = Array(try reader.take(saltLength))
        let count = Int(try reader.uint16("record count"))
        guard count <= maximumCount else { throw EmbeddedSecretsError.tampered("\(count) records") }
        var records = [Parsed.Record]()
        var seen = Set<[UInt8]>()
        for _ in 0..<count {
            let name = Array(try reader.shortField("secret name"))
            guard !name.isEmpty else { throw EmbeddedSecretsError.tampered("an empty secret name") }
            guard seen.insert(name).inserted else { throw EmbeddedSecretsError.tampered("a secret name appears twice") }
            guard let type = EmbeddedSecretType(rawValue: try reader.byte("secret type")) else {
                throw EmbeddedSecretsError.tampered("an unknown secret type")
            }
            let nonce = Array(try reader.take(nonceLength))
            let length = Int(try reader.uint32("record length"))
            guard length <= maximumValueLength else { throw EmbeddedSecretsError.tampered("a record of \(length) bytes") }
            let ciphertext = Array(try reader.take(length))
            let tag = Array(try reader.take(tagLength))
            records.append(.init(name: name, type: type, nonce: nonce, ciphertext: ciphertext, tag: tag))
        }
        let bodyLength = reader.offset
        let check = Array(try reader.take(macLength))
        let integrity = Array(try reader.take(macLength))
        guard reader.remaining == 0 else { throw EmbeddedSecretsError.tampered("\(reader.remaining) bytes after the end") }
        return Parsed(flags: flags, manifestVersion: manifestVersion, salt: salt, records: records,
                      body: Array(blob[0..<bodyLength]), integrity: integrity, check: check)
    }

    /// Opens the secret `name` of `type`.
    ///
    /// Order of checks: the blob's structure and its integrity tag under the per-build key
    /// (``EmbeddedSecretsError/tampered(_:)``), then the run-time share if the blob needs one
    /// (``EmbeddedSecretsError/runtimeShareMissing(_:)``, ``EmbeddedSecretsError/runtimeShareWrong(_:)``),
    /// then the secret itself.
    ///
    /// - Parameters:
    ///   - blob: The sealed blob embedded in the binary.
    ///   - name: The secret's name, as declared in the manifest.
    ///   - type: The secret's declared type.
    ///   - buildKey: The per-build key the blob was sealed under.
    ///   - runtimeShare: Called only when the blob needs a share; returns nil when there is none.
    /// - Returns: The value's bytes, or nil when the blob holds no secret of that name (an
    ///   optional secret that had no value at build time).
    /// - Throws: ``EmbeddedSecretsError`` as listed above, and any error of `runtimeShare`
    ///   (untyped: that error is passed on unchanged).
    public static func open(_ blob: [UInt8], name: String, type: EmbeddedSecretType, buildKey: SecretBytes,
                            runtimeShare: () throws -> SecretBytes?) throws -> SecretBytes? {
        let parsed = try verified(blob, buildKey: buildKey)
        let share = parsed.needsRuntimeShare ? try runtimeShare() : nil
        return try open(parsed, name: name, type: type, buildKey: buildKey, runtimeShare: share)
    }

    /// The blob parsed, its integrity tag checked under the per-build key.
    /// - Throws: ``EmbeddedSecretsError/tampered(_:)``.
    static func verified(_ blob: [UInt8], buildKey: SecretBytes) throws(EmbeddedSecretsError) -> Parsed {
        guard buildKey.count == keyLength else { throw EmbeddedSecretsError.tampered("the per-build key is \(buildKey.count) bytes, not 32") }
        let parsed = try parse(blob)
        let integrityKey = KeyDerivation.hkdf(buildKey, salt: parsed.salt, info: "SFES v1 integrity")
        defer { integrityKey.wipe() }
        guard ConstantTime.equals(mac(integrityKey, parsed.body + parsed.check), parsed.integrity) else {
            throw EmbeddedSecretsError.tampered("the integrity tag does not match")
        }
        return parsed
    }

    /// Opens the secret `name` of a ``verified(_:buildKey:)`` blob with `runtimeShare` (wiped
    /// here; looked at only when the blob needs one).
    /// - Throws: As ``open(_:name:type:buildKey:runtimeShare:)``, after the integrity check.
    static func open(_ parsed: Parsed, name: String, type: EmbeddedSecretType, buildKey: SecretBytes,
                     runtimeShare supplied: SecretBytes?) throws(EmbeddedSecretsError) -> SecretBytes? {
        var share: SecretBytes?
        if parsed.needsRuntimeShare {
            guard let supplied, !supplied.isEmpty else {
                throw EmbeddedSecretsError.runtimeShareMissing("the secrets were sealed with a run-time share and none was supplied")
            }
            share = supplied
        }
        defer { share?.wipe() }
        let master = masterKey(buildKey: buildKey, runtimeShare: share, salt: parsed.salt)
        defer { master.wipe() }
        let checkKey = KeyDerivation.hkdf(master, salt: parsed.salt, info: "SFES v1 check")
        defer { checkKey.wipe() }
        guard ConstantTime.equals(mac(checkKey, parsed.body), parsed.check) else {
            if parsed.needsRuntimeShare {
                throw EmbeddedSecretsError.runtimeShareWrong("the share does not open these secrets")
            }
            throw EmbeddedSecretsError.tampered("the check tag does not match")
        }
        let nameBytes = Array(name.utf8)
        guard let record = parsed.records.first(where: { $0.name == nameBytes }) else { return nil }
        guard record.type == type else { throw EmbeddedSecretsError.notFound(name) }
        let key = secretKey(master: master, salt: parsed.salt, name: name)
        defer { key.wipe() }
        let ad = associatedData(name: nameBytes, type: record.type, manifestVersion: parsed.manifestVersion)
        let plain: Data
        do {
            let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: record.nonce), ciphertext: record.ciphertext, tag: record.tag)
            plain = try ChaChaPoly.open(box, using: key.symmetricKey, authenticating: ad)
        } catch {
            throw EmbeddedSecretsError.tampered("the secret \"\(name)\" does not authenticate")
        }
        return take(plain)
    }

    // MARK: - Pieces

    static func masterKey(buildKey: SecretBytes, runtimeShare: SecretBytes?, salt: [UInt8]) -> SecretBytes {
        guard let runtimeShare else { return KeyDerivation.hkdf(buildKey, salt: salt, info: "SFES v1 master") }
        let material = buildKey.appending(runtimeShare)
        defer { material.wipe() }
        return KeyDerivation.hkdf(material, salt: salt, info: "SFES v1 master with run-time share")
    }

    static func secretKey(master: SecretBytes, salt: [UInt8], name: String) -> SecretBytes {
        KeyDerivation.hkdf(master, salt: salt, info: "SFES v1 secret " + name)
    }

    static func associatedData(name: [UInt8], type: EmbeddedSecretType, manifestVersion: UInt32) -> [UInt8] {
        var ad = ByteWriter(magic + [version], capacity: magic.count + 7 + name.count)
        ad.byte(UInt8(truncatingIfNeeded: name.count))
        ad.raw(name)
        ad.byte(type.rawValue)
        ad.uint32(manifestVersion)
        return ad.bytes
    }

    static func mac(_ key: SecretBytes, _ body: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: body, using: key.symmetricKey))
    }

    /// Copies swift-crypto's plaintext into locked memory and zeroes the `Data`'s buffer.
    static func take(_ data: Data) -> SecretBytes {
        let secret = SecretBytes(copying: data)
        data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return }
            memset(UnsafeMutableRawPointer(mutating: base), 0, bytes.count)
        }
        return secret
    }
}
