import Cipher
import Foundation
import X509

/// Certificates and keys read from PEM files (`--cert`, `--key`, `--ca`, a policy's anchor
/// files). The PEM text is read by ``IdentityImport`` (one reader for the whole module); this
/// adds the file: only a regular file is read, and only up to a bound. Package plumbing: clients
/// read files through ``TrustAnchors/only(certificateFile:)`` and
/// ``TLSIdentity/init(certificateFile:keyFile:)``.
package enum PEMFiles {
    /// Largest certificate file read (a bundle such as the system's, about 200 KiB, fits).
    static let maximumLength = IdentityImport.maxInputLength
    /// Largest key file read.
    static let maximumKeyLength = 64 * 1024

    /// Every certificate in a PEM file, in file order.
    ///
    /// - Throws: ``PinnedTLSError/notARegularFile(path:kind:)`` (a FIFO, a device...),
    ///   ``PinnedTLSError/fileTooLarge(path:limit:)``, ``PinnedTLSError/io(path:detail:)``, or
    ///   ``PinnedTLSError/invalidIdentity(_:)`` when the file holds no certificate or one does
    ///   not parse.
    package static func certificates(atPath path: String) throws(PinnedTLSError) -> [Certificate] {
        let bytes = try RegularFile.contents(path, maxLength: maximumLength)
        return try certificates(pemBytes: bytes, name: path)
    }

    /// Every certificate in PEM text.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` naming `name`.
    package static func certificates(pem: String, name: String = "input") throws(PinnedTLSError) -> [Certificate] {
        try certificates(pemBytes: Array(pem.utf8), name: name)
    }

    private static func certificates(pemBytes: [UInt8], name: String) throws(PinnedTLSError) -> [Certificate] {
        do {
            return try IdentityImport.certificates(pem: pemBytes)
        } catch {
            throw .invalidIdentity("\(name): \(error)")
        }
    }

    /// A private key from a PEM file (PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or
    /// `RSA PRIVATE KEY`; P-256, P-384 or RSA of 2048 bits or more). The file's bytes are held
    /// in wiped memory while parsing.
    ///
    /// - Throws: as ``certificates(atPath:)``; ``PinnedTLSError/invalidIdentity(_:)`` when it
    ///   holds no usable key.
    package static func privateKey(atPath path: String) throws(PinnedTLSError) -> Certificate.PrivateKey {
        let fd = try RegularFile.openForReading(path)
        defer { close(fd) }
        let secret: SecretBytes
        do {
            secret = try SecretBytes(readingFrom: fd, maxLength: maximumKeyLength, trimNewline: false, name: path)
        } catch {
            throw .invalidIdentity("\(path): cannot read the key (\(error))")
        }
        defer { secret.wipe() }
        do {
            return try IdentityImport.privateKey(pem: secret)
        } catch {
            throw .invalidIdentity("\(path): \(error)")
        }
    }

    /// An identity from a certificate file (the key's certificate and its intermediates) and a
    /// key file. The certificate whose key is the private key's becomes the leaf.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)``, also when no certificate is the key's;
    ///   the file errors of ``certificates(atPath:)``.
    package static func identity(certificatePath: String, keyPath: String) throws(PinnedTLSError) -> TLSIdentity {
        let chain = try certificates(atPath: certificatePath)
        let key = try privateKey(atPath: keyPath)
        do {
            return try IdentityImport.identity(key: key, certificates: chain)
        } catch {
            throw .invalidIdentity("\(keyPath) and \(certificatePath): \(error)")
        }
    }
}

extension TrustAnchors {
    /// Only the certificates of a PEM file (one CA, or a bundle); the system store is off.
    ///
    /// Only a regular file is read, up to 1 MiB.
    ///
    /// - Throws: ``PinnedTLSError/notARegularFile(path:kind:)`` (a FIFO, a device...),
    ///   ``PinnedTLSError/fileTooLarge(path:limit:)``, ``PinnedTLSError/io(path:detail:)``, or
    ///   ``PinnedTLSError/invalidIdentity(_:)`` when the file holds no certificate or one does
    ///   not parse.
    /// - Parameter path: The PEM file.
    /// - Returns: Anchors that trust its certificates only.
    public static func only(certificateFile path: String) throws(PinnedTLSError) -> TrustAnchors {
        .only(try PEMFiles.certificates(atPath: path))
    }

    /// The application's own CA from a PEM file, with the revocation list file it signs
    /// (``ownCA(_:revocationList:)``).
    ///
    /// - Throws: as ``only(certificateFile:)``; the list itself is read at the handshakes.
    /// - Parameters:
    ///   - path: The CA's PEM file.
    ///   - revocationList: The file of the revocation list it signs (PEM or DER).
    /// - Returns: Anchors that trust the CA, checking the list at each handshake.
    public static func ownCA(certificateFile path: String, revocationList: String) throws(PinnedTLSError) -> TrustAnchors {
        .ownCA(try PEMFiles.certificates(atPath: path), revocationList: revocationList)
    }
}

extension TLSIdentity {
    /// An identity from a PEM certificate file (the key's certificate and its intermediates)
    /// and a PEM key file (PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or `RSA PRIVATE KEY`;
    /// P-256, P-384 or RSA of 2048 bits or more). The certificate whose key is the private
    /// key's becomes the leaf; the key file's bytes are held in wiped memory while parsing.
    /// Only regular files are read.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)``, also when no certificate is the key's;
    ///   ``PinnedTLSError/notARegularFile(path:kind:)``, ``PinnedTLSError/fileTooLarge(path:limit:)``
    ///   or ``PinnedTLSError/io(path:detail:)`` for either file.
    /// - Parameters:
    ///   - certificateFile: The PEM certificate file.
    ///   - keyFile: The PEM private key file.
    public init(certificateFile: String, keyFile: String) throws(PinnedTLSError) {
        self = try PEMFiles.identity(certificatePath: certificateFile, keyPath: keyFile)
    }
}
