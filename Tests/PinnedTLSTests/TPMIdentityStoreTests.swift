import Cipher
import Foundation
import HardwareKeys
import Keychain
@testable import PinnedTLS
import TestSupport
import Testing
import X509

/// Identities whose key stays in a software TPM (swtpm), kept in a real keychain: stored,
/// read back and used; a record whose key blobs were replaced by another TPM key's is refused
/// at load (the public key the TPM reports is not the certificate's).
@Suite("Identity store: keys in the TPM")
struct TPMIdentityStoreTests {
    @Test("a TPM identity is stored as a version 3 record, opens through the TPM and signs; another key's blobs planted under it are refused")
    func storedOpenedAndSwapRefused() throws {
        let scratch = try IdentityScratch()
        guard let tpm = try SoftwareTPM.orSkip(root: try scratch.directory("tpm")) else { return }
        defer { tpm.stop() }
        let keychain = try scratch.keychain()
        let store = IdentityStore(keychain: keychain)
        let (authority, _) = try IdentityStoreTests.sampleIdentity()
        let key = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let other = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let leaf = try authority.issue(publicKey: key.publicKey, names: ["tpm.example"], usage: .server, validity: 3600)
        let chain = [leaf, authority.certificate]

        // A key that is not the leaf's is not stored.
        #expect(identityError { try store.storeIdentity(tpmKey: other, chain: chain, label: "web") }
            == .keyDoesNotMatchCertificate("the TPM key \(other.location) is not the leaf certificate's key"))
        try store.storeIdentity(tpmKey: key, chain: chain, label: "web", accessibility: .always)
        #expect(try store.hardwareKeyLocation(label: "web") == key.location)
        let opened = try store.identity(label: "web", tcti: tpm.tcti)
        guard case .hardware(let hardware) = opened.key, let reopened = hardware as? TPM2PrivateKey else {
            Issue.record("not a TPM key"); return
        }
        #expect(reopened.blobs == key.blobs)
        #expect(opened.leaf == leaf)
        #expect(opened.privateKey == nil)
        // The chain is also a certificate item, as for every identity.
        #expect(try store.certificates(label: "web") == chain)

        // The record's blobs replaced by another key's (someone able to write the record): refused at load.
        let planted = try IdentityRecord.encodeTPM(other.blobs, certificates: chain)
        try keychain.addOrUpdate(planted, for: .generic(service: IdentityItemKind.identity.service, account: "web"), accessibility: .always)
        let error = identityError { _ = try store.identity(label: "web", tcti: tpm.tcti) }
        guard case .hardwareKeyMismatch(let label, let location)? = error else { Issue.record("\(String(describing: error))"); return }
        #expect(label == "web" && location == other.location, "\(label) \(location)")

        // The TPM gone: the identity does not open, and says why.
        tpm.stop()
        try store.storeIdentity(tpmKey: key, chain: chain, label: "web", accessibility: .always, replace: true)
        let gone = identityError { _ = try store.identity(label: "web", tcti: tpm.tcti) }
        guard case .hardwareKey(.tpmUnreachable)? = gone else { Issue.record("\(String(describing: gone))"); return }
    }
}
