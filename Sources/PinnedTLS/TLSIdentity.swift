import Cipher
import X509

/// A private key with the certificate chain that vouches for it: what a TLS server presents,
/// and what a client presents when the server asks for a client certificate.
///
/// The chain is leaf first; intermediates follow in order and the root may be left out. The
/// private key must be the leaf certificate's key.
public struct TLSIdentity: Sendable {
    /// The certificates, leaf first.
    public let chain: [Certificate]
    /// The leaf's private key.
    public let privateKey: Certificate.PrivateKey

    /// Creates an identity from a chain (leaf first) and the leaf's private key.
    ///
    /// - Parameters:
    ///   - chain: the certificates, leaf first; must not be empty.
    ///   - privateKey: the private key of `chain[0]`.
    /// - Returns: `nil` when the chain is empty or the key does not belong to the leaf.
    public init?(chain: [Certificate], privateKey: Certificate.PrivateKey) {
        guard let leaf = chain.first, leaf.publicKey == privateKey.publicKey else { return nil }
        self.chain = chain
        self.privateKey = privateKey
    }

    /// The leaf certificate.
    public var leaf: Certificate { chain[0] }
}
