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
                                 policy: .interactive, attemptPolicy: attemptPolicy, kdfCeiling: kdfCeiling, clock: { clock.now })
    }

    func cleanup() {
        try? FileManager.default.removeItem(atPath: root)
    }

    var statePath: String { home + "/vault.state" }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        _ = lstat(path, &info)
        return info.st_mode & 0o777
    }

    func supersededFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []).filter { $0.hasPrefix(".superseded-") }
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

let sampleQuestions = ["First pet?", "City of birth?", "Favourite teacher?"]
let sampleAnswers = ["Fluffy the Cat", "Lyon", "Mrs Dupont"]
