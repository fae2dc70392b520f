import Cipher
import Foundation

/// A secret key (CKK_GENERIC_SECRET) that stays in a PKCS #11 token and computes
/// HMAC-SHA256 (CKM_SHA256_HMAC) there: what derives a key-encryption key from the token, so
/// that files protected with it open only where the token is.
///
/// The key must be sensitive and not extractable (CKA_SENSITIVE true, CKA_EXTRACTABLE false):
/// a key the token would hand out protects nothing once read. Create one with, for example,
/// `pkcs11-tool --keygen --key-type GENERIC:32 --label device-key --id 10 --sensitive --usage-sign`.
public final class PKCS11SecretKey: Sendable {
    /// The URI the key was opened with.
    public let uri: PKCS11URI
    /// The token that holds it.
    public let token: PKCS11Module.Token
    private let sessions: TokenSessions

    /// Opens the secret key `uri` names (exactly one must match).
    /// - Parameters: as ``PKCS11PrivateKey/init(uri:modulePath:refusing:pin:)``.
    /// - Throws: ``HardwareKeyError``; ``HardwareKeyError/unsupportedKey(_:)`` for a key that is
    ///   not a generic secret, or that the token would let out.
    public init(uri: PKCS11URI, modulePath: String?, refusing: [String] = [], pin: PKCS11PINSource) throws(HardwareKeyError) {
        if let type = uri.type, type != "secret-key" { throw .invalidURI("type=\(type) does not name a secret key") }
        let (module, token, secret) = try PKCS11PrivateKey.openToken(uri: uri, modulePath: modulePath, refusing: refusing, pin: pin)
        let label = uri.object, id = uri.id
        let sessions = try TokenSessions(module: module, slot: token.slot, pin: secret) { module, session throws(HardwareKeyError) in
            let found = try TokenSessions.find(module, session: session, objectClass: CK.objectClassSecretKey,
                                               keyType: CK.keyTypeGenericSecret, label: label, id: id)
            guard let first = found.first else { throw .keyNotFound(uri.objectDescription) }
            return first
        }
        let session = sessions.anchorSession
        let found = try TokenSessions.find(module, session: session, objectClass: CK.objectClassSecretKey,
                                           keyType: CK.keyTypeGenericSecret, label: label, id: id)
        guard let key = found.first else { throw .keyNotFound("generic secret \(uri.objectDescription) on token \(token.label)") }
        guard found.count == 1 else { throw .ambiguousKey(uri.objectDescription) }
        guard TokenSessions.bool(module, session: session, object: key, type: CK.attributeSensitive) == true,
              TokenSessions.bool(module, session: session, object: key, type: CK.attributeExtractable) == false
        else {
            throw .unsupportedKey("the secret key \(uri.objectDescription) is extractable or not sensitive: the token would let it "
                + "out; make one with CKA_SENSITIVE true and CKA_EXTRACTABLE false (pkcs11-tool --keygen --sensitive)")
        }
        self.uri = uri
        self.token = token
        self.sessions = sessions
    }

    /// HMAC-SHA256 of `message` under the token's key, computed by the token.
    /// - Throws: ``HardwareKeyError``.
    /// - Parameter message: the bytes to authenticate.
    /// - Returns: the 32-byte HMAC-SHA256, in `SecretBytes`.
    public func hmacSHA256(_ message: [UInt8]) throws(HardwareKeyError) -> SecretBytes {
        let mac = try sessions.with { session, key throws(HardwareKeyError) in
            try TokenSessions.signSecret(sessions.module, session: session, key: key, mechanism: CK.mechanismSHA256HMAC, data: message)
        }
        guard mac.count == 32 else {
            mac.wipe()
            throw .unsupportedKey("the token's HMAC-SHA256 gave \(mac.count) bytes")
        }
        return mac
    }
}
