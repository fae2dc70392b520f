import Cipher
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
        // No transient object is left in the TPM: a socket TCTI has no resource manager, and
        // the TPM's three slots are every process's.
        let handles = try tpm.run("tpm2_getcap", ["handles-transient"])
        #expect(handles.status == 0)
        #expect(handles.output.isEmpty, "transient objects left loaded: \(handles.output)")

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
        // No session and no object is left behind by the failed policy (a socket TCTI: the
        // TPM's slots are every process's).
        let sessions = try tpm.run("tpm2_getcap", ["handles-loaded-session"])
        #expect(sessions.output.isEmpty)
        #expect(try tpm.run("tpm2_getcap", ["handles-transient"]).output.isEmpty)
    }

    @Test("blobs made by tpm2-tools sign in-process; blobs made in-process load and sign in tpm2-tools (the signature verifies)")
    func blobsInteroperateWithTheTools() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-tools")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        let dir = directory.path
        // The tools make a key under their default primary key; it opens and signs here.
        #expect(try tpm.tool("tpm2_createprimary", ["-Q", "-C", "o", "-g", "sha256", "-G", "ecc256", "-c", dir + "/primary.ctx"]) == 0)
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(try tpm.tool("tpm2_create", ["-Q", "-C", dir + "/primary.ctx", "-G", "ecc256:ecdsa-sha256", "-a",
                                             "sign|fixedtpm|fixedparent|sensitivedataorigin|userwithauth",
                                             "-u", dir + "/tools.pub", "-r", dir + "/tools.priv"]) == 0)
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        let toolsBlobs = TPM2PrivateKey.Blobs(publicArea: Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/tools.pub"))),
                                              privateArea: Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/tools.priv"))), pcrs: [])
        let toolsKey = try TPM2PrivateKey(blobs: toolsBlobs, tcti: tpm.tcti)
        let toolsPublic = try #require(P256.Signing.PublicKey(toolsKey.publicKey))
        let signature = try toolsKey.signature(for: [1, 2, 3], scheme: .ecdsaSHA256)
        #expect(toolsPublic.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: [1, 2, 3]))

        // A key made here: tpm2_load takes its blobs and tpm2_sign signs with it.
        let blobs = try TPM2PrivateKey.create(tcti: tpm.tcti)
        let ours = try #require(P256.Signing.PublicKey(try TPM2PrivateKey(blobs: blobs, tcti: tpm.tcti).publicKey))
        try Data(blobs.publicArea).write(to: URL(fileURLWithPath: dir + "/ours.pub"))
        try Data(blobs.privateArea).write(to: URL(fileURLWithPath: dir + "/ours.priv"))
        try Data("message".utf8).write(to: URL(fileURLWithPath: dir + "/message"))
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(try tpm.tool("tpm2_load", ["-Q", "-C", dir + "/primary.ctx", "-u", dir + "/ours.pub", "-r", dir + "/ours.priv",
                                           "-c", dir + "/ours.ctx"]) == 0)
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(try tpm.tool("tpm2_sign", ["-c", dir + "/ours.ctx", "-g", "sha256", "-f", "plain", "-o", dir + "/signature",
                                           dir + "/message"]) == 0)
        let toolsSignature = Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/signature")))
        #expect(ours.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: toolsSignature), for: Array("message".utf8)))
    }

    @Test("another process flushes the loaded key, or loads its own object in its place: the next signature is still this key's")
    func anotherProcessFlushesTheKey() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-flushed")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        let dir = directory.path
        // As behind a resource manager: the key signed with last stays loaded between signatures.
        TPM2.keepKeysLoaded(true, tcti: tpm.tcti)
        let key = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let other = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(pcrs: [16], tcti: tpm.tcti), tcti: tpm.tcti)
        let publicKey = try #require(P256.Signing.PublicKey(key.publicKey))
        let otherPublic = try #require(P256.Signing.PublicKey(other.publicKey))
        func signs(_ key: TPM2PrivateKey, _ publicKey: P256.Signing.PublicKey, _ message: [UInt8]) throws -> Bool {
            let signature = try key.signature(for: message, scheme: .ecdsaSHA256)
            return publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message)
        }
        #expect(try signs(key, publicKey, [1]))
        #expect(try tpm.run("tpm2_getcap", ["handles-transient"]).output.split(separator: "\n").count == 1)
        // Flushed by another process (tpm2_flushcontext -t): loaded again, and it signs.
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(try signs(key, publicKey, [2]))
        // Flushed, and another object loaded at the handle the key had: the signature would be
        // that object's; it is checked, the key loaded again, and the signature is the key's.
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(try tpm.tool("tpm2_createprimary", ["-Q", "-C", "o", "-G", "ecc256", "-c", dir + "/intruder.ctx"]) == 0)
        #expect(try tpm.run("tpm2_getcap", ["handles-transient"]).output.contains("0x80000000"))
        #expect(try signs(key, publicKey, [3]))
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        // Two keys taking turns (one bound to a PCR): each signature is its own key's.
        for index in 0..<6 {
            #expect(try signs(index % 2 == 0 ? key : other, index % 2 == 0 ? publicKey : otherPublic, [UInt8(index)]))
        }
        // One key left loaded (the one used last), no session.
        #expect(try tpm.run("tpm2_getcap", ["handles-transient"]).output.split(separator: "\n").count == 1)
        #expect(try tpm.run("tpm2_getcap", ["handles-loaded-session"]).output.isEmpty)
    }

    @Test("the TPM restarted (its saved contexts void): the key loads again from its blobs and signs")
    func theTPMRestarts() throws {
        let directory = try TemporaryDirectory(prefix: "sf-tpm-restart")
        guard let tpm = try Self.started(directory) else { return }
        defer { tpm.stop() }
        TPM2.keepKeysLoaded(true, tcti: tpm.tcti)
        let key = try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(tcti: tpm.tcti), tcti: tpm.tcti)
        let publicKey = try #require(P256.Signing.PublicKey(key.publicKey))
        _ = try key.signature(for: [0], scheme: .ecdsaSHA256)
        // A reset (swtpm's control channel), then TPM2_Startup(CLEAR): transient objects and
        // saved contexts are void.
        guard let ioctl = ExternalTool.find("swtpm_ioctl") else { print("skipping: needs swtpm_ioctl (swtpm-tools)"); return }
        let reset = try ExternalTool.run([ioctl, "--tcp", "127.0.0.1:\(tpm.port + 1)", "-i"], maxOutput: 4096)
        reset.output.wipe()
        #expect(reset.status == 0)
        #expect(try tpm.tool("tpm2_startup", ["-c"]) == 0)
        let signature = try key.signature(for: [9], scheme: .ecdsaSHA256)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: [9]))
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
