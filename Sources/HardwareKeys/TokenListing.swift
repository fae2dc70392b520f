import Cipher
internal import CPKCS11

/// A key found on a token: where it is and what it allows, never its bytes.
public struct PKCS11KeyInfo: Sendable, Equatable {
    /// `private` or `secret-key`.
    public let kind: String
    /// `EC`, `RSA`, `GENERIC_SECRET` or the key type's number.
    public let keyType: String
    public let label: String
    public let id: [UInt8]
    /// CKA_SENSITIVE and CKA_EXTRACTABLE (nil when the token does not say).
    public let sensitive: Bool?
    public let extractable: Bool?
    /// The token's label.
    public let token: String

    /// The key's `pkcs11:` URI (token, object and id, percent-encoded).
    public var uri: String {
        "pkcs11:token=\(PKCS11KeyInfo.encoded(Array(token.utf8)))"
            + (label.isEmpty ? "" : ";object=\(PKCS11KeyInfo.encoded(Array(label.utf8)))")
            + (id.isEmpty ? "" : ";id=" + PKCS11URI.percentHex(id))
            + ";type=\(kind)"
    }

    static func encoded(_ bytes: [UInt8]) -> String {
        var out = ""
        for byte in bytes {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80, c.isLetter || c.isNumber || "-._~".contains(c) {
                out.append(c)
            } else {
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }
}

extension PKCS11Module {
    /// The private and secret keys on the tokens `uri` selects (logged in with `pin` when the
    /// token requires it): labels, ids and flags only.
    /// - Throws: ``HardwareKeyError``.
    /// - Parameters:
    ///   - uri: the tokens to list (its token attributes) and the keys on them (its `object` and `id`).
    ///   - pin: the user PIN, read only for a token that requires login.
    /// - Returns: one ``PKCS11KeyInfo`` per key found.
    public func keys(matching uri: PKCS11URI, pin: PKCS11PINSource) throws(HardwareKeyError) -> [PKCS11KeyInfo] {
        var result: [PKCS11KeyInfo] = []
        let tokens = try tokens(matching: uri)
        guard !tokens.isEmpty else { throw .tokenNotFound(uri.tokenDescription) }
        for token in tokens where token.initialized {
            let secret: SecretBytes? = token.loginRequired ? try PKCS11PrivateKey.pin(uri: uri, given: pin).read() : nil
            let sessions = try TokenSessions(module: self, slot: token.slot, pin: secret) { _, _ throws(HardwareKeyError) in 0 }
            let session = sessions.anchorSession
            for (kind, objectClass) in [("private", CK.objectClassPrivateKey), ("secret-key", CK.objectClassSecretKey)] {
                let objects = try TokenSessions.find(self, session: session, objectClass: objectClass, label: uri.object, id: uri.id, limit: 1024)
                for object in objects {
                    let type = (try? TokenSessions.ulong(self, session: session, object: object, type: CK.attributeKeyType)) ?? ~0
                    let typeName = switch type {
                    case CK.keyTypeEC: "EC"
                    case CK.keyTypeRSA: "RSA"
                    case CK.keyTypeGenericSecret: "GENERIC_SECRET"
                    default: String(type)
                    }
                    let label = (try? TokenSessions.attribute(self, session: session, object: object, type: CK.attributeLabel)) ?? []
                    let id = (try? TokenSessions.attribute(self, session: session, object: object, type: CK.attributeID)) ?? []
                    result.append(PKCS11KeyInfo(
                        kind: kind, keyType: typeName, label: String(decoding: label, as: UTF8.self), id: id,
                        sensitive: TokenSessions.bool(self, session: session, object: object, type: CK.attributeSensitive),
                        extractable: TokenSessions.bool(self, session: session, object: object, type: CK.attributeExtractable),
                        token: token.label))
                }
            }
        }
        return result
    }
}
