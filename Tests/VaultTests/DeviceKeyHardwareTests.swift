import Foundation
import Testing
import Cipher
@testable import Vault
import HardwareDeviceKeys

/// The TPM and PKCS #11 providers live in HardwareDeviceKeys and reach Vault through a
/// registration, process-wide; the refusal without one is seen through a provider given an
/// empty registry of its own (other tests of the process may register).
@Suite("Device-key providers beside their hardware")
struct DeviceKeyHardwareTests {
    @Test("a PKCS #11 record without its registered provider says what to link, and reads nothing")
    func unregisteredKindSaysWhatToLink() throws {
        let record = DeviceKeyRecord(kind: .pkcs11, sealedPath: "/nonexistent/device-key.pkcs11", module: "/usr/lib/softhsm/libsofthsm2.so",
                                     uri: "pkcs11:token=t;object=k", check: Data(count: 16))
        #expect(record.provider().isOnRemovableHardware)
        let provider = HardwareDeviceKeyProvider(record: record, lookup: { _ in nil })
        do {
            _ = try provider.deviceKey()
            Issue.record("an unregistered provider read a key")
        } catch {
            guard case let VaultError.deviceKey(why) = error else { throw error }
            #expect(why.contains("the pkcs11 device-key provider is not part of this program"), "\(why)")
            #expect(why.contains("HardwareDeviceKeys.register()"), "\(why)")
        }
    }

    @Test("only a token is removable hardware: the vault reads its key again at every use")
    func removableHardware() {
        #expect(PKCS11DeviceKeyProvider(modulePath: "/m.so", uri: "pkcs11:token=t", sealedPath: "/x").isOnRemovableHardware)
        #expect(!TPM2DeviceKeyProvider(sealedPath: "/x").isOnRemovableHardware)
        #expect(!FileDeviceKeyProvider(path: "/x").isOnRemovableHardware)
        let record = DeviceKeyRecord(kind: .tpm2, sealedPath: "/x", pcrs: [], check: Data(count: 16))
        #expect(!record.provider().isOnRemovableHardware)
    }
}
