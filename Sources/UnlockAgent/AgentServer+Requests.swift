import Foundation
import Cipher
import AgentWire
import Vault
import Age
import ProtectedFiles
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The requests the agent serves: status, unlock, lock, class keys, file keys; and the TTLs and
// the vault-change check that run before each.
extension AgentServer {
    func handle(_ request: SecretBytes, fd: Int32) throws -> Bool {
        let (version, code) = request.withUnsafeBytes { bytes in bytes.count >= 2 ? (bytes[0], bytes[1]) : (0, 0) }
        guard version == AgentProtocol.version else {
            throw AgentError.protocolViolation("protocol version \(version) is not supported (this agent speaks \(AgentProtocol.version))")
        }
        guard let operation = AgentProtocol.Operation(rawValue: code) else {
            throw AgentError.protocolViolation("unknown request \(code)")
        }
        expireIfDue()
        forgetIfVaultChanged()
        switch operation {
        case .status:
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse(try JSONEncoder().encode(status()).map { $0 }))
        case .unlock:
            try unlock(request)
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse(try JSONEncoder().encode(status()).map { $0 }))
        case .lock:
            lockNow()
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse())
        case .classKeys:
            let response = try classKeys(request)
            defer { response.wipe() }
            try AgentProtocol.writeFrame(fd, response)
        case .unwrapFileKey:
            let key = try unwrapFileKey(request)
            defer { key.wipe() }
            let response = SecretBytes(count: 1 + key.count) { target in
                target[0] = 0
                key.withUnsafeBytes { (target.baseAddress! + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            }
            defer { response.wipe() }
            try AgentProtocol.writeFrame(fd, response)
        case .tokenPIN:
            try holdTokenPIN(request)
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse())
        case .deviceKey:
            let response = try deviceKey(request)
            defer { response.wipe() }
            try AgentProtocol.writeFrame(fd, response)
        case .subscribe:
            let admitted = locked { state -> Bool in
                guard state.subscribers.count + state.pendingSubscribers.count < configuration.maximumSubscribers else { return false }
                state.pendingSubscribers.append(fd)
                return true
            }
            guard admitted else { throw AgentError.remote("too many lock-state subscribers") }
            // The run loop owns the descriptor from here: it sends the current state, then every change.
            wake()
            return true
        case .stop:
            try? AgentProtocol.writeFrame(fd, AgentProtocol.okResponse())
            log?("stopping on request")
            stop()
        }
        return false
    }

    /// The agent's status (no secret).
    /// - Returns: The lock state, the data directory served, the TTLs and what remains of them.
    public func status() -> AgentStatus {
        let now = Self.now()
        let unlocked = manager.isUnlocked
        return locked { state in
            var idle: Int?, max: Int?
            if unlocked, let unlockedAt = state.unlockedAt, let lastUse = state.lastUse {
                idle = Swift.max(0, Int((Double(configuration.idleTTL) - (now - lastUse)).rounded(.up)))
                max = Swift.max(0, Int((Double(configuration.maxTTL) - (now - unlockedAt)).rounded(.up)))
            }
            return AgentStatus(state: unlocked ? .unlocked : .locked, firstUnlockDone: state.firstUnlockDone, home: manager.directory,
                               idleTTL: configuration.idleTTL, maxTTL: configuration.maxTTL, idleRemaining: idle, maxRemaining: max,
                               pid: getpid(), uid: UInt32(geteuid()))
        }
    }

    /// Holds the device key's token PIN for this process (``DeviceKeyHardware/holdPIN(_:)``)
    /// until the agent stops.
    func holdTokenPIN(_ request: SecretBytes) throws {
        let count = request.count - 2
        guard (1...AgentProtocol.maximumPIN).contains(count) else {
            throw AgentError.protocolViolation("a token PIN of \(count) bytes (1 to \(AgentProtocol.maximumPIN))")
        }
        let pin = request.slice(2..<request.count)
        defer { pin.wipe() }
        DeviceKeyHardware.holdPIN(pin)
        // Tried at once, so that a wrong PIN is reported to the person who typed it (the
        // token counts the attempt, as any login) and not kept.
        do {
            try manager.deviceKeyForAgent().wipe()
        } catch {
            DeviceKeyHardware.holdPIN(nil)
            throw error
        }
        log?("holding the token PIN for the device key")
    }

    /// `0 ‖ device key` for the vault this agent serves.
    func deviceKey(_ request: SecretBytes) throws -> SecretBytes {
        let vaultID = try request.withUnsafeBytes { bytes -> Data in
            guard bytes.count == 2 + 16 else { throw AgentError.protocolViolation("a device-key request of \(bytes.count) bytes") }
            return Data(bytes[2..<18])
        }
        guard try manager.vaultID == vaultID else {
            throw AgentError.remote("this agent serves another vault (\(manager.directory))")
        }
        let key = try manager.deviceKeyForAgent()
        defer { key.wipe() }
        return SecretBytes(count: 1 + key.count) { target in
            target[0] = 0
            key.withUnsafeBytes { (target.baseAddress! + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    func unlock(_ request: SecretBytes) throws {
        let (passcode, answers) = try request.withUnsafeBytes { bytes -> (SecretBytes?, [SecretBytes]) in
            guard bytes.count >= 3 else { throw AgentError.protocolViolation("an unlock request without a credential") }
            func secret(_ range: Range<Int>) -> SecretBytes {
                SecretBytes(count: range.count) { target in
                    if !range.isEmpty { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[range])) }
                }
            }
            switch bytes[2] {
            case 0:
                guard bytes.count > 3 else { throw AgentError.protocolViolation("an empty passcode") }
                return (secret(3..<bytes.count), [])
            case 1:
                guard bytes.count >= 4, (1...CryptoManager.maximumQuestions).contains(Int(bytes[3])) else {
                    throw AgentError.protocolViolation("an unlock request with a bad answer count")
                }
                var answers: [SecretBytes] = []
                var offset = 4
                for _ in 0..<Int(bytes[3]) {
                    guard offset + 2 <= bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("a truncated answer") }
                    let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
                    offset += 2
                    guard offset + length <= bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("a truncated answer") }
                    answers.append(secret(offset..<offset + length))
                    offset += length
                }
                guard offset == bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("trailing bytes after the answers") }
                return (nil, answers)
            default:
                throw AgentError.protocolViolation("an unknown credential kind")
            }
        }
        defer {
            passcode?.wipe()
            answers.forEach { $0.wipe() }
        }
        if let passcode { try manager.unlock(passcode: passcode) } else { try manager.unlock(answers: answers) }
        // Taken after the unlock, which rewrites a state of an older version in the current one.
        let identity = manager.stateIdentity
        let vaultID = try? manager.vaultID
        let now = Self.now()
        locked {
            $0.unlockedAt = now
            $0.lastUse = now
            $0.firstUnlockDone = true
            $0.servedVault = (vaultID, identity)
        }
        log?("unlocked")
        wake()
    }

    func lockNow() {
        locked {
            $0.unlockedAt = nil
            $0.lastUse = nil
        }
        manager.lock()
        log?("locked on request")
        wake()
    }

    /// Locks and forgets every key (afterFirstUnlock ones too, and the device key) when the
    /// vault's files are no longer those unlocked: erased, rewritten (a passcode or questions
    /// change, a rotation of the application, class or device key) or put back from a copy. A
    /// vault restored from a backup is thus never served with keys held from before; it needs
    /// an unlock again.
    func forgetIfVaultChanged() {
        guard let served = locked({ $0.servedVault }) else { return }
        let current = manager.stateIdentity
        guard !current.matches(served.identity) else { return }
        let forget = locked { state -> Bool in
            // Another thread forgot first, or a new unlock recorded another identity.
            guard let now = state.servedVault, now.identity == served.identity else { return false }
            state.servedVault = nil
            state.unlockedAt = nil
            state.lastUse = nil
            state.firstUnlockDone = false
            return true
        }
        guard forget else { return }
        manager.forgetHeldKeys(vaultID: served.id)
        log?(current.hasState
             ? "locked and forgot every key: the vault's files changed (a new passcode or questions, a key rotation, or files put back)"
             : "locked and forgot every key: the vault was erased")
        wake()
    }

    /// Locks when the idle or the maximum TTL has run out.
    func expireIfDue() {
        let now = Self.now()
        let expired = locked { state -> String? in
            guard let unlockedAt = state.unlockedAt, let lastUse = state.lastUse else { return nil }
            var why: String?
            if now - lastUse >= Double(configuration.idleTTL) { why = "idle TTL" }
            if now - unlockedAt >= Double(configuration.maxTTL) { why = "maximum TTL" }
            if why != nil {
                state.unlockedAt = nil
                state.lastUse = nil
            }
            return why
        }
        if let expired {
            manager.lock()
            log?("locked: the \(expired) ran out")
            wake()
        }
    }

    func classKeys(_ request: SecretBytes) throws -> SecretBytes {
        let (classCode, deviceOnly, vaultID) = try request.withUnsafeBytes { bytes -> (UInt8, UInt8, Data) in
            guard bytes.count == 2 + 2 + 16 else { throw AgentError.protocolViolation("a class-key request of \(bytes.count) bytes") }
            return (bytes[2], bytes[3], Data(bytes[4..<20]))
        }
        guard let protectionClass = AgentProtocol.protectionClass(classCode), deviceOnly <= 1 else {
            throw AgentError.protocolViolation("an unknown class")
        }
        guard protectionClass != .always else {
            throw AgentError.remote("the always class needs no agent; read its key from the data directory")
        }
        guard try manager.vaultID == vaultID else {
            throw AgentError.remote("this agent serves another vault (\(manager.directory))")
        }
        let accessibility = Accessibility(protectionClass, thisDeviceOnly: deviceOnly == 1)
        // The agent's own state decides, not the process's: a program that embeds the agent
        // and unlocked the vault elsewhere (the afterFirstUnlock keys are kept per process)
        // must not serve them before the agent itself was unlocked.
        let firstUnlockDone = locked { $0.firstUnlockDone }
        switch protectionClass {
        case .whenUnlocked where !manager.isUnlocked:
            throw VaultError.classKeyUnavailable(accessibility, .locked)
        case .afterFirstUnlock where !firstUnlockDone:
            throw VaultError.classKeyUnavailable(accessibility, .noFirstUnlockYet)
        default:
            break
        }
        let current = try manager.classKey(for: accessibility)
        var keys = [current]
        defer { keys.forEach { $0.wipe() } }
        keys += try manager.retiredClassKeys(for: accessibility)
        let count = min(keys.count, 255)
        locked { if $0.lastUse != nil { $0.lastUse = Self.now() } }
        // status 0 ‖ count ‖ keys
        return SecretBytes(count: 2 + 32 * count) { target in
            target[0] = 0
            target[1] = UInt8(count)
            for index in 0..<count {
                keys[index].withUnsafeBytes { (target.baseAddress! + 2 + 32 * index).copyMemory(from: $0.baseAddress!, byteCount: min(32, $0.count)) }
            }
        }
    }

    /// Unwraps a protected file's key with the class identity, which never leaves the agent.
    /// The same rules as for class keys decide which classes are served: whenUnlocked ones
    /// (complete, completeUnlessOpen) only while unlocked, afterFirstUnlock ones from the
    /// agent's own first unlock, the none class always (its key is in the data directory anyway).
    func unwrapFileKey(_ request: SecretBytes) throws -> SecretBytes {
        let (onlyClassName, stanzas) = try request.withUnsafeBytes { try AgentProtocol.parseUnwrapRequest(Array($0)) }
        var onlyClass: FileProtectionClass?
        if let onlyClassName {
            guard let cls = FileProtectionClass(name: onlyClassName) else {
                throw AgentError.protocolViolation("an unknown protection class \(onlyClassName.prefix(60).debugDescription)")
            }
            onlyClass = cls
        }
        let firstUnlockDone = locked { $0.firstUnlockDone }
        let key = try files.unwrapFileKey(stanzas: stanzas, onlyClass: onlyClass) { cls in
            switch cls.accessibility.protectionClass {
            case .whenUnlocked where !manager.isUnlocked: throw ProtectedFileError.locked(cls, .locked)
            case .afterFirstUnlock where !firstUnlockDone: throw ProtectedFileError.locked(cls, .noFirstUnlockYet)
            default: break
            }
        }
        locked { if $0.lastUse != nil { $0.lastUse = Self.now() } }
        log?("unwrapped a file key for age-plugin-securefoundation")
        return key
    }
}
