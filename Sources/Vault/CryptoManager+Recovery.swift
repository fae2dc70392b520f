import Foundation
import Crypto
import Cipher

/// What a person proves they may open a vault with: the passcode, the answers, or the recovery key.
public enum VaultCredential: Sendable {
    /// The passcode.
    case passcode(SecretBytes)
    /// The answers, one entry per question, in order (empty: not answered).
    case answers([SecretBytes])
    /// The recovery key (``RecoveryKey``).
    case recoveryKey(RecoveryKey)

    /// Reads security answers from a file: one answer per line, in the order of the questions,
    /// each line straight into locked memory (never a `String`); a `\r` before a newline is
    /// dropped, and an empty line is an answer left empty.
    /// - Parameter path: The answers file.
    /// - Returns: The answers.
    /// - Throws: ``VaultError/io(_:)`` when the file cannot be read (64 KiB at most).
    public static func answers(fromFile path: String) throws(VaultError) -> [SecretBytes] {
        let all: SecretBytes
        do { all = try SecretBytes(contentsOfFile: path) } catch {
            if case .io(let why) = error { throw VaultError.io(why) }
            throw VaultError.io("\(error)")
        }
        defer { all.wipe() }
        var lines: [SecretBytes] = []
        all.withUnsafeBytes { bytes in
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == 0x0A {
                var end = index
                if end > start, bytes[end - 1] == 0x0D { end -= 1 }
                let from = start
                let count = end - from
                lines.append(SecretBytes(count: count) { target in
                    if count > 0 { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[from..<from + count])) }
                })
                start = index + 1
            }
        }
        return lines
    }

    /// The name recorded in the state's re-binding record: `passcode`, `answers` or `recovery-key`.
    public var name: String {
        switch self {
        case .passcode: return "passcode"
        case .answers: return "answers"
        case .recoveryKey: return "recovery-key"
        }
    }
}

extension CryptoManager {
    // MARK: The recovery key

    /// Whether the vault has a recovery key.
    /// - Throws: ``VaultError/notSetUp``, ``VaultError/corrupted(_:)`` and permission errors.
    public var hasRecoveryKey: Bool {
        get throws(VaultError) { try requireState().recovery != nil }
    }

    /// Makes a new recovery key for the vault, replacing (and so revoking) any earlier one. Needs
    /// the vault unlocked in this process. Show the key's ``RecoveryKey/text()`` to the person
    /// once; the vault keeps only a wrapping of the application key under a KEK derived from it
    /// (and that KEK sealed under the application key, for key rotations).
    ///
    /// A copy of `vault.state` taken before the change still opens with the earlier recovery
    /// key, as it does with an earlier passcode.
    /// - Returns: The new key.
    /// - Throws: ``VaultError/locked``, the errors of a state rewrite.
    public func createRecoveryKey() throws(VaultError) -> RecoveryKey {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        let key = try RecoveryKey.generate()
        do throws(VaultError) {
            try vaultCall {
                var next = state
                next.recovery = try key.wrap(unlocked.appKey, state: state)
                try rewrite(next, keys: unlocked, expecting: state, during: "a recovery key was being made")
            }
        } catch {
            key.wipe()
            throw error
        }
        return key
    }

    /// Removes the recovery key (it opens nothing in this state afterwards). Needs the vault
    /// unlocked in this process.
    /// - Throws: ``VaultError/locked``, ``VaultError/invalidArgument(_:)`` when there is none,
    ///   the errors of a state rewrite.
    public func removeRecoveryKey() throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        guard state.recovery != nil else { throw VaultError.invalidArgument("this vault has no recovery key") }
        try vaultCall {
            var next = state
            next.recovery = nil
            try rewrite(next, keys: unlocked, expecting: state, during: "the recovery key was being removed")
        }
    }

    /// Unlocks with the recovery key: one attempt of the same counter as the passcode and the
    /// answers (a typo caught by the key's checksum never reaches the vault).
    /// - Parameter recoveryKey: The key.
    /// - Throws: ``VaultError/wrongRecoveryKey(failures:nextAttemptAfter:)``,
    ///   ``VaultError/noRecoveryKey`` and the errors of `unlock(passcode:)`.
    public func unlock(recoveryKey: RecoveryKey) throws(VaultError) {
        let identity = FileIdentity(path: statePath)
        let state = try requireState()
        let appKey = try checkCredential(.recoveryKey(recoveryKey), state: state)
        try finishUnlock(state: state, appKey: appKey, identity: identity)
    }

    /// Sets a new passcode after checking the recovery key (the way back when the passcode and
    /// the answers are lost). The vault is unlocked afterwards.
    /// - Parameters:
    ///   - recoveryKey: The recovery key.
    ///   - new: The new passcode.
    /// - Throws: The errors of ``unlock(recoveryKey:)``, ``VaultError/invalidArgument(_:)`` for an empty passcode.
    public func resetPasscode(recoveryKey: RecoveryKey, new: SecretBytes) throws(VaultError) {
        guard !new.isEmpty else { throw VaultError.invalidArgument("an empty passcode is not accepted") }
        try unlock(recoveryKey: recoveryKey)
        try replacePasscodeUnlocked(new)
    }

    /// Unlocks with any credential.
    /// - Parameter credential: The passcode, the answers or the recovery key.
    /// - Throws: The errors of the matching `unlock`.
    public func unlock(_ credential: VaultCredential) throws(VaultError) {
        switch credential {
        case .passcode(let passcode): try unlock(passcode: passcode)
        case .answers(let answers): try unlock(answers: answers)
        case .recoveryKey(let key): try unlock(recoveryKey: key)
        }
    }

    /// One guarded attempt with `credential` against `state`; the application key it opens.
    func checkCredential(_ credential: VaultCredential, state: VaultState) throws(VaultError) -> SecretBytes {
        switch credential {
        case .passcode(let passcode):
            return try checkPasscode(passcode, state: state)
        case .recoveryKey(let key):
            guard state.recovery != nil else { throw VaultError.noRecoveryKey }
            return try attempt(state: state, wrong: { VaultError.wrongRecoveryKey(failures: $0, nextAttemptAfter: $1) }) {
                key.open(state)
            }
        case .answers(let answers):
            guard let set = state.questions else { throw VaultError.noSecurityQuestions }
            guard answers.count == set.questions.count else {
                throw VaultError.invalidArgument("\(set.questions.count) questions but \(answers.count) answers; give one entry per question (empty for unanswered)")
            }
            let normalized = try normalizeAll(answers)
            defer { normalized.forEach { $0.wipe() } }
            let given = Set(normalized.indices.filter { !normalized[$0].isEmpty })
            guard given.count >= set.threshold else {
                throw VaultError.invalidArgument("\(given.count) answers given; \(set.threshold) of the \(set.questions.count) questions must be answered")
            }
            return try attempt(state: state, wrong: { VaultError.wrongAnswers(failures: $0, nextAttemptAfter: $1) }) { () -> SecretBytes? in
                try openWithAnswers(state: state, set: set, normalized: normalized, given: given)?.key
            }
        }
    }

    /// The vault's current whenUnlocked class key, opened with `credential` (one counted
    /// attempt) without unlocking this manager: nothing is kept in memory, nor in the process's
    /// afterFirstUnlock cache. For checking a backup before its vault is trusted.
    /// - Parameters:
    ///   - credential: The passcode, the answers or the recovery key.
    ///   - stateDigest: Set to SHA-256 of the `vault.state` bytes the key came from.
    /// - Returns: The key (the caller wipes it).
    /// - Throws: The credential's unlock errors.
    package func whenUnlockedKey(opening credential: VaultCredential, stateDigest: inout [UInt8]) throws(VaultError) -> SecretBytes {
        let state = try requireState()
        stateDigest = try Self.digest(of: state)
        let appKey = try checkCredential(credential, state: state)
        defer { appKey.wipe() }
        let secrets = try openSecrets(of: state, appKey: appKey)
        defer { secrets.wipe() }
        return KeyHierarchy.classKey(.whenUnlocked, master: secrets.classMaster)
    }

    /// SHA-256 of a state's canonical encoding.
    static func digest(of state: VaultState) throws(VaultError) -> [UInt8] {
        Array(SHA256.hash(data: try VaultError.call { try state.encoded() }))
    }

    // MARK: Re-binding to a new device key

    /// Unlocks with `credential` without comparing the device key with the one the state names:
    /// the first step of a re-binding (``DeviceKeyRebinding``), for a vault whose device key is
    /// lost. The rollback anchor is still checked, unless `restoring` (a restore from a backup
    /// authenticated under the vault's keys puts back an older state on purpose; its re-binding
    /// then raises the anchor past the generation found, ``recordRebinding(to:by:minimumGeneration:expectedState:)``). Class keys of the thisDeviceOnly classes are
    /// not available from this manager until the re-binding recorded the new key.
    /// - Parameters:
    ///   - credential: The passcode, the answers or the recovery key.
    ///   - restoring: Accept a generation below the rollback anchor's.
    ///   - expectedState: The digest (``whenUnlockedKey(opening:stateDigest:)``) the state must
    ///     have: the one a restore authenticated before it put the home in place.
    /// - Returns: The device key's check value the state records (nil: none), and the state's
    ///   digest, which ``recordRebinding(to:by:minimumGeneration:expectedState:)`` requires.
    /// - Throws: The credential's unlock errors; ``VaultError/rolledBack(file:found:expected:)``;
    ///   ``VaultError/corrupted(_:)`` for a state other than the expected one.
    @discardableResult
    package func unlockForRebinding(_ credential: VaultCredential, restoring: Bool = false,
                                    expectedState: [UInt8]? = nil) throws(VaultError) -> (deviceCheck: Data?, digest: [UInt8]) {
        let identity = FileIdentity(path: statePath)
        let state = try requireState()
        let digest = try Self.digest(of: state)
        if let expectedState {
            guard digest == expectedState else {
                throw VaultError.corrupted("\(statePath) is not the state the restore authenticated: it was changed after the restored home was put in place; restore again")
            }
        }
        let appKey = try checkCredential(credential, state: state)
        do {
            let secrets = try openSecrets(of: state, appKey: appKey)
            let unlocked: UnlockedKeys
            do {
                if !restoring {
                    try vaultCall { try anchor(for: state)?.check(RollbackAnchor.vaultState, found: state.generation ?? 0, file: statePath) }
                }
                unlocked = try UnlockedKeys(state: state, appKey: appKey, secrets: secrets, stateIdentity: identity)
            } catch {
                secrets.wipe()
                throw error
            }
            forgetDeviceKey()
            try install(unlocked)
        } catch {
            appKey.wipe()
            throw VaultError.wrap(error)
        }
        return (state.deviceCheck, digest)
    }

    /// The check value `vault.state` records for the device key (nil: none recorded).
    /// - Throws: ``VaultError/notSetUp`` and the state's read errors.
    package var recordedDeviceCheck: Data? {
        get throws(VaultError) { try requireState().deviceCheck }
    }

    /// Records in `vault.state` that the vault is now bound to the device key of check value
    /// `check` (a rewrite: a new generation, one more entry in the re-binding record). Needs the
    /// keys installed by ``unlockForRebinding(_:restoring:expectedState:)``.
    /// - Parameters:
    ///   - check: The new device key's check value.
    ///   - credential: The name of the credential the re-binding was made with.
    ///   - minimumGeneration: The new state's generation is at least this; a restore gives one
    ///     more than the rollback anchor holds, so the restored state is the newest.
    ///   - expectedState: The digest the state must still have (the one unlocked): no other
    ///     state is written past the anchor.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)`` for another state, the errors of a rewrite.
    package func recordRebinding(to check: Data, by credential: String, minimumGeneration: UInt64 = 0, expectedState: [UInt8]) throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        guard try Self.digest(of: state) == expectedState else {
            throw VaultError.corrupted("\(statePath) changed while the vault was being re-bound: run the re-binding (or the restore) again")
        }
        try checkSameVault(state, unlocked)
        forgetDeviceKey()
        try vaultCall {
            var next = state
            next.deviceCheck = check
            var record = state.rebindings ?? []
            record.append(VaultState.Rebinding(at: UInt64(max(0, clock().timeIntervalSince1970)), from: state.deviceCheck, to: check, by: credential))
            if record.count > VaultState.maximumRebindings { record.removeFirst(record.count - VaultState.maximumRebindings) }
            next.rebindings = record
            let base = max(state.generation ?? 0, minimumGeneration > 0 ? minimumGeneration - 1 : 0)
            try rewrite(next, keys: unlocked, expecting: state, during: "the vault was being re-bound to a new device key", generationBase: base)
        }
    }

    /// The re-bindings recorded in `vault.state`, oldest first: when (seconds since 1970), the
    /// device keys' check values before and after, and the credential used.
    /// - Throws: ``VaultError/notSetUp`` and the state's read errors.
    public var rebindingRecord: [(at: Date, from: Data?, to: Data, credential: String)] {
        get throws(VaultError) {
            (try requireState().rebindings ?? []).map { (Date(timeIntervalSince1970: TimeInterval($0.at)), $0.from, $0.to, $0.by) }
        }
    }
}
