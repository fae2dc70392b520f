import Cipher
import HardwareKeys
import X509

/// A private key with the certificate chain that vouches for it: what a TLS server presents,
/// and what a client presents when the server asks for a client certificate.
///
/// The chain is leaf first; intermediates follow in order and the root may be left out. The
/// private key must be the leaf certificate's key. The key is either held in memory
/// (``Key/software(_:)``, read from the keychain or a PEM file) or stays in hardware, a PKCS #11
/// token or the TPM (``Key/hardware(_:)``): TLS then signs through the hardware and the key's
/// bytes never enter the process.
public struct TLSIdentity: Sendable {
    /// Where the leaf's private key is.
    public enum Key: Sendable {
        /// In memory.
        case software(Certificate.PrivateKey)
        /// In hardware (a PKCS #11 token, the TPM); every signature is made there.
        case hardware(any HardwareSigningKey)

        /// The key's public key.
        public var publicKey: Certificate.PublicKey {
            switch self {
            case .software(let key): key.publicKey
            case .hardware(let key): key.publicKey
            }
        }
    }

    /// The certificates, leaf first.
    public let chain: [Certificate]
    /// The leaf's private key, wherever it is.
    public let key: Key

    /// The leaf's private key when it is held in memory; nil when it stays in a token.
    public var privateKey: Certificate.PrivateKey? {
        if case .software(let key) = key { return key }
        return nil
    }

    /// Creates an identity from a chain (leaf first) and the leaf's private key.
    ///
    /// - Parameters:
    ///   - chain: the certificates, leaf first; must not be empty.
    ///   - privateKey: the private key of `chain[0]`.
    /// - Returns: `nil` when the chain is empty or the key does not belong to the leaf.
    public init?(chain: [Certificate], privateKey: Certificate.PrivateKey) {
        self.init(chain: chain, key: .software(privateKey))
    }

    /// Creates an identity whose key stays in hardware (a PKCS #11 token, the TPM).
    ///
    /// - Returns: `nil` when the chain is empty or the hardware key does not belong to the leaf.
    /// - Parameters:
    ///   - chain: The certificates, leaf first.
    ///   - tokenKey: The key in hardware; it must be the leaf's.
    public init?(chain: [Certificate], tokenKey: any HardwareSigningKey) {
        self.init(chain: chain, key: .hardware(tokenKey))
    }

    /// Creates an identity from a chain and a key wherever it is.
    /// - Returns: `nil` when the chain is empty or the key does not belong to the leaf.
    /// - Parameters:
    ///   - chain: The certificates, leaf first.
    ///   - key: The key, in memory or in hardware; it must be the leaf's.
    public init?(chain: [Certificate], key: Key) {
        guard let leaf = chain.first, leaf.publicKey == key.publicKey else { return nil }
        self.chain = chain
        self.key = key
    }

    /// The leaf certificate.
    public var leaf: Certificate { chain[0] }
}
