import Cipher
import Crypto
import Foundation
import Testing
import X509
@testable import PinnedTLS

/// The byte layout of TLS identity records (docs/FORMATS.md, "TLS identity records").
@Suite("Identity records")
struct IdentityRecordVectorTests {
    @Test("Known answer: a P-256 key record, version 1")
    func keyRecordVector() throws {
        let scalar = (1...32).map { UInt8($0) }
        let key = Certificate.PrivateKey(try P256.Signing.PrivateKey(rawRepresentation: scalar))
        let record = try IdentityRecord.encode(key: key, certificates: [])
        let bytes = record.withUnsafeBytes { Array($0) }
        let expectedPrefix: [UInt8] = [0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x8A]
        #expect(Array(bytes.prefix(7)) == expectedPrefix)
        #expect(bytes.count == 7 + 0x8A)
        // PKCS#8: version 0, id-ecPublicKey with prime256v1, then the SEC 1 key holding the scalar.
        let pkcs8Head = "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420"
        #expect(Encoding.hex(bytes[7..<(7 + pkcs8Head.count / 2)]) == pkcs8Head)
        #expect(Array(bytes[(7 + pkcs8Head.count / 2)..<(7 + pkcs8Head.count / 2 + 32)]) == scalar)
        #expect(Encoding.hex(SHA256.hash(data: bytes)) == IdentityRecordVectorTests.keyRecordSHA256)
        let decoded = try IdentityRecord.decode(record, expecting: .privateKey, label: "v")
        #expect(decoded.key == key)
    }

    // Computed independently with Python's cryptography package (OpenSSL): PKCS#8 of the same key, behind 01 01 01 0000008a.
    static let keyRecordSHA256 = "f31786db3f7521998c12d0212514eb1be3a0db3cc7ee0a46c657cf2eb16db3a6"

    @Test("A certificates record: count, then length and DER of each")
    func certificatesRecordLayout() throws {
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        let der = try IdentityRecord.der(authority.certificate)
        let record = try IdentityRecord.encode(key: nil, certificates: [authority.certificate, authority.certificate])
        let bytes = record.withUnsafeBytes { Array($0) }
        let length = [UInt8(der.count >> 24 & 0xFF), UInt8(der.count >> 16 & 0xFF), UInt8(der.count >> 8 & 0xFF), UInt8(der.count & 0xFF)]
        #expect(bytes == [0x02, 0x01, 0x00, 0x02] + length + der + length + der)
        #expect(try IdentityRecord.decode(record, expecting: .certificate, label: "c").certificates == [authority.certificate, authority.certificate])
    }
}
