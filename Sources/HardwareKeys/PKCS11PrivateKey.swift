import Cipher
import Crypto
import CryptoExtras
import Foundation
import X509

/// How a signature is made with a key that stays in hardware (a PKCS #11 token or the TPM).
public enum HardwareSignatureScheme: Sendable, Hashable, CaseIterable {
    case ecdsaSHA256, ecdsaSHA384, ecdsaSHA512
    case rsaPSSSHA256, rsaPSSSHA384, rsaPSSSHA512
    case rsaPKCS1SHA256, rsaPKCS1SHA384, rsaPKCS1SHA512

    var isECDSA: Bool { [.ecdsaSHA256, .ecdsaSHA384, .ecdsaSHA512].contains(self) }

    /// The message's digest (SHA-2, computed here with swift-crypto: the token signs a digest).
    func digest(_ message: [UInt8]) -> [UInt8] {
        switch self {
        case .ecdsaSHA256, .rsaPSSSHA256, .rsaPKCS1SHA256: Array(SHA256.hash(data: message))
        case .ecdsaSHA384, .rsaPSSSHA384, .rsaPKCS1SHA384: Array(SHA384.hash(data: message))
        case .ecdsaSHA512, .rsaPSSSHA512, .rsaPKCS1SHA512: Array(SHA512.hash(data: message))
        }
    }

    /// The DER DigestInfo prefix (RFC 8017 section 9.2, note 1) for CKM_RSA_PKCS.
    var digestInfoPrefix: [UInt8] {
        switch self {
        case .rsaPKCS1SHA256: [0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20]
        case .rsaPKCS1SHA384: [0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30]
        case .rsaPKCS1SHA512: [0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40]
        default: []
        }
    }

    var pssHashBits: UInt32 {
        switch self {
        case .rsaPSSSHA256: 256
        case .rsaPSSSHA384: 384
        case .rsaPSSSHA512: 512
        default: 0
        }
    }
}

/// A private key that stays in a PKCS #11 token: found by its `pkcs11:` URI, used through the
/// module's `C_Sign`, never read. Its public key is read from the token (the public-key object
/// beside it for EC keys, the modulus and exponent for RSA).
///
/// Thread safety: signatures may be made from several threads at once; each uses a session of
/// its own.
public final class PKCS11PrivateKey: HardwareSigningKey, Hashable, CustomStringConvertible {
    /// The key's algorithm.
    public enum Algorithm: Sendable, Hashable {
        case p256, p384
        case rsa(bits: Int)
    }

    /// The URI the key was opened with.
    public let uri: PKCS11URI
    /// The token that holds it.
    public let token: PKCS11Module.Token
    public let algorithm: Algorithm
    /// The key's public key.
    public let publicKey: Certificate.PublicKey
    /// The key's label (CKA_LABEL) and id (CKA_ID) on the token.
    public let label: String
    public let id: [UInt8]
    private let sessions: TokenSessions
    private let failures = SigningFailureRecord()

    /// The error of the last signature that failed (a TLS handshake only reports that the
    /// key failed; this says why), nil when none has.
    public var lastFailure: HardwareKeyError? { failures.error }

    /// Loads the module, finds the one token `uri` names, and reads its PIN when it needs a
    /// login: what opening a private or a secret key starts with.
    static func openToken(uri: PKCS11URI, modulePath: String?, refusing: [String],
                          pin: PKCS11PINSource) throws(HardwareKeyError) -> (PKCS11Module, PKCS11Module.Token, SecretBytes?) {
        let module = try PKCS11Module.load(path: try Self.modulePath(uri: uri, given: modulePath), refusing: refusing)
        let tokens = try module.tokens(matching: uri)
        guard let token = tokens.first else { throw .tokenNotFound(uri.tokenDescription) }
        guard tokens.count == 1 else {
            throw .tokenNotFound("\(uri.tokenDescription) (\(tokens.count) tokens match; name one with token= or serial=)")
        }
        let secret: SecretBytes? = token.loginRequired ? try Self.pin(uri: uri, given: pin).read() : nil
        return (module, token, secret)
    }

    /// Opens the private key `uri` names.
    ///
    /// - Parameters:
    ///   - uri: the key's URI; exactly one private key must match it.
    ///   - modulePath: the module to load; the URI's `module-path` is used when this is nil
    ///     (both given and different is refused).
    ///   - refusing: directories the module must not be in (the data directory).
    ///   - pin: where the user PIN comes from; the URI's `pin-source` replaces `.prompt`.
    /// - Throws: ``HardwareKeyError``.
    public init(uri: PKCS11URI, modulePath: String?, refusing: [String] = [], pin: PKCS11PINSource) throws(HardwareKeyError) {
        if let type = uri.type, type != "private" { throw .invalidURI("type=\(type) does not name a private key") }
        let (module, token, secret) = try Self.openToken(uri: uri, modulePath: modulePath, refusing: refusing, pin: pin)
        let label = uri.object, id = uri.id
        let sessions = try TokenSessions(module: module, slot: token.slot, pin: secret) { module, session throws(HardwareKeyError) in
            let found = try TokenSessions.find(module, session: session, objectClass: CK.objectClassPrivateKey, label: label, id: id)
            guard let first = found.first else { throw .keyNotFound(uri.objectDescription) }
            return first
        }
        let session = sessions.anchorSession
        let found = try TokenSessions.find(module, session: session, objectClass: CK.objectClassPrivateKey, label: label, id: id)
        guard let key = found.first else { throw .keyNotFound("\(uri.objectDescription) on token \(token.label)") }
        guard found.count == 1 else { throw .ambiguousKey(uri.objectDescription) }
        let keyLabel = (try? TokenSessions.attribute(module, session: session, object: key, type: CK.attributeLabel)) ?? []
        let keyID = (try? TokenSessions.attribute(module, session: session, object: key, type: CK.attributeID)) ?? []
        let keyType = try TokenSessions.ulong(module, session: session, object: key, type: CK.attributeKeyType)
        switch keyType {
        case CK.keyTypeEC:
            let params = try TokenSessions.attribute(module, session: session, object: key, type: CK.attributeECParams)
            let point = try Self.ecPoint(module, session: session, label: keyLabel, id: keyID)
            do {
                if params == Self.p256OID {
                    algorithm = .p256
                    publicKey = Certificate.PublicKey(try P256.Signing.PublicKey(x963Representation: Self.unwrapPoint(point, length: 65)))
                } else if params == Self.p384OID {
                    algorithm = .p384
                    publicKey = Certificate.PublicKey(try P384.Signing.PublicKey(x963Representation: Self.unwrapPoint(point, length: 97)))
                } else {
                    throw HardwareKeyError.unsupportedKey("an EC key on a curve other than P-256 and P-384")
                }
            } catch let error as HardwareKeyError {
                throw error
            } catch {
                throw .unsupportedKey("the token's EC public key cannot be read: \(error)")
            }
        case CK.keyTypeRSA:
            let modulus = try TokenSessions.attribute(module, session: session, object: key, type: CK.attributeModulus)
            let exponent = try TokenSessions.attribute(module, session: session, object: key, type: CK.attributePublicExponent)
            let bits = (modulus.drop { $0 == 0 }.count) * 8
            guard bits >= 2048 else { throw .unsupportedKey("an RSA key of \(bits) bits") }
            do {
                publicKey = Certificate.PublicKey(try _RSA.Signing.PublicKey(n: modulus, e: exponent))
            } catch {
                throw .unsupportedKey("the token's RSA public key cannot be read: \(error)")
            }
            algorithm = .rsa(bits: bits)
        default:
            throw .unsupportedKey("key type \(keyType) (not EC or RSA)")
        }
        self.uri = uri
        self.token = token
        self.label = String(decoding: keyLabel, as: UTF8.self)
        self.id = keyID
        self.sessions = sessions
    }

    /// The schemes this key signs with.
    public var signatureSchemes: [HardwareSignatureScheme] {
        switch algorithm {
        case .p256: [.ecdsaSHA256]
        case .p384: [.ecdsaSHA384]
        case .rsa: [.rsaPSSSHA256, .rsaPSSSHA384, .rsaPSSSHA512, .rsaPKCS1SHA256, .rsaPKCS1SHA384, .rsaPKCS1SHA512]
        }
    }

    /// Signs `message` (hashed here). ECDSA signatures are returned DER-encoded (as TLS and
    /// X.509 carry them); RSA signatures as the token made them.
    ///
    /// - Throws: ``HardwareKeyError``; nothing falls back to a software key.
    /// - Parameters:
    ///   - message: the bytes to sign, before hashing.
    ///   - scheme: one of the key's ``signatureSchemes``.
    /// - Returns: the signature bytes.
    public func signature(for message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        try failures.recording { () throws(HardwareKeyError) in try sign(message, scheme: scheme) }
    }

    private func sign(_ message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        guard signatureSchemes.contains(scheme) else { throw .unsupportedKey("\(scheme) with a \(algorithm) key") }
        let digest = scheme.digest(message)
        switch algorithm {
        case .p256, .p384:
            let raw = try sessions.with { session, key throws(HardwareKeyError) in
                try TokenSessions.sign(sessions.module, session: session, key: key, mechanism: CK.mechanismECDSA, data: digest, maxLength: 512)
            }
            do {
                if algorithm == .p256 { return Array(try P256.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation) }
                return Array(try P384.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation)
            } catch {
                throw .unsupportedKey("the token returned a malformed ECDSA signature (\(raw.count) bytes)")
            }
        case .rsa(let bits):
            let length = (bits + 7) / 8
            if scheme.pssHashBits != 0 {
                return try sessions.with { session, key throws(HardwareKeyError) in
                    try TokenSessions.sign(sessions.module, session: session, key: key, mechanism: CK.mechanismRSAPSS,
                                           pssHashBits: scheme.pssHashBits, data: digest, maxLength: length)
                }
            }
            let info = scheme.digestInfoPrefix + digest
            return try sessions.with { session, key throws(HardwareKeyError) in
                try TokenSessions.sign(sessions.module, session: session, key: key, mechanism: CK.mechanismRSAPKCS,
                                       data: info, maxLength: length)
            }
        }
    }

    public var description: String { "PKCS11PrivateKey(\(uri.text))" }
    /// The key's PKCS #11 URI.
    public var location: String { uri.text }

    /// Whether both are the same key object (identity, not key material).
    /// - Parameters:
    ///   - lhs: a key.
    ///   - rhs: another key.
    /// - Returns: `true` when `lhs` and `rhs` are the identical instance.
    public static func == (lhs: PKCS11PrivateKey, rhs: PKCS11PrivateKey) -> Bool { lhs === rhs }
    /// Hashes the object's identity, consistently with `==`.
    /// - Parameter hasher: the hasher to feed.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Opening

    static let p256OID: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    static let p384OID: [UInt8] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]

    static func modulePath(uri: PKCS11URI, given: String?) throws(HardwareKeyError) -> String {
        switch (given, uri.modulePath) {
        case (let given?, let fromURI?) where given != fromURI:
            throw .invalidURI("module-path=\(fromURI) differs from the module given (\(given)); give one")
        case (let given?, _): return given
        case (nil, let fromURI?): return fromURI
        case (nil, nil): throw .invalidURI("no module: give its path with --module PATH (or module-path= in the URI)")
        }
    }

    static func pin(uri: PKCS11URI, given: PKCS11PINSource) throws(HardwareKeyError) -> PKCS11PINSource {
        guard let file = uri.pinFile else { return given }
        if case .prompt = given { return .file(file) }
        throw .invalidURI("pin-source= in the URI and another PIN source were both given; give one")
    }

    /// The EC point of the public-key object beside the private key (same id, else same label).
    private static func ecPoint(_ module: PKCS11Module, session: UInt, label: [UInt8], id: [UInt8]) throws(HardwareKeyError) -> [UInt8] {
        var candidates: [UInt] = []
        if !id.isEmpty {
            candidates = try TokenSessions.find(module, session: session, objectClass: CK.objectClassPublicKey, label: nil, id: id)
        }
        if candidates.isEmpty, !label.isEmpty {
            candidates = try TokenSessions.find(module, session: session, objectClass: CK.objectClassPublicKey, label: label, id: nil)
        }
        guard candidates.count == 1 else {
            throw .unsupportedKey("the token holds \(candidates.isEmpty ? "no" : "more than one") public-key object beside the "
                + "private key (same id); store the public key on the token with the same id")
        }
        return try TokenSessions.attribute(module, session: session, object: candidates[0], type: CK.attributeECPoint)
    }

    /// CKA_EC_POINT is a DER OCTET STRING holding the point (some modules give the bare point).
    static func unwrapPoint(_ value: [UInt8], length: Int) -> [UInt8] {
        if value.count == length + 2, value[0] == 0x04, Int(value[1]) == length { return Array(value[2...]) }
        return value
    }
}
