import Crypto
import Foundation
@testable import HardwareKeys
@testable import PinnedTLS
import TestSupport
import Testing
import X509

/// Signing keys resident in a software TPM (swtpm), each test with a TPM of its own (its own
/// state directory, so its own seed): signatures that verify, blobs another TPM refuses, a PCR
/// policy that fails once the PCR moves, a record whose blobs were swapped refused at load.
@Suite("TPM-resident signing keys")
struct TPMKeyTests {
    static func started(_ directory: TemporaryDirectory, _ name: String = "tpm1") throws -> SoftwareTPM? {
        try SoftwareTPM.orSkip(root: try directory.directory(name))
    }

    @Test("a key made in the TPM signs (the signature verifies with the public key it reports); another TPM refuses its blobs")
    func signsAndStaysInItsTPM() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-key")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        let blobs = try TPM2PrivateKey.create(tcti: tpm.tcti)
        #expect(blobs.pcrs.isEmpty)
        let key = try TPM2PrivateKey(blobs: blobs, tcti: tpm.tcti)
        #expect(key.location == "tpm:name=\(blobs.name)")
        #expect(blobs.name.count == 16)
        let publicKey = try #require(P256.Signing.PublicKey(key.publicKey))
        // Several signatures from one opened key (its contexts are kept), each verifying.
        for index in 0..<3 {
            let message = Array("message \(index)".utf8)
            let signature = try key.signature(for: message, scheme: .ecdsaSHA256)
            #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
        }
        #expect(throws: HardwareKeyError.unsupportedKey("ecdsaSHA384 with a TPM P-256 key")) {
            try key.signature(for: [1], scheme: .ecdsaSHA384)
        }
        // Opening again from the blobs gives the same key.
        #expect(try TPM2PrivateKey(blobs: blobs, tcti: tpm.tcti).publicKey == key.publicKey)
        // No transient object is left in the TPM (a socket TCTI has no resource manager).
        let handles = try TPM2.run(["tpm2_getcap", "handles-transient"], tcti: tpm.tcti)
        #expect(handles.status == 0)
        #expect(handles.output.withUnsafeBytes { Array($0) }.isEmpty, "transient objects left loaded")

        // The blobs on another TPM (another seed): refused, and no signature is made.
        let other = try #require(try SoftwareTPM(root: try directory.directory("tpm2")))
        defer { other.stop() }
        do {
            _ = try TPM2PrivateKey(blobs: blobs, tcti: other.tcti)
            Issue.record("another TPM loaded the key")
        } catch {
            guard case .tpmKeyRefused(let detail) = error else { Issue.record("\(error)"); return }
            #expect(error.description.contains("open only in the TPM that made them"), "\(detail)")
        }
        // The key opened on the first TPM, asked to sign once that TPM is gone: the TPM is unreachable.
        tpm.stop()
        #expect(throws: HardwareKeyError.self) { try key.signature(for: [1, 2, 3], scheme: .ecdsaSHA256) }
        guard case .tpmUnreachable(let tcti, _)? = key.lastFailure else { Issue.record("\(String(describing: key.lastFailure))"); return }
        #expect(tcti == tpm.tcti)
    }

    @Test("a key bound to a PCR signs until the PCR is extended, then the TPM refuses with the PCR message")
    func boundToPCRs() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-pcr")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        let blobs = try TPM2PrivateKey.create(pcrs: [16, 16], tcti: tpm.tcti)
        #expect(blobs.pcrs == [16])
        let key = try TPM2PrivateKey(blobs: blobs, tcti: tpm.tcti)
        #expect(key.location == "tpm:name=\(blobs.name);pcrs=16")
        let publicKey = try #require(P256.Signing.PublicKey(key.publicKey))
        let signature = try key.signature(for: [7], scheme: .ecdsaSHA256)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: [7]))
        #expect(try tpm.tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)]) == 0)
        #expect(throws: HardwareKeyError.tpmPolicyFailed(pcrs: [16])) { try key.signature(for: [7], scheme: .ecdsaSHA256) }
        #expect(key.lastFailure?.description.contains("PCRs 16 differ from their values when the key was made") == true)
        // No session is left behind by the failed policy.
        let sessions = try TPM2.run(["tpm2_getcap", "handles-loaded-session"], tcti: tpm.tcti)
        #expect(sessions.output.withUnsafeBytes { Array($0) }.isEmpty)
    }

    @Test("identity records: a TPM key is recorded as version 3 (blobs, PCRs, chain) and a swapped blob is refused at load")
    func recordsAndSwappedBlobs() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-record")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        let pki = try TestPKI()
        let first = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let second = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(pcrs: [0, 7], tcti: tpm.tcti), tcti: tpm.tcti)
        let chain = [try pki.leaf(for: first.publicKey), pki.authority]

        let record = try IdentityRecord.encodeTPM(first.blobs, certificates: chain)
        let bytes = record.withUnsafeBytes { Array($0) }
        #expect(Array(bytes.prefix(5)) == [3, 3, 2, 1, 0], "kind 3, version 3, location TPM, P-256, no PCR")
        let decoded = try IdentityRecord.decode(record, expecting: .identity, label: "web")
        #expect(decoded.tpmKey == first.blobs)
        #expect(decoded.key == nil)
        #expect(decoded.certificates == chain)
        // PCRs are kept in order.
        let bound = try IdentityRecord.decode(try IdentityRecord.encodeTPM(second.blobs, certificates: chain), expecting: .identity, label: "b")
        #expect(bound.tpmKey?.pcrs == [0, 7])
        // A truncated record is refused as damaged.
        #expect(throws: IdentityError.self) {
            try IdentityRecord.decode(.init(copying: bytes.dropLast(bytes.count - 20)), expecting: .identity, label: "web")
        }
        // Version 1 (software keys) still reads.
        let software = P256.Signing.PrivateKey()
        let softwareChain = [try pki.leaf(for: .init(software.publicKey)), pki.authority]
        let v1 = try IdentityRecord.encode(key: .init(software), certificates: softwareChain)
        #expect(v1.withUnsafeBytes { Array($0.prefix(2)) } == [3, 1])
        #expect(try IdentityRecord.decode(v1, expecting: .identity, label: "soft").key?.publicKey == .init(software.publicKey))

        // Loading: the record's own key opens; the other key's blobs under this chain are refused.
        let identity = try IdentityStore.tpmIdentity(label: "web", blobs: first.blobs, chain: chain, tcti: tpm.tcti)
        #expect(identity.leaf == chain[0])
        do {
            _ = try IdentityStore.tpmIdentity(label: "web", blobs: second.blobs, chain: chain, tcti: tpm.tcti)
            Issue.record("a swapped key blob was accepted")
        } catch {
            #expect(error == .hardwareKeyMismatch(label: "web", location: second.location))
        }
        // Storing refuses a key that is not the leaf's.
        #expect(IdentityRecord.tpmVersion == 3)
    }
}
