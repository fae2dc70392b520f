import Cipher
import Crypto
import CryptoExtras
import Foundation
import SwiftASN1
import Testing
import X509
@testable import PinnedTLS

/// The certificate authority: what it issues, checked by swift-certificates and by the real openssl.
@Suite("Certificate authority")
struct AuthorityTests {
    @Test("A root is self-signed, CA:true pathlen 0, keyCertSign+cRLSign, 10 years, 20-byte positive serial, SKI")
    func rootShape() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let authority = try CertificateAuthority.createRoot(commonName: "Devices CA", organization: "Example", now: now)
        let root = authority.certificate
        #expect("\(root.subject)" == "CN=Devices CA,O=Example")
        #expect(root.issuer == root.subject)
        #expect(root.publicKey.isValidSignature(root.signature, for: root))
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(try root.extensions.keyUsage == KeyUsage(keyCertSign: true, cRLSign: true))
        #expect(root.extensions.first { $0.oid == .X509ExtensionID.basicConstraints }?.critical == true)
        #expect(try root.extensions.subjectKeyIdentifier == SubjectKeyIdentifier(hash: root.publicKey))
        #expect(root.serialNumber.bytes.count == 20 && root.serialNumber.bytes[0] & 0x80 == 0)
        #expect(root.notValidBefore == now - CertificateAuthority.backdating)
        #expect(root.notValidAfter == now + CertificateAuthority.defaultRootValidity)
        #expect(P256.Signing.PublicKey(root.publicKey) != nil)
        #expect(root.signatureAlgorithm == .ecdsaWithSHA256)
        // Two roots never share a serial number.
        #expect(try CertificateAuthority.createRoot(commonName: "Devices CA").certificate.serialNumber != root.serialNumber)
    }

    @Test("A leaf: CA:false, digitalSignature, EKU, SAN from the names, AKI = root's SKI, 397 days, never past the root")
    func leafShape() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let authority = try CertificateAuthority.createRoot(commonName: "CA", now: now)
        let identity = try authority.issue(names: ["Device-1.Example.com", "10.0.0.5", "::1"], usage: .server, now: now)
        let leaf = identity.leaf
        #expect(identity.chain == [leaf, authority.certificate])
        #expect("\(leaf.subject)" == "CN=Device-1.Example.com")
        #expect(leaf.issuer == authority.certificate.subject)
        #expect(authority.certificate.publicKey.isValidSignature(leaf.signature, for: leaf))
        #expect(try leaf.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try leaf.extensions.keyUsage == KeyUsage(digitalSignature: true))
        #expect(try leaf.extensions.extendedKeyUsage == ExtendedKeyUsage([.serverAuth]))
        #expect(try leaf.extensions.subjectAlternativeNames == SubjectAlternativeNames([
            .dnsName("device-1.example.com"),
            .ipAddress(ASN1OctetString(contentBytes: [10, 0, 0, 5])),
            .ipAddress(ASN1OctetString(contentBytes: ArraySlice([UInt8](repeating: 0, count: 15) + [1]))),
        ]))
        #expect(try leaf.extensions.authorityKeyIdentifier?.keyIdentifier == authority.certificate.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(leaf.notValidAfter == now + CertificateAuthority.defaultLeafValidity)
        #expect(leaf.notValidBefore == now - CertificateAuthority.backdating)
        #expect(leaf.serialNumber.bytes.count == 20)

        // Near the root's end, a leaf ends with the root.
        let late = authority.certificate.notValidAfter - 86_400
        let short = try authority.issue(names: ["late.example"], now: late)
        #expect(short.leaf.notValidAfter == authority.certificate.notValidAfter)
        let expired = identityError { _ = try authority.issue(names: ["x.example"], now: authority.certificate.notValidAfter + 1) }
        guard case .notAnAuthority? = expired else { Issue.record("an expired root issued: \(String(describing: expired))"); return }
    }

    @Test("Names that are neither DNS names nor IP addresses are refused")
    func invalidNames() throws {
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        for bad in ["", "-bad.example", "bad-.example", "sp ace.example", "a..b", "ünï.example", String(repeating: "a", count: 64) + ".example",
                    "x.example/", "1.2.3.4.5:80"] {
            guard case .invalidName? = identityError({ _ = try authority.issue(names: [bad]) }) else {
                Issue.record("\"\(bad)\" was accepted as a name"); continue
            }
        }
        guard case .invalidName? = identityError({ _ = try authority.issue(names: []) }) else { Issue.record("no names accepted"); return }
        #expect(try authority.issue(names: ["*.devices.example"]).leaf.extensions.subjectAlternativeNames == SubjectAlternativeNames([.dnsName("*.devices.example")]))
    }

    @Test("A certificate that is not CA:true, or a key not its own, cannot be an authority")
    func notAnAuthority() throws {
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        let leaf = try authority.issue(names: ["leaf.example"])
        let leafKey = try #require(leaf.privateKey)
        guard case .notAnAuthority? = identityError({ _ = try CertificateAuthority(certificate: leaf.leaf, privateKey: leafKey) }) else {
            Issue.record("a leaf was accepted as an authority"); return
        }
        guard case .notAnAuthority? = identityError({ _ = try CertificateAuthority(certificate: authority.certificate, privateKey: leafKey) }) else {
            Issue.record("a root with another key was accepted"); return
        }
    }

    @Test("The root is kept in the keychain and loads back; P-384 and RSA roots sign with their own algorithms")
    func keychainAndOtherKeys() throws {
        let scratch = try IdentityScratch()
        let store = IdentityStore(keychain: try scratch.keychain())
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        try authority.save(to: store)
        let loaded = try CertificateAuthority.load(from: store)
        #expect(loaded.certificate == authority.certificate)
        #expect(try store.certificates(label: "ca") == [authority.certificate])
        let leaf = try loaded.issue(names: ["a.example"]).leaf
        #expect(authority.certificate.publicKey.isValidSignature(leaf.signature, for: leaf))

        let p384 = try CertificateAuthority.createRoot(commonName: "CA384", key: Certificate.PrivateKey(P384.Signing.PrivateKey()))
        #expect(p384.certificate.signatureAlgorithm == .ecdsaWithSHA384)
        let rsa = try CertificateAuthority.createRoot(commonName: "CARSA", key: Certificate.PrivateKey(_RSA.Signing.PrivateKey(keySize: .bits2048)))
        let rsaLeaf = try rsa.issue(names: ["r.example"])
        #expect(rsaLeaf.leaf.signatureAlgorithm == .sha256WithRSAEncryption)
        #expect(rsa.certificate.publicKey.isValidSignature(rsaLeaf.leaf.signature, for: rsaLeaf.leaf))
        try store.storeIdentity(rsaLeaf, label: "rsa")
        #expect(try store.identity(label: "rsa").privateKey?.publicKey == rsaLeaf.leaf.publicKey)
    }

    @Test("openssl verifies issued leaves against the root and shows the SAN, EKU and key usage set",
          .enabled(if: IdentityOpenSSL.available, "openssl is not installed"))
    func opensslVerifies() throws {
        let scratch = try IdentityScratch()
        let authority = try CertificateAuthority.createRoot(commonName: "Devices CA")
        let server = try authority.issue(names: ["device-1.example.com", "10.0.0.5"], usage: .server)
        let client = try authority.issue(names: ["device-2"], usage: .client)
        try scratch.write("root.pem", Array(try IdentityStore.pem([authority.certificate]).utf8))
        try scratch.write("server.pem", Array(try IdentityStore.pem([server.leaf]).utf8))
        try scratch.write("client.pem", Array(try IdentityStore.pem([client.leaf]).utf8))

        let verify = try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "server.pem"], in: scratch.path)
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout == "server.pem: OK\n")
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-purpose", "sslserver", "server.pem"], in: scratch.path).status == 0)
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-purpose", "sslclient", "client.pem"], in: scratch.path).status == 0)
        // Purposes not granted are refused by openssl too.
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-purpose", "sslclient", "server.pem"], in: scratch.path).status != 0)
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-verify_hostname", "device-1.example.com", "server.pem"], in: scratch.path).status == 0)
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-verify_ip", "10.0.0.5", "server.pem"], in: scratch.path).status == 0)
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-verify_hostname", "other.example.com", "server.pem"], in: scratch.path).status != 0)
        // A root made elsewhere does not verify them.
        let stranger = try CertificateAuthority.createRoot(commonName: "Devices CA")
        try scratch.write("stranger.pem", Array(try IdentityStore.pem([stranger.certificate]).utf8))
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "stranger.pem", "server.pem"], in: scratch.path).status != 0)

        let rootText = try IdentityOpenSSL.require(["x509", "-in", "root.pem", "-noout", "-text"], in: scratch.path).stdout
        #expect(rootText.contains("CA:TRUE, pathlen:0"))
        #expect(rootText.contains("Certificate Sign, CRL Sign"))
        #expect(rootText.contains("X509v3 Subject Key Identifier"))
        let serverText = try IdentityOpenSSL.require(["x509", "-in", "server.pem", "-noout", "-text"], in: scratch.path).stdout
        #expect(serverText.contains("CA:FALSE"))
        #expect(serverText.contains("X509v3 Key Usage: critical\n                Digital Signature\n"))
        #expect(serverText.contains("X509v3 Extended Key Usage: \n                TLS Web Server Authentication\n"))
        #expect(serverText.contains("DNS:device-1.example.com, IP Address:10.0.0.5"))
        #expect(serverText.contains("X509v3 Authority Key Identifier"))
        #expect(serverText.contains("ecdsa-with-SHA256"))
        let clientText = try IdentityOpenSSL.require(["x509", "-in", "client.pem", "-noout", "-text"], in: scratch.path).stdout
        #expect(clientText.contains("TLS Web Client Authentication"))
        #expect(!clientText.contains("TLS Web Server Authentication"))
    }

    @Test("A leaf for an openssl CSR: the signature is checked, the requested names are used; a tampered CSR is refused",
          .enabled(if: IdentityOpenSSL.available, "openssl is not installed"))
    func certificateSigningRequest() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.require(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "device.key",
                                     "-subj", "/CN=device-9", "-addext", "subjectAltName=DNS:device-9.local,IP:192.168.1.9",
                                     "-out", "device.csr"], in: scratch.path)
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        let request = try CertificateAuthority.request(from: scratch.read("device.csr"))
        let leaf = try authority.issue(request: request, usage: .client)
        #expect(try leaf.extensions.subjectAlternativeNames == SubjectAlternativeNames([
            .dnsName("device-9.local"), .ipAddress(ASN1OctetString(contentBytes: [192, 168, 1, 9])),
        ]))
        // The key of the request, which stayed with the device, is the leaf's.
        let deviceKey = try IdentityImport.privateKey(pem: SecretBytes(copying: scratch.read("device.key")))
        #expect(leaf.publicKey == deviceKey.publicKey)
        try scratch.write("root.pem", Array(try IdentityStore.pem([authority.certificate]).utf8))
        try scratch.write("leaf.pem", Array(try IdentityStore.pem([leaf]).utf8))
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "-purpose", "sslclient", "leaf.pem"], in: scratch.path).status == 0)

        // Without SANs in the request, its common name; names given override both.
        try IdentityOpenSSL.require(["req", "-new", "-key", "device.key", "-subj", "/CN=plain-device", "-outform", "DER", "-out", "plain.der"], in: scratch.path)
        let plain = try CertificateAuthority.request(from: scratch.read("plain.der"))
        #expect(try authority.issue(request: plain).extensions.subjectAlternativeNames == SubjectAlternativeNames([.dnsName("plain-device")]))
        #expect(try authority.issue(request: plain, names: ["chosen.example"]).extensions.subjectAlternativeNames
            == SubjectAlternativeNames([.dnsName("chosen.example")]))

        // A CSR whose signature no longer matches (a byte of the signature flipped) is refused.
        var der = try scratch.read("plain.der")
        der[der.count - 3] ^= 0x01
        let error = identityError {
            let tampered = try CertificateAuthority.request(from: der)
            _ = try authority.issue(request: tampered)
        }
        guard case .invalidRequest? = error else { Issue.record("a tampered CSR: \(String(describing: error))"); return }
        guard case .invalidRequest? = identityError({ _ = try CertificateAuthority.request(from: Array("garbage".utf8)) }) else {
            Issue.record("garbage was accepted as a CSR"); return
        }
    }

    @Test("A leaf for a public key sent by another device verifies with openssl",
          .enabled(if: IdentityOpenSSL.available, "openssl is not installed"))
    func publicKeyOfAnotherDevice() throws {
        let scratch = try IdentityScratch()
        let authority = try CertificateAuthority.createRoot(commonName: "CA")
        let deviceKey = P256.Signing.PrivateKey()
        let leaf = try authority.issue(publicKey: Certificate.PublicKey(deviceKey.publicKey), names: ["device-7"])
        #expect(leaf.publicKey == Certificate.PublicKey(deviceKey.publicKey))
        try scratch.write("root.pem", Array(try IdentityStore.pem([authority.certificate]).utf8))
        try scratch.write("leaf.pem", Array(try IdentityStore.pem([leaf]).utf8))
        #expect(try IdentityOpenSSL.run(["verify", "-CAfile", "root.pem", "leaf.pem"], in: scratch.path).status == 0)
    }
}
