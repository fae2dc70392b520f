import Foundation
import Cipher

extension CryptoManager {
    // MARK: Class keys

    /// The key of a protection class (a new copy each call; wipe it when done).
    ///
    /// - whenUnlocked: needs the manager unlocked.
    /// - afterFirstUnlock: needs one unlock of this vault since the process started (survives ``lock()``).
    /// - always: needs no unlock; it is a random key kept in the data directory (`always.key`).
    /// - thisDeviceOnly variants also mix in the device key.
    ///
    /// whenUnlocked and afterFirstUnlock come from the class master, a random key sealed in the
    /// state under the application key, so they stay the same across key rotation; only
    /// ``rotateClassKeys()`` changes them (and the always key). An unlocked manager follows a
    /// class-key rotation made by another manager or process (it notices that `vault.state`
    /// changed and re-reads the class master), or locks when its application key no longer
    /// opens the state.
    ///
    /// - Parameter accessibility: The class.
    /// - Returns: 32 key bytes.
    /// - Throws: ``VaultError/classKeyUnavailable(_:_:)`` with the reason, or permission errors.
    public func classKey(for accessibility: Accessibility) throws(VaultError) -> SecretBytes {
        let base: SecretBytes
        switch accessibility.protectionClass {
        case .whenUnlocked:
            if let unlocked = try currentUnlockedKeys(), let key = try? unlocked.classKey(.whenUnlocked) {
                base = key
            } else if let keys = try sourcedClassKeys(.whenUnlocked) {
                base = keys[0]
                keys.dropFirst().forEach { $0.wipe() }
            } else {
                let setUp = try loadState() != nil
                throw VaultError.classKeyUnavailable(accessibility, setUp ? .locked : .notSetUp)
            }
        case .afterFirstUnlock:
            if let unlocked = try currentUnlockedKeys(), let cached = FirstUnlockCache.key(vaultID: unlocked.vaultID) {
                base = cached
            } else if let state = try loadState() {
                if let cached = FirstUnlockCache.key(vaultID: state.vaultID) {
                    base = cached
                } else if let keys = try sourcedClassKeys(.afterFirstUnlock) {
                    base = keys[0]
                    keys.dropFirst().forEach { $0.wipe() }
                } else {
                    throw VaultError.classKeyUnavailable(accessibility, .noFirstUnlockYet)
                }
            } else {
                throw VaultError.classKeyUnavailable(accessibility, .notSetUp)
            }
        case .always:
            let keys = try alwaysKeys()
            base = keys[0]
            keys.dropFirst().forEach { $0.wipe() }
        }
        return try bindToDevice(base, accessibility)
    }

    /// The keys of a protection class's earlier generations (before ``rotateClassKeys()``), newest
    /// first, for opening data sealed before a rotation; empty when there was no rotation. The same
    /// availability rules as ``classKey(for:)``: whenUnlocked needs the vault unlocked,
    /// afterFirstUnlock one unlock in this process, always nothing. Wipe them when done.
    ///
    /// - Parameter accessibility: The class.
    /// - Returns: 32-byte keys, newest first.
    /// - Throws: ``VaultError/classKeyUnavailable(_:_:)`` with the reason, or permission errors.
    public func retiredClassKeys(for accessibility: Accessibility) throws(VaultError) -> [SecretBytes] {
        let bases: [SecretBytes]
        switch accessibility.protectionClass {
        case .whenUnlocked:
            let own: [SecretBytes]?
            if let unlocked = try currentUnlockedKeys() { own = try? unlocked.classKeys(.whenUnlocked) } else { own = nil }
            let sourced: [SecretBytes]? = if let own { own } else { try sourcedClassKeys(.whenUnlocked) }
            guard let keys = sourced else {
                let setUp = try loadState() != nil
                throw VaultError.classKeyUnavailable(accessibility, setUp ? .locked : .notSetUp)
            }
            keys[0].wipe()
            bases = Array(keys.dropFirst())
        case .afterFirstUnlock:
            let vaultID: Data
            if let unlocked = try currentUnlockedKeys() {
                vaultID = unlocked.vaultID
            } else if let state = try loadState() {
                vaultID = state.vaultID
            } else {
                throw VaultError.classKeyUnavailable(accessibility, .notSetUp)
            }
            if let keys = FirstUnlockCache.retiredKeys(vaultID: vaultID) {
                bases = keys
            } else if let keys = try sourcedClassKeys(.afterFirstUnlock) {
                keys[0].wipe()
                bases = Array(keys.dropFirst())
            } else {
                throw VaultError.classKeyUnavailable(accessibility, .noFirstUnlockYet)
            }
        case .always:
            let keys = try alwaysKeys()
            keys[0].wipe()
            bases = Array(keys.dropFirst())
        }
        var result: [SecretBytes] = []
        do throws(VaultError) {
            for (offset, base) in bases.enumerated() {
                do throws(VaultError) {
                    result.append(try bindToDevice(base, accessibility))
                } catch {
                    bases[(offset + 1)...].forEach { $0.wipe() }
                    throw error
                }
            }
        } catch {
            result.forEach { $0.wipe() }
            throw error
        }
        return result
    }

    /// Replaces the class master (whenUnlocked and afterFirstUnlock) and the always-class key with
    /// new random keys. The previous generations stay, for opening only: the class masters sealed
    /// in the state (at most 16; a rotation beyond that drops the oldest), the always keys in
    /// `always.key`. Nothing sealed under the new keys can be opened from a copy of the state or
    /// of `always.key` taken before. Data sealed under the old keys is not re-sealed here (the
    /// keychain does that); until it is, ``retiredClassKeys(for:)`` opens it.
    ///
    /// Needs the vault unlocked. `always.key` is written first, then the state (each atomically,
    /// under the vault's lock): an interruption between the two leaves a new always key with the
    /// old class master, and both still open everything.
    ///
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)`` when the vault changed
    ///   elsewhere meanwhile, I/O errors (then nothing changed, or only the always key).
    public func rotateClassKeys() throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        try vaultCall {
            let current = try unlocked.secretsCopy()
            var retiredMasters = [current.classMaster] + current.retiredClassMasters
            while retiredMasters.count > VaultSecrets.maximumRetiredClassMasters { retiredMasters.removeLast().wipe() }
            let secrets = VaultSecrets(classMaster: try SecretBytes.random(count: 32), retired: current.retired,
                                       retiredClassMasters: retiredMasters)
            try rewrite(state, keys: unlocked, expecting: state, secrets: secrets,
                        during: "the class keys were being rotated") {
                try rotateAlwaysKeyLocked()
                testHooks.step?("always key rotated")
            }
        }
    }

    /// The unlocked keys, re-read when another manager or process changed `vault.state` since
    /// they were read (a cheap stat first). When the state's key id is the one in memory, the
    /// secret section is opened again with the application key held, so a class-key rotation
    /// elsewhere is followed. When it cannot be (the key was rotated elsewhere, the vault was
    /// erased or replaced), the manager locks: it must not go on with keys that are no longer
    /// the vault's. Nil when locked.
    func currentUnlockedKeys() throws(VaultError) -> UnlockedKeys? {
        guard let unlocked = memory.withLock({ $0.unlocked }) else { return nil }
        let identity = FileIdentity(path: statePath)
        if identity != nil, identity == unlocked.stateIdentity { return unlocked }
        let state: VaultState?
        do { state = try loadState() } catch { lock(); throw error }
        guard let state, state.vaultID == unlocked.vaultID, Array(state.keyID) == unlocked.keyID else {
            lock()
            return nil
        }
        let secrets: VaultSecrets
        do {
            secrets = try openSecrets(of: state, appKey: unlocked.appKey)
        } catch {
            lock()
            throw error
        }
        let fresh = try vaultCall {
            try UnlockedKeys(vaultID: state.vaultID, keyID: unlocked.keyID, appKey: try unlocked.appKey.copyKey(),
                             secrets: secrets, stateIdentity: identity)
        }
        let installed: Bool = memory.withLock { memory in
            guard memory.unlocked === unlocked else { return false }
            memory.unlocked = fresh
            return true
        }
        guard installed else {
            fresh.wipe()
            return memory.withLock { $0.unlocked }
        }
        FirstUnlockCache.store(vaultID: fresh.vaultID, keys: try vaultCall { try fresh.classKeys(.afterFirstUnlock) })
        unlocked.wipe()
        return fresh
    }

    /// Keys of `protectionClass` from ``unlockedKeySource`` (current first, then retired), or nil
    /// without a source, without a vault, or when the source has none. Keys of the wrong length
    /// are never used.
    func sourcedClassKeys(_ protectionClass: ProtectionClass) throws(VaultError) -> [SecretBytes]? {
        guard let source = unlockedKeySource, let state = try loadState() else { return nil }
        guard let keys = source.unlockedClassKeys(protectionClass, vaultID: state.vaultID) else { return nil }
        guard !keys.isEmpty, keys.allSatisfy({ $0.count == 32 }) else {
            keys.forEach { $0.wipe() }
            return nil
        }
        return keys
    }

    /// `base` bound to the device key for a thisDeviceOnly class (consumes `base`).
    func bindToDevice(_ base: SecretBytes, _ accessibility: Accessibility) throws(VaultError) -> SecretBytes {
        guard accessibility.thisDeviceOnly else { return base }
        defer { base.wipe() }
        let device: SecretBytes
        do {
            device = try cachedDeviceKey()
        } catch {
            if case .insecurePermissions = error { throw error }
            throw VaultError.classKeyUnavailable(accessibility, .deviceKeyMissing)
        }
        defer { device.wipe() }
        return KeyHierarchy.deviceBound(base, deviceKey: device, protectionClass: accessibility.protectionClass)
    }

    /// A sub-key of the device key for a named purpose: HKDF-SHA256(device key, info = purpose).
    /// Needs no unlock. Example: the keychain's blind-index key, purpose "keychain blind index v1".
    ///
    /// - Parameter purpose: A fixed, versioned name of what the key is for.
    /// - Returns: 32 key bytes.
    /// - Throws: ``VaultError/deviceKey(_:)`` or ``VaultError/insecurePermissions(path:reason:fix:)``.
    public func deviceSubkey(purpose: String) throws(VaultError) -> SecretBytes {
        guard !purpose.isEmpty else { throw VaultError.invalidArgument("the purpose of a device sub-key is empty") }
        let device = try cachedDeviceKey()
        defer { device.wipe() }
        return KeyDerivation.hkdf(device, info: purpose)
    }

    /// The check value of the device key when it can be read now, else nil.
    func readableDeviceCheck() -> Data? {
        guard let key = try? cachedDeviceKey() else { return nil }
        defer { key.wipe() }
        return DeviceKeyRecord.checkValue(of: key)
    }

    /// A copy of the device key, read once from the provider and then kept in locked memory.
    func cachedDeviceKey() throws(VaultError) -> SecretBytes {
        if let key = memory.withLock({ $0.deviceKey }) { return key.copy() }
        let key: SecretBytes
        do {
            key = try deviceKeyProvider.deviceKey()
        } catch {
            guard let served = try agentDeviceKey() else { throw VaultError.wrap(error) }
            key = served
        }
        guard key.count == 32 else {
            key.wipe()
            throw VaultError.deviceKey("the device key is \(key.count) bytes, not 32")
        }
        // A version-3 state names its device key: another one is never used.
        if let expected = (try? VaultState.load(directory: directory))??.deviceCheck, DeviceKeyRecord.checkValue(of: key) != expected {
            key.wipe()
            throw VaultError.deviceKey(Self.otherDeviceKeyText)
        }
        memory.withLock { memory in
            if memory.deviceKey == nil { memory.deviceKey = key.copy() }
        }
        return key
    }

    /// The device key from ``unlockedKeySource`` (the unlock agent, which may hold a token's
    /// PIN this process lacks), when the provider has a trusted record (beside the device key,
    /// outside the data directory) whose check value the key must match; else nil.
    /// - Throws: ``VaultError/deviceKey(_:)`` for a served key that is not this vault's.
    func agentDeviceKey() throws(VaultError) -> SecretBytes? {
        guard let checked = deviceKeyProvider as? CheckedDeviceKeyProvider, let source = unlockedKeySource,
              let vaultID = (try? loadState())??.vaultID, let served = source.deviceKey(vaultID: vaultID) else { return nil }
        guard served.count == 32, DeviceKeyRecord.checkValue(of: served) == checked.record.check else {
            served.wipe()
            throw VaultError.deviceKey("the unlock agent gave a device key that is not this vault's (its check value differs from the record beside the device key); stop that agent and start one for this vault")
        }
        return served
    }

    /// The device key as this manager reads it (its provider, else the unlock agent), for the
    /// unlock agent to serve to processes of the same user that cannot read it themselves.
    /// - Returns: A copy of the 32-byte device key (the caller wipes it).
    /// - Throws: ``VaultError/deviceKey(_:)`` and the provider's errors.
    package func deviceKeyForAgent() throws(VaultError) -> SecretBytes {
        // A token can be pulled out: it is asked again at every request (as a TLS key in a
        // token is used at every handshake), so the agent stops serving the key once the token
        // is gone instead of serving what it read before.
        if deviceKeyIsOnARemovableToken {
            let old = memory.withLock { memory -> SecretBytes? in
                defer { memory.deviceKey = nil }
                return memory.deviceKey
            }
            old?.wipe()
        }
        return try cachedDeviceKey()
    }

    /// Whether the device key comes from a PKCS #11 token (which can be removed at any time).
    var deviceKeyIsOnARemovableToken: Bool {
        deviceKeyProvider.isOnRemovableHardware
    }

    /// Reads the device key from its provider and checks that it is this vault's, as every use
    /// of a device-bound class or of the keychain will: the token's PIN, the token itself, the
    /// TPM, the credential. `vault unlock` runs it after the passcode so that a right passcode
    /// with a wrong token PIN (or no token) is not reported as unlocked.
    /// - Throws: The provider's ``VaultError`` (``VaultError/wrongTokenPIN(_:)``,
    ///   ``VaultError/tokenPINUnavailable(_:)``, ``VaultError/deviceKey(_:)``, …).
    public func checkDeviceKey() throws(VaultError) {
        let key = try cachedDeviceKey()
        key.wipe()
    }

    /// The always-class keys, current first: `always.key` in the data directory, created on
    /// first use (under the vault's lock, so its temporary file is never taken for a leftover).
    func alwaysKeys() throws(VaultError) -> [SecretBytes] {
        try vaultCall {
            if access(alwaysKeyPath, F_OK) != 0 {
                try withFileLock {
                    if access(alwaysKeyPath, F_OK) != 0 {
                        try KeyFile.createExclusively(path: alwaysKeyPath, key: SecretBytes.random(count: 32))
                    }
                }
            }
            return try AlwaysKeyFile.read(path: alwaysKeyPath)
        }
    }

    /// Puts a new random always key in front of the existing ones (at most 17 in all), written
    /// atomically. Call with the file lock held.
    func rotateAlwaysKeyLocked() throws(VaultError) {
        try vaultCall {
            var keys = access(alwaysKeyPath, F_OK) == 0 ? try AlwaysKeyFile.read(path: alwaysKeyPath) : []
            defer { keys.forEach { $0.wipe() } }
            keys.insert(try SecretBytes.random(count: 32), at: 0)
            while keys.count > 1 + VaultSecrets.maximumRetiredClassMasters { keys.removeLast().wipe() }
            let bytes = try AlwaysKeyFile.encode(keys)
            defer { bytes.wipe() }
            try replaceDestroyingSuperseded(alwaysKeyPath) {
                try bytes.withUnsafeBytes { raw in
                    try SecureFile.replaceAtomically(alwaysKeyPath) { fd in try SecureFile.writeAll(fd, raw, path: alwaysKeyPath) }
                }
            }
        }
    }

    // MARK: Encryption with the application key

    /// Seals bytes under the application key (the sealed-data format of the Cipher module; the
    /// key id is recorded, so data stays readable after `rotateKey(passcode:answers:)`).
    ///
    /// - Parameters:
    ///   - plaintext: The bytes.
    ///   - context: Associated data the sealed bytes are bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``VaultError/locked``.
    public func encrypt<Plaintext: DataProtocol>(_ plaintext: Plaintext, context: [UInt8] = []) throws(VaultError) -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.seal(plaintext, with: unlocked.keyring, context: context) }
    }

    /// Opens bytes sealed by ``encrypt(_:context:)`` under the current or a retired application key.
    /// - Parameters:
    ///   - sealed: The sealed envelope.
    ///   - context: The associated data it was sealed with.
    /// - Returns: The plaintext.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)`` when the data was modified,
    ///   sealed under another vault's key, or bound to another context.
    public func decrypt(_ sealed: [UInt8], context: [UInt8] = []) throws(VaultError) -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.open(sealed, with: unlocked.keyring, context: context) }
    }

    /// Seals a Codable value (canonical JSON) under the application key.
    /// - Parameters:
    ///   - value: The value.
    ///   - context: Associated data the sealed bytes are bound to (not stored).
    /// - Returns: The sealed envelope.
    /// - Throws: ``VaultError/locked``.
    public func encrypt<Value: Encodable>(value: Value, context: [UInt8] = []) throws(VaultError) -> [UInt8] {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.seal(value: value, with: unlocked.keyring, context: context) }
    }

    /// Opens a Codable value sealed by ``encrypt(value:context:)``.
    /// - Parameters:
    ///   - type: The value's type.
    ///   - sealed: The sealed envelope.
    ///   - context: The associated data it was sealed with.
    /// - Returns: The decoded value.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)``.
    public func decrypt<Value: Decodable>(_ type: Value.Type, from sealed: [UInt8], context: [UInt8] = []) throws(VaultError) -> Value {
        let unlocked = try requireUnlocked()
        defer { HeapScrub.scrubRecentlyFreed() }
        return try vaultCall { try Sealed.open(type, from: sealed, with: unlocked.keyring, context: context) }
    }

    // MARK: Test support

    /// The application key in hex, for the memory-scan test only. Never use it in an application.
    /// - Returns: The key in hex, or nil while locked.
    package func _applicationKeyHexForTesting() -> String? {
        memory.withLock { memory in
            memory.unlocked?.appKey.withUnsafeBytes { bytes in
                let digits = Array("0123456789abcdef")
                var text = ""
                for byte in bytes { text.append(digits[Int(byte >> 4)]); text.append(digits[Int(byte & 0x0F)]) }
                return text
            }
        }
    }
}
