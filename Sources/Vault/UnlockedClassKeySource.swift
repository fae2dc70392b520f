import Foundation
import Cipher

/// Class keys of an unlocked vault held by another process, such as the unlock agent
/// (`UnlockAgent`'s `AgentClient`).
///
/// A ``CryptoManager`` made with such a source asks it for the whenUnlocked and
/// afterFirstUnlock keys whenever it cannot derive them itself (it is locked, or has not been
/// unlocked in this process). The source never sees the passcode or the application key, only
/// class keys, and only while its own rules allow (see docs/UNLOCK.md).
public protocol UnlockedClassKeySource: Sendable {
    /// The keys of `protectionClass` (``ProtectionClass/whenUnlocked`` or
    /// ``ProtectionClass/afterFirstUnlock``) of the vault named `vaultID`, not bound to the
    /// device key: the current key first, then the retired generations, newest first.
    ///
    /// - Returns: The keys (the caller wipes them), or nil when the source cannot give them
    ///   (no agent running, the agent is locked or holds another vault).
    /// - Parameters:
    ///   - protectionClass: The class.
    ///   - vaultID: The vault's id.
    func unlockedClassKeys(_ protectionClass: ProtectionClass, vaultID: Data) -> [SecretBytes]?

    /// The device key of the vault named `vaultID` as the source's process reads it, for when
    /// this process's own provider cannot (a token whose PIN was given to the unlock agent
    /// only). The manager uses it only when it has the trusted device-key record's check value
    /// and the key matches it.
    ///
    /// - Returns: The 32-byte device key (the caller wipes it), or nil (the default).
    /// - Parameter vaultID: The vault's id.
    func deviceKey(vaultID: Data) -> SecretBytes?
}

extension UnlockedClassKeySource {
    /// No device key: the default for sources that serve only class keys.
    /// - Parameter vaultID: The vault's id.
    /// - Returns: nil: this source serves no device key.
    public func deviceKey(vaultID: Data) -> SecretBytes? { nil }
}
