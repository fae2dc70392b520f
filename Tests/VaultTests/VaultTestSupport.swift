import Foundation
import TestSupport
import Testing
import Cipher
@testable import Vault

/// A temporary vault directory and device key, removed by `cleanup()` or when the value goes away.
final class VaultFixture: @unchecked Sendable {
    let root: String
    let home: String
    let deviceKey: SecretBytes
    let clock = TestClock()

    private let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "vault-test")
        root = directory.path
        home = root + "/home"
        deviceKey = try SecretBytes.random(count: 32)
    }

    func manager(attemptPolicy: AttemptPolicy = .unlimited, deviceKey: SecretBytes? = nil, kdfCeiling: KDFCeiling = .standard) throws -> CryptoManager {
        let clock = self.clock
        return try CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: deviceKey ?? self.deviceKey),
                                 policy: .minimum, attemptPolicy: attemptPolicy, kdfCeiling: kdfCeiling, clock: { clock.now })
    }

    func cleanup() {
        try? FileManager.default.removeItem(atPath: root)
    }

    var statePath: String { home + "/vault.state" }

    /// The device-key file of provider tests; device-key records and rotation journals live in
    /// `vaults/` beside it.
    var keyFile: String { root + "/config/device.key" }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        _ = lstat(path, &info)
        return info.st_mode & 0o777
    }

    func supersededFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []).filter { $0.hasPrefix(".superseded-") }
    }
}

extension VaultFixture {
    /// A random key sealed by `systemd-creds` with the host key, as the credential
    /// `sf-device-key` in `root/credstore/sf-device-key.cred`; nil, with the reason printed, when
    /// that cannot be done here (it needs root, systemd-creds and a host key).
    func hostSealedCredential() throws -> (key: SecretBytes, path: String)? {
        guard geteuid() == 0, ExternalTool.find("systemd-creds") != nil else {
            print("skipping: needs root and systemd-creds (the host key lives in /var/lib/systemd/credential.secret)")
            return nil
        }
        let key = try SecretBytes.random(count: 32)
        let credential = root + "/credstore/sf-device-key.cred"
        do {
            try SystemdCredentialDeviceKeyProvider.seal(key, name: "sf-device-key", to: credential, withKey: "host")
        } catch {
            print("skipping: systemd-creds encrypt --with-key=host does not work here: \(error)")
            return nil
        }
        return (key, credential)
    }
}

/// A settable clock.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value = Date(timeIntervalSince1970: 1_800_000_000)
    var now: Date { lock.withLock { value } }
    func advance(_ seconds: Double) { lock.withLock { value += seconds } }
}

func secret(_ text: String) -> SecretBytes { SecretBytes(utf8: text) }

/// After a passcode change: once locked, the old passcode is refused (one failure counted), the
/// new one unlocks, and `sealed` (sealed before the change) still opens to `plaintext`.
func expectPasscodeChanged(_ manager: CryptoManager, from old: String, to new: String, sealed: [UInt8], plaintext: String,
                           sourceLocation: SourceLocation = #_sourceLocation) throws {
    manager.lock()
    #expect(throws: VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil), sourceLocation: sourceLocation) {
        try manager.unlock(passcode: secret(old))
    }
    try manager.unlock(passcode: secret(new))
    #expect(try manager.decrypt(sealed) == Array(plaintext.utf8), sourceLocation: sourceLocation)
}

let sampleQuestions = ["First pet?", "City of birth?", "Favourite teacher?"]
let sampleAnswers = ["Fluffy the Cat", "Lyon", "Mrs Dupont"]
