import Cipher
import Crypto
import CryptoExtras
import Foundation
import HardwareKeys
import SwiftASN1
import X509

/// The byte encoding of the secret of a key, certificate or identity item (docs/FORMATS.md,
/// section "TLS identity records"). Version 1:
///
/// ```
/// kind u8 (1 key, 2 certificates, 3 identity) | version u8 (1)
/// key (kinds 1, 3):          algorithm u8 (1 P-256, 2 P-384, 3 RSA) | length u32 | PKCS#8 PrivateKeyInfo DER
/// certificates (kinds 2, 3): count u16 (1...16) | count × (length u32 | certificate DER)
/// ```
///
/// Version 2, an identity whose key stays in a PKCS #11 token: the record says where the key is
/// instead of holding it.
///
/// ```
/// kind u8 (3) | version u8 (2) | location length u16 (1...2048) | location UTF-8 (a pkcs11: URI
/// without module or PIN source) | certificates as in version 1
/// ```
///
/// Version 3 (written for keys that stay in the TPM; version 1 is still written for software
/// keys and both are read) puts the key's location before the key field:
///
/// ```
/// key (kinds 1, 3): location u8 | …
///   location 1 (software): algorithm u8 | length u32 | PKCS#8 PrivateKeyInfo DER   (as version 1)
///   location 2 (TPM):      algorithm u8 (1 P-256) | pcr count u8 (0...24) | count × pcr u8 (0...23, ascending)
///                          | length u32 | TPM2B_PUBLIC | length u32 | TPM2B_PRIVATE
/// ```
///
/// Integers are big-endian; nothing may follow the last field.
enum IdentityRecord {
    static let version: UInt8 = 1
    /// The version of a record whose key stays in hardware.
    static let hardwareVersion: UInt8 = 2
    static let maxLocationLength = 2048
    /// The version of a record whose key stays in the TPM (its blobs are recorded).
    static let tpmVersion: UInt8 = 3
    static let maxBlobLength = 4096
    static let maxKeyLength = 16 * 1024
    static let maxCertificateLength = 64 * 1024
    static let maxCertificates = 16

    enum Algorithm: UInt8 {
        case p256 = 1, p384 = 2, rsa = 3
    }

    /// The algorithm of a public key the store accepts.
    static func algorithm(of publicKey: Certificate.PublicKey) throws(IdentityError) -> Algorithm {
        if P256.Signing.PublicKey(publicKey) != nil { return .p256 }
        if P384.Signing.PublicKey(publicKey) != nil { return .p384 }
        if let rsa = _RSA.Signing.PublicKey(publicKey) {
            guard rsa.keySizeInBits >= 2048 else { throw .unsupportedKey("an RSA key of \(rsa.keySizeInBits) bits") }
            return .rsa
        }
        if P521.Signing.PublicKey(publicKey) != nil { throw .unsupportedKey("a P-521 key") }
        throw .unsupportedKey("a key of type \(publicKey)")
    }

    /// The PKCS#8 DER of a private key. The caller zeroes the array after use. (swift-crypto
    /// and swift-certificates serialize through PEM strings of their own, which cannot be wiped.)
    static func pkcs8(_ key: Certificate.PrivateKey) throws(IdentityError) -> [UInt8] {
        _ = try algorithm(of: key.publicKey)
        do {
            let document = try key.serializeAsPEM()
            switch document.discriminator {
            case "PRIVATE KEY":
                return document.derBytes
            case "RSA PRIVATE KEY":
                return Array(try _RSA.Signing.PrivateKey(derRepresentation: document.derBytes).pkcs8DERRepresentation)
            default:
                throw IdentityError.unsupportedKey("a key serialized as \(document.discriminator)")
            }
        } catch let error as IdentityError {
            throw error
        } catch {
            throw .unsupportedKey("the key does not serialize: \(error)")
        }
    }

    /// A private key from PKCS#8 DER, checked to be of an accepted type.
    static func privateKey(pkcs8 der: [UInt8]) throws(IdentityError) -> Certificate.PrivateKey {
        let key: Certificate.PrivateKey
        do { key = try Certificate.PrivateKey(derBytes: der) } catch {
            throw .unsupportedKey("the PKCS#8 key does not parse: \(error)")
        }
        _ = try algorithm(of: key.publicKey)
        return key
    }

    static func der(_ certificate: Certificate) throws(IdentityError) -> [UInt8] {
        var serializer = DER.Serializer()
        do { try serializer.serialize(certificate) } catch { throw .invalidCertificate("it does not serialize: \(error)") }
        return serializer.serializedBytes
    }

    // MARK: Encoding

    static func encode(key: Certificate.PrivateKey?, certificates: [Certificate]) throws(IdentityError) -> SecretBytes {
        precondition(key != nil || !certificates.isEmpty)
        let kind: UInt8 = key == nil ? 2 : (certificates.isEmpty ? 1 : 3)
        guard certificates.count <= maxCertificates else {
            throw .invalidCertificate("\(certificates.count) certificates; at most \(maxCertificates) are stored under one label")
        }
        var keyBytes: [UInt8] = []
        defer { zero(&keyBytes) }
        var algorithm = Algorithm.p256
        if let key {
            algorithm = try Self.algorithm(of: key.publicKey)
            keyBytes = try pkcs8(key)
        }
        var certificateBytes: [[UInt8]] = []
        for certificate in certificates {
            let der = try der(certificate)
            guard der.count <= maxCertificateLength else { throw .invalidCertificate("a certificate of \(der.count) bytes") }
            certificateBytes.append(der)
        }
        var total = 2
        if key != nil { total += 1 + 4 + keyBytes.count }
        if !certificates.isEmpty { total += 2 + certificateBytes.reduce(0) { $0 + 4 + $1.count } }
        return SecretBytes(count: total) { out in
            var offset = 0
            func put(_ byte: UInt8) { out[offset] = byte; offset += 1 }
            func put32(_ value: Int) { for shift in [24, 16, 8, 0] { put(UInt8(truncatingIfNeeded: value >> shift)) } }
            func put(_ bytes: [UInt8]) {
                for byte in bytes { put(byte) }
            }
            put(kind)
            put(version)
            if key != nil {
                put(algorithm.rawValue)
                put32(keyBytes.count)
                put(keyBytes)
            }
            if !certificates.isEmpty {
                put(UInt8(certificateBytes.count >> 8))
                put(UInt8(certificateBytes.count & 0xFF))
                for der in certificateBytes {
                    put32(der.count)
                    put(der)
                }
            }
        }
    }

    /// A version-2 identity record: where the hardware key is, and the chain.
    static func encode(location: String, certificates: [Certificate]) throws(IdentityError) -> SecretBytes {
        let locationBytes = Array(location.utf8)
        guard checkLocation(locationBytes) != nil else {
            throw .unsupportedKey("the hardware key's location (\(locationBytes.count) bytes) cannot be recorded")
        }
        guard !certificates.isEmpty, certificates.count <= maxCertificates else {
            throw .invalidCertificate("\(certificates.count) certificates; 1 to \(maxCertificates) are stored under one label")
        }
        var certificateBytes: [[UInt8]] = []
        for certificate in certificates {
            let der = try der(certificate)
            guard der.count <= maxCertificateLength else { throw .invalidCertificate("a certificate of \(der.count) bytes") }
            certificateBytes.append(der)
        }
        var out: [UInt8] = [3, hardwareVersion, UInt8(locationBytes.count >> 8), UInt8(locationBytes.count & 0xFF)]
        out += locationBytes
        out += [UInt8(certificateBytes.count >> 8), UInt8(certificateBytes.count & 0xFF)]
        for der in certificateBytes {
            for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: der.count >> shift)) }
            out += der
        }
        return SecretBytes(copying: out)
    }

    /// A location that can be recorded: 1 to 2048 bytes of UTF-8 without control characters.
    static func checkLocation(_ bytes: [UInt8]) -> String? {
        guard !bytes.isEmpty, bytes.count <= maxLocationLength, let text = String(validating: bytes, as: UTF8.self),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        return text
    }

    /// A version 3 identity record whose key stays in the TPM: its blobs and the chain.
    static func encodeTPM(_ blobs: TPM2PrivateKey.Blobs, certificates: [Certificate]) throws(IdentityError) -> SecretBytes {
        guard !certificates.isEmpty, certificates.count <= maxCertificates else {
            throw .invalidCertificate("\(certificates.count) certificates; 1 to \(maxCertificates) are stored under one label")
        }
        guard blobs.publicArea.count <= maxBlobLength, blobs.privateArea.count <= maxBlobLength, !blobs.publicArea.isEmpty,
              !blobs.privateArea.isEmpty, blobs.pcrs.count <= 24, blobs.pcrs.allSatisfy({ (0...23).contains($0) }) else {
            throw .unsupportedKey("TPM key blobs of unexpected sizes or PCRs")
        }
        var bytes: [UInt8] = [3, tpmVersion, 2, 1, UInt8(blobs.pcrs.count)] + blobs.pcrs.sorted().map { UInt8($0) }
        func put32(_ value: Int) { bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }
        put32(blobs.publicArea.count)
        bytes += blobs.publicArea
        put32(blobs.privateArea.count)
        bytes += blobs.privateArea
        bytes += [UInt8(certificates.count >> 8), UInt8(certificates.count & 0xFF)]
        for certificate in certificates {
            let der = try der(certificate)
            guard der.count <= maxCertificateLength else { throw .invalidCertificate("a certificate of \(der.count) bytes") }
            put32(der.count)
            bytes += der
        }
        return SecretBytes(copying: bytes)
    }

    // MARK: Decoding

    struct Decoded {
        var key: Certificate.PrivateKey?
        /// The key's blobs when it stays in the TPM (version 2, location 2).
        var tpmKey: TPM2PrivateKey.Blobs? = nil
        var certificates: [Certificate]
        /// Where the key is, for an identity whose key stays in hardware (version 2).
        var location: String? = nil
    }

    /// Parses a record of the expected kind (1 key, 2 certificates, 3 identity).
    static func decode(_ record: SecretBytes, expecting kind: IdentityItemKind, label: String) throws(IdentityError) -> Decoded {
        let expected: UInt8 = switch kind {
        case .privateKey: 1
        case .certificate: 2
        case .identity: 3
        }
        let result: Result<Decoded, IdentityError> = record.withUnsafeBytes { bytes in
            var reader = Reader(bytes: bytes)
            func fail(_ detail: String) -> Result<Decoded, IdentityError> { .failure(.corruptedRecord(label: label, detail: detail)) }
            guard let recordKind = reader.byte(), let recordVersion = reader.byte() else { return fail("the record is truncated") }
            guard recordKind == expected else { return fail("a record of kind \(recordKind) where kind \(expected) was expected") }
            let hardware = recordVersion == hardwareVersion && expected == 3
            guard recordVersion == version || hardware || recordVersion == tpmVersion else {
                return fail("record version \(recordVersion) is not supported (this version reads versions \(version) and \(tpmVersion), "
                    + "and for identities \(hardwareVersion))")
            }
            var decoded = Decoded(key: nil, certificates: [])
            var location: UInt8 = 1
            if expected != 2, recordVersion == tpmVersion {
                guard let value = reader.byte(), value == 1 || value == 2 else { return fail("unknown key location") }
                location = value
            }
            if hardware {
                guard let high = reader.byte(), let low = reader.byte() else { return fail("the location length is truncated") }
                let length = Int(high) << 8 | Int(low)
                guard let raw = reader.bytes(length), let location = checkLocation(raw) else {
                    return fail("the hardware key's location is truncated, too long or not text")
                }
                decoded.location = location
            } else if location == 2 {
                guard reader.byte() == 1 else { return fail("unknown TPM key algorithm") }
                guard let count = reader.byte(), count <= 24 else { return fail("the PCR count is truncated or too large") }
                var pcrs: [Int] = []
                for _ in 0..<count {
                    guard let pcr = reader.byte(), pcr <= 23, pcrs.last.map({ Int(pcr) > $0 }) ?? true else {
                        return fail("a PCR is truncated, out of range or out of order")
                    }
                    pcrs.append(Int(pcr))
                }
                guard let publicLength = reader.u32(), publicLength > 0, publicLength <= maxBlobLength,
                      let publicArea = reader.bytes(publicLength),
                      let privateLength = reader.u32(), privateLength > 0, privateLength <= maxBlobLength,
                      let privateArea = reader.bytes(privateLength) else {
                    return fail("the TPM key blobs are truncated or too long")
                }
                decoded.tpmKey = TPM2PrivateKey.Blobs(publicArea: publicArea, privateArea: privateArea, pcrs: pcrs)
            } else if expected != 2 {
                guard let rawAlgorithm = reader.byte(), let algorithm = Algorithm(rawValue: rawAlgorithm) else { return fail("unknown key algorithm") }
                guard let length = reader.u32(), length > 0, length <= maxKeyLength, var der = reader.bytes(length) else {
                    return fail("the key field is truncated or too long")
                }
                defer { zero(&der) }
                do {
                    let key = try privateKey(pkcs8: der)
                    guard try Self.algorithm(of: key.publicKey) == algorithm else { return fail("the key is not of the algorithm recorded") }
                    decoded.key = key
                } catch {
                    return fail("the key does not parse: \(error)")
                }
            }
            if expected != 1 {
                guard let high = reader.byte(), let low = reader.byte() else { return fail("the certificate count is truncated") }
                let count = Int(high) << 8 | Int(low)
                guard count >= 1, count <= maxCertificates else { return fail("\(count) certificates") }
                for _ in 0..<count {
                    guard let length = reader.u32(), length > 0, length <= maxCertificateLength, let der = reader.bytes(length) else {
                        return fail("a certificate field is truncated or too long")
                    }
                    do { decoded.certificates.append(try Certificate(derEncoded: der)) } catch {
                        return fail("a certificate does not parse: \(error)")
                    }
                }
            }
            guard reader.atEnd else { return fail("bytes follow the last field") }
            return .success(decoded)
        }
        let decoded = try result.get()
        if let key = decoded.key, let leaf = decoded.certificates.first, leaf.publicKey != key.publicKey {
            throw .corruptedRecord(label: label, detail: "the key is not the leaf certificate's key")
        }
        return decoded
    }

    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0
        var atEnd: Bool { offset == bytes.count }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func u32() -> Int? {
            guard bytes.count - offset >= 4 else { return nil }
            var value = 0
            for _ in 0..<4 { value = value << 8 | Int(bytes[offset]); offset += 1 }
            return value
        }

        mutating func bytes(_ count: Int) -> [UInt8]? {
            guard count >= 0, bytes.count - offset >= count else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
    }

    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            zeroMemory(base, buffer.count)
        }
    }
}

/// Zeroes memory. Not inlined, so the stores cannot be dropped as dead by the caller's optimizer.
@inline(never)
func zeroMemory(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
    let bytes = pointer.bindMemory(to: UInt8.self, capacity: count)
    for index in 0..<count { bytes[index] = 0 }
}

/// Runs `body` over the bytes of `secret`, keeping the error type.
func withSecretBytes<Result>(_ secret: SecretBytes,
                             _ body: (UnsafeRawBufferPointer) throws(IdentityError) -> Result) throws(IdentityError) -> Result {
    let result: Swift.Result<Result, IdentityError> = secret.withUnsafeBytes { buffer in
        do throws(IdentityError) { return .success(try body(buffer)) } catch { return .failure(error) }
    }
    return try result.get()
}

/// Runs `body` over the bytes of `bytes`, keeping the error type.
func withPlainBytes<Result>(_ bytes: some ContiguousBytes,
                            _ body: (UnsafeRawBufferPointer) throws(IdentityError) -> Result) throws(IdentityError) -> Result {
    let result: Swift.Result<Result, IdentityError> = bytes.withUnsafeBytes { buffer in
        do throws(IdentityError) { return .success(try body(buffer)) } catch { return .failure(error) }
    }
    return try result.get()
}
