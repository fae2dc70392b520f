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

/// The AEAD algorithms of the sealed-data format.
public enum SealAlgorithm: UInt8, Sendable, CaseIterable, Codable {
    /// AES-256-GCM, 12-byte nonce, 16-byte tag. The default.
    case aes256GCM = 1
    /// ChaCha20-Poly1305, 12-byte nonce, 16-byte tag.
    case chaCha20Poly1305 = 2

    public var name: String {
        switch self {
        case .aes256GCM: return "AES-256-GCM"
        case .chaCha20Poly1305: return "ChaCha20-Poly1305"
        }
    }
}

/// The parsed header of a sealed envelope (everything before the ciphertext). See docs/FORMATS.md.
public struct SealedHeader: Sendable, Equatable {
    /// How the key is found.
    public enum KeySource: Sendable, Equatable {
        /// A key from a keyring, named by its id.
        case key(id: [UInt8])
        /// A key derived from a passphrase with these parameters and salt.
        case passphrase(KDFParameters, salt: [UInt8])
    }

    public let version: UInt8
    public let algorithm: SealAlgorithm
    public let keySource: KeySource
    public let nonce: [UInt8]
    /// The header's bytes, which are authenticated as associated data.
    let encoded: [UInt8]
}

/// Authenticated encryption of bytes and Codable values in a versioned, self-describing envelope.
///
/// Opening returns the whole plaintext or throws; it never returns partial plaintext.
public enum Sealed {
    /// The envelope's magic bytes, "SFSD".
    public static let magic: [UInt8] = [0x53, 0x46, 0x53, 0x44]
    /// The current format version.
    public static let version: UInt8 = 1
    static let modeKey: UInt8 = 1
    static let modePassphrase: UInt8 = 2
    static let nonceLength = 12
    static let tagLength = 16

    // MARK: Keys

    /// Seals `plaintext` under `key`, binding it to `context` (associated data, not stored).
    /// - Parameters:
    ///   - plaintext: The bytes to seal.
    ///   - key: The key; its id is recorded in the envelope.
    ///   - algorithm: The AEAD.
    ///   - context: Associated data the envelope is bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``CipherError/randomUnavailable(_:)``.
    public static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, with key: SealingKey,
                                                     algorithm: SealAlgorithm = .aes256GCM,
                                                     context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        try seal(plaintext, with: key, algorithm: algorithm, context: context, nonce: nil)
    }

    /// Seals with a given nonce; for known-answer tests only (a repeated nonce breaks AEAD).
    static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, with key: SealingKey, algorithm: SealAlgorithm,
                                              context: [UInt8], nonce: [UInt8]?) throws(CipherError) -> [UInt8] {
        // magic ‖ version ‖ algorithm ‖ mode ‖ key id length ‖ key id, written straight into the
        // envelope (SealingKey holds ids of 1...255 bytes).
        let id = key.id
        guard (1...255).contains(id.count) else { throw CipherError.invalidParameter("the key id is \(id.count) bytes; at most 255") }
        let algorithmByte = algorithm.rawValue
        return try finish(headerCount: 8 + id.count, plaintext: plaintext, key: key.key, algorithm: algorithm, context: context,
                          nonce: nonce) { header in
            header[0] = 0x53; header[1] = 0x46; header[2] = 0x53; header[3] = 0x44
            header[4] = version
            header[5] = algorithmByte
            header[6] = modeKey
            header[7] = UInt8(id.count)
            id.withUnsafeBytes { header.baseAddress!.advanced(by: 8).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    /// Seals under the primary key of `keyring`.
    /// - Parameters:
    ///   - plaintext: The bytes to seal.
    ///   - keyring: Its primary key seals.
    ///   - algorithm: The AEAD.
    ///   - context: Associated data the envelope is bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``CipherError/randomUnavailable(_:)``.
    public static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, with keyring: Keyring,
                                                     algorithm: SealAlgorithm = .aes256GCM,
                                                     context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        try seal(plaintext, with: keyring.primary, algorithm: algorithm, context: context)
    }

    /// Opens data sealed under any key of `keyring`.
    ///
    /// - Parameters:
    ///   - sealed: The sealed envelope.
    ///   - keyring: The keys it may have been sealed under.
    ///   - context: The context given when sealing.
    /// - Returns: The whole plaintext.
    /// - Throws: ``CipherError/truncated(_:)``, ``CipherError/unknownVersion(_:)``,
    ///   ``CipherError/unsupportedAlgorithm(_:)``, ``CipherError/wrongKey(_:)`` (no key with that id),
    ///   ``CipherError/tampered`` (authentication failed).
    public static func open(_ sealed: [UInt8], with keyring: Keyring, context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        let header = try parseHeader(sealed)
        guard case .key(let id) = header.keySource else {
            throw CipherError.wrongKey("the data was sealed with a passphrase, not a key")
        }
        guard let key = keyring.key(withID: id) else {
            throw CipherError.wrongKey("no key in the keyring has key id \(Encoding.hex(id))")
        }
        return try decrypt(sealed, header: header, key: key.key, context: context)
    }

    /// Opens data sealed under `key`.
    /// - Parameters:
    ///   - sealed: The sealed envelope.
    ///   - key: The key it was sealed under.
    ///   - context: The context given when sealing.
    /// - Returns: The whole plaintext.
    /// - Throws: as ``open(_:with:context:)-(_,Keyring,_)``.
    public static func open(_ sealed: [UInt8], with key: SealingKey, context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        // As a keyring of this one key, without making one (its duplicate check costs more than
        // opening a small value).
        let header = try parseHeader(sealed)
        guard case .key(let id) = header.keySource else {
            throw CipherError.wrongKey("the data was sealed with a passphrase, not a key")
        }
        let matches = key.id.withUnsafeBytes { ours in id.withUnsafeBytes { theirs in ConstantTime.equals(ours, theirs) } }
        guard matches else { throw CipherError.wrongKey("no key in the keyring has key id \(Encoding.hex(id))") }
        return try decrypt(sealed, header: header, key: key.key, context: context)
    }

    // MARK: Passphrases

    /// Seals `plaintext` under a key derived from `passphrase` with a fresh salt; the KDF id,
    /// parameters and salt are stored in the envelope.
    /// - Parameters:
    ///   - plaintext: The bytes to seal.
    ///   - passphrase: The passphrase.
    ///   - policy: The KDF work (stored in the envelope).
    ///   - algorithm: The AEAD.
    ///   - context: Associated data the envelope is bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``CipherError/randomUnavailable(_:)``, ``CipherError/kdfParametersTooWeak(_:)`` or ``CipherError/kdfParametersTooExpensive(_:)`` for a policy out of range.
    public static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, passphrase: SecretBytes,
                                                     policy: KDFPolicy = .sensitive,
                                                     algorithm: SealAlgorithm = .aes256GCM,
                                                     context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        try seal(plaintext, passphrase: passphrase, policy: policy, algorithm: algorithm, context: context,
                 salt: try SecureRandom.bytes(KeyDerivation.saltLength), nonce: nil)
    }

    /// Seals under a passphrase with a given salt and nonce; for known-answer tests only.
    static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, passphrase: SecretBytes, policy: KDFPolicy,
                                              algorithm: SealAlgorithm, context: [UInt8],
                                              salt: [UInt8], nonce: [UInt8]?) throws(CipherError) -> [UInt8] {
        guard (8...255).contains(salt.count) else { throw CipherError.invalidParameter("a salt of \(salt.count) bytes is not 8...255") }
        let key = try KeyDerivation.derive(password: passphrase, salt: salt, parameters: policy.parameters)
        defer { key.wipe() }
        var header = ByteWriter(magic + [version, algorithm.rawValue, modePassphrase])
        header.kdfParameters(policy.parameters)
        try header.shortField(salt, "salt")
        let headerBytes = header.bytes
        return try finish(headerCount: headerBytes.count, plaintext: plaintext, key: key, algorithm: algorithm, context: context,
                          nonce: nonce) { target in
            headerBytes.withUnsafeBytes { target.copyMemory(from: $0) }
        }
    }

    /// Opens data sealed with a passphrase. Parameters outside the floor and `ceiling` are
    /// refused before any work is done.
    ///
    /// - Parameters:
    ///   - sealed: The sealed bytes.
    ///   - passphrase: The passphrase they were sealed with.
    ///   - context: The context given when sealing (empty by default).
    ///   - ceiling: The most KDF memory and work the header may demand; pass
    ///     ``KDFCeiling/legacy`` only for trusted data sealed with costlier parameters.
    /// - Returns: The whole plaintext.
    /// - Throws: as ``open(_:with:context:)-(_,Keyring,_)``, plus ``CipherError/kdfParametersTooWeak(_:)``
    ///   and ``CipherError/kdfParametersTooExpensive(_:)``; a wrong passphrase is ``CipherError/wrongKey(_:)``.
    public static func open(_ sealed: [UInt8], passphrase: SecretBytes, context: [UInt8] = [],
                            ceiling: KDFCeiling = .standard) throws(CipherError) -> [UInt8] {
        let header = try parseHeader(sealed)
        guard case let .passphrase(parameters, salt) = header.keySource else {
            throw CipherError.wrongKey("the data was sealed with a key (id \(keyIDString(header))), not a passphrase")
        }
        try parameters.validate(ceiling: ceiling)
        let key = try KeyDerivation.derive(password: passphrase, salt: salt, parameters: parameters, outputLength: 32, ceiling: ceiling)
        defer { key.wipe() }
        do {
            return try decrypt(sealed, header: header, key: key, context: context)
        } catch CipherError.tampered {
            throw CipherError.wrongKey("the passphrase is wrong, or the data or its context was modified")
        }
    }

    // MARK: Codable

    /// Seals a Codable value (encoded canonically as JSON).
    /// - Parameters:
    ///   - value: The value.
    ///   - keyring: Its primary key seals.
    ///   - algorithm: The AEAD.
    ///   - context: Associated data the envelope is bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``CipherError/coding(_:)``, ``CipherError/randomUnavailable(_:)``.
    public static func seal<Value: Encodable>(value: Value, with keyring: Keyring,
                                              algorithm: SealAlgorithm = .aes256GCM,
                                              context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        let data = try CanonicalEncoding.encode(value)
        return try seal(data, with: keyring, algorithm: algorithm, context: context)
    }

    /// Opens a Codable value sealed with ``seal(value:with:algorithm:context:)``.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - sealed: The sealed envelope.
    ///   - keyring: The keys it may have been sealed under.
    ///   - context: The context given when sealing.
    /// - Returns: The decoded value.
    /// - Throws: as ``open(_:with:context:)-(_,Keyring,_)``, plus ``CipherError/coding(_:)``.
    public static func open<Value: Decodable>(_ type: Value.Type, from sealed: [UInt8], with keyring: Keyring,
                                              context: [UInt8] = []) throws(CipherError) -> Value {
        let data = try open(sealed, with: keyring, context: context)
        return try CanonicalEncoding.decode(type, from: data)
    }

    /// Seals a Codable value under a passphrase.
    /// - Parameters:
    ///   - value: The value.
    ///   - passphrase: The passphrase.
    ///   - policy: The KDF work (stored in the envelope).
    ///   - algorithm: The AEAD.
    ///   - context: Associated data the envelope is bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``CipherError/coding(_:)``, ``CipherError/randomUnavailable(_:)``.
    public static func seal<Value: Encodable>(value: Value, passphrase: SecretBytes, policy: KDFPolicy = .sensitive,
                                              algorithm: SealAlgorithm = .aes256GCM,
                                              context: [UInt8] = []) throws(CipherError) -> [UInt8] {
        let data = try CanonicalEncoding.encode(value)
        return try seal(data, passphrase: passphrase, policy: policy, algorithm: algorithm, context: context)
    }

    /// Opens a Codable value sealed under a passphrase.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - sealed: The sealed envelope.
    ///   - passphrase: The passphrase it was sealed with.
    ///   - context: The context given when sealing.
    /// - Returns: The decoded value.
    /// - Throws: as ``open(_:passphrase:context:ceiling:)``, plus ``CipherError/coding(_:)``.
    public static func open<Value: Decodable>(_ type: Value.Type, from sealed: [UInt8], passphrase: SecretBytes,
                                              context: [UInt8] = []) throws(CipherError) -> Value {
        let data = try open(sealed, passphrase: passphrase, context: context)
        return try CanonicalEncoding.decode(type, from: data)
    }

    // MARK: Header

    /// Parses and checks the header without decrypting.
    /// - Parameter sealed: The sealed envelope.
    /// - Returns: The parsed header.
    /// - Throws: ``CipherError/truncated(_:)``, ``CipherError/unknownVersion(_:)``, ``CipherError/unsupportedAlgorithm(_:)``, ``CipherError/kdfParametersTooWeak(_:)`` for a salt under 8 bytes.
    public static func parseHeader(_ sealed: [UInt8]) throws(CipherError) -> SealedHeader {
        var reader = ByteReader(sealed)
        guard sealed.count >= 4 else { throw CipherError.truncated("\(sealed.count) bytes is shorter than the magic") }
        guard Array(try reader.take(4)) == magic else { throw CipherError.truncated("no SFSD magic: this is not sealed data") }
        let version = try reader.byte("version")
        guard version == Self.version else { throw CipherError.unknownVersion(version) }
        let algorithmByte = try reader.byte("algorithm")
        guard let algorithm = SealAlgorithm(rawValue: algorithmByte) else {
            throw CipherError.unsupportedAlgorithm("AEAD id \(algorithmByte)")
        }
        let mode = try reader.byte("key mode")
        let source: SealedHeader.KeySource
        switch mode {
        case modeKey:
            let length = Int(try reader.byte("key id length"))
            guard length > 0 else { throw CipherError.truncated("empty key id") }
            source = .key(id: Array(try reader.take(length)))
        case modePassphrase:
            let parameters = try reader.kdfParameters()
            let saltLength = Int(try reader.byte("salt length"))
            guard saltLength >= 8 else { throw CipherError.kdfParametersTooWeak("a salt of \(saltLength) bytes is under 8") }
            source = .passphrase(parameters, salt: Array(try reader.take(saltLength)))
        default:
            throw CipherError.unsupportedAlgorithm("key mode \(mode)")
        }
        let nonce = Array(try reader.take(nonceLength))
        guard reader.remaining >= tagLength else {
            throw CipherError.truncated("\(reader.remaining) bytes left where at least a \(tagLength)-byte tag is needed")
        }
        return SealedHeader(version: version, algorithm: algorithm, keySource: source, nonce: nonce,
                            encoded: Array(sealed[0..<reader.offset]))
    }

    // MARK: Internals

    private static func keyIDString(_ header: SealedHeader) -> String {
        if case .key(let id) = header.keySource { return Encoding.hex(id) }
        return "-"
    }

    /// Seals `plaintext` into a new envelope: the header (`headerCount` bytes, written by
    /// `writeHeader`), a fresh nonce (or the given one, for known-answer tests), the ciphertext and
    /// the tag, all written straight into the one output array. The header and nonce, followed by
    /// `context`, are the associated data.
    private static func finish<Plaintext: DataProtocol>(headerCount: Int, plaintext: Plaintext, key: SecretBytes,
                                                        algorithm: SealAlgorithm, context: [UInt8],
                                                        nonce fixedNonce: [UInt8]? = nil,
                                                        writeHeader: (UnsafeMutableRawBufferPointer) -> Void) throws(CipherError) -> [UInt8] {
        if let fixedNonce, fixedNonce.count != nonceLength {
            throw CipherError.invalidParameter("a nonce is \(nonceLength) bytes, not \(fixedNonce.count)")
        }
        guard let schedule = key.schedule(for: algorithm) else {
            throw CipherError.invalidParameter("a sealing key is 32 bytes, not \(key.count) (was it wiped?)")
        }
        func sealContiguous(_ input: UnsafeRawBufferPointer) throws(CipherError) -> [UInt8] {
            let prefix = headerCount + nonceLength
            let total = prefix + input.count + tagLength
            return try [UInt8](unsafeUninitializedCapacity: total) { (buffer, initialized) throws(CipherError) in
                let output = UnsafeMutableRawBufferPointer(buffer)
                let base = output.baseAddress!
                writeHeader(UnsafeMutableRawBufferPointer(rebasing: output[0..<headerCount]))
                let nonce = UnsafeMutableRawBufferPointer(rebasing: output[headerCount..<prefix])
                if let fixedNonce {
                    fixedNonce.withUnsafeBytes { nonce.copyMemory(from: $0) }
                } else {
                    try SecureRandom.fill(nonce)
                }
                let sealed: Bool
                if context.isEmpty {
                    sealed = schedule.seal(input, into: base + prefix, tag: base + prefix + input.count, nonce: base + headerCount,
                                           authenticating: UnsafeRawBufferPointer(rebasing: output[0..<prefix]))
                } else {
                    var ad = [UInt8](UnsafeRawBufferPointer(rebasing: output[0..<prefix]))
                    ad += context
                    sealed = ad.withUnsafeBytes {
                        schedule.seal(input, into: base + prefix, tag: base + prefix + input.count, nonce: base + headerCount,
                                      authenticating: $0)
                    }
                }
                guard sealed else { throw CipherError.invalidParameter("the \(algorithm.name) seal failed") }
                initialized = total
            }
        }
        if let sealed = plaintext.withContiguousStorageIfAvailable({ bytes in
            Result { () throws(CipherError) in try sealContiguous(UnsafeRawBufferPointer(bytes)) }
        }) {
            return try sealed.get()
        }
        // Plaintext in several regions: one contiguous copy, zeroed afterwards.
        var copy = [UInt8](plaintext)
        defer { copy.withUnsafeMutableBytes { if let base = $0.baseAddress { MemoryProtection.zero(base, $0.count) } } }
        return try copy.withUnsafeBytes { bytes in Result { () throws(CipherError) in try sealContiguous(bytes) } }.get()
    }

    /// Opens the envelope whose header was parsed, straight into the returned array.
    private static func decrypt(_ sealed: [UInt8], header: SealedHeader, key: SecretBytes, context: [UInt8]) throws(CipherError) -> [UInt8] {
        guard let schedule = key.schedule(for: header.algorithm) else {
            throw CipherError.invalidParameter("a sealing key is 32 bytes, not \(key.count) (was it wiped?)")
        }
        // The header ends with the nonce; then the ciphertext and the tag (parseHeader checked
        // that a tag's worth of bytes follows).
        let prefix = header.encoded.count
        let ciphertextCount = sealed.count - prefix - tagLength
        return try sealed.withUnsafeBytes { bytes in Result { () throws(CipherError) in
            let base = bytes.baseAddress!
            let ciphertext = UnsafeRawBufferPointer(rebasing: bytes[prefix..<(prefix + ciphertextCount)])
            func open(_ ad: UnsafeRawBufferPointer) throws(CipherError) -> [UInt8] {
                try [UInt8](unsafeUninitializedCapacity: ciphertextCount) { (buffer, initialized) throws(CipherError) in
                    // On failure BoringSSL zeroes the output before returning.
                    guard schedule.open(ciphertext, tag: base + prefix + ciphertextCount,
                                        into: buffer.baseAddress.map(UnsafeMutableRawPointer.init),
                                        nonce: base + prefix - nonceLength, authenticating: ad) else {
                        throw CipherError.tampered
                    }
                    initialized = ciphertextCount
                }
            }
            if context.isEmpty { return try open(UnsafeRawBufferPointer(rebasing: bytes[0..<prefix])) }
            var ad = header.encoded
            ad += context
            return try ad.withUnsafeBytes { adBytes in Result { () throws(CipherError) in try open(adBytes) } }.get()
        } }.get()
    }
}
