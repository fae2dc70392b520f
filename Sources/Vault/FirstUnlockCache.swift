import Foundation
import Cipher

/// The afterFirstUnlock class keys of every vault unlocked in this process, by vault id; kept
/// until the process ends (as iOS keeps them until reboot). Guarded by a lock.
enum FirstUnlockCache {
    /// Current generation first, then retired generations, newest first.
    private static let keys = Protected([Data: [SecretBytes]]())

    static func store(vaultID: Data, keys newKeys: [SecretBytes]) {
        keys.withLock { keys in
            keys[vaultID]?.forEach { $0.wipe() }
            keys[vaultID] = newKeys
        }
    }

    /// The current generation's key.
    static func key(vaultID: Data) -> SecretBytes? {
        keys.withLock { $0[vaultID]?.first.map { $0.copy() } }
    }

    /// The retired generations' keys, newest first.
    static func retiredKeys(vaultID: Data) -> [SecretBytes]? {
        keys.withLock { $0[vaultID].map { $0.dropFirst().map { $0.copy() } } }
    }

    static func remove(vaultID: Data) {
        keys.withLock { keys in
            keys[vaultID]?.forEach { $0.wipe() }
            keys[vaultID] = nil
        }
    }
}
