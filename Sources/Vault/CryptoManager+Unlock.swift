import Foundation
import Cipher

extension CryptoManager {
    // MARK: Unlock

    /// Unlocks with the passcode.
    ///
    /// The attempt is recorded as failed before the KDF runs and cleared on success, so killing
    /// the process mid-check cannot bypass the counter. A failed attempt leaves an unlocked
    /// manager unlocked.
    ///
    /// - Parameter passcode: The passcode.
    /// - Throws: ``VaultError/wrongPasscode(failures:nextAttemptAfter:)``,
    ///   ``VaultError/tooManyAttempts(retryAfter:)``, ``VaultError/erased``, ``VaultError/notSetUp``,
    ///   ``VaultError/noPasscode``, ``VaultError/corrupted(_:)``.
    public func unlock(passcode: SecretBytes) throws(VaultError) {
        let identity = FileIdentity(path: statePath)
        let state = try requireState()
        let appKey = try checkPasscode(passcode, state: state)
        try finishUnlock(state: state, appKey: appKey, identity: identity)
    }

    /// The passcode check: one guarded attempt (``attempt(state:wrong:_:)``) running the
    /// passcode's KDF once. Returns the application key the passcode opens.
    /// - Throws: ``VaultError/noPasscode``, ``VaultError/wrongPasscode(failures:nextAttemptAfter:)``
    ///   and the attempt errors.
    func checkPasscode(_ passcode: SecretBytes, state: VaultState) throws(VaultError) -> SecretBytes {
        guard state.passcode != nil else { throw VaultError.noPasscode }
        return try attempt(state: state, wrong: { VaultError.wrongPasscode(failures: $0, nextAttemptAfter: $1) }) {
            try openWithPasscode(passcode, state: state)
        }
    }

    /// The application key if `passcode` opens the passcode wrapping of `state`, else nil. No
    /// attempt accounting (callers run it inside `attempt`).
    func openWithPasscode(_ passcode: SecretBytes, state: VaultState) throws(VaultError) -> SecretBytes? {
        guard let wrap = state.passcode else { return nil }
        let kek = try storedKDF(password: passcode, salt: Array(wrap.salt), parameters: wrap.kdf)
        defer { kek.wipe() }
        return try? KeyWrap.unwrap(Array(wrap.wrapped), under: kek, aad: state.passcodeAAD())
    }

    /// Unlocks with the answers to the security questions.
    ///
    /// - Parameter answers: One entry per question, in order; an empty entry means "not answered".
    ///   At least ``answerThreshold`` must be given. Answers are normalized (``AnswerNormalization``).
    /// - Throws: ``VaultError/wrongAnswers(failures:nextAttemptAfter:)`` and the errors of
    ///   `unlock(passcode:)`; ``VaultError/invalidArgument(_:)`` for too few answers (not counted as an attempt).
    public func unlock(answers: [SecretBytes]) throws(VaultError) {
        let identity = FileIdentity(path: statePath)
        let state = try requireState()
        let appKey = try checkCredential(.answers(answers), state: state)
        try finishUnlock(state: state, appKey: appKey, identity: identity)
    }

    /// Unlocks with String answers (see ``AnswerNormalization`` about `String` copies in memory).
    /// - Parameter answers: The answers, one per question, in order.
    /// - Throws: ``VaultError``, as the `[SecretBytes]` variant.
    public func unlock(answers: [String]) throws(VaultError) {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        try unlock(answers: secrets)
    }

    /// `unlock(passcode:)` with the KDF run on a dispatch queue, off the cooperative pool.
    /// - Parameter passcode: The passcode.
    /// - Throws: ``VaultError``, as the synchronous variant.
    public func unlock(passcode: SecretBytes) async throws(VaultError) {
        try await offPool { () throws(VaultError) in try self.unlock(passcode: passcode) }
    }

    /// ``unlock(answers:)`` with the KDF run on a dispatch queue, off the cooperative pool.
    /// - Parameter answers: The answers, one per question, in order.
    /// - Throws: ``VaultError``, as the synchronous variant.
    public func unlock(answers: [SecretBytes]) async throws(VaultError) {
        try await offPool { () throws(VaultError) in try self.unlock(answers: answers) }
    }

    func offPool(_ body: @escaping @Sendable () throws(VaultError) -> Void) async throws(VaultError) {
        let result: Result<Void, VaultError> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                do throws(VaultError) { try body(); continuation.resume(returning: .success(())) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        try result.get()
    }

    /// The normalized answers (``AnswerNormalization``), in order; nothing is left unwiped on failure.
    func normalizeAll(_ answers: [SecretBytes]) throws(VaultError) -> [SecretBytes] {
        var normalized: [SecretBytes] = []
        normalized.reserveCapacity(answers.count)
        for answer in answers {
            do {
                normalized.append(try AnswerNormalization.normalize(answer))
            } catch {
                normalized.forEach { $0.wipe() }
                throw error
            }
        }
        return normalized
    }

    /// Tries the subsets made only of given answers, in order, and returns the application key
    /// with the first subset it opened. No attempt accounting (callers run it inside `attempt`).
    func openWithAnswers(state: VaultState, set: VaultState.Questions, normalized: [SecretBytes],
                         given: Set<Int>) throws(VaultError) -> (key: SecretBytes, indices: [Int])? {
        for subset in set.subsets where subset.indices.allSatisfy(given.contains) {
            if let key = try openSubset(state: state, set: set, indices: subset.indices, normalized: normalized) {
                return (key, subset.indices)
            }
        }
        return nil
    }

    /// The application key if the answers at `indices` open that subset's wrapping, else nil.
    func openSubset(state: VaultState, set: VaultState.Questions, indices: [Int], normalized: [SecretBytes]) throws(VaultError) -> SecretBytes? {
        guard let subset = set.subsets.first(where: { $0.indices == indices }) else { return nil }
        let kek = try subsetKEK(normalized: normalized, indices: subset.indices, salt: Array(subset.salt), parameters: set.kdf)
        defer { kek.wipe() }
        return try? KeyWrap.unwrap(Array(subset.wrapped), under: kek, aad: state.subsetAAD(questions: set, indices: subset.indices))
    }

    /// Installs the keys `appKey` (consumed) opens from `state`. An older state is rewritten in
    /// the current version on the way (same keys and wrappings, the secret section re-sealed for
    /// the new associated data); when that fails, or the file changed meanwhile, the old state
    /// stays, readable as it is.
    func finishUnlock(state: VaultState, appKey: SecretBytes, identity: FileIdentity?) throws(VaultError) {
        do {
            let secrets = try openSecrets(of: state, appKey: appKey)
            let unlocked: UnlockedKeys
            do {
                try verifyBinding(of: state)
                unlocked = try UnlockedKeys(state: state, appKey: appKey, secrets: secrets, stateIdentity: identity)
            } catch {
                secrets.wipe()
                throw error
            }
            if state.version < VaultState.currentVersion,
               (try? rewrite(state, keys: unlocked, expecting: state, during: "it was being upgraded")) != nil {
                unlocked.wipe()
            } else {
                try install(unlocked)
            }
        } catch {
            appKey.wipe()
            throw VaultError.wrap(error)
        }
    }

    /// The checks of an authenticated state (its secret section opened) against what lives
    /// outside the data directory: the device key must be the one the state names (version 3),
    /// and the state's generation must not be below the rollback anchor's, which is advanced to
    /// it. A device key that cannot be read now is not checked here (nothing gets it then; the
    /// first read compares it, ``cachedDeviceKey()``).
    /// - Throws: ``VaultError/deviceKey(_:)`` for another device key,
    ///   ``VaultError/rolledBack(file:found:expected:)``, anchor errors.
    func verifyBinding(of state: VaultState) throws(VaultError) {
        if let expected = state.deviceCheck {
            if let key = memory.withLock({ $0.deviceKey?.copy() }) ?? readDeviceKey(expecting: expected) {
                defer { key.wipe() }
                guard key.count == 32, DeviceKeyRecord.checkValue(of: key) == expected else {
                    throw VaultError.deviceKey(Self.otherDeviceKeyText)
                }
                memory.withLock { memory in
                    if memory.deviceKey == nil { memory.deviceKey = key.copy() }
                }
            }
        }
        try vaultCall { try anchor(for: state)?.check(RollbackAnchor.vaultState, found: state.generation ?? 0, file: statePath) }
    }

    /// The device key from the provider, or nil when it gives none now. A provider checked
    /// against a record (or a fallback key file checked against the state) is read underneath,
    /// so that the state's own check decides and names the problem.
    func readDeviceKey(expecting expected: Data) -> SecretBytes? {
        var provider: any DeviceKeyProvider = deviceKeyProvider
        if let checked = provider as? CheckedDeviceKeyProvider { provider = checked.inner }
        if let cache = provider as? KeyringDeviceKeyProvider {
            return try? cache.deviceKey(accepting: { $0.count == 32 && DeviceKeyRecord.checkValue(of: $0) == expected })
        }
        return try? provider.deviceKey()
    }

    static let otherDeviceKeyText = "the device key is not the one this vault was made with (its check value differs from the one vault.state records): the key file or provider was replaced, or the data directory was restored from another machine; put back this vault's device key (or its provider record beside it); if that key is lost, bind the vault to this machine's with `securefoundation vault rebind-device-key` and the passcode, the answers or the recovery key (docs/RECOVERY.md)"

    // MARK: Attempts

    /// Runs one guarded attempt: refuses it while a delay runs (or erases when the failure limit
    /// was reached), records it as failed, runs `check`, and clears the record when `check`
    /// returns a key. A nil from `check` is a wrong guess: the error from `wrong` is thrown (or
    /// ``VaultError/erased`` when this failure reaches the limit).
    ///
    /// Erase-after-N is the stricter of the count stored in the (version 2) state and the
    /// manager's ``AttemptPolicy/eraseAfter``. A record that does not parse never erases: it is
    /// rewritten as the longest delay, starting now, with failures that do not count towards
    /// erasure, and ``VaultError/attemptRecordDamaged(retryAfter:)`` says so.
    func attempt(state: VaultState?, wrong: (Int, Duration?) -> VaultError, _ check: () throws -> SecretBytes?) throws(VaultError) -> SecretBytes {
        // Settings over the manager's KDF ceiling are refused before an attempt is counted.
        for parameters in [state?.passcode?.kdf, state?.questions?.kdf].compactMap({ $0 }) { try checkKDFCeiling(parameters) }
        let limit = effectiveEraseAfter(state)
        let anchor = attemptAnchor(state)
        try vaultCall {
            try withFileLock {
                var record = try loadAttempts(anchor)
                if record.damaged == true {
                    record = AttemptRecord.damagedRecord(policy: attemptPolicy, now: clock())
                    try storeAttempts(record, anchor: anchor)
                    let wait = record.wait(at: clock(), policy: attemptPolicy)
                    if wait > .zero { throw VaultError.attemptRecordDamaged(retryAfter: wait) }
                }
                if let limit, record.countedFailures >= limit {
                    try eraseLocked(keepMarker: true)
                    throw VaultError.erased
                }
                // A last failure in the future (a damaged record, or a clock set back) restarts
                // the delay now, so the wait always runs out; it is never skipped.
                let now = clock().timeIntervalSince1970
                if record.lastFailure > now {
                    record.lastFailure = now
                    try storeAttempts(record, anchor: anchor)
                }
                let wait = record.wait(at: clock(), policy: attemptPolicy)
                if wait > .zero { throw VaultError.tooManyAttempts(retryAfter: wait) }
                record.failures += 1
                record.lastFailure = clock().timeIntervalSince1970
                try storeAttempts(record, anchor: anchor)
            }
        }
        testHooks.step?("attempt counted")
        let key: SecretBytes?
        do {
            key = try check()
        } catch {
            throw VaultError.wrap(error)
        }
        if let key {
            try vaultCall { try withFileLock { try storeAttempts(AttemptRecord(), anchor: anchor, durable: false) } }
            return key
        }
        let failures: Int = try vaultCall {
            try withFileLock {
                let record = try loadAttempts(anchor)
                if let limit, record.damaged != true, record.countedFailures >= limit {
                    try eraseLocked(keepMarker: true)
                    throw VaultError.erased
                }
                return record.failures
            }
        }
        let delay = attemptPolicy.delay(afterFailures: failures)
        throw wrong(failures, delay > .zero ? delay : nil)
    }

    /// The erase-after count in force: the stricter of the stored one and the manager's.
    func effectiveEraseAfter(_ state: VaultState?) -> Int? {
        switch (state?.eraseAfter, attemptPolicy.eraseAfter) {
        case let (stored?, given?): return min(stored, given)
        case let (stored?, nil): return stored
        case let (nil, given): return given
        }
    }

    // MARK: Erase

    /// Destroys the vault: the state file with every wrapped key (crypto-erase), every leftover
    /// that may hold a copy of it (temporaries of interrupted writes, superseded state files,
    /// files of an interrupted erase), the attempt record and the always-class key file, and
    /// locks the manager. Data sealed under the vault's keys cannot be recovered afterwards. The
    /// device key is kept (it is not the vault's). Running it again after an interruption
    /// finishes the job.
    /// - Throws: ``VaultError/io(_:)`` when a file cannot be destroyed.
    public func erase() throws(VaultError) {
        try vaultCall { try withFileLock { try eraseLocked(keepMarker: false, includeAlwaysKey: true) } }
    }

    /// Removes the device key from the kernel-keyring cache named by this vault's record or
    /// provider, and from this manager's memory: the cache is named by the home's path only, so a
    /// vault made there later would be handed this vault's key.
    func evictCachedDeviceKey() {
        if let record = try? DeviceKeyRecord.load(directory: directory, filePath: deviceKeyFilePath), record.kind == .keyring, let name = record.name {
            KeyringDeviceKeyProvider.evict(description: name)
        }
        var provider: any DeviceKeyProvider = deviceKeyProvider
        if let checked = provider as? CheckedDeviceKeyProvider { provider = checked.inner }
        if let cache = provider as? KeyringDeviceKeyProvider { cache.evict() }
        forgetDeviceKey()
    }

    /// Call with the file lock held.
    func eraseLocked(keepMarker: Bool, includeAlwaysKey: Bool = false) throws(VaultError) {
        let vaultID = (try? VaultState.load(directory: directory))?.vaultID
        var failures: [String] = []
        // Leftovers first: a name linked to the live state is only unlinked, after which the
        // state has one link and can be overwritten.
        do { try destroyLeftovers() } catch { failures.append("\(error)") }
        testHooks.step?("leftovers destroyed")
        CheckedFileCache.forget(path: statePath, kind: VaultState.self)
        var paths = [statePath]
        if includeAlwaysKey { paths.append(alwaysKeyPath) }
        for path in paths {
            do { try destroyFile(path, live: nil) } catch { failures.append("\(error)") }
        }
        unlink(directory + "/" + AttemptRecord.fileName)
        testHooks.step?("attempts removed")
        // Whatever the destruction itself left behind (nothing, unless it failed).
        do { try destroyLeftovers() } catch { failures.append("\(error)") }
        if keepMarker {
            try vaultCall {
                let marker = try CanonicalEncoding.encode(["erased": clock().timeIntervalSince1970])
                try SecureFile.writeAtomically(marker, to: erasedMarkerPath)
            }
        } else {
            unlink(erasedMarkerPath)
        }
        try? SecureFile.syncDirectory(directory)
        if let vaultID { FirstUnlockCache.remove(vaultID: vaultID) }
        evictCachedDeviceKey()
        lock()
        if !failures.isEmpty {
            throw VaultError.io("the erase was incomplete (run it again): " + failures.joined(separator: "; "))
        }
    }
}
