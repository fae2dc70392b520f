import Foundation
import Crypto
import Cipher

extension CryptoManager {
    // MARK: Setup (the original's temporary passcode, temporary questions, finalize)

    /// Keeps a copy of `passcode` in locked memory until ``finalize()`` (the original's StoreTP).
    /// - Parameter passcode: The passcode; the caller may wipe its own copy afterwards.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for an empty passcode.
    public func storeTemporaryPasscode(_ passcode: SecretBytes) throws(VaultError) {
        guard !passcode.isEmpty else { throw VaultError.invalidArgument("an empty passcode is not accepted") }
        let copy = passcode.copy()
        memory.withLock { memory in
            memory.temporaryPasscode?.wipe()
            memory.temporaryPasscode = copy
        }
    }

    /// Keeps the questions and copies of the answers until ``finalize()`` (the original's StoreTSQA).
    ///
    /// - Parameters:
    ///   - questions: The question texts, shown before unlock (1 to `maximumQuestions`).
    ///   - answers: One answer per question, in UTF-8.
    ///   - threshold: How many correct answers unlock (k of n); nil means all of them.
    /// - Throws: ``VaultError/invalidArgument(_:)`` when counts or the threshold are out of range.
    public func storeTemporarySecurityQuestions(_ questions: [String], answers: [SecretBytes], threshold: Int? = nil) throws(VaultError) {
        try Self.validateQuestions(questions, answerCount: answers.count, threshold: threshold ?? questions.count)
        let copies = answers.map { $0.copy() }
        memory.withLock { memory in
            memory.temporaryAnswers?.forEach { $0.wipe() }
            memory.temporaryQuestions = questions
            memory.temporaryAnswers = copies
            memory.temporaryThreshold = threshold ?? questions.count
        }
    }

    /// String answers (see ``AnswerNormalization`` about `String` copies in memory).
    /// - Parameters:
    ///   - questions: The questions.
    ///   - answers: One answer per question.
    ///   - threshold: How many correct answers unlock (k of n); nil means all of them.
    /// - Throws: ``VaultError``, as the `[SecretBytes]` variant.
    public func storeTemporarySecurityQuestions(_ questions: [String], answers: [String], threshold: Int? = nil) throws(VaultError) {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        try storeTemporarySecurityQuestions(questions, answers: secrets, threshold: threshold)
    }

    /// Creates the vault from the temporaries: a new application key wrapped under the passcode
    /// and/or the answers, all written in one atomic step. The temporaries are wiped whether it
    /// succeeds or not. Afterwards the vault is unlocked, as in the original.
    ///
    /// - Throws: ``VaultError/alreadySetUp``, ``VaultError/invalidArgument(_:)`` when neither a
    ///   passcode nor questions were stored or an answer is empty after normalization; I/O errors
    ///   (then nothing was written).
    public func finalize() throws(VaultError) {
        let (passcode, questions, answers, threshold) = memory.withLock { memory in
            defer {
                memory.temporaryPasscode = nil
                memory.temporaryQuestions = nil
                memory.temporaryAnswers = nil
                memory.temporaryThreshold = nil
            }
            return (memory.temporaryPasscode, memory.temporaryQuestions, memory.temporaryAnswers, memory.temporaryThreshold)
        }
        defer {
            passcode?.wipe()
            answers?.forEach { $0.wipe() }
        }
        guard passcode != nil || questions != nil else {
            throw VaultError.invalidArgument("nothing to finalize: store a temporary passcode and/or security questions first")
        }
        var questionSet: (questions: [String], answers: [SecretBytes], threshold: Int)?
        if let questions, let answers {
            questionSet = (questions, answers, threshold ?? questions.count)
        }
        try create(passcode: passcode, questions: questionSet)
    }

    /// Sets up the vault in one call: the same as storing the temporaries and finalizing.
    ///
    /// - Parameters:
    ///   - passcode: The passcode, or nil for a vault opened by answers only.
    ///   - questions: The security questions (empty for none).
    ///   - answers: One answer per question.
    ///   - threshold: How many answers unlock; nil means all.
    /// - Throws: ``VaultError``, as ``finalize()``.
    public func setUp(passcode: SecretBytes?, questions: [String] = [], answers: [SecretBytes] = [], threshold: Int? = nil) throws(VaultError) {
        guard passcode != nil || !questions.isEmpty else {
            throw VaultError.invalidArgument("give a passcode, security questions, or both")
        }
        if !questions.isEmpty {
            try Self.validateQuestions(questions, answerCount: answers.count, threshold: threshold ?? questions.count)
        }
        if let passcode, passcode.isEmpty { throw VaultError.invalidArgument("an empty passcode is not accepted") }
        try create(passcode: passcode, questions: questions.isEmpty ? nil : (questions, answers, threshold ?? questions.count))
    }

    /// One-call setup with String answers.
    /// - Parameters:
    ///   - passcode: The passcode (nil: questions only).
    ///   - questions: The security questions.
    ///   - answers: One answer per question.
    ///   - threshold: How many answers unlock; nil means all.
    /// - Throws: ``VaultError``, as the `[SecretBytes]` variant.
    public func setUp(passcode: SecretBytes?, questions: [String], answers: [String], threshold: Int? = nil) throws(VaultError) {
        let secrets = answers.map { SecretBytes(utf8: $0) }
        defer { secrets.forEach { $0.wipe() } }
        try setUp(passcode: passcode, questions: questions, answers: secrets, threshold: threshold)
    }

    static func validateQuestions(_ questions: [String], answerCount: Int, threshold: Int) throws(VaultError) {
        let n = questions.count
        guard (1...maximumQuestions).contains(n) else {
            throw VaultError.invalidArgument("\(n) security questions; give 1 to \(maximumQuestions)")
        }
        guard answerCount == n else {
            throw VaultError.invalidArgument("\(n) questions but \(answerCount) answers; give one answer per question")
        }
        guard (1...n).contains(threshold) else {
            throw VaultError.invalidArgument("a threshold of \(threshold) with \(n) questions; give 1 to \(n)")
        }
        guard binomial(n, threshold) <= maximumSubsets else {
            throw VaultError.invalidArgument("\(threshold) of \(n) needs \(binomial(n, threshold)) wrappings; at most \(maximumSubsets) are allowed")
        }
        for question in questions where question.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            throw VaultError.invalidArgument("a security question is empty")
        }
    }

    static func binomial(_ n: Int, _ k: Int) -> Int {
        guard k >= 0, k <= n else { return 0 }
        var result = 1
        for i in 0..<min(k, n - k) { result = result * (n - i) / (i + 1) }
        return result
    }

    /// Every k-subset of 0..<n, in lexicographic order.
    static func subsets(n: Int, k: Int) -> [[Int]] {
        var result: [[Int]] = []
        var current: [Int] = []
        func walk(_ start: Int) {
            if current.count == k { result.append(current); return }
            guard start < n else { return }
            for index in start..<n where n - index >= k - current.count {
                current.append(index)
                walk(index + 1)
                current.removeLast()
            }
        }
        walk(0)
        return result
    }

    private func create(passcode: SecretBytes?, questions: (questions: [String], answers: [SecretBytes], threshold: Int)?) throws(VaultError) {
        try vaultCall {
            // Normalize answers and derive every wrapping before touching the disk.
            let normalized = try questions.map { try $0.answers.map { try AnswerNormalization.normalize($0) } } ?? []
            defer { normalized.forEach { $0.wipe() } }
            if normalized.contains(where: { $0.isEmpty }) {
                throw VaultError.invalidArgument("an answer is empty (answers are compared after trimming whitespace)")
            }
            let appKey = try SecretBytes.random(count: 32)
            let secrets = VaultSecrets(classMaster: try SecretBytes.random(count: 32), retired: [])
            var state = VaultState(vaultID: Data(try SecureRandom.bytes(16)), keyID: Data(try SecureRandom.bytes(8)),
                                   passcode: nil, questions: nil, eraseAfter: attemptPolicy.eraseAfter, generation: 1,
                                   deviceCheck: readableDeviceCheck(), secrets: Data())
            do {
                if let passcode {
                    state.passcode = try wrapPasscode(passcode, appKey: appKey, state: state)
                }
                if let questions {
                    state.questions = try wrapAnswers(questions: questions.questions, normalized: normalized,
                                                      threshold: questions.threshold, appKey: appKey, state: state)
                }
                try sealSecrets(secrets, appKey: appKey, into: &state)
                // All or nothing: every file is created before the commit point (the rename of
                // the state file); after it nothing can fail, so a failure means no vault.
                let attemptsPath = directory + "/" + AttemptRecord.fileName
                let prepared = try UnlockedKeys(state: state, appKey: appKey, secrets: secrets, stateIdentity: nil)
                var identity: FileIdentity?
                try withFileLock {
                    guard try VaultState.load(directory: directory) == nil else { throw VaultError.alreadySetUp }
                    try destroyLeftovers()
                    let hadAttempts = access(attemptsPath, F_OK) == 0
                    do {
                        try AttemptRecord().store(directory: directory)
                        try testHooks.beforeCommit?()
                        identity = try commit(state)
                    } catch {
                        if !hadAttempts { unlink(attemptsPath) }
                        throw error
                    }
                    unlink(erasedMarkerPath)
                }
                // Written first, anchored second: a failure here leaves the anchor behind, which
                // the next unlock advances.
                _ = try? anchor(for: state)?.advance(RollbackAnchor.vaultState, to: 1)
                // The vault exists now; nothing after this point reports a failure.
                let unlocked = (try? UnlockedKeys(state: state, appKey: appKey, secrets: secrets, stateIdentity: identity)) ?? prepared
                try? install(unlocked)
            } catch {
                appKey.wipe()
                secrets.wipe()
                throw error
            }
        }
    }

    // MARK: Wrapping

    func wrapPasscode(_ passcode: SecretBytes, appKey: SecretBytes, state: VaultState) throws(VaultError) -> VaultState.PasscodeWrap {
        try vaultCall {
            let salt = try SecureRandom.bytes(KeyDerivation.saltLength)
            let kek = try KeyDerivation.derive(password: passcode, salt: salt, parameters: policy.parameters)
            defer { kek.wipe() }
            let wrapped = try KeyWrap.wrap(appKey, under: kek, aad: state.passcodeAAD())
            return VaultState.PasscodeWrap(kdf: policy.parameters, salt: Data(salt), wrapped: Data(wrapped))
        }
    }

    func wrapAnswers(questions: [String], normalized: [SecretBytes], threshold: Int, appKey: SecretBytes,
                     state: VaultState) throws -> VaultState.Questions {
        var set = VaultState.Questions(questions: questions, threshold: threshold, kdf: policy.parameters, subsets: [],
                                       normalization: VaultState.currentNormalization)
        for indices in Self.subsets(n: questions.count, k: threshold) {
            let salt = try SecureRandom.bytes(KeyDerivation.saltLength)
            let kek = try subsetKEK(normalized: normalized, indices: indices, salt: salt, parameters: policy.parameters)
            defer { kek.wipe() }
            let wrapped = try KeyWrap.wrap(appKey, under: kek, aad: state.subsetAAD(questions: set, indices: indices))
            set.subsets.append(VaultState.SubsetWrap(indices: indices, salt: Data(salt), wrapped: Data(wrapped)))
        }
        return set
    }

    /// The KEK of one subset: KDF over `for each index: index (4, BE) ‖ length (4, BE) ‖ normalized answer`.
    func subsetKEK(normalized: [SecretBytes], indices: [Int], salt: [UInt8], parameters: KDFParameters) throws(VaultError) -> SecretBytes {
        let total = indices.reduce(0) { $0 + 8 + normalized[$1].count }
        let material = SecretBytes(count: total) { target in
            var offset = 0
            for index in indices {
                normalized[index].withUnsafeBytes { answer in
                    var header = ByteWriter()
                    header.uint32(UInt32(index))
                    header.uint32(UInt32(answer.count))
                    for byte in header.bytes { target[offset] = byte; offset += 1 }
                    if answer.count > 0 {
                        (target.baseAddress! + offset).copyMemory(from: answer.baseAddress!, byteCount: answer.count)
                        offset += answer.count
                    }
                }
            }
        }
        defer { material.wipe() }
        return try storedKDF(password: material, salt: salt, parameters: parameters)
    }

    /// Runs the KDF of a wrapping with the manager's ceiling (``kdfCeiling``), refusing settings
    /// above it before any work with an error that says how to open a vault made with them.
    func storedKDF(password: SecretBytes, salt: [UInt8], parameters: KDFParameters) throws(VaultError) -> SecretBytes {
        try checkKDFCeiling(parameters)
        return try vaultCall { try KeyDerivation.derive(password: password, salt: salt, parameters: parameters, outputLength: 32, ceiling: kdfCeiling) }
    }

    /// Throws, before any work, when stored settings exceed ``kdfCeiling``.
    func checkKDFCeiling(_ parameters: KDFParameters) throws(VaultError) {
        do {
            try parameters.validate(ceiling: kdfCeiling)
        } catch CipherError.kdfParametersTooExpensive(let detail) {
            throw VaultError.corrupted("the vault's stored KDF settings exceed the accepted ceiling (\(detail)): if this vault was created with such costly custom settings by an earlier version, open it with CryptoManager(kdfCeiling: .legacy) or --legacy-kdf-ceiling; otherwise the state file was changed")
        } catch {
            throw VaultError.wrap(error)
        }
    }

    /// Seals the secret section under the state key, bound to every public field of `state`.
    func sealSecrets(_ secrets: VaultSecrets, appKey: SecretBytes, into state: inout VaultState) throws(VaultError) {
        let plaintext = try vaultCall { try secrets.serialize() }
        defer { plaintext.wipe() }
        let stateKey = KeyHierarchy.stateKey(appKey)
        defer { stateKey.wipe() }
        state.secrets = Data()
        let aad = state.secretsAAD()
        state.secrets = Data(try vaultCall { try KeyWrap.wrap(plaintext, under: stateKey, aad: aad) })
    }

    /// Opens the secret section; failure means the state was modified (the key was right).
    func openSecrets(of state: VaultState, appKey: SecretBytes) throws(VaultError) -> VaultSecrets {
        let stateKey = KeyHierarchy.stateKey(appKey)
        defer { stateKey.wipe() }
        let plaintext: SecretBytes
        do {
            plaintext = try KeyWrap.unwrap(Array(state.secrets), under: stateKey, aad: state.secretsAAD())
        } catch is KeyWrap.WrongKey {
            throw VaultError.corrupted("the state file was modified (its questions, wrappings or secret section do not authenticate)")
        } catch {
            throw VaultError.wrap(error)
        }
        defer { plaintext.wipe() }
        return try vaultCall { try VaultSecrets.parse(plaintext) }
    }
}

/// Hooks for tests (fault injection).
struct TestHooks: Sendable {
    var beforeCommit: (@Sendable () throws -> Void)?
    /// Called at each named step of commits and destruction (tests copy the directory there to
    /// see what a kill at that moment leaves).
    var step: (@Sendable (String) -> Void)?
}

extension CryptoManager {
    var testHooks: TestHooks { hooks.withLock { $0 } }
}
