import Cipher
import Crypto
import Foundation
import Testing
import X509
@testable import PinnedTLS

/// PEM and PKCS#12 files made by the real `openssl`, and hostile ones.
@Suite("Identity import", .enabled(if: IdentityOpenSSL.available, "openssl is not installed"))
struct IdentityImportTests {
    @Test("A PEM key and chain made by openssl req import as an identity whose key is the leaf's (PKCS#8, SEC 1, RSA, P-384)")
    func pemKeyAndChain() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("ec-", in: scratch.path)
        try IdentityOpenSSL.selfSigned("p384-", in: scratch.path, key: "ec384")
        try IdentityOpenSSL.selfSigned("rsa-", in: scratch.path, key: "rsa:2048")
        // The same EC key as SEC 1 ("EC PRIVATE KEY") and the RSA key as PKCS#1 ("RSA PRIVATE KEY").
        try IdentityOpenSSL.require(["ec", "-in", "ec-key.pem", "-out", "ec-sec1.pem"], in: scratch.path)
        try IdentityOpenSSL.require(["rsa", "-in", "rsa-key.pem", "-traditional", "-out", "rsa-pkcs1.pem"], in: scratch.path)
        #expect(String(decoding: try scratch.read("ec-sec1.pem"), as: UTF8.self).contains("BEGIN EC PRIVATE KEY"))
        #expect(String(decoding: try scratch.read("rsa-pkcs1.pem"), as: UTF8.self).contains("BEGIN RSA PRIVATE KEY"))

        for (key, chain) in [("ec-key.pem", "ec-cert.pem"), ("ec-sec1.pem", "ec-cert.pem"), ("p384-key.pem", "p384-cert.pem"),
                             ("rsa-key.pem", "rsa-cert.pem"), ("rsa-pkcs1.pem", "rsa-cert.pem")] {
            let identity = try IdentityImport.identity(keyPEM: SecretBytes(copying: scratch.read(key)), chainPEM: scratch.read(chain))
            #expect(identity.chain.count == 1)
            #expect(identity.leaf.publicKey == identity.privateKey?.publicKey)
            #expect("\(identity.leaf.subject)" == "CN=test.example")
        }
    }

    @Test("Key and certificates in one file, leaf not first: the key's certificate becomes the leaf")
    func leafIsReordered() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("a-", in: scratch.path, subject: "/CN=a")
        try IdentityOpenSSL.selfSigned("b-", in: scratch.path, subject: "/CN=b")
        let combined = try scratch.read("b-cert.pem") + scratch.read("a-cert.pem") + scratch.read("a-key.pem")
        let identity = try IdentityImport.identity(keyPEM: SecretBytes(copying: combined), chainPEM: combined)
        #expect(identity.chain.map { "\($0.subject)" } == ["CN=a", "CN=b"])
    }

    @Test("PKCS#12 from openssl pkcs12 -export imports with its password, and without one")
    func pkcs12WithAndWithoutPassword() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("ca-", in: scratch.path, subject: "/CN=chain-ca")
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-certfile", "ca-cert.pem",
                                     "-passout", "pass:s3cret", "-out", "with.p12"], in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:", "-out", "empty.p12"], in: scratch.path)
        let withPassword = try IdentityImport.identity(pkcs12: scratch.read("with.p12"), password: SecretBytes(utf8: "s3cret"))
        #expect(withPassword.chain.map { "\($0.subject)" } == ["CN=test.example", "CN=chain-ca"])
        #expect(withPassword.leaf.publicKey == withPassword.privateKey?.publicKey)
        let expectedLeaf = try IdentityImport.certificates(pem: scratch.read("cert.pem"))[0]
        #expect(withPassword.leaf == expectedLeaf)
        for password in [nil, SecretBytes(utf8: "")] {
            let empty = try IdentityImport.identity(pkcs12: scratch.read("empty.p12"), password: password)
            #expect(empty.leaf == expectedLeaf)
        }
        // RSA and P-384 keys come out of PKCS#12 too.
        try IdentityOpenSSL.selfSigned("rsa-", in: scratch.path, key: "rsa:2048")
        try IdentityOpenSSL.selfSigned("p384-", in: scratch.path, key: "ec384")
        for prefix in ["rsa-", "p384-"] {
            try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "\(prefix)key.pem", "-in", "\(prefix)cert.pem", "-passout", "pass:k",
                                         "-out", "\(prefix)b.p12"], in: scratch.path)
            let identity = try IdentityImport.identity(pkcs12: scratch.read("\(prefix)b.p12"), password: SecretBytes(utf8: "k"))
            #expect(identity.leaf == (try IdentityImport.certificates(pem: scratch.read("\(prefix)cert.pem"))[0]))
            #expect(identity.privateKey?.publicKey == identity.leaf.publicKey)
        }
        // The older encryption (RC2-40 certificates, 3DES key, SHA-1 MAC), where this openssl can still write it.
        let legacy = try IdentityOpenSSL.run(["pkcs12", "-export", "-legacy", "-inkey", "key.pem", "-in", "cert.pem",
                                              "-passout", "pass:old", "-out", "legacy.p12"], in: scratch.path)
        if legacy.status == 0 {
            #expect(try IdentityImport.identity(pkcs12: scratch.read("legacy.p12"), password: SecretBytes(utf8: "old")).leaf == expectedLeaf)
        }
    }

    @Test("A wrong PKCS#12 password, or none for a file that has one, is wrongPassword")
    func pkcs12WrongPassword() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:right", "-out", "b.p12"], in: scratch.path)
        let bytes = try scratch.read("b.p12")
        #expect(identityError { _ = try IdentityImport.identity(pkcs12: bytes, password: SecretBytes(utf8: "wrong")) } == .wrongPassword)
        #expect(identityError { _ = try IdentityImport.identity(pkcs12: bytes, password: nil) } == .wrongPassword)
        #expect(identityError { _ = try IdentityImport.identity(pkcs12: bytes, password: SecretBytes(utf8: "right\u{0}x")) } == .wrongPassword)
    }

    @Test("A PKCS#12 without a private key, or whose key matches no certificate, is an error (NIOSSLPKCS12Bundle stops the process on both)")
    func pkcs12WithoutKeyOrMatchingCertificate() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.selfSigned("other-", in: scratch.path, subject: "/CN=other")
        try IdentityOpenSSL.require(["pkcs12", "-export", "-nokeys", "-in", "cert.pem", "-passout", "pass:x", "-out", "nokey.p12"], in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-nocerts", "-inkey", "key.pem", "-passout", "pass:x", "-out", "nocert.p12"], in: scratch.path)
        let noKey = identityError { _ = try IdentityImport.identity(pkcs12: scratch.read("nokey.p12"), password: SecretBytes(utf8: "x")) }
        #expect(noKey == .invalidPKCS12("it holds no private key"))
        let noCertificate = identityError { _ = try IdentityImport.identity(pkcs12: scratch.read("nocert.p12"), password: SecretBytes(utf8: "x")) }
        guard case .keyDoesNotMatchCertificate? = noCertificate else { Issue.record("got \(String(describing: noCertificate))"); return }

        // A key with another key's certificate (openssl pkcs12 refuses -inkey with a certificate that does not
        // match, but -nocerts with -certfile writes exactly that).
        try IdentityOpenSSL.require(["pkcs12", "-export", "-nocerts", "-inkey", "key.pem", "-certfile", "other-cert.pem", "-passout", "pass:x",
                                     "-out", "mismatch.p12"], in: scratch.path)
        let mismatch = identityError { _ = try IdentityImport.identity(pkcs12: scratch.read("mismatch.p12"), password: SecretBytes(utf8: "x")) }
        guard case .keyDoesNotMatchCertificate? = mismatch else { Issue.record("got \(String(describing: mismatch))"); return }
    }

    @Test("Garbage and every truncation of a PKCS#12 file are typed errors, never a crash")
    func pkcs12Garbage() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:x", "-out", "b.p12"], in: scratch.path)
        let bytes = try scratch.read("b.p12")
        for garbage in [[], [0x30], Array("not a pkcs12 file".utf8), [UInt8](repeating: 0x30, count: 4096)] {
            guard case .invalidPKCS12? = identityError({ _ = try IdentityImport.identity(pkcs12: garbage, password: nil) }) else {
                Issue.record("garbage of \(garbage.count) bytes was not refused as invalidPKCS12"); continue
            }
        }
        for length in stride(from: 0, to: bytes.count, by: 37) {
            let error = identityError { _ = try IdentityImport.identity(pkcs12: Array(bytes[0..<length]), password: SecretBytes(utf8: "x")) }
            #expect(error != nil, "a PKCS#12 file cut at \(length) bytes was accepted")
        }
        // A flipped byte in the middle: the MAC (or the structure) fails.
        var flipped = bytes
        flipped[bytes.count / 2] ^= 0x01
        #expect(identityError { _ = try IdentityImport.identity(pkcs12: flipped, password: SecretBytes(utf8: "x")) } != nil)
    }

    @Test("Iteration counts above 1,000,000 in the clear are refused before any key derivation; openssl's 2048 pass")
    func pkcs12IterationBound() throws {
        func check(_ bytes: [UInt8]) -> IdentityError? {
            identityError { try bytes.withUnsafeBytes { buffer in try PKCS12Limits.check(buffer) } }
        }
        // MacData-shaped: digest, salt, iterations.
        let ok: [UInt8] = [0x30, 0x0C, 0x30, 0x00, 0x04, 0x04, 1, 2, 3, 4, 0x02, 0x02, 0x08, 0x00]
        let huge: [UInt8] = [0x30, 0x0D, 0x30, 0x00, 0x04, 0x04, 1, 2, 3, 4, 0x02, 0x03, 0x1E, 0x84, 0x80]
        let negative: [UInt8] = [0x30, 0x0C, 0x30, 0x00, 0x04, 0x04, 1, 2, 3, 4, 0x02, 0x02, 0x80, 0x00]
        #expect(check(ok) == nil)
        #expect(check(huge) == .invalidPKCS12("it asks for more than 1000000 key-derivation iterations"))
        #expect(check(negative) == .invalidPKCS12("it asks for more than 1000000 key-derivation iterations"))
        // The same, wrapped in an octet string inside a sequence (as SafeContents are).
        #expect(check([0x30, 0x11, 0x04, 0x0F] + huge) == .invalidPKCS12("it asks for more than 1000000 key-derivation iterations"))
        #expect(check([0x30, 0x10, 0x04, 0x0E] + ok) == nil)

        guard IdentityOpenSSL.available else { return }
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.require(["pkcs12", "-export", "-iter", "1000001", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:x",
                                     "-out", "slow.p12"], in: scratch.path)
        #expect(identityError { _ = try IdentityImport.identity(pkcs12: scratch.read("slow.p12"), password: SecretBytes(utf8: "x")) }
            == .invalidPKCS12("it asks for more than 1000000 key-derivation iterations"))
    }

    @Test("Truncated PEM (at any point), an encrypted key and a key of the wrong certificate are typed errors")
    func hostilePEM() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.selfSigned("other-", in: scratch.path, subject: "/CN=other")
        let key = try scratch.read("key.pem"), certificate = try scratch.read("cert.pem")

        for length in stride(from: 0, to: certificate.count - 1, by: 7) {
            let error = identityError { _ = try IdentityImport.certificates(pem: Array(certificate[0..<length])) }
            guard case .invalidPEM? = error else { Issue.record("a certificate cut at \(length) bytes: \(String(describing: error))"); continue }
        }
        for length in stride(from: 0, to: key.count - 1, by: 7) {
            let error = identityError { _ = try IdentityImport.privateKey(pem: SecretBytes(copying: key[0..<length])) }
            guard case .invalidPEM? = error else { Issue.record("a key cut at \(length) bytes: \(String(describing: error))"); continue }
        }
        // A base64 line cut short inside an otherwise complete block.
        var text = String(decoding: certificate, as: UTF8.self)
        let lines = text.split(separator: "\n")
        text = ([lines[0], lines[1].dropLast(3)] + lines[2...]).joined(separator: "\n") + "\n"
        guard case .invalidPEM? = identityError({ _ = try IdentityImport.certificates(pem: Array(text.utf8)) }) else {
            Issue.record("a certificate missing three base64 characters was not refused"); return
        }

        let mismatch = identityError { _ = try IdentityImport.identity(keyPEM: SecretBytes(copying: key), chainPEM: scratch.read("other-cert.pem")) }
        guard case .keyDoesNotMatchCertificate? = mismatch else { Issue.record("got \(String(describing: mismatch))"); return }

        try IdentityOpenSSL.require(["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:x", "-out", "encrypted.pem"], in: scratch.path)
        let encrypted = identityError { _ = try IdentityImport.privateKey(pem: SecretBytes(copying: scratch.read("encrypted.pem"))) }
        guard case .invalidPEM(let detail)? = encrypted, detail.contains("encrypted") else { Issue.record("got \(String(describing: encrypted))"); return }

        // A certificate block whose bytes are not a certificate.
        let fake = Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)
        guard case .invalidCertificate? = identityError({ _ = try IdentityImport.certificates(pem: fake) }) else {
            Issue.record("a CERTIFICATE block of garbage was not refused"); return
        }
    }

    @Test("Keys outside P-256, P-384 and RSA-2048+ are refused: RSA-1024, P-521, Ed25519")
    func unsupportedKeys() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.require(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "rsa1024.pem"], in: scratch.path)
        try IdentityOpenSSL.require(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521", "-out", "p521.pem"], in: scratch.path)
        try IdentityOpenSSL.require(["genpkey", "-algorithm", "ED25519", "-out", "ed25519.pem"], in: scratch.path)
        for file in ["rsa1024.pem", "p521.pem", "ed25519.pem"] {
            let error = identityError { _ = try IdentityImport.privateKey(pem: SecretBytes(copying: scratch.read(file))) }
            guard case .unsupportedKey? = error else { Issue.record("\(file): \(String(describing: error))"); continue }
        }
    }
}
