import Cipher
import Crypto
import Foundation
import Keychain
import Testing
import Vault
import X509
@testable import PinnedTLS

/// Keys, certificates and identities kept in the keychain.
@Suite("Identity store")
struct IdentityStoreTests {
    static func sampleIdentity(_ name: String = "device-1.example") throws -> (CertificateAuthority, TLSIdentity) {
        let authority = try CertificateAuthority.createRoot(commonName: "Test CA")
        return (authority, try authority.issue(names: [name]))
    }

    @Test("An identity survives a reopen of the keychain; its key is the leaf's and signs what the leaf verifies")
    func roundTripAfterReopen() throws {
        let scratch = try IdentityScratch()
        let (authority, identity) = try Self.sampleIdentity()
        do {
            let store = IdentityStore(keychain: try scratch.keychain())
            try store.storeIdentity(identity, label: "device-1")
            try store.storePrivateKey(authority.privateKey, label: "bare-key")
            try store.storeCertificates([authority.certificate], label: "anchors")
            try store.flush()
            try store.keychain.close()
        }
        let store = IdentityStore(keychain: try scratch.keychain())
        let back = try store.identity(label: "device-1")
        #expect(back.chain == identity.chain)
        #expect(back.privateKey?.publicKey == back.leaf.publicKey)
        // Something signed with the key read back verifies under the leaf's public key.
        let signed = try Certificate(version: .v3, serialNumber: .init(), publicKey: back.key.publicKey,
                                     notValidBefore: Date(), notValidAfter: Date() + 60,
                                     issuer: back.leaf.subject, subject: back.leaf.subject, signatureAlgorithm: .ecdsaWithSHA256,
                                     extensions: Certificate.Extensions(), issuerPrivateKey: try #require(back.privateKey))
        #expect(back.leaf.publicKey.isValidSignature(signed.signature, for: signed))
        #expect(try store.privateKey(label: "bare-key").publicKey == authority.certificate.publicKey)
        // The anchors a trust policy reads, and the identity's chain stored beside it.
        #expect(try store.certificates(label: "anchors") == [authority.certificate])
        #expect(try store.anchorCertificates(label: "anchors") == [authority.certificate])
        #expect(try store.certificates(label: "device-1") == identity.chain)
        // Another master key opens nothing (the keychain refuses the key).
        #expect(throws: KeychainError.self) { _ = try scratch.keychain(master: Array(repeating: 9, count: 32)) }
    }

    @Test("Keys and identities under whenUnlocked are refused while the vault is locked; certificates are not")
    func whenUnlockedRefusedWhileLocked() throws {
        let scratch = try IdentityScratch()
        let manager = try CryptoManager(directory: scratch.sub("vault"), deviceKeyProvider: FileDeviceKeyProvider(path: scratch.sub("device.key")),
                                        attemptPolicy: .unlimited)
        try manager.storeTemporaryPasscode(SecretBytes(utf8: "1234"))
        try manager.finalize()
        let store = IdentityStore(keychain: try Keychain(manager: manager))
        let (authority, identity) = try Self.sampleIdentity()
        try store.storeIdentity(identity, label: "server")
        try store.storePrivateKey(authority.privateKey, label: "key")
        try store.flush()
        manager.lock()

        #expect(identityError { _ = try store.identity(label: "server") } == .locked(label: "server", accessibility: .whenUnlocked, reason: .locked))
        #expect(identityError { _ = try store.privateKey(label: "key") } == .locked(label: "key", accessibility: .whenUnlocked, reason: .locked))
        #expect(identityError { try store.storePrivateKey(authority.privateKey, label: "new-key") }
            == .locked(label: "new-key", accessibility: .whenUnlocked, reason: .locked))
        #expect(identityError { _ = try CertificateAuthority.load(from: store, label: "server") }
            == .locked(label: "server", accessibility: .whenUnlocked, reason: .locked))
        // The chain stored beside the identity stays readable, and exportable.
        #expect(try store.certificates(label: "server") == identity.chain)
        #expect(try store.exportCertificatesPEM(label: "server") == IdentityStore.pem(identity.chain))
        // Locked, the listing counts the sealed items without naming them.
        let listing = try store.list()
        #expect(listing.items.map(\.kind) == [.certificate])
        #expect(listing.unreadable == 2)

        try manager.unlock(passcode: SecretBytes(utf8: "1234"))
        #expect(try store.identity(label: "server").chain == identity.chain)
        #expect(try store.list().items.count == 3)
    }

    @Test("A key stored as always is refused by a read that requires whenUnlocked")
    func requiredClassIsEnforced() throws {
        let scratch = try IdentityScratch()
        let store = IdentityStore(keychain: try scratch.keychain())
        let (authority, _) = try Self.sampleIdentity()
        try store.storePrivateKey(authority.privateKey, label: "weak", accessibility: .always)
        #expect(identityError { _ = try store.privateKey(label: "weak", requiring: .whenUnlocked) }
            == .accessibilityTooWeak(label: "weak", stored: .always, required: .whenUnlocked))
        #expect(try store.privateKey(label: "weak").publicKey == authority.privateKey.publicKey)
    }

    @Test("The exported certificate equals the PEM imported (bytes as openssl wrote them)",
          .enabled(if: IdentityOpenSSL.available, "openssl is not installed"))
    func exportEqualsImport() throws {
        let scratch = try IdentityScratch()
        try IdentityOpenSSL.selfSigned("", in: scratch.path)
        try IdentityOpenSSL.selfSigned("ca-", in: scratch.path, subject: "/CN=ca")
        let chain = try scratch.read("cert.pem") + scratch.read("ca-cert.pem")
        let store = IdentityStore(keychain: try scratch.keychain())
        try store.importPEM(key: SecretBytes(copying: scratch.read("key.pem")), chain: chain, label: "imported")
        #expect(Array(try store.exportCertificatesPEM(label: "imported").utf8) == chain)
        // And from the identity itself when there is no certificate item.
        try store.delete(label: "imported", kind: .certificate)
        #expect(Array(try store.exportCertificatesPEM(label: "imported").utf8) == chain)
        // PKCS#12 of the same: the same certificate comes out.
        try IdentityOpenSSL.require(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:pw", "-out", "b.p12"], in: scratch.path)
        try store.importPKCS12(scratch.read("b.p12"), password: SecretBytes(utf8: "pw"), label: "from-p12")
        #expect(try Array(store.exportCertificatesPEM(label: "from-p12").utf8) == scratch.read("cert.pem"))
    }

    @Test("Duplicates are refused unless replaced; delete removes every kind under the label; listing shows them")
    func duplicateReplaceDeleteList() throws {
        let scratch = try IdentityScratch()
        let store = IdentityStore(keychain: try scratch.keychain())
        let (authority, identity) = try Self.sampleIdentity()
        try store.storeIdentity(identity, label: "x")
        #expect(identityError { try store.storeIdentity(identity, label: "x") } == .duplicate(kind: .identity, label: "x"))
        // A certificate item alone under a label blocks an identity there, and nothing is half-written.
        try store.storeCertificates([authority.certificate], label: "y")
        #expect(identityError { try store.storeIdentity(identity, label: "y") } == .duplicate(kind: .certificate, label: "y"))
        #expect(identityError { _ = try store.identity(label: "y") } == .notFound(kind: .identity, label: "y"))
        let other = try authority.issue(names: ["other.example"])
        try store.storeIdentity(other, label: "x", replace: true)
        #expect(try store.identity(label: "x").leaf == other.leaf)
        #expect(try store.certificates(label: "x").first == other.leaf)

        let listing = try store.list()
        #expect(listing.items.map { "\($0.kind) \($0.label) \($0.accessibility.name)" }
            == ["certificate x always", "identity x whenUnlocked", "certificate y always"])
        #expect(listing.items[0].summary?.hasPrefix("CN=other.example, expires ") == true)

        #expect(try store.delete(label: "x") == 2)
        #expect(identityError { try store.delete(label: "x") } == .notFound(kind: .identity, label: "x"))
        #expect(identityError { _ = try store.identity(label: "x") } == .notFound(kind: .identity, label: "x"))
        #expect(identityError { try store.storeIdentity(identity, label: "") } == .invalidLabel("the label is empty"))
        #expect(identityError { try store.storeIdentity(identity, label: "a\nb") } == .invalidLabel("the label contains control characters"))
    }

    @Test("Hostile records (garbage, every truncation, another kind, a newer version, a key of another certificate) are corruptedRecord")
    func hostileRecords() throws {
        let scratch = try IdentityScratch()
        let keychain = try scratch.keychain()
        let store = IdentityStore(keychain: keychain)
        let (authority, identity) = try Self.sampleIdentity()
        let good = try IdentityRecord.encode(key: identity.privateKey, certificates: identity.chain)
        let bytes = good.withUnsafeBytes { Array($0) }
        #expect(bytes[0] == 3 && bytes[1] == 1 && bytes[2] == 1)

        func plant(_ record: [UInt8], kind: IdentityItemKind = .identity) throws {
            try keychain.addOrUpdate(SecretBytes(copying: record), for: .generic(service: kind.service, account: "planted"), accessibility: .always)
        }
        func expectCorrupted(_ what: String, kind: IdentityItemKind = .identity) {
            let error = identityError {
                switch kind {
                case .identity: _ = try store.identity(label: "planted")
                case .privateKey: _ = try store.privateKey(label: "planted")
                case .certificate: _ = try store.certificates(label: "planted")
                }
            }
            guard case .corruptedRecord(label: "planted", _)? = error else {
                Issue.record("\(what): got \(String(describing: error))"); return
            }
        }
        for length in 0..<bytes.count {
            try plant(Array(bytes[0..<length]))
            expectCorrupted("a record cut at \(length) bytes")
        }
        try plant(bytes + [0])
        expectCorrupted("a trailing byte")
        try plant(Array("garbage".utf8))
        expectCorrupted("garbage")
        var newer = bytes
        newer[1] = 4
        try plant(newer)
        expectCorrupted("record version 4")
        // Version 2 (a key in hardware) is an identity record only, and its location must be text.
        var hardware = bytes
        hardware[1] = 2
        try plant(hardware)
        expectCorrupted("a version-1 body under version 2")
        try plant(hardware, kind: .privateKey)
        expectCorrupted("a version-2 record in a key item", kind: .privateKey)
        // Version 3 with this record's bytes: byte 2 is read as the key's location (1, software),
        // then the algorithm is the length's first byte (0): refused.
        var tpm = bytes
        tpm[1] = 3
        try plant(tpm)
        expectCorrupted("version 3 over a version 1 body")
        try plant(bytes, kind: .privateKey)
        expectCorrupted("an identity record in a key item", kind: .privateKey)
        var wrongAlgorithm = bytes
        wrongAlgorithm[2] = 2
        try plant(wrongAlgorithm)
        expectCorrupted("a P-256 key recorded as P-384")

        // The root's key with the leaf's chain: the key is not the leaf's.
        let mismatched = try IdentityRecord.encode(key: authority.privateKey, certificates: identity.chain)
        try plant(mismatched.withUnsafeBytes { Array($0) })
        expectCorrupted("a key of another certificate")
    }
}
