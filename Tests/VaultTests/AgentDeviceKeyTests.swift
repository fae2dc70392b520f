import Foundation
import Testing
import Cipher
@testable import Vault

/// A source of class keys that also serves a device key (as the unlock agent does for a token
/// whose PIN only it holds).
private struct ServingSource: UnlockedClassKeySource {
    let key: SecretBytes?
    func unlockedClassKeys(_ protectionClass: ProtectionClass, vaultID: Data) -> [SecretBytes]? { nil }
    func deviceKey(vaultID: Data) -> SecretBytes? { key.map { $0.slice(0..<$0.count) } }
}

/// A provider that cannot read its key here (a token without its PIN).
private struct NoPINProvider: DeviceKeyProvider {
    func deviceKey() throws -> SecretBytes { throw VaultError.deviceKey("the token's PIN cannot be read") }
}

@Suite("Device key served by the unlock agent")
struct AgentDeviceKeyTests {
    /// A manager whose provider has no PIN, checked against a trusted record of the fixture's key.
    func manager(_ fixture: VaultFixture, serving key: SecretBytes?, source: Bool = true) throws -> CryptoManager {
        let record = DeviceKeyRecord(kind: .pkcs11, module: "/usr/lib/softhsm/libsofthsm2.so", uri: "pkcs11:token=t;object=k",
                                     check: DeviceKeyRecord.checkValue(of: fixture.deviceKey))
        return try CryptoManager(directory: fixture.home, deviceKeyProvider: CheckedDeviceKeyProvider(inner: NoPINProvider(), record: record),
                                 policy: .minimum, attemptPolicy: .unlimited, unlockedKeySource: source ? ServingSource(key: key) : nil)
    }

    @Test("the served key is used only when it matches the trusted record; another key is refused, none leaves the provider's error")
    func servedKeyIsChecked() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let owner = try fixture.manager()
        try owner.setUp(passcode: SecretBytes(utf8: "1234"))
        let expected = try owner.deviceSubkey(purpose: "test v1")

        let served = try manager(fixture, serving: fixture.deviceKey)
        #expect(try served.deviceSubkey(purpose: "test v1") == expected)

        let other = try manager(fixture, serving: try SecretBytes.random(count: 32))
        #expect {
            _ = try other.deviceSubkey(purpose: "test v1")
        } throws: { error in
            guard case VaultError.deviceKey(let reason) = error else { return false }
            return reason.contains("the unlock agent gave a device key that is not this vault's")
        }
        let short = try manager(fixture, serving: try SecretBytes.random(count: 16))
        #expect(throws: VaultError.self) { _ = try short.deviceSubkey(purpose: "test v1") }

        for (key, source) in [(nil, true), (fixture.deviceKey, false)] as [(SecretBytes?, Bool)] {
            let without = try manager(fixture, serving: key, source: source)
            #expect {
                _ = try without.deviceSubkey(purpose: "test v1")
            } throws: { error in
                guard case VaultError.deviceKey(let reason) = error else { return false }
                return reason.contains("the token's PIN cannot be read")
            }
        }
    }
}
