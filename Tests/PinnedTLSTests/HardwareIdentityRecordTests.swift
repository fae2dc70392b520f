import Cipher
import Crypto
import Foundation
import HardwareKeys
import Keychain
import Testing
import X509
@testable import PinnedTLS

/// A software key posing as a key in hardware: it signs with a P-256 key held here, under a
/// location of the test's choosing.
final class SoftwareStandInKey: HardwareSigningKey {
    let key = P256.Signing.PrivateKey()
    let location: String
    init(location: String) { self.location = location }
    var publicKey: Certificate.PublicKey { Certificate.PublicKey(key.publicKey) }
    var signatureSchemes: [HardwareSignatureScheme] { [.ecdsaSHA256] }
    func signature(for message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        do { return Array(try key.signature(for: message).derRepresentation) } catch { throw .unsupportedKey("\(error)") }
    }
    var lastFailure: HardwareKeyError? { nil }
}

/// Version-2 identity records (the key stays in hardware; the record says where), through the
/// store: round trip, hostile bytes, a missing opener, a swapped key.
@Suite("Identity records of keys in hardware")
struct HardwareIdentityRecordTests {
    @Test("a hardware authority's record: version 2, the location and the chain; loaded only with an opener, and only for the certificate's key")
    func roundTripAndRefusals() throws {
        let scratch = try IdentityScratch()
        let store = IdentityStore(keychain: try scratch.keychain())
        let key = SoftwareStandInKey(location: "pkcs11:token=t;object=root")
        let authority = try CertificateAuthority.createRoot(commonName: "Stand-in CA", hardwareKey: key)
        #expect(authority.certificate.publicKey.isValidSignature(authority.certificate.signature, for: authority.certificate))
        try authority.save(to: store, label: "ca", accessibility: .always)

        let record = try IdentityRecord.encode(location: key.location, certificates: [authority.certificate])
        let bytes = record.withUnsafeBytes { Array($0) }
        #expect(Array(bytes[0..<4]) == [3, 2, 0, UInt8(key.location.utf8.count)])
        #expect(Array(bytes[4..<(4 + key.location.utf8.count)]) == Array(key.location.utf8))

        #expect(identityError { _ = try store.identity(label: "ca") } == .hardwareKeyRequired(label: "ca", location: key.location))
        var asked: [String] = []
        let loaded = try CertificateAuthority.load(from: store, label: "ca") { (location: String) throws(HardwareKeyError) in
            asked.append(location)
            return key
        }
        #expect(asked == [key.location])
        #expect(loaded.hardwareKey === key)
        let leaf = try loaded.issue(publicKey: Certificate.PublicKey(P256.Signing.PrivateKey().publicKey), names: ["a.example"])
        #expect(authority.hasIssued(leaf))

        // Another key answering for the location: refused before anything is signed.
        let impostor = SoftwareStandInKey(location: key.location)
        #expect(identityError {
            _ = try CertificateAuthority.load(from: store, label: "ca") { (_: String) throws(HardwareKeyError) in impostor }
        } == .hardwareKeyMismatch(label: "ca", location: key.location))
        // The opener's failure is the hardware's, typed.
        #expect(identityError {
            _ = try CertificateAuthority.load(from: store, label: "ca") { (_: String) throws(HardwareKeyError) -> any HardwareSigningKey in
                throw .pkcs11(function: "C_Initialize", returnValue: 5)
            }
        } == .hardwareKey(.pkcs11(function: "C_Initialize", returnValue: 5)))

        // Hostile version-2 bytes: every truncation, a trailing byte, a location with a control character.
        let keychain = store.keychain
        func plant(_ bytes: [UInt8]) throws {
            try keychain.addOrUpdate(SecretBytes(copying: bytes), for: .generic(service: IdentityItemKind.identity.service, account: "planted"),
                                     accessibility: .always)
        }
        func corrupted() -> Bool {
            guard case .corruptedRecord(label: "planted", _)? = identityError({ _ = try store.identity(label: "planted") { (_: String) throws(HardwareKeyError) in key } })
            else { return false }
            return true
        }
        for length in 0..<bytes.count {
            try plant(Array(bytes[0..<length]))
            #expect(corrupted(), "cut at \(length)")
        }
        try plant(bytes + [0])
        #expect(corrupted())
        var control = bytes
        control[5] = 0x0A
        try plant(control)
        #expect(corrupted())
        #expect(throws: IdentityError.self) { _ = try IdentityRecord.encode(location: "", certificates: [authority.certificate]) }
        // A pkcs11: location naming a module or a PIN source is not recorded.
        let withModule = SoftwareStandInKey(location: "pkcs11:token=t;object=root?module-path=/tmp/evil.so")
        let identity = try #require(TLSIdentity(chain: [authority.certificate], tokenKey: withModule)
            ?? TLSIdentity(chain: [try CertificateAuthority.createRoot(commonName: "M", hardwareKey: withModule).certificate],
                           tokenKey: withModule))
        guard case .unsupportedKey? = identityError({ try store.storeIdentity(identity, label: "module", accessibility: .always) }) else {
            Issue.record("a URI with module-path was recorded")
            return
        }
    }
}
