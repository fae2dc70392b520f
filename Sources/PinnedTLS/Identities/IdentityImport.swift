import Cipher
import Foundation
import SwiftASN1
import X509
internal import CNIOBoringSSL

/// Reading keys, certificates and identities from PEM and PKCS#12 files.
public enum IdentityImport {
    /// The largest PEM or PKCS#12 input accepted.
    package static let maxInputLength = 1 << 20

    /// Every certificate of a PEM file (`CERTIFICATE` blocks, in order; other blocks are skipped).
    /// - Throws: ``IdentityError/invalidPEM(_:)`` when the text does not parse or holds no
    ///   certificate, ``IdentityError/invalidCertificate(_:)`` when a block is not a certificate.
    /// - Parameter bytes: The PEM text.
    /// - Returns: The certificates, in file order.
    public static func certificates(pem bytes: some ContiguousBytes) throws(IdentityError) -> [Certificate] {
        let blocks: [PEMReader.Block] = try withBytes(bytes) { buffer throws(IdentityError) in try PEMReader.blocks(buffer) }
        var result: [Certificate] = []
        for block in blocks where block.type == "CERTIFICATE" {
            do { result.append(try Certificate(derEncoded: block.der)) } catch {
                throw .invalidCertificate("certificate \(result.count + 1) of the file does not parse: \(error)")
            }
        }
        guard !result.isEmpty else { throw .invalidPEM("no CERTIFICATE block found") }
        return result
    }

    /// The private key of a PEM file: the first `PRIVATE KEY` (PKCS#8), `EC PRIVATE KEY` (SEC 1)
    /// or `RSA PRIVATE KEY` (PKCS#1) block. The decoded bytes are zeroed after parsing.
    /// - Throws: ``IdentityError/invalidPEM(_:)`` (also for an `ENCRYPTED PRIVATE KEY`),
    ///   ``IdentityError/unsupportedKey(_:)``.
    /// - Parameter key: The PEM text (wiped by the caller).
    /// - Returns: The key.
    public static func privateKey(pem key: SecretBytes) throws(IdentityError) -> Certificate.PrivateKey {
        var blocks: [PEMReader.Block] = try withSecretBytes(key) { buffer throws(IdentityError) in
            guard buffer.count <= maxInputLength else { throw .invalidPEM("the key file is larger than \(maxInputLength) bytes") }
            return try PEMReader.blocks(buffer)
        }
        defer { for index in blocks.indices { IdentityRecord.zero(&blocks[index].der) } }
        if blocks.contains(where: { $0.type == "ENCRYPTED PRIVATE KEY" }) {
            throw .invalidPEM("the private key is encrypted; decrypt it first: openssl pkey -in KEY -out PLAIN.pem")
        }
        guard let block = blocks.first(where: { ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"].contains($0.type) }) else {
            throw .invalidPEM("no PRIVATE KEY block found")
        }
        let privateKey: Certificate.PrivateKey
        do { privateKey = try Certificate.PrivateKey(pemDocument: PEMDocument(type: block.type, derBytes: block.der)) } catch {
            throw .unsupportedKey("the \(block.type) block does not parse as a key: \(error)")
        }
        _ = try IdentityRecord.algorithm(of: privateKey.publicKey)
        return privateKey
    }

    /// An identity from a PEM private key and a PEM chain (the key may also be in the chain's
    /// file). The certificate whose key is the private key's becomes the leaf (first); the others
    /// follow in file order.
    /// - Throws: as ``privateKey(pem:)`` and ``certificates(pem:)``;
    ///   ``IdentityError/keyDoesNotMatchCertificate(_:)`` when no certificate is the key's.
    /// - Parameters:
    ///   - keyPEM: The private key's PEM text (wiped by the caller).
    ///   - chainPEM: The certificates' PEM text.
    /// - Returns: The identity: the key and its chain, leaf first.
    public static func identity(keyPEM: SecretBytes, chainPEM: some ContiguousBytes) throws(IdentityError) -> TLSIdentity {
        let key = try privateKey(pem: keyPEM)
        let chain = try certificates(pem: chainPEM)
        return try identity(key: key, certificates: chain)
    }

    /// Puts the key's certificate first, and builds the identity.
    static func identity(key: Certificate.PrivateKey, certificates: [Certificate]) throws(IdentityError) -> TLSIdentity {
        guard let leafIndex = certificates.firstIndex(where: { $0.publicKey == key.publicKey }) else {
            let subject = certificates.first.map { "\($0.subject)" } ?? "none"
            throw .keyDoesNotMatchCertificate("no certificate of the chain is the key's (first certificate: \(subject))")
        }
        var chain = certificates
        let leaf = chain.remove(at: leafIndex)
        chain.insert(leaf, at: 0)
        guard chain.count <= IdentityRecord.maxCertificates else {
            throw .invalidCertificate("\(chain.count) certificates; at most \(IdentityRecord.maxCertificates) make one chain")
        }
        guard let identity = TLSIdentity(chain: chain, privateKey: key) else {
            throw .keyDoesNotMatchCertificate("the key is not the leaf's")
        }
        return identity
    }

    /// An identity from a PKCS#12 file (`.p12`, `.pfx`), as `openssl pkcs12 -export` writes it.
    ///
    /// BoringSSL (the copy inside swift-nio-ssl) checks the file's MAC and decrypts it. Unlike
    /// `NIOSSLPKCS12Bundle`, which stops the process when a well-formed file has no private key
    /// or no certificate for it, such a file is an error here.
    /// - Parameters:
    ///   - bytes: The file.
    ///   - password: The export password; nil or empty for a file without one.
    /// - Throws: ``IdentityError/wrongPassword``, ``IdentityError/invalidPKCS12(_:)``,
    ///   ``IdentityError/unsupportedKey(_:)``.
    /// - Returns: The identity: the file's key and its chain, leaf first.
    public static func identity(pkcs12 bytes: some ContiguousBytes, password: SecretBytes?) throws(IdentityError) -> TLSIdentity {
        var parsed = try withBytes(bytes) { buffer throws(IdentityError) in try parsePKCS12(buffer, password: password) }
        defer { IdentityRecord.zero(&parsed.key) }
        let key = try IdentityRecord.privateKey(pkcs8: parsed.key)
        var certificates: [Certificate] = []
        for der in parsed.certificates {
            do { certificates.append(try Certificate(derEncoded: der)) } catch {
                throw .invalidPKCS12("a certificate in it does not parse: \(error)")
            }
        }
        return try identity(key: key, certificates: certificates)
    }

    private static func withBytes<Result>(_ bytes: some ContiguousBytes,
                                          _ body: (UnsafeRawBufferPointer) throws(IdentityError) -> Result) throws(IdentityError) -> Result {
        let result: Swift.Result<Result, IdentityError> = bytes.withUnsafeBytes { buffer in
            guard buffer.count <= maxInputLength else { return .failure(.invalidPEM("the input is larger than \(maxInputLength) bytes")) }
            do throws(IdentityError) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The private key (PKCS#8 DER, to be zeroed by the caller) and the certificates (the key's
    /// first) of a PKCS#12 file.
    private static func parsePKCS12(_ bytes: UnsafeRawBufferPointer, password: SecretBytes?) throws(IdentityError) -> (key: [UInt8], certificates: [[UInt8]]) {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let base = bytes.baseAddress, bytes.count > 0 else { throw .invalidPKCS12("the file is empty") }
        try PKCS12Limits.check(bytes)
        var cursor: UnsafePointer<UInt8>? = base.assumingMemoryBound(to: UInt8.self)
        guard let p12 = d2i_PKCS12(nil, &cursor, bytes.count) else { throw .invalidPKCS12("the bytes are not PKCS#12 (DER)") }
        defer { PKCS12_free(p12) }

        // The password as a NUL-terminated C string, zeroed after use.
        var cPassword = [CChar](repeating: 0, count: (password?.count ?? 0) + 1)
        defer { cPassword.withUnsafeMutableBytes { if let base = $0.baseAddress { zeroMemory(base, $0.count) } } }
        if let password {
            let hasNUL = password.withUnsafeBytes { source in
                for index in 0..<source.count { cPassword[index] = CChar(bitPattern: source[index]) }
                return source.contains(0)
            }
            guard !hasNUL else { throw .wrongPassword }
        }

        var key: OpaquePointer?
        var leaf: OpaquePointer?
        var others: OpaquePointer?
        let status = cPassword.withUnsafeBufferPointer { buffer in
            PKCS12_parse(p12, (password?.isEmpty ?? true) ? nil : buffer.baseAddress, &key, &leaf, &others)
        }
        defer {
            if let key { EVP_PKEY_free(key) }
            if let leaf { X509_free(leaf) }
            if let others {
                for index in 0..<OPENSSL_sk_num(others) {
                    if let certificate = OPENSSL_sk_value(others, index) { X509_free(OpaquePointer(certificate)) }
                }
                OPENSSL_sk_free(others)
            }
        }
        guard status == 1 else {
            let code = ERR_peek_last_error()
            // ERR_GET_LIB and ERR_GET_REASON are C macros: library in bits 24-31, reason in bits 0-11.
            if Int((code >> 24) & 0xFF) == Int(ERR_LIB_PKCS8), Int(code & 0xFFF) == Int(PKCS8_R_INCORRECT_PASSWORD) { throw .wrongPassword }
            throw .invalidPKCS12(errorText(code))
        }
        guard let key else { throw .invalidPKCS12("it holds no private key") }
        guard let leaf else {
            throw .keyDoesNotMatchCertificate("the PKCS#12 file holds no certificate for its private key")
        }

        var cbb = CBB()
        guard CBB_init(&cbb, 256) == 1 else { throw .invalidPKCS12("out of memory") }
        guard EVP_marshal_private_key(&cbb, key) == 1 else {
            CBB_cleanup(&cbb)
            throw .unsupportedKey("the key of the PKCS#12 file cannot be written as PKCS#8")
        }
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        guard CBB_finish(&cbb, &output, &length) == 1, let output else {
            CBB_cleanup(&cbb)
            throw .invalidPKCS12("out of memory")
        }
        let keyDER = Array(UnsafeBufferPointer(start: output, count: length))
        OPENSSL_cleanse(output, length)
        OPENSSL_free(output)

        var certificates = [try der(leaf)]
        if let others {
            for index in 0..<OPENSSL_sk_num(others) {
                if let certificate = OPENSSL_sk_value(others, index) { certificates.append(try der(OpaquePointer(certificate))) }
            }
        }
        return (keyDER, certificates)
    }

    private static func der(_ certificate: OpaquePointer) throws(IdentityError) -> [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(certificate, &output)
        guard length > 0, let output else { throw .invalidPKCS12("a certificate in it cannot be encoded") }
        defer { OPENSSL_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }

    private static func errorText(_ code: UInt32) -> String {
        guard code != 0 else { return "it does not parse" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "it does not parse (\(text))"
    }
}
