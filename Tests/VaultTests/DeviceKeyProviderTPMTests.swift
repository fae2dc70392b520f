import Foundation
import TestSupport
import Testing
import Cipher
@testable import Vault
import HardwareDeviceKeys

@Suite("Device-key providers: TPM 2.0", .serialized)
struct DeviceKeyProviderTPMTests {
    @Test func sealedToTheTPMAndBoundToPCRs() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        guard let tpm = try SoftwareTPM.orSkip(root: fixture.root) else { return }
        defer { tpm.stop() }
        let key = try SecretBytes.random(count: 32)

        // Without PCRs: only this TPM unseals it.
        try TPM2DeviceKeyProvider.seal(key, to: fixture.root + "/sealed/plain", tcti: tpm.tcti)
        var info = stat()
        #expect(lstat(fixture.root + "/sealed/plain.priv", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(hexOf(try TPM2DeviceKeyProvider(sealedPath: fixture.root + "/sealed/plain", tcti: tpm.tcti).deviceKey()) == hexOf(key))

        // Bound to PCR 16: unseals until the PCR is extended, then refuses with a clear error.
        try TPM2DeviceKeyProvider.seal(key, to: fixture.root + "/sealed/pcr", pcrs: [16], tcti: tpm.tcti)
        let bound = TPM2DeviceKeyProvider(sealedPath: fixture.root + "/sealed/pcr", pcrs: [16], tcti: tpm.tcti)
        #expect(hexOf(try bound.deviceKey()) == hexOf(key))
        #expect(try tpm.tool("tpm2_pcrextend", ["16:sha256=" + String(repeating: "ab", count: 32)]) == 0)
        do {
            _ = try bound.deviceKey()
            Issue.record("unsealed after a PCR change")
        } catch {
            guard case let VaultError.deviceKey(why) = error else { throw error }
            #expect(why.contains("PCRs 16 differ from their values at sealing"), "\(why)")
        }
        // The key without PCRs still opens (the PCR change concerns only the bound object).
        #expect(hexOf(try TPM2DeviceKeyProvider(sealedPath: fixture.root + "/sealed/plain", tcti: tpm.tcti).deviceKey()) == hexOf(key))

        // Another TPM (a copied data directory on another machine) opens nothing.
        tpm.stop()
        let otherRoot = fixture.root + "/other"
        try FileManager.default.createDirectory(atPath: otherRoot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard let other = try SoftwareTPM(root: otherRoot) else { return }
        defer { other.stop() }
        #expect(throws: VaultError.self) { try TPM2DeviceKeyProvider(sealedPath: fixture.root + "/sealed/plain", tcti: other.tcti).deviceKey() }
    }

    @Test("a key sealed by tpm2-tools unseals here, and one sealed here unseals in tpm2-tools (with and without a PCR)")
    func sealedFilesInteroperateWithTheTools() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        guard let tpm = try SoftwareTPM.orSkip(root: fixture.root) else { return }
        defer { tpm.stop() }
        let dir = fixture.root
        let key = try SecretBytes.random(count: 32)
        try key.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: dir + "/key.bin")) }
        defer { unlink(dir + "/key.bin") }
        #expect(try tpm.tool("tpm2_createprimary", ["-Q", "-C", "o", "-g", "sha256", "-G", "ecc256", "-c", dir + "/primary.ctx"]) == 0)
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        // tpm2-tools seal (tpm2_create -i), the provider unseals.
        #expect(try tpm.tool("tpm2_create", ["-Q", "-C", dir + "/primary.ctx", "-g", "sha256", "-i", dir + "/key.bin",
                                             "-u", dir + "/tools.pub", "-r", dir + "/tools.priv"]) == 0)
        #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        #expect(hexOf(try TPM2DeviceKeyProvider(sealedPath: dir + "/tools", tcti: tpm.tcti).deviceKey()) == hexOf(key))
        // The provider seals (plain and bound to PCR 16), tpm2_unseal gives the key back.
        try TPM2DeviceKeyProvider.seal(key, to: dir + "/ours", tcti: tpm.tcti)
        try TPM2DeviceKeyProvider.seal(key, to: dir + "/bound", pcrs: [16], tcti: tpm.tcti)
        for (name, policy) in [("ours", [String]()), ("bound", ["-p", "pcr:sha256:16"])] {
            #expect(try tpm.tool("tpm2_load", ["-Q", "-C", dir + "/primary.ctx", "-u", dir + "/\(name).pub", "-r", dir + "/\(name).priv",
                                               "-c", dir + "/\(name).ctx"]) == 0)
            #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
            let unsealed = try tpm.run("tpm2_unseal", ["-c", dir + "/\(name).ctx", "-o", dir + "/\(name).out"] + policy)
            #expect(unsealed.status == 0, "\(name)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/\(name).out")) == key.withUnsafeBytes { Data($0) }, "\(name)")
            unlink(dir + "/\(name).out")
            #expect(try tpm.tool("tpm2_flushcontext", ["-t"]) == 0)
        }
        // Nothing of the provider's is left loaded.
        #expect(try tpm.run("tpm2_getcap", ["handles-transient"]).output.isEmpty)
        #expect(try tpm.run("tpm2_getcap", ["handles-loaded-session"]).output.isEmpty)
    }
}
