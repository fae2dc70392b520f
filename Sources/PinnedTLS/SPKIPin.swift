import Crypto
import Foundation
import NIOConcurrencyHelpers
import SwiftASN1
import X509

/// A public-key pin: SHA-256 over the DER SubjectPublicKeyInfo of a certificate's key, written
/// `sha256/<base64>` as HPKP, TrustKit and OkHttp write it.
///
/// The value equals
/// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`.
public struct SPKIPin: Hashable, Sendable, CustomStringConvertible {
    /// The 32-byte SHA-256 digest.
    public let digest: [UInt8]

    /// The pin of a public key.
    ///
    /// - Parameter publicKey: the key whose DER SubjectPublicKeyInfo is hashed.
    /// - Throws: an ASN.1 error if the key cannot be serialized.
    public init(publicKey: Certificate.PublicKey) throws {
        var serializer = DER.Serializer()
        try serializer.serialize(publicKey)
        digest = Array(SHA256.hash(data: serializer.serializedBytes))
    }

    /// The pin of a certificate's public key.
    ///
    /// - Parameter certificate: the certificate whose key is pinned.
    /// - Throws: an ASN.1 error if the key cannot be serialized.
    public init(certificate: Certificate) throws {
        try self.init(publicKey: certificate.publicKey)
    }

    /// The pin of `certificate`'s key, remembered for certificates seen before (a server's
    /// anchors and its clients' certificates come back at every handshake). The key is the
    /// whole certificate (its signed bytes and signature), so another certificate never gets
    /// this one's pin. `nil` when the key cannot be serialized.
    static func memoized(_ certificate: Certificate) -> SPKIPin? {
        if let pin = memo.withLockedValue({ $0[certificate] }) { return pin }
        guard let pin = try? SPKIPin(certificate: certificate) else { return nil }
        memo.withLockedValue { memo in
            if memo.count >= 256 { memo.removeAll() }
            memo[certificate] = pin
        }
        return pin
    }

    private static let memo = NIOLockedValueBox<[Certificate: SPKIPin]>([:])

    /// Parses `sha256/<base64 of 32 bytes>`.
    ///
    /// - Parameter string: the pin as written in a configuration.
    /// - Returns: `nil` if the prefix is not `sha256/` or the rest is not the base64 of 32 bytes.
    public init?(_ string: String) {
        let prefix = "sha256/"
        guard string.hasPrefix(prefix),
              let bytes = Data(base64Encoded: String(string.dropFirst(prefix.count))),
              bytes.count == 32
        else { return nil }
        digest = Array(bytes)
    }

    /// `sha256/<base64>`.
    public var description: String { "sha256/" + Data(digest).base64EncodedString() }
}
