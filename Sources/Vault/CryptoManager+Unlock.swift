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
    public func unlock(passcode: SecretBytes) throws {
        let state = try requireState()
        guard let wrap = state.passcode else { throw VaultError.noPasscode }
        let appKey = try attempt(wrong: { VaultError.wrongPasscode(failures: $0, nextAttemptAfter: $1) }) { () -> SecretBytes? in
            let kek = try KeyDerivation.derive(password: passcode, salt: Array(wrap.salt), parameters: wrap.kdf)
            defer { kek.wipe() }
            return try? KeyWrap.unwrap(Array(wrap.wrapped), under: kek, aad: state.passcodeAAD())
        }
        try finishUnlock(state: state, appKey: appKey)
    }

    /// Unlocks with the answers to the security questions.
    ///
    /// - Parameter answers: One entry per question, in order; an empty entry means "not answered".
    ///   At least ``answerThreshold`` must be given. Answers are normalized (``AnswerNormalization``).
    /// - Throws: ``VaultError/wrongAnswers(failures:nextAttemptAfter:)`` and the errors of
    ///   ``unlock(passcode:)``; ``VaultError/invalidArgument(_:)`` for too few answers (not counted as an attempt).
    public func unlock(answers: [SecretBytes]) throws {
        let state = try requireState()
        guard let set = state.questions else { throw VaultError.noSecurityQuestions }
        guard answers.count == set.questions.count else {
            throw VaultError.invalidArgument("\(set.questions.count) questions but \(answers.count) answers; give one entry per question (empty for unanswered)")
        }
        let normalized = try answers.map { try AnswerNormalization.normalize($0) }
        defer { normalized.forEach { $0.wipe() } }
        let given = Set(normalized.indices.filter { !normalized[$0].isEmpty })
        guard given.count >= set.threshold else {
            throw VaultError.invalidArgument("\(given.count) answers given; \(set.threshold) of the \(set.questions.count) questions must be answered")
        }
        let appKey = try attempt(wrong: { VaultError.wrongAnswers(failures: $0, nextAttemptAfter: $1) }) { () -> SecretBytes? in
            for subset in set.subsets where subset.indices.allSatisfy(given.contains) {
                let kek = try subsetKEK(normalized: normalized, indices: subset.indices, salt: Array(subset.salt), parameters: set.kdf)
                defer { kek.wipe() }
                if let key = try? KeyWrap.unwrap(Array(subset.wrapped), under: kek, aad: state.subsetAAD(questions: set, indices: subset.indices)) {
                    return key
                }
            }
            return nil
        }
        try finishUnlock(state: state, appKey: appKey)
    }

    /// Unlocks with String answers (see ``AnswerNormalization`` about `String` copies in memory).
    public func unlock(answers: [String]) throws {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        try unlock(answers: secrets)
    }

    /// ``unlock(passcode:)`` with the KDF run on a dispatch queue, off the cooperative pool.
    public func unlock(passcode: SecretBytes) async throws {
        try await offPool { try self.unlock(passcode: passcode) }
    }

    /// ``unlock(answers:)`` with the KDF run on a dispatch queue, off the cooperative pool.
    public func unlock(answers: [SecretBytes]) async throws {
        try await offPool { try self.unlock(answers: answers) }
    }

    func offPool(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global(qos: .userInitiated).async {
                do { try body(); continuation.resume() } catch { continuation.resume(throwing: error) }
            }
        }
    }

    func finishUnlock(state: VaultState, appKey: SecretBytes) throws {
        do {
            let secrets = try openSecrets(of: state, appKey: appKey)
            try install(UnlockedKeys(vaultID: state.vaultID, keyID: Array(state.keyID), appKey: appKey, secrets: secrets))
        } catch {
            appKey.wipe()
            throw VaultError.wrap(error)
        }
    }

    // MARK: Attempts

    /// Runs one guarded attempt: refuses it while a delay runs (or erases when the failure limit
    /// was reached), records it as failed, runs `check`, and clears the record when `check`
    /// returns a key. A nil from `check` is a wrong guess: the error from `wrong` is thrown (or
    /// ``VaultError/erased`` when this failure reaches the limit).
    func attempt(wrong: (Int, Duration?) -> VaultError, _ check: () throws -> SecretBytes?) throws -> SecretBytes {
        try vaultCall {
            try withFileLock {
                var record = try AttemptRecord.load(directory: directory)
                if let limit = attemptPolicy.eraseAfter, record.failures >= limit {
                    try eraseLocked(keepMarker: true)
                    throw VaultError.erased
                }
                let wait = record.wait(at: clock(), policy: attemptPolicy)
                if wait > .zero { throw VaultError.tooManyAttempts(retryAfter: wait) }
                record.failures += 1
                record.lastFailure = clock().timeIntervalSince1970
                try record.store(directory: directory)
            }
        }
        let key: SecretBytes?
        do {
            key = try check()
        } catch {
            throw VaultError.wrap(error)
        }
        if let key {
            try vaultCall { try withFileLock { try AttemptRecord().store(directory: directory, durable: false) } }
            return key
        }
        let failures: Int = try vaultCall {
            try withFileLock {
                let record = try AttemptRecord.load(directory: directory)
                if let limit = attemptPolicy.eraseAfter, record.failures >= limit {
                    try eraseLocked(keepMarker: true)
                    throw VaultError.erased
                }
                return record.failures
            }
        }
        let delay = attemptPolicy.delay(afterFailures: failures)
        throw wrong(failures, delay > .zero ? delay : nil)
    }

    // MARK: Erase

    /// Destroys the vault: the state file with every wrapped key (crypto-erase), the attempt
    /// record and the always-class key file, and locks the manager. Data sealed under the
    /// vault's keys cannot be recovered afterwards. The device key is kept (it is not the vault's).
    /// - Throws: ``VaultError/io(_:)`` when a file cannot be destroyed.
    public func erase() throws {
        try vaultCall { try withFileLock { try eraseLocked(keepMarker: false, includeAlwaysKey: true) } }
    }

    /// Call with the file lock held.
    func eraseLocked(keepMarker: Bool, includeAlwaysKey: Bool = false) throws {
        let vaultID = (try? VaultState.load(directory: directory))?.vaultID
        var paths = [statePath]
        if includeAlwaysKey { paths.append(alwaysKeyPath) }
        try Erasure.destroy(paths)
        unlink(directory + "/" + AttemptRecord.fileName)
        if keepMarker {
            let marker = try CanonicalEncoding.encode(["erased": clock().timeIntervalSince1970])
            try SecureFile.writeAtomically(marker, to: erasedMarkerPath)
        } else {
            unlink(erasedMarkerPath)
        }
        if let vaultID { FirstUnlockCache.remove(vaultID: vaultID) }
        lock()
    }
}
