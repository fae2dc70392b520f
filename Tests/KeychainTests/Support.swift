import Foundation
import TestSupport
import GRDB
import Cipher
import Vault
@testable import Keychain

/// A key source with a lock state, as the crypto manager has: whenUnlocked needs it unlocked,
/// afterFirstUnlock needs one unlock since start, always is always there.
final class TestKeySource: KeychainKeySource, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var unlocked: Bool
    private var everUnlocked: Bool
    private let keys: StaticKeySource
    let masterHex: String

    init(unlocked: Bool = true, master: [UInt8]? = nil) throws {
        let bytes = try master ?? SecureRandom.bytes(32)
        self.masterHex = Encoding.hex(bytes)
        self.keys = try StaticKeySource(masterKey: SecretBytes(copying: bytes))
        self.unlocked = unlocked
        self.everUnlocked = unlocked
    }

    func setUnlocked(_ value: Bool) {
        lock.withLock {
            unlocked = value
            if value { everUnlocked = true }
        }
    }

    func classKey(for accessibility: Accessibility) throws -> SecretBytes {
        let (unlocked, everUnlocked) = lock.withLock { (self.unlocked, self.everUnlocked) }
        switch accessibility.protectionClass {
        case .whenUnlocked where !unlocked:
            throw KeychainError.interactionNotAllowed(accessibility, .locked)
        case .afterFirstUnlock where !everUnlocked:
            throw KeychainError.interactionNotAllowed(accessibility, .noFirstUnlockYet)
        default:
            return try keys.classKey(for: accessibility)
        }
    }

    func blindIndexKey() throws -> SecretBytes { try keys.blindIndexKey() }
}

/// The shared private temporary directory; `sub` names a path inside it.
typealias TemporaryDirectory = TestSupport.TemporaryDirectory

extension TemporaryDirectory {
    func sub(_ name: String) -> String { path(name) }
}

func text(_ secret: SecretBytes) -> String {
    secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

/// The package root, from this file's path.
let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// The built worker executable, or nil.
func workerPath() -> String? { BuiltProducts.path(of: "KeychainWorker") }

/// The built worker executable, or nil with the reason printed (the test then skips).
func workerOrSkip() -> String? {
    guard let path = workerPath() else {
        print("skipped: the KeychainWorker helper is not built (run swift build --build-tests)")
        return nil
    }
    return path
}

extension KeychainError {
    var isCorrupted: Bool { if case .corrupted = self { return true } else { return false } }
    var isNotFound: Bool { if case .itemNotFound = self { return true } else { return false } }
    var isDuplicate: Bool { if case .duplicateItem = self { return true } else { return false } }
    /// The item ids a listing reported damaged (nil for another error); each with a corrupted reason.
    var damagedIDs: [String]? {
        guard case .damagedItems(let items) = self, items.allSatisfy({ $0.error.isCorrupted }) else { return nil }
        return items.map(\.itemID)
    }
}

func keychainError(_ body: () throws -> Void) -> KeychainError? {
    do { try body() } catch let error as KeychainError { return error } catch { return nil }
    return nil
}

/// A connection for a test's own reads and edits of a keychain file: it waits for a lock held
/// by another connection (a keychain still checkpointing) instead of failing with SQLITE_BUSY.
func inspectionQueue(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}

func open(_ dir: TemporaryDirectory, _ source: TestKeySource, interval: Duration = .milliseconds(50),
          marker: String? = nil) throws -> Keychain {
    var configuration = Keychain.Configuration()
    configuration.coalescingInterval = interval
    configuration.installMarkerPath = marker
    return try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
}
