import Foundation
import SwiftASN1
import X509

/// A key that stays in hardware as swift-certificates takes a private key: certificates,
/// certificate signing requests and revocation lists are signed by the hardware
/// (`Certificate.PrivateKey(HardwareCertificateKey(key))`, or ``certificatePrivateKey(_:)``).
///
/// Signature algorithms: ECDSA with SHA-256 for a P-256 key, with SHA-384 for a P-384 key
/// (the digest the key's scheme makes); RSA PKCS #1 v1.5 with SHA-256, SHA-384 or SHA-512 for
/// an RSA key. swift-certificates 1 names no RSA-PSS signature algorithm, so a key that signs
/// only with PSS cannot sign certificates (``HardwareKeyError/unsupportedKey(_:)``).
///
/// The key's bytes cannot be serialized: PEM and DER serialization throw
/// ``HardwareKeyError/unsupportedKey(_:)``. Nothing falls back to a software key: a failure of
/// the hardware is thrown as the key's ``HardwareKeyError``.
public struct HardwareCertificateKey: CustomPrivateKey, CustomStringConvertible {
    /// The key that signs.
    public let key: any HardwareSigningKey

    /// Wraps `key`.
    /// - Parameter key: the PKCS #11 or TPM key that signs.
    public init(_ key: any HardwareSigningKey) {
        self.key = key
    }

    /// Whether two wrappers hold the same key object.
    /// - Parameters:
    ///   - lhs: a key.
    ///   - rhs: another key.
    /// - Returns: `true` when both wrap the identical ``HardwareSigningKey`` instance.
    public static func == (lhs: HardwareCertificateKey, rhs: HardwareCertificateKey) -> Bool { lhs.key === rhs.key }
    /// Hashes the identity of the wrapped key object, consistently with `==`.
    /// - Parameter hasher: the hasher to feed.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(key)) }

    public var publicKey: Certificate.PublicKey { key.publicKey }

    public var description: String { "HardwareCertificateKey(\(key.location))" }

    /// The X.509 signature algorithm and the hardware scheme that makes it, for every scheme the
    /// key has that swift-certificates names.
    static let mapping: [(Certificate.SignatureAlgorithm, HardwareSignatureScheme)] = [
        (.ecdsaWithSHA256, .ecdsaSHA256), (.ecdsaWithSHA384, .ecdsaSHA384), (.ecdsaWithSHA512, .ecdsaSHA512),
        (.sha256WithRSAEncryption, .rsaPKCS1SHA256), (.sha384WithRSAEncryption, .rsaPKCS1SHA384),
        (.sha512WithRSAEncryption, .rsaPKCS1SHA512),
    ]

    /// The hardware scheme that makes `algorithm`, when the key has it.
    /// - Parameter algorithm: an X.509 signature algorithm.
    /// - Returns: the ``HardwareSignatureScheme`` that makes it, or `nil` when the key does not
    ///   sign with it or swift-certificates names no such algorithm for the scheme.
    public func scheme(for algorithm: Certificate.SignatureAlgorithm) -> HardwareSignatureScheme? {
        let schemes = key.signatureSchemes
        return Self.mapping.first { $0.0 == algorithm && schemes.contains($0.1) }?.1
    }

    public var supportedSignatureAlgorithms: [Certificate.SignatureAlgorithm] {
        let schemes = key.signatureSchemes
        return Self.mapping.filter { schemes.contains($0.1) }.map(\.0)
    }

    /// The first supported algorithm: ECDSA with the key's digest, or RSA PKCS #1 v1.5 with
    /// SHA-256. (A key with no algorithm swift-certificates names gets ECDSA with SHA-256,
    /// which signing then refuses with a typed error.)
    public var defaultSignatureAlgorithm: Certificate.SignatureAlgorithm {
        supportedSignatureAlgorithms.first ?? .ecdsaWithSHA256
    }

    /// Signs `bytes` in the hardware.
    /// - Throws: ``HardwareKeyError`` (the key's own failure, or
    ///   ``HardwareKeyError/unsupportedKey(_:)`` for an algorithm the key does not sign with).
    /// - Parameters:
    ///   - bytes: the bytes to sign (the key hashes them with the algorithm's digest).
    ///   - signatureAlgorithm: the X.509 algorithm to sign with; one of ``supportedSignatureAlgorithms``.
    /// - Returns: the signature, tagged with `signatureAlgorithm`.
    public func signSynchronously(bytes: some DataProtocol,
                                  signatureAlgorithm: Certificate.SignatureAlgorithm) throws -> Certificate.Signature {
        guard let scheme = scheme(for: signatureAlgorithm) else {
            throw HardwareKeyError.unsupportedKey("\(signatureAlgorithm) with the key at \(key.location) (it signs with "
                + "\(supportedSignatureAlgorithms.map { "\($0)" }.joined(separator: ", ")))")
        }
        let signature = try key.signature(for: Array(bytes), scheme: scheme)
        do {
            return try Certificate.Signature(signatureAlgorithm: signatureAlgorithm,
                                             signatureBytes: ASN1BitString(bytes: ArraySlice(signature)))
        } catch {
            throw HardwareKeyError.unsupportedKey("the key at \(key.location) returned a signature that does not parse: \(error)")
        }
    }

    // MARK: Serialization (refused: the key's bytes never leave the hardware)

    public static var defaultPEMDiscriminator: String { "PRIVATE KEY" }

    /// Always refused: the key's bytes never leave the hardware.
    /// - Parameter coder: unused.
    /// - Throws: ``HardwareKeyError/unsupportedKey(_:)``, always.
    public func serialize(into coder: inout DER.Serializer) throws {
        throw HardwareKeyError.unsupportedKey("the key at \(key.location) stays in hardware and cannot be serialized")
    }

    /// Always refused: the key's bytes never leave the hardware.
    /// - Parameter discriminator: unused.
    /// - Returns: never returns.
    /// - Throws: ``HardwareKeyError/unsupportedKey(_:)``, always.
    public func serializeAsPEM(discriminator: String) throws -> PEMDocument {
        throw HardwareKeyError.unsupportedKey("the key at \(key.location) stays in hardware and cannot be serialized as PEM")
    }
}

extension HardwareCertificateKey {
    /// `key` as swift-certificates' private key.
    /// - Parameter key: the PKCS #11 or TPM key that signs.
    /// - Returns: a `Certificate.PrivateKey` wrapping a ``HardwareCertificateKey`` of `key`.
    public static func certificatePrivateKey(_ key: any HardwareSigningKey) -> Certificate.PrivateKey {
        Certificate.PrivateKey(HardwareCertificateKey(key))
    }
}
