import Foundation
import Cipher

/// The vault's class keys (current and retired generations) and device sub-keys, with the
/// thisDeviceOnly variants bound to one given device key rather than to the manager's.
///
/// A device-key rotation holds two of them, one for the old device key and one for the new, and
/// re-keys everything that depends on the device key from the first to the second (keychains,
/// the protected-file key table). Made by `CryptoManager.deviceBoundKeys(deviceKey:)`.
///
/// Thread safety: immutable after init; ``wipe()`` must not race other calls.
public final class DeviceBoundKeys: @unchecked Sendable {
    /// The check value of the device key these keys are bound to (``DeviceKeyRecord/checkValue(of:)``).
    public let deviceCheck: Data
    private let device: SecretBytes
    private let current: [Accessibility: SecretBytes]
    private let retired: [Accessibility: [SecretBytes]]

    init(device: SecretBytes, current: [Accessibility: SecretBytes], retired: [Accessibility: [SecretBytes]]) {
        self.device = device
        self.deviceCheck = DeviceKeyRecord.checkValue(of: device)
        self.current = current
        self.retired = retired
    }

    deinit { wipe() }

    /// The current key of `accessibility`. The object owns it: do not wipe it.
    /// - Parameter accessibility: The accessibility whose key is wanted.
    /// - Returns: The key.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for an accessibility without a key (never for the six classes).
    public func classKey(for accessibility: Accessibility) throws(VaultError) -> SecretBytes {
        guard let key = current[accessibility] else { throw VaultError.invalidArgument("no \(accessibility.name) key") }
        return key
    }

    /// A copy of the current key of `accessibility` (the caller wipes it).
    /// - Parameter accessibility: The accessibility whose key is wanted.
    /// - Returns: The copy.
    /// - Throws: ``VaultError``, as ``classKey(for:)``.
    package func classKeyCopy(for accessibility: Accessibility) throws(VaultError) -> SecretBytes {
        try classKey(for: accessibility).copy()
    }

    /// Copies of the retired keys of `accessibility`, newest first (the caller wipes them).
    /// - Parameter accessibility: The accessibility whose retired keys are wanted.
    /// - Returns: The copies (empty when there is none).
    public func retiredClassKeys(for accessibility: Accessibility) -> [SecretBytes] {
        (retired[accessibility] ?? []).map { $0.copy() }
    }

    /// HKDF-SHA256(device key, info = purpose), as ``CryptoManager/deviceSubkey(purpose:)`` with this device key.
    /// - Parameter purpose: The HKDF info string naming the use.
    /// - Returns: The 32-byte subkey.
    public func deviceSubkey(purpose: String) -> SecretBytes {
        KeyDerivation.hkdf(device, info: purpose)
    }

    /// Wipes every key held.
    public func wipe() {
        device.wipe()
        current.values.forEach { $0.wipe() }
        retired.values.forEach { $0.forEach { $0.wipe() } }
    }
}

extension CryptoManager {
    /// Every class key of this vault (current and retired generations), the thisDeviceOnly
    /// variants bound to `deviceKey` instead of this manager's device key; for re-keying what
    /// depends on the device key (``DeviceKeyRotation``).
    ///
    /// Needs every class key: the vault unlocked (or an unlock agent holding it unlocked).
    /// - Parameter deviceKey: 32 bytes; copied.
    /// - Returns: The class keys, bound to `deviceKey`.
    /// - Throws: ``VaultError/classKeyUnavailable(_:_:)`` while locked, ``VaultError/invalidArgument(_:)``
    ///   for a key that is not 32 bytes.
    package func deviceBoundKeys(deviceKey: SecretBytes) throws(VaultError) -> DeviceBoundKeys {
        guard deviceKey.count == 32 else { throw VaultError.invalidArgument("a device key of \(deviceKey.count) bytes, not 32") }
        var current: [Accessibility: SecretBytes] = [:]
        var retired: [Accessibility: [SecretBytes]] = [:]
        func wipeAll() {
            current.values.forEach { $0.wipe() }
            retired.values.forEach { $0.forEach { $0.wipe() } }
        }
        do {
            for protectionClass in ProtectionClass.allCases {
                let plain = Accessibility(protectionClass)
                // The unbound keys: this manager's own (or an agent's) class keys.
                let base = try classKey(for: plain)
                let older = try retiredClassKeys(for: plain)
                let bound = Accessibility(protectionClass, thisDeviceOnly: true)
                current[bound] = KeyHierarchy.deviceBound(base, deviceKey: deviceKey, protectionClass: protectionClass)
                retired[bound] = older.map { KeyHierarchy.deviceBound($0, deviceKey: deviceKey, protectionClass: protectionClass) }
                current[plain] = base
                retired[plain] = older
            }
        } catch {
            wipeAll()
            throw error
        }
        return DeviceBoundKeys(device: deviceKey.copy(), current: current, retired: retired)
    }

    /// Records `check` as the check value of the vault's device key in `vault.state` (a rewrite:
    /// a new generation), after a device-key rotation put a new key in place. Needs the vault
    /// unlocked in this process (an unlock agent's keys do not re-seal the state).
    /// - Throws: ``VaultError/locked``, the errors of a rewrite.
    func recordDeviceCheck(_ check: Data) throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        forgetDeviceKey()
        guard state.deviceCheck != check else { return }
        try vaultCall {
            var next = state
            next.deviceCheck = check
            try rewrite(next, keys: unlocked, expecting: state, during: "the device key was being rotated")
        }
    }

    /// Drops the device key this manager read from its provider (kept in memory since its first
    /// use), so the next use reads it again. After a device-key rotation a manager made before
    /// it still has the old provider record: make a new manager.
    func forgetDeviceKey() {
        memory.withLock { memory in
            memory.deviceKey?.wipe()
            memory.deviceKey = nil
        }
    }
}
