import Foundation
import X509

/// The old name of ``HardwareSignatureScheme``.
public typealias PKCS11SignatureScheme = HardwareSignatureScheme

/// A private key that stays in hardware: it signs, and its bytes are never read.
///
/// ``PKCS11PrivateKey`` (a key in a PKCS #11 token) is one. TLS (PinnedTLS's `TLSIdentity`) and
/// certificate signing take any conforming key, so a new location needs only this conformance.
/// Implementations are reference types: one object stands for one key handle, and two keys
/// compare by identity.
public protocol HardwareSigningKey: AnyObject, Sendable {
    /// The key's public key.
    var publicKey: Certificate.PublicKey { get }
    /// The schemes the key signs with.
    var signatureSchemes: [HardwareSignatureScheme] { get }
    /// Where the key is, for messages and listings (a PKCS #11 URI, a TPM key's name); never
    /// key material.
    var location: String { get }
    /// Signs `message` (the implementation hashes it). ECDSA signatures are DER-encoded.
    ///
    /// - Parameters:
    ///   - message: The bytes to sign.
    ///   - scheme: One of ``signatureSchemes``.
    /// - Returns: The signature as TLS and X.509 carry it.
    /// - Throws: ``HardwareKeyError``; nothing falls back to a software key.
    func signature(for message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8]
    /// The last signing failure (a handshake reports only that signing failed; this says why).
    var lastFailure: HardwareKeyError? { get }
}

/// The last signing failure of a key in hardware, kept for ``HardwareSigningKey/lastFailure``
/// (a TLS handshake only reports that the key failed; this says why). Thread-safe: signatures
/// may be asked for from several threads.
package final class SigningFailureRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var last: HardwareKeyError?

    package init() {}

    /// The error of the last signature that failed, nil when none has.
    package var error: HardwareKeyError? { lock.withLock { last } }

    /// Runs `sign`, keeping its error (if any) as the last failure before throwing it.
    package func recording(_ sign: () throws(HardwareKeyError) -> [UInt8]) throws(HardwareKeyError) -> [UInt8] {
        do {
            return try sign()
        } catch {
            lock.withLock { last = error }
            throw error
        }
    }
}
