import Foundation
import Cipher

extension CryptoManager {
    // MARK: Changing the passcode, the questions, the key

    /// Replaces the passcode, checking the current one as an unlock attempt (one KDF run,
    /// counted on failure). Works locked or unlocked, so a caller holding only the passcode runs
    /// the KDF once; the vault is unlocked afterwards. A vault without a passcode (questions
    /// only) gains one; that needs the vault unlocked. The application key does not change, so
    /// data stays readable; the state file holding the old wrapping is destroyed.
    ///
    /// - Parameters:
    ///   - current: The current passcode (ignored when the vault has none yet).
    ///   - new: The new passcode.
    /// - Throws: ``VaultError/wrongPasscode(failures:nextAttemptAfter:)`` and the attempt errors,
    ///   ``VaultError/invalidArgument(_:)`` for an empty new passcode or a missing current one,
    ///   ``VaultError/locked`` when a vault without a passcode is locked.
    public func updatePasscode(current: SecretBytes?, new: SecretBytes) throws(VaultError) {
        guard !new.isEmpty else { throw VaultError.invalidArgument("an empty passcode is not accepted") }
        let state = try requireState()
        let held = try heldKeys(matching: state)
        let keys: UnlockedKeys
        if state.passcode != nil {
            guard let current else { throw VaultError.invalidArgument("the current passcode is required to change it") }
            keys = try changeKeys(state: state, appKey: try checkPasscode(current, state: state), held: held, opener: "the passcode")
        } else {
            guard let held else { throw VaultError.locked }
            keys = held
        }
        defer { if keys !== held { keys.wipe() } }
        try vaultCall {
            var next = state
            next.passcode = try wrapPasscode(new, appKey: keys.appKey, state: state)
            try rewrite(next, keys: keys, expecting: state, during: "the passcode was being changed")
        }
    }

    /// Sets a new passcode after checking the answers to the security questions (the recovery
    /// path when the passcode is forgotten). Works locked or unlocked; the answers are checked as
    /// an unlock attempt (counted on failure) and the vault is unlocked afterwards.
    ///
    /// - Parameters:
    ///   - answers: One entry per question (empty for unanswered); at least the threshold.
    ///   - new: The new passcode.
    /// - Throws: ``VaultError/wrongAnswers(failures:nextAttemptAfter:)`` and the attempt errors,
    ///   ``VaultError/noSecurityQuestions``, ``VaultError/invalidArgument(_:)``.
    public func resetPasscode(answers: [SecretBytes], new: SecretBytes) throws(VaultError) {
        guard !new.isEmpty else { throw VaultError.invalidArgument("an empty passcode is not accepted") }
        try unlock(answers: answers)
        try replacePasscodeUnlocked(new)
    }

    /// Wraps the application key of the unlocked vault under `new` (the recovery paths: the
    /// answers or the recovery key were just checked).
    func replacePasscodeUnlocked(_ new: SecretBytes) throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        try vaultCall {
            var next = state
            next.passcode = try wrapPasscode(new, appKey: unlocked.appKey, state: state)
            try rewrite(next, keys: unlocked, expecting: state, during: "the passcode was being changed")
        }
    }

    /// The original's name: replaces the passcode (the current one is required here).
    /// - Parameters:
    ///   - current: The current passcode (nil when the vault has none).
    ///   - new: The new passcode.
    /// - Throws: ``VaultError``, as ``updatePasscode(current:new:)``.
    public func changePasscode(from current: SecretBytes?, to new: SecretBytes) throws(VaultError) {
        try updatePasscode(current: current, new: new)
    }

    /// Replaces the security questions and answers. Needs the vault unlocked. The application key
    /// does not change; the state file holding the old wrappings is destroyed.
    ///
    /// - Parameters:
    ///   - questions: The new questions (empty removes them, allowed only when a passcode is set).
    ///   - answers: One answer per question.
    ///   - threshold: How many answers unlock; nil means all.
    /// - Throws: ``VaultError/locked``, ``VaultError/invalidArgument(_:)``.
    public func updateSecurityQuestions(_ questions: [String], answers: [SecretBytes], threshold: Int? = nil) throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        if questions.isEmpty {
            guard state.passcode != nil else { throw VaultError.invalidArgument("a vault without a passcode needs security questions") }
        } else {
            try Self.validateQuestions(questions, answerCount: answers.count, threshold: threshold ?? questions.count)
        }
        try vaultCall {
            let normalized = try normalizeAll(answers)
            defer { normalized.forEach { $0.wipe() } }
            if normalized.contains(where: { $0.isEmpty }) { throw VaultError.invalidArgument("an answer is empty") }
            var next = state
            next.questions = questions.isEmpty ? nil : try wrapAnswers(questions: questions, normalized: normalized,
                                                                        threshold: threshold ?? questions.count,
                                                                        appKey: unlocked.appKey, state: state)
            try rewrite(next, keys: unlocked, expecting: state, during: "the questions were being changed")
        }
    }

    /// String answers (see ``AnswerNormalization`` about `String` copies in memory).
    /// - Parameters:
    ///   - questions: The new questions.
    ///   - answers: One answer per question.
    ///   - threshold: How many answers unlock; nil means all.
    /// - Throws: ``VaultError``, as the `[SecretBytes]` variant.
    public func updateSecurityQuestions(_ questions: [String], answers: [String], threshold: Int? = nil) throws(VaultError) {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        try updateSecurityQuestions(questions, answers: secrets, threshold: threshold)
    }

    /// Replaces the application key with a new random one. The old key is kept, sealed under the
    /// new one in the state, so data sealed under it stays readable by its key id; nothing has to
    /// be re-encrypted at once. Class keys do not change (they come from the class master).
    ///
    /// The new key must be wrapped under the passcode and under every k-subset of the answers, so
    /// each unlock method the vault has must be given: the passcode and, when questions are set,
    /// all answers. Every answer is verified before it is used for a new wrapping: one subset
    /// that opens, then each other answer together with k - 1 verified ones (one KDF each). The
    /// passcode and the answers are checked as one unlock attempt, counted as failed unless all
    /// of them verify. Works locked or unlocked (the vault is unlocked afterwards), so a caller
    /// holding the secrets runs each KDF once.
    ///
    /// - Parameters:
    ///   - passcode: The current passcode (required when the vault has one).
    ///   - answers: All answers (required when the vault has questions).
    /// - Returns: The new key id.
    /// - Throws: ``VaultError/invalidArgument(_:)`` when a required secret is missing (nothing is
    ///   counted), ``VaultError/wrongPasscode(failures:nextAttemptAfter:)``,
    ///   ``VaultError/wrongAnswers(failures:nextAttemptAfter:)`` when no subset opens,
    ///   ``VaultError/unverifiedAnswers(questions:)`` naming the answers that did not verify
    ///   (nothing is written), and the attempt errors.
    @discardableResult
    public func rotateKey(passcode: SecretBytes?, answers: [SecretBytes]? = nil) throws(VaultError) -> [UInt8] {
        let state = try requireState()
        let held = try heldKeys(matching: state)
        if state.passcode != nil, passcode == nil {
            throw VaultError.invalidArgument("the passcode is required to rotate the key")
        }
        var normalized: [SecretBytes] = []
        defer { normalized.forEach { $0.wipe() } }
        if let set = state.questions {
            guard let answers, answers.count == set.questions.count else {
                throw VaultError.invalidArgument("all \(set.questions.count) answers are required to rotate the key")
            }
            normalized = try normalizeAll(answers)
            if normalized.contains(where: { $0.isEmpty }) {
                throw VaultError.invalidArgument("all \(set.questions.count) answers are required to rotate the key; one is empty")
            }
        }
        // One attempt for every secret given: the passcode first, then every answer (one subset
        // that opens, then each other answer in a subset with k - 1 answers already verified).
        var wrongAnswers = false
        let appKey = try attempt(state: state, wrong: { failures, delay in
            wrongAnswers ? VaultError.wrongAnswers(failures: failures, nextAttemptAfter: delay)
                         : VaultError.wrongPasscode(failures: failures, nextAttemptAfter: delay)
        }) { () -> SecretBytes? in
            var key: SecretBytes?
            if let passcode, state.passcode != nil {
                guard let opened = try openWithPasscode(passcode, state: state) else { return nil }
                key = opened
            }
            if let set = state.questions {
                wrongAnswers = true
                let opened: SecretBytes?
                do {
                    opened = try verifyAllAnswers(state: state, set: set, normalized: normalized)
                } catch {
                    key?.wipe()
                    throw error
                }
                guard let opened else { key?.wipe(); return nil }
                if let key {
                    defer { opened.wipe() }
                    guard opened == key else {
                        key.wipe()
                        throw VaultError.corrupted("the passcode and the answers open different keys; the state file was changed")
                    }
                } else {
                    key = opened
                }
            }
            return key
        }
        let keys = try changeKeys(state: state, appKey: appKey, held: held, opener: "the passcode or the answers")
        defer { if keys !== held { keys.wipe() } }
        return try vaultCall {
            let newKey = try SecretBytes.random(count: 32)
            var next = state
            next.keyID = Data(try SecureRandom.bytes(8))
            let secrets: VaultSecrets
            do {
                if let passcode, state.passcode != nil {
                    next.passcode = try wrapPasscode(passcode, appKey: newKey, state: next)
                }
                if let set = state.questions {
                    next.questions = try wrapAnswers(questions: set.questions, normalized: normalized, threshold: set.threshold,
                                                     appKey: newKey, state: next)
                }
                // The recovery key stays valid: the new key is wrapped under its KEK (unsealed with
                // the current key).
                if let recovery = state.recovery {
                    next.recovery = try RecoveryKey.rewrap(recovery, from: keys.appKey, state: state, to: newKey, next: next)
                }
                let current = try keys.secretsCopy()
                let previous: SecretBytes
                do { previous = try keys.appKey.copyKey() } catch { current.wipe(); throw error }
                secrets = VaultSecrets(classMaster: current.classMaster,
                                       retired: [(id: Array(state.keyID), key: previous)] + current.retired,
                                       retiredClassMasters: current.retiredClassMasters)
            } catch {
                newKey.wipe()
                throw error
            }
            try commitChange(next, appKey: newKey, secrets: secrets, expecting: state, during: "the key was being rotated")
            return Array(next.keyID)
        }
    }

    /// Checks every answer against the state: finds one subset that opens, then checks each
    /// remaining answer in a subset made of it and k - 1 verified answers. Returns the key when
    /// all verify, nil when no subset opens, and throws ``VaultError/unverifiedAnswers(questions:)``
    /// naming the answers that did not verify.
    func verifyAllAnswers(state: VaultState, set: VaultState.Questions, normalized: [SecretBytes]) throws(VaultError) -> SecretBytes? {
        let all = Set(normalized.indices)
        guard let (key, opened) = try openWithAnswers(state: state, set: set, normalized: normalized, given: all) else { return nil }
        var unverified: [Int] = []
        let verified = Array(opened.dropLast())
        for index in all.subtracting(opened).sorted() {
            let indices = (verified + [index]).sorted()
            if let other = try openSubset(state: state, set: set, indices: indices, normalized: normalized) {
                other.wipe()
            } else {
                unverified.append(index + 1)
            }
        }
        guard unverified.isEmpty else {
            key.wipe()
            throw VaultError.unverifiedAnswers(questions: unverified)
        }
        return key
    }

    /// String answers for `rotateKey(passcode:answers:)`.
    /// - Parameters:
    ///   - passcode: The current passcode (required when the vault has one).
    ///   - answers: All answers.
    /// - Returns: The new key id.
    /// - Throws: ``VaultError``, as the `[SecretBytes]` variant.
    @discardableResult
    public func rotateKey(passcode: SecretBytes?, answers: [String]) throws(VaultError) -> [UInt8] {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        return try rotateKey(passcode: passcode, answers: secrets)
    }

    /// The ids of the retired application keys still kept (newest first). Needs the vault unlocked.
    /// - Throws: ``VaultError/locked``.
    public var retiredKeyIDs: [[UInt8]] {
        get throws { try requireUnlocked().retired.map(\.id) }
    }

    /// Opens data sealed under the current or a retired key and seals it again under the current
    /// one, so a retired key can later be removed.
    ///
    /// - Parameters:
    ///   - sealed: Data sealed by ``encrypt(_:context:)``.
    ///   - context: The associated data it was sealed with (kept).
    /// - Returns: The data sealed under the current key.
    /// - Throws: ``VaultError/locked``, ``VaultError/corrupted(_:)``.
    public func reseal(_ sealed: [UInt8], context: [UInt8] = []) throws(VaultError) -> [UInt8] {
        var plaintext = try decrypt(sealed, context: context)
        defer { plaintext.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        return try encrypt(plaintext, context: context)
    }

    /// Forgets retired application keys once nothing sealed under them is needed (after
    /// ``reseal(_:context:)``). The state file that still held them is crypto-erased, so data
    /// sealed under a removed key becomes unreadable. Unknown ids are ignored.
    ///
    /// - Parameter ids: Key ids from ``retiredKeyIDs``.
    /// - Throws: ``VaultError/locked``, I/O errors.
    public func removeRetiredKeys(_ ids: [[UInt8]]) throws(VaultError) {
        let unlocked = try requireUnlocked()
        let state = try requireState()
        try checkSameVault(state, unlocked)
        let kept = unlocked.retired.filter { entry in !ids.contains(entry.id) }
        guard kept.count != unlocked.retired.count else { return }
        try vaultCall {
            let secrets = VaultSecrets(classMaster: try unlocked.classMaster.copyKey(),
                                       retired: try kept.map { (id: $0.id, key: try $0.key.copyKey()) },
                                       retiredClassMasters: try unlocked.retiredClassMasters.map { try $0.copyKey() })
            try rewrite(state, keys: unlocked, expecting: state, secrets: secrets, during: "retired keys were being removed")
        }
    }

    /// Writes `next` with the same application key as `keys` and the secrets `given` (consumed;
    /// a copy of `keys`' secrets when nil) through ``commitChange(_:appKey:secrets:expecting:during:generationBase:beforeCommit:)``.
    func rewrite(_ next: VaultState, keys: UnlockedKeys, expecting expected: VaultState, secrets given: VaultSecrets? = nil,
                 during operation: String, generationBase: UInt64? = nil, beforeCommit: () throws -> Void = {}) throws {
        let secrets = try given ?? keys.secretsCopy()
        let appKey: SecretBytes
        do { appKey = try keys.appKey.copyKey() } catch { secrets.wipe(); throw error }
        try commitChange(next, appKey: appKey, secrets: secrets, expecting: expected, during: operation, generationBase: generationBase,
                         beforeCommit: beforeCommit)
    }

    /// The one way a change reaches `vault.state`: seals `secrets` into `next` (written in the
    /// current state version) under `appKey`, then, under the vault's lock, reloads the state and
    /// commits `next` only if the file still holds `expected`, running `beforeCommit` first; the
    /// keys in memory are then bound to the new file. `appKey` and `secrets` are consumed, also
    /// on failure.
    /// - Throws: ``VaultError/corrupted(_:)`` naming `operation` when the vault changed meanwhile
    ///   (nothing is written), I/O errors.
    func commitChange(_ next: VaultState, appKey: SecretBytes, secrets: VaultSecrets, expecting expected: VaultState,
                      during operation: String, generationBase: UInt64? = nil, beforeCommit: () throws -> Void = {}) throws {
        var next = next
        next.version = VaultState.currentVersion
        next.eraseAfter = expected.eraseAfter ?? (expected.version < 2 ? attemptPolicy.eraseAfter : nil)
        if next.questions != nil, next.questions?.normalization == nil { next.questions?.normalization = VaultState.currentNormalization }
        // Version 3: one generation more than the state replaced, and the device key's check
        // value (kept; recorded when the replaced state had none and the key can be read).
        // (A re-binding that restores over an anchored home counts from `generationBase`.)
        next.generation = (generationBase ?? expected.generation ?? 0) + 1
        if next.deviceCheck == nil { next.deviceCheck = readableDeviceCheck() }
        let anchor = anchor(for: expected)
        do {
            try sealSecrets(secrets, appKey: appKey, into: &next)
            let identity: FileIdentity? = try withFileLock {
                guard try VaultState.load(directory: directory) == expected else {
                    throw VaultError.corrupted("the vault changed while \(operation); try again")
                }
                // A state older than the anchor is not the base of a change.
                try anchor?.check(RollbackAnchor.vaultState, found: generationBase ?? expected.generation ?? 0, file: statePath)
                try beforeCommit()
                return try commit(next)
            }
            // Written first, anchored second: a failure here leaves the anchor behind, which the
            // next unlock advances (a newer state is accepted).
            _ = try? anchor?.advance(RollbackAnchor.vaultState, to: next.generation ?? 0)
            try install(UnlockedKeys(state: next, appKey: appKey, secrets: secrets, stateIdentity: identity))
        } catch {
            appKey.wipe()
            secrets.wipe()
            throw error
        }
    }

    /// The keys in memory, checked to be those of `state` (nil when locked).
    func heldKeys(matching state: VaultState) throws(VaultError) -> UnlockedKeys? {
        guard let held = memory.withLock({ $0.unlocked }) else { return nil }
        try checkSameVault(state, held)
        return held
    }

    /// The keys a change works from, given the application key that `opener` just opened from
    /// `state` (consumed): the keys in memory when the vault is unlocked (the key must be
    /// theirs), else keys opened from `state`, which the caller wipes when done.
    func changeKeys(state: VaultState, appKey: SecretBytes, held: UnlockedKeys?, opener: String) throws(VaultError) -> UnlockedKeys {
        if let held {
            defer { appKey.wipe() }
            guard appKey == held.appKey else {
                throw VaultError.corrupted("\(opener) opens a different key than the one in memory")
            }
            return held
        }
        do {
            let secrets = try openSecrets(of: state, appKey: appKey)
            do {
                try verifyBinding(of: state)
                return try UnlockedKeys(state: state, appKey: appKey, secrets: secrets, stateIdentity: nil)
            } catch {
                secrets.wipe()
                throw error
            }
        } catch {
            appKey.wipe()
            throw VaultError.wrap(error)
        }
    }

    func checkSameVault(_ state: VaultState, _ unlocked: UnlockedKeys) throws(VaultError) {
        guard state.vaultID == unlocked.vaultID, Array(state.keyID) == unlocked.keyID else {
            throw VaultError.corrupted("the vault on disk is not the one unlocked in memory (it was replaced or its key rotated elsewhere); lock and unlock again")
        }
        // The state a change builds on must authenticate under the key held: its generation
        // (checked against the rollback anchor) and wrappings are then the ones this key sealed,
        // not an older state's with a raised generation.
        try openSecrets(of: state, appKey: unlocked.appKey).wipe()
    }
}
