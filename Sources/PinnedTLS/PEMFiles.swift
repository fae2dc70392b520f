import Cipher
import Crypto
import Foundation
import SwiftASN1
import X509
import CryptoExtras

/// Certificates and keys read from PEM files (`--cert`, `--key`, `--ca`).
public enum PEMFiles {
    /// Largest PEM file read (certificate bundles included).
    static let maximumLength = 4 * 1024 * 1024

    /// Every certificate in a PEM file, in file order.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)`` when the file cannot be read, holds no
    ///   certificate, or one does not parse.
    public static func certificates(atPath path: String) throws(PinnedTLSError) -> [Certificate] {
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            data = try handle.read(upToCount: maximumLength + 1) ?? Data()
        } catch {
            throw .invalidIdentity("\(path): cannot read (\(error.localizedDescription))")
        }
        guard data.count <= maximumLength else { throw .invalidIdentity("\(path): larger than 4 MiB") }
        return try certificates(pem: String(decoding: data, as: UTF8.self), name: path)
    }

    /// Every certificate in PEM text.
    public static func certificates(pem: String, name: String = "input") throws(PinnedTLSError) -> [Certificate] {
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: pem)
        } catch {
            throw .invalidIdentity("\(name): not PEM (\(error))")
        }
        var result: [Certificate] = []
        for document in documents where document.discriminator == "CERTIFICATE" {
            do {
                result.append(try Certificate(pemDocument: document))
            } catch {
                throw .invalidIdentity("\(name): certificate \(result.count + 1) does not parse (\(error))")
            }
        }
        guard !result.isEmpty else { throw .invalidIdentity("\(name): no CERTIFICATE block") }
        return result
    }

    /// A private key from a PEM file (PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or
    /// `RSA PRIVATE KEY`). The file's bytes are held in wiped memory while parsing.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)``.
    public static func privateKey(atPath path: String) throws(PinnedTLSError) -> Certificate.PrivateKey {
        let secret: SecretBytes
        do {
            secret = try SecretBytes(contentsOfFile: path, maxLength: 64 * 1024)
        } catch {
            throw .invalidIdentity("\(path): cannot read the key (\(error))")
        }
        defer { secret.wipe() }
        let parsed: Certificate.PrivateKey? = secret.withUnsafeBytes { raw -> Certificate.PrivateKey? in
            var body = Self.pemBody(raw)
            defer { scrubBytes(&body) }
            guard var der = Data(base64Encoded: Data(body), options: .ignoreUnknownCharacters) else { return nil }
            defer { scrubBytes(&der) }
            if let key = try? Certificate.PrivateKey(derBytes: Array(der)) { return key }
            if let key = try? P256.Signing.PrivateKey(derRepresentation: der) { return Certificate.PrivateKey(key) }
            if let key = try? P384.Signing.PrivateKey(derRepresentation: der) { return Certificate.PrivateKey(key) }
            if let key = try? _RSA.Signing.PrivateKey(derRepresentation: der) { return Certificate.PrivateKey(key) }
            return nil
        }
        guard let parsed else {
            throw .invalidIdentity("\(path): not a PEM private key (PKCS#8, EC or RSA)")
        }
        return parsed
    }

    /// An identity from a certificate file (leaf first, then intermediates) and a key file.
    ///
    /// - Throws: ``PinnedTLSError/invalidIdentity(_:)``, also when the key is not the leaf's.
    public static func identity(certificatePath: String, keyPath: String) throws(PinnedTLSError) -> TLSIdentity {
        let chain = try certificates(atPath: certificatePath)
        let key = try privateKey(atPath: keyPath)
        guard let identity = TLSIdentity(chain: chain, privateKey: key) else {
            throw .invalidIdentity("\(keyPath) is not the key of the first certificate in \(certificatePath)")
        }
        return identity
    }

    /// The base64 lines between the first `-----BEGIN` line and the next `-----END`.
    private static func pemBody(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let dash = Array("-----".utf8)
        var lines: [[UInt8]] = []
        var current: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                lines.append(current)
                current = []
            } else if byte != UInt8(ascii: "\r") {
                current.append(byte)
            }
        }
        lines.append(current)
        var body: [UInt8] = []
        var inside = false
        for index in lines.indices {
            let line = lines[index]
            if line.starts(with: dash) {
                if inside { break }
                inside = true
            } else if inside {
                body += line
            }
            scrubBytes(&lines[index])
        }
        return body
    }
}
