import Cipher
import Crypto
import DeviceSharing
import Foundation
import HardwareKeys
import Keychain
@testable import PinnedTLS
import TestSupport
import Testing
import X509

/// The device certificate authority and a sharing group with keys in a software TPM, in
/// process: the authority stored as the key's blobs and loaded back through the TPM; another
/// TPM key's blobs planted under it refused before anything is signed; the sharing group's
/// errors about keys in hardware typed (``ShareError/hardwareKey(_:)`` carries the
/// ``HardwareKeyError``); the blobs' byte string for a key that waits for its certificate.
@Suite("certificate authority and sharing group with keys in the TPM")
struct TPMAuthorityTests {
    @Test("a root made in the TPM is stored as its blobs and loaded through the TPM; planted blobs of another TPM key are refused")
    func authorityStoredAndSwapRefused() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-authority")
        guard let tpm = try SoftwareTPM.orSkip(root: try directory.directory("tpm")) else { return }
        defer { tpm.stop() }
        let store = try TokenAuthorityTests.store(in: directory)
        let key = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let authority = try CertificateAuthority.createRoot(commonName: "TPM CA", hardwareKey: key)
        try authority.save(to: store, label: "ca", accessibility: .always)
        #expect(try store.hardwareKeyLocation(label: "ca") == key.location)

        let loaded = try CertificateAuthority.load(from: store, label: "ca", tcti: tpm.tcti)
        #expect((loaded.hardwareKey as? TPM2PrivateKey)?.blobs == key.blobs)
        let leafKey = P256.Signing.PrivateKey()
        let leaf = try loaded.issue(publicKey: .init(leafKey.publicKey), names: ["device.example"], usage: .client)
        #expect(authority.certificate.publicKey.isValidSignature(leaf.signature, for: leaf))

        // Another TPM key's blobs under the root's chain (a writer of the data directory who
        // replaced the record): the TPM loads them, but they are not the root's key.
        let other = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        #expect(TLSIdentity(chain: [authority.certificate], tokenKey: other) == nil)
        // Storing the other key under the root's certificate is refused (the key is not the leaf's)...
        #expect(throws: IdentityError.keyDoesNotMatchCertificate("the TPM key \(other.location) is not the leaf certificate's key")) {
            try store.storeIdentity(tpmKey: other, chain: [authority.certificate], label: "ca", accessibility: .always, replace: true)
        }
        // ...so the record is written as an attacker would, by hand, and loading refuses it.
        let handMade = try IdentityRecord.encodeTPM(other.blobs, certificates: [authority.certificate])
        try store.keychain.addOrUpdate(handMade, for: .generic(service: IdentityItemKind.identity.service, account: "ca"),
                                       accessibility: .always)
        do {
            _ = try CertificateAuthority.load(from: store, label: "ca", tcti: tpm.tcti)
            Issue.record("planted blobs were accepted")
        } catch {
            #expect(error == .hardwareKeyMismatch(label: "ca", location: other.location))
        }
    }

    @Test("a group whose root and device keys are in the TPM: membership opens through the TPM; the TPM gone is ShareError.hardwareKey(.tpmUnreachable)")
    func groupInTPM() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-group")
        guard let tpm = try SoftwareTPM.orSkip(root: try directory.directory("tpm")) else { return }
        defer { tpm.stop() }
        let store = try TokenAuthorityTests.store(in: directory)
        let deviceKey = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let rootKey = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let group = ShareGroup(store: store, tcti: tpm.tcti)
        let created = try group.create(deviceName: "alpha", deviceKey: deviceKey, rootKey: rootKey)
        #expect(created.root.publicKey == rootKey.publicKey)
        #expect(created.identity.leaf.publicKey == deviceKey.publicKey)
        #expect(try store.hardwareKeyLocation(label: ShareGroup.rootLabel) == rootKey.location)
        #expect(try store.hardwareKeyLocation(label: ShareGroup.deviceLabel) == deviceKey.location)
        let membership = try group.membership()
        #expect(membership.identity.leaf == created.identity.leaf)
        #expect((try group.authority().hardwareKey as? TPM2PrivateKey)?.blobs == rootKey.blobs)

        // The TPM gone: the error is typed, and a caller can switch over the hardware's cause.
        tpm.stop()
        do {
            _ = try group.membership()
            Issue.record("the membership opened without the TPM")
        } catch {
            switch error {
            case .hardwareKey(.tpmUnreachable(let tcti, _)): #expect(tcti == tpm.tcti)
            default: Issue.record("\(error)")
            }
            #expect(error.description.hasPrefix("a key of this group in hardware cannot be used: "), "\(error)")
        }
    }

    @Test("a device key in a token recorded without a way to open it: ShareError.hardwareKeyRequired with its location")
    func tokenKeyWithoutOpener() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let directory = try TemporaryDirectory(prefix: "sf-token-group")
        let store = try TokenAuthorityTests.store(in: directory)
        let key = try InProcessTokens.open("pkcs11:token=ca256;object=root")
        try ShareGroup(store: store).create(deviceName: "alpha", deviceKey: key)
        do {
            _ = try ShareGroup(store: store).membership()
            Issue.record("the membership opened without the token's module")
        } catch {
            #expect(error == .hardwareKeyRequired(location: "pkcs11:token=ca256;object=root"))
        }
        _ = fixture
    }

    @Test("TPM key blobs as one byte string: a round trip; a wrong tag, unsorted PCRs, empty or cut areas and trailing bytes are refused")
    func blobsSerialized() throws {
        let blobs = TPM2PrivateKey.Blobs(publicArea: [1, 2, 3], privateArea: [4, 5], pcrs: [7, 0])
        let bytes = blobs.serialized
        #expect(bytes == Array("TPM".utf8) + [1, 2, 0, 7, 0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 2, 4, 5])
        #expect(TPM2PrivateKey.Blobs(serialized: bytes) == TPM2PrivateKey.Blobs(publicArea: [1, 2, 3], privateArea: [4, 5], pcrs: [0, 7]))
        #expect(TPM2PrivateKey.Blobs(serialized: Array("pkcs11:token=a;object=b".utf8)) == nil)
        #expect(TPM2PrivateKey.Blobs(serialized: Array("TPM".utf8) + [1, 2, 7, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1]) == nil)
        #expect(TPM2PrivateKey.Blobs(serialized: Array("TPM".utf8) + [1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]) == nil)
        #expect(TPM2PrivateKey.Blobs(serialized: Array(bytes.dropLast())) == nil)
        #expect(TPM2PrivateKey.Blobs(serialized: bytes + [0]) == nil)
        #expect(TPM2PrivateKey.Blobs(serialized: Array("TPM".utf8) + [1, 25]) == nil)
        for cut in 0..<bytes.count { #expect(TPM2PrivateKey.Blobs(serialized: Array(bytes.prefix(cut))) == nil, "cut at \(cut)") }
    }
}
