import Cipher
import Crypto
import Foundation
import HardwareKeys
import Keychain
import PinnedTLS
import TestSupport
import Testing
import X509

/// A key that claims another key's public key under a location of its choosing: what a record
/// swapped in the data directory amounts to (the certificate of one key, the location of another).
final class RelabelledKey: HardwareSigningKey {
    let publicKey: Certificate.PublicKey
    let location: String
    init(publicKey: Certificate.PublicKey, location: String) {
        self.publicKey = publicKey
        self.location = location
    }
    var signatureSchemes: [HardwareSignatureScheme] { [.ecdsaSHA256] }
    func signature(for message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        throw .unsupportedKey("a relabelled key does not sign")
    }
    var lastFailure: HardwareKeyError? { nil }
}

/// The device certificate authority with its key in a PKCS #11 token (SoftHSM2), in process:
/// certificates and revocation lists signed through the token and checked by openssl, the
/// authority's record (where its key is) stored and loaded, a swapped record refused, a token
/// gone failing with the module's error and nothing stored.
@Suite("certificate authority with its key in a PKCS #11 token")
struct TokenAuthorityTests {
    static let openssl = ChildProcess.which("openssl")

    static func pem(_ certificates: [Certificate]) throws -> String {
        try certificates.map { try $0.serializeAsPEM().pemString + "\n" }.joined()
    }

    /// A keychain of its own (fixed master key) in `directory`.
    static func store(in directory: TemporaryDirectory) throws -> IdentityStore {
        IdentityStore(keychain: try Keychain(directory: directory.path("keychain"),
                                             keySource: StaticKeySource(masterKey: SecretBytes(copying: [UInt8](repeating: 7, count: 32)))))
    }

    static func opener(_ pinFile: String) -> (String) throws(HardwareKeyError) -> any HardwareSigningKey {
        { (location: String) throws(HardwareKeyError) -> any HardwareSigningKey in
            try PKCS11PrivateKey(uri: PKCS11URI(location), modulePath: SoftHSM.module, pin: .file(pinFile))
        }
    }

    @Test("a root self-signed in the token, a leaf and a revocation list signed there: openssl verifies all three",
          arguments: [("ca256", Certificate.SignatureAlgorithm.ecdsaWithSHA256), ("ca384", .ecdsaWithSHA384),
                      ("carsa", .sha256WithRSAEncryption)])
    func signedThroughTheToken(token: String, algorithm: Certificate.SignatureAlgorithm) throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let openssl = try #require(Self.openssl, "openssl is needed")
        let key = try InProcessTokens.open("pkcs11:token=\(token);object=root")

        // The adapter: the algorithms swift-certificates names, and no serialization.
        let adapter = HardwareCertificateKey(key)
        #expect(adapter.defaultSignatureAlgorithm == algorithm)
        #expect(adapter.supportedSignatureAlgorithms.contains(algorithm))
        let wrapped = HardwareCertificateKey.certificatePrivateKey(key)
        #expect(wrapped.publicKey == key.publicKey)
        #expect(throws: HardwareKeyError.self) { _ = try wrapped.serializeAsPEM() }
        #expect(throws: HardwareKeyError.self) { _ = try adapter.serializeAsPEM() }
        if token != "carsa" {
            #expect(throws: HardwareKeyError.self) {
                _ = try adapter.signSynchronously(bytes: [1, 2, 3], signatureAlgorithm: .sha256WithRSAEncryption)
            }
        }

        let authority = try CertificateAuthority.createRoot(commonName: "Token CA \(token)", hardwareKey: key)
        #expect(authority.certificate.signatureAlgorithm == algorithm)
        #expect(authority.hardwareKey === key)
        #expect(authority.privateKey.publicKey == key.publicKey)
        let leafKey = P256.Signing.PrivateKey()
        let leaf = try authority.issue(publicKey: Certificate.PublicKey(leafKey.publicKey), names: ["device-1.example", "10.0.0.7"],
                                       usage: [.server])
        #expect(authority.hasIssued(leaf))
        let list = try authority.signRevocationList(entries: [.init(serialNumber: leaf.serialNumber, revocationDate: Date())], number: 7)
        #expect(list.isIssued(by: authority.certificate))

        let directory = try TemporaryDirectory(prefix: "sf-token-ca")
        let caFile = try directory.file("ca.pem", try Self.pem([authority.certificate]))
        let leafFile = try directory.file("leaf.pem", try Self.pem([leaf]))
        let crlFile = try directory.file("crl.pem", list.pemEncoded)
        let verified = try ChildProcess.run(openssl, ["verify", "-CAfile", caFile, leafFile])
        #expect(verified.status == 0, "\(verified.errorText)")
        #expect(verified.text == "\(leafFile): OK\n")
        let crl = try ChildProcess.run(openssl, ["crl", "-in", crlFile, "-CAfile", caFile, "-verify", "-noout"])
        #expect(crl.status == 0, "\(crl.errorText)")
        #expect((crl.text + crl.errorText).contains("verify OK"))
        // The list takes effect: the leaf is revoked for openssl.
        let checked = try ChildProcess.run(openssl, ["verify", "-crl_check", "-CAfile", caFile, "-CRLfile", crlFile, leafFile])
        #expect(checked.status != 0)
        #expect(checked.text.contains("certificate revoked") || checked.errorText.contains("certificate revoked"),
                "\(checked.text) \(checked.errorText)")
        _ = fixture
    }

    @Test("the record says where the key is; loading checks the token key against the root; a swapped record is refused")
    func storedAndLoaded() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let directory = try TemporaryDirectory(prefix: "sf-token-ca-store")
        let store = try Self.store(in: directory)
        let key = try InProcessTokens.open("pkcs11:token=castore;object=root")
        let authority = try CertificateAuthority.createRoot(commonName: "Stored token CA", hardwareKey: key)
        try authority.save(to: store, label: "ca", accessibility: .always)
        // A software authority beside it: version-1 records are still written and read.
        let software = try CertificateAuthority.createRoot(commonName: "Software CA")
        try software.save(to: store, label: "soft", accessibility: .always)
        try store.flush()

        #expect(try CertificateAuthority.load(from: store, label: "soft").hardwareKey == nil)
        #expect(throws: IdentityError.hardwareKeyRequired(label: "ca", location: "pkcs11:token=castore;object=root")) {
            _ = try CertificateAuthority.load(from: store, label: "ca")
        }
        #expect(throws: IdentityError.hardwareKeyRequired(label: "ca", location: "pkcs11:token=castore;object=root")) {
            _ = try store.identity(label: "ca")
        }
        let loaded = try CertificateAuthority.load(from: store, label: "ca", openingHardwareKey: Self.opener(fixture.pinFile))
        #expect(loaded.certificate == authority.certificate)
        #expect(loaded.hardwareKey?.location == "pkcs11:token=castore;object=root")
        let leaf = try loaded.issue(publicKey: Certificate.PublicKey(P256.Signing.PrivateKey().publicKey), names: ["leaf.example"])
        #expect(authority.hasIssued(leaf))
        let (list, added) = try loaded.revoke(leaf, in: store, label: "ca")
        #expect(added && list.number == 1 && list.entries.count == 1)

        // The record swapped: the root's certificate with the location of another key of the token.
        let other = "pkcs11:token=castore;object=other"
        let swapped = try #require(TLSIdentity(chain: [authority.certificate],
                                               tokenKey: RelabelledKey(publicKey: authority.certificate.publicKey, location: other)))
        try store.storeIdentity(swapped, label: "ca", accessibility: .always, replace: true)
        try store.flush()
        #expect(throws: IdentityError.hardwareKeyMismatch(label: "ca", location: other)) {
            _ = try CertificateAuthority.load(from: store, label: "ca", openingHardwareKey: Self.opener(fixture.pinFile))
        }
        // The other key itself refuses to act for the root.
        let otherKey = try InProcessTokens.open(other)
        #expect(throws: IdentityError.self) { _ = try CertificateAuthority(certificate: authority.certificate, hardwareKey: otherKey) }
        // A record naming a module or a PIN source is a usage error for the command line
        // (HardwareKeyOptions); here the opener is the caller's, so nothing is loaded from it.
        #expect(try store.certificates(label: "ca") == [authority.certificate])
    }

    @Test("the token gone: issuing and revoking fail with the module's error; the stored revocation list is unchanged")
    func tokenGone() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let directory = try TemporaryDirectory(prefix: "sf-token-ca-gone")
        let store = try Self.store(in: directory)
        let key = try InProcessTokens.open("pkcs11:token=cagone;object=root")
        let authority = try CertificateAuthority.createRoot(commonName: "Vanishing CA", hardwareKey: key)
        try authority.save(to: store, label: "ca", accessibility: .always)
        let first = try authority.issue(publicKey: Certificate.PublicKey(P256.Signing.PrivateKey().publicKey), names: ["one.example"])
        try authority.revoke(first, in: store, label: "ca")
        let before = try #require(try authority.storedRevocationList(in: store, label: "ca"))
        let second = try authority.issue(publicKey: Certificate.PublicKey(P256.Signing.PrivateKey().publicKey), names: ["two.example"])

        try FileManager.default.removeItem(atPath: try #require(fixture.directories["cagone"]))
        var issueError: IdentityError?
        for _ in 0..<3 {
            do {
                _ = try authority.issue(publicKey: Certificate.PublicKey(P256.Signing.PrivateKey().publicKey), names: ["three.example"])
            } catch {
                issueError = error
                break
            }
        }
        let error = try #require(issueError, "an authority whose token is gone still signed")
        guard case .hardwareKey(let cause) = error, let name = cause.returnValueName else {
            Issue.record("not the module's error: \(error)")
            return
        }
        #expect(name.hasPrefix("CKR_"))
        #expect("\(error)".contains(name))
        #expect(throws: IdentityError.self) { try authority.revoke(second, in: store, label: "ca") }
        let after = try #require(try authority.storedRevocationList(in: store, label: "ca"))
        #expect(after.derEncoded == before.derEncoded)
        #expect(throws: IdentityError.self) {
            _ = try CertificateAuthority.load(from: store, label: "ca", openingHardwareKey: Self.opener(fixture.pinFile))
        }
    }
}
