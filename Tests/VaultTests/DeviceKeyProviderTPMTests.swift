import Foundation
import TestSupport
import Testing
import Cipher
@testable import Vault

/// A software TPM (swtpm) on a local TCP port, stopped by `stop()`.
final class SoftwareTPM: @unchecked Sendable {
    let state: String
    let port: Int
    let process: ChildProcess.Running
    var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    init?(root: String) throws {
        guard let swtpm = ExternalTool.find("swtpm"), ExternalTool.find("tpm2_getrandom") != nil else { return nil }
        state = root + "/tpm"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        port = Int.random(in: 20000..<40000) & ~1
        process = try ChildProcess.start(swtpm, ["socket", "--tpm2", "--tpmstate", "dir=" + state,
                                                 "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                                 "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1", "--flags", "not-need-init,startup-clear"])
        // Ready when the TPM answers (at most 10 s).
        for _ in 0..<100 {
            if let result = try? ExternalTool.run([ExternalTool.find("tpm2_getrandom")!, "8"], maxOutput: 64, environment: ["TPM2TOOLS_TCTI": tcti]),
               result.status == 0 { return }
            usleep(100_000)
        }
        stop()
        return nil
    }

    /// A started software TPM, or nil with the reason printed.
    static func orSkip(root: String) throws -> SoftwareTPM? {
        guard let tpm = try SoftwareTPM(root: root) else {
            print("skipping: needs swtpm and tpm2-tools (Debian: swtpm swtpm-tools tpm2-tools)")
            return nil
        }
        return tpm
    }

    func tool(_ name: String, _ arguments: [String]) throws -> Int32 {
        let result = try ExternalTool.run([ExternalTool.find(name)!] + arguments, maxOutput: 65536, environment: ["TPM2TOOLS_TCTI": tcti])
        result.output.wipe()
        return result.status
    }

    func stop() {
        // swtpm does not end on SIGTERM while a client may be connected: SIGKILL.
        process.kill()
        _ = try? process.wait(timeout: .seconds(30))
    }
}

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
        } catch let VaultError.deviceKey(why) {
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
}
