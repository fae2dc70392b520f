import Foundation
import Crypto
import Cipher

/// The vault's state file, `vault.state`: one JSON document written atomically, so a change of
/// passcode, questions or key is all-or-nothing. Byte layouts: docs/FORMATS.md, section Vault.
struct VaultState: Codable, Equatable {
    static let fileName = "vault.state"
    static let formatName = "securefoundation-vault"
    /// Version 2 adds the stored erase policy, the answer-normalization version and secret
    /// layout 2 (retired class masters). Version 3 adds the generation (checked against the
    /// rollback anchor) and the device key's check value, both authenticated by the secret
    /// section. Version 4 adds the recovery key's wrapping and the record of device-key
    /// re-bindings, both authenticated by the secret section. Versions 1 to 3 are read and
    /// upgraded on the next write or unlock.
    static let currentVersion = 4
    /// How many re-binding records are kept (the oldest is dropped beyond this).
    static let maximumRebindings = 16
    /// The answer normalization this code implements (``AnswerNormalization``).
    static let currentNormalization = 1
    /// nonce (12) ‖ application key (32) ‖ tag (16).
    static let wrappedKeyLength = 60

    /// The application key wrapped under the passcode's key.
    struct PasscodeWrap: Codable, Equatable {
        var kdf: KDFParameters
        var salt: Data
        var wrapped: Data
    }

    /// The application key wrapped under the combined answers of one k-subset of the questions.
    struct SubsetWrap: Codable, Equatable {
        var indices: [Int]
        var salt: Data
        var wrapped: Data
    }

    /// The security questions (readable before unlock; authenticated) and their wrappings.
    struct Questions: Codable, Equatable {
        var questions: [String]
        var threshold: Int
        var kdf: KDFParameters
        var subsets: [SubsetWrap]
        /// The answer-normalization version the wrappings were made with (version 2; absent in
        /// version 1, which used normalization 1).
        var normalization: Int?
    }

    /// The recovery key's wrappings (version 4): the application key wrapped under a KEK derived
    /// from the recovery key (only its holder can make a wrapping it opens), and that KEK sealed
    /// under a key derived from the application key, so a key rotation can wrap the new key
    /// without the recovery key.
    struct RecoveryWrap: Codable, Equatable {
        /// 16 random bytes: the salt of the KEK's derivation, new with every recovery key.
        var salt: Data
        /// nonce (12) ‖ application key (32) ‖ tag (16), under the KEK.
        var wrapped: Data
        /// nonce (12) ‖ KEK (32) ‖ tag (16), under HKDF(application key, "securefoundation vault v4 recovery kek seal").
        var sealedKEK: Data
    }

    /// One re-binding of the vault to a new device key (version 4): when, from which key to
    /// which (check values), and with which credential.
    struct Rebinding: Codable, Equatable {
        /// Seconds since 1970.
        var at: UInt64
        /// The check value the state recorded before (absent when it recorded none).
        var from: Data?
        /// The new device key's check value.
        var to: Data
        /// `passcode`, `answers` or `recovery-key`.
        var by: String
    }

    var format: String = VaultState.formatName
    var version: Int = VaultState.currentVersion
    /// 16 random bytes naming this vault (bound into every wrapping).
    var vaultID: Data
    /// 8 random bytes naming the current application key (recorded in sealed data).
    var keyID: Data
    var passcode: PasscodeWrap?
    var questions: Questions?
    /// Erase after this many consecutive failed attempts (version 2; nil: never). Bound into the
    /// secret section's associated data.
    var eraseAfter: Int?
    /// Incremented by every rewrite of the state (version 3; 1 at setup). The rollback anchor
    /// beside the device key holds the highest generation seen; an older one is refused.
    var generation: UInt64?
    /// The check value (``DeviceKeyRecord/checkValue(of:)``) of the device key the vault uses
    /// (version 3; nil when no device key could be read when it was written).
    var deviceCheck: Data?
    /// The recovery key's wrapping (version 4; nil: no recovery key).
    var recovery: RecoveryWrap?
    /// Re-bindings to a new device key, oldest first (version 4; at most ``maximumRebindings``).
    var rebindings: [Rebinding]?
    /// The secret section (class master, retired keys), AES-256-GCM under the state key with the
    /// digest of every other field as associated data.
    var secrets: Data

    // MARK: Associated data

    static let label = "securefoundation vault v1"

    /// Associated data of the passcode wrapping.
    func passcodeAAD() -> [UInt8] {
        Array((VaultState.label + " passcode").utf8) + [0] + Array(vaultID) + Array(keyID)
    }

    /// Associated data of one subset wrapping: binds the question texts, the threshold and the subset.
    func subsetAAD(questions: Questions, indices: [Int]) -> [UInt8] {
        var aad = Array((VaultState.label + " answers").utf8) + [0] + Array(vaultID) + Array(keyID)
        aad += VaultState.questionsDigest(questions.questions)
        aad += [UInt8(clamping: questions.threshold), UInt8(clamping: questions.questions.count), UInt8(clamping: indices.count)]
        aad += indices.map { UInt8(clamping: $0) }
        return aad
    }

    /// Associated data of the recovery wrapping.
    func recoveryAAD() -> [UInt8] {
        Array((VaultState.label + " recovery").utf8) + [0] + Array(vaultID) + Array(keyID)
    }

    /// Associated data of the sealed recovery KEK.
    func recoveryKEKAAD() -> [UInt8] {
        Array((VaultState.label + " recovery kek").utf8) + [0] + Array(vaultID) + Array(keyID)
    }

    /// Associated data of the secret section: a digest of every public field.
    func secretsAAD() -> [UInt8] {
        var input = ByteWriter(Array((VaultState.label + " public").utf8) + [0])
        input.field(Array(format.utf8))
        input.uint32(UInt32(clamping: version))
        input.field(vaultID)
        input.field(keyID)
        if let passcode {
            input.byte(1)
            input.field(VaultState.encode(passcode.kdf))
            input.field(passcode.salt)
            input.field(passcode.wrapped)
        } else {
            input.byte(0)
        }
        if let questions {
            input.byte(1)
            input.uint32(UInt32(clamping: questions.questions.count))
            for question in questions.questions { input.field(Array(question.utf8)) }
            input.uint32(UInt32(clamping: questions.threshold))
            input.field(VaultState.encode(questions.kdf))
            input.uint32(UInt32(clamping: questions.subsets.count))
            for subset in questions.subsets {
                input.field(subset.indices.map { UInt8(clamping: $0) })
                input.field(subset.salt)
                input.field(subset.wrapped)
            }
        } else {
            input.byte(0)
        }
        if version >= 2 {
            if let eraseAfter {
                input.byte(1)
                input.uint32(UInt32(clamping: eraseAfter))
            } else {
                input.byte(0)
            }
            if let questions {
                input.byte(1)
                input.uint32(UInt32(clamping: questions.normalization ?? 0))
            } else {
                input.byte(0)
            }
        }
        if version >= 3 {
            input.uint64(generation ?? 0)
            if let deviceCheck {
                input.byte(1)
                input.field(deviceCheck)
            } else {
                input.byte(0)
            }
        }
        if version >= 4 {
            if let recovery {
                input.byte(1)
                input.field(recovery.salt)
                input.field(recovery.wrapped)
                input.field(recovery.sealedKEK)
            } else {
                input.byte(0)
            }
            let rebindings = rebindings ?? []
            input.uint32(UInt32(clamping: rebindings.count))
            for entry in rebindings {
                input.uint64(entry.at)
                input.field(entry.from ?? Data())
                input.field(entry.to)
                input.field(Array(entry.by.utf8))
            }
        }
        return Array((VaultState.label + " secrets").utf8) + [0] + Array(SHA256.hash(data: input.bytes))
    }

    /// SHA-256 over the length-prefixed UTF-8 question texts.
    static func questionsDigest(_ questions: [String]) -> [UInt8] {
        var input = ByteWriter()
        input.uint32(UInt32(clamping: questions.count))
        for question in questions { input.field(Array(question.utf8)) }
        return Array(SHA256.hash(data: input.bytes))
    }

    /// KDF parameters in their binary form (the sealed envelope's, docs/FORMATS.md).
    static func encode(_ parameters: KDFParameters) -> [UInt8] {
        var output = ByteWriter()
        output.kdfParameters(parameters)
        return output.bytes
    }

    // MARK: Files

    static func path(in directory: String) -> String { directory + "/" + fileName }

    /// Reads the state, or nil when there is none.
    static func load(directory: String) throws -> VaultState? {
        let path = path(in: directory)
        guard access(path, F_OK) == 0 else {
            CheckedFileCache.forget(path: path, kind: VaultState.self)
            return nil
        }
        // Parsed and checked once while the file is unchanged (CheckedFileCache, which also
        // checks that it is a private regular file before reading it).
        return try CheckedFileCache.value(at: path, kind: VaultState.self, maxLength: 4 << 20) { bytes in
            let state: VaultState
            do {
                state = try CanonicalEncoding.decode(VaultState.self, from: bytes)
            } catch {
                throw VaultError.corrupted("\(path) is not a vault state file: \(error)")
            }
            try state.check(path: path)
            return state
        }
    }

    /// Structural checks done before any key derivation.
    func check(path: String) throws {
        guard format == VaultState.formatName else { throw VaultError.corrupted("\(path): unknown format \(format)") }
        guard (1...VaultState.currentVersion).contains(version) else {
            throw VaultError.corrupted("\(path): state version \(version) is not supported by this version of SecureFoundation")
        }
        guard vaultID.count == 16, keyID.count == 8 else { throw VaultError.corrupted("\(path): bad vault or key id") }
        guard secrets.count >= KeyWrap.nonceLength + 34 + KeyWrap.tagLength else {
            throw VaultError.corrupted("\(path): the secret section is \(secrets.count) bytes, too short")
        }
        guard passcode != nil || questions != nil else { throw VaultError.corrupted("\(path): neither a passcode nor questions") }
        if let eraseAfter {
            guard version >= 2, (1...AttemptPolicy.maximumEraseAfter).contains(eraseAfter) else {
                throw VaultError.corrupted("\(path): an erase-after count of \(eraseAfter) is out of range")
            }
        }
        if version >= 3 {
            guard let generation, generation >= 1, generation <= RollbackAnchor.maximumValue else {
                throw VaultError.corrupted("\(path): a version-3 state needs a generation")
            }
            if let deviceCheck, deviceCheck.count != 16 {
                throw VaultError.corrupted("\(path): the device key's check value is \(deviceCheck.count) bytes, not 16")
            }
        } else if generation != nil || deviceCheck != nil {
            throw VaultError.corrupted("\(path): a version-\(version) state has no generation or device check")
        }
        if version >= 4 {
            if let recovery {
                guard recovery.salt.count == 16, recovery.wrapped.count == VaultState.wrappedKeyLength,
                      recovery.sealedKEK.count == VaultState.wrappedKeyLength else {
                    throw VaultError.corrupted("\(path): the recovery-key wrapping is malformed")
                }
            }
            let rebindings = rebindings ?? []
            guard rebindings.count <= VaultState.maximumRebindings,
                  rebindings.allSatisfy({ ($0.from?.count ?? 16) == 16 && $0.to.count == 16 && ["passcode", "answers", "recovery-key"].contains($0.by) }) else {
                throw VaultError.corrupted("\(path): the record of device-key re-bindings is malformed")
            }
        } else if recovery != nil || rebindings != nil {
            throw VaultError.corrupted("\(path): a version-\(version) state has no recovery key or re-binding record")
        }
        if let passcode {
            try passcode.kdf.validateForVault(path: path)
            guard passcode.salt.count >= 16 else { throw VaultError.corrupted("\(path): passcode salt too short") }
            guard passcode.wrapped.count == VaultState.wrappedKeyLength else {
                throw VaultError.corrupted("\(path): the passcode wrapping is \(passcode.wrapped.count) bytes, not \(VaultState.wrappedKeyLength)")
            }
        }
        if let questions {
            try questions.kdf.validateForVault(path: path)
            let n = questions.questions.count
            guard (1...CryptoManager.maximumQuestions).contains(n), (1...n).contains(questions.threshold) else {
                throw VaultError.corrupted("\(path): \(questions.threshold) of \(n) questions is out of range")
            }
            // Exactly the C(n, k) distinct k-subsets, each once: one unlock costs at most
            // C(n, k) <= maximumSubsets KDF runs, whatever the file says.
            let expected = CryptoManager.binomial(n, questions.threshold)
            guard expected <= CryptoManager.maximumSubsets, questions.subsets.count == expected else {
                throw VaultError.corrupted("\(path): \(questions.subsets.count) question subsets where \(questions.threshold) of \(n) needs exactly \(expected) (at most \(CryptoManager.maximumSubsets))")
            }
            var seen = Set<[Int]>()
            for subset in questions.subsets {
                guard subset.indices.count == questions.threshold,
                      subset.indices.allSatisfy({ (0..<n).contains($0) }),
                      zip(subset.indices, subset.indices.dropFirst()).allSatisfy({ $0 < $1 }),
                      seen.insert(subset.indices).inserted,
                      subset.salt.count >= 16, subset.wrapped.count == VaultState.wrappedKeyLength else {
                    throw VaultError.corrupted("\(path): a question subset is malformed or repeated")
                }
            }
            switch (version, questions.normalization) {
            case (1, nil), (2..., VaultState.currentNormalization?): break
            case (1, _?), (_, nil):
                throw VaultError.corrupted("\(path): the answer-normalization version is missing or misplaced")
            case let (_, other?):
                throw VaultError.corrupted("\(path): answer normalization \(other) is not supported by this version of SecureFoundation; use the version that wrote the vault")
            }
        }
    }

    func encoded() throws -> Data {
        try CanonicalEncoding.encode(self)
    }
}

extension KDFParameters {
    func validateForVault(path: String) throws {
        // The legacy ceiling bounds what a state may say at all; the manager's own ceiling
        // (CryptoManager.kdfCeiling, standard by default) is applied before the KDF runs.
        do { try validate(ceiling: .legacy) } catch { throw VaultError.corrupted("\(path): \(error)") }
    }
}

/// The secret section's plaintext. Layout 2 (written by state version 2):
/// `0x02 ‖ class master (32) ‖ count (1) ‖ count × (id length (1) ‖ id ‖ retired application key (32))
/// ‖ class count (1) ‖ class count × retired class master (32)`, newest first. Layout 1 (read only)
/// ends after the retired application keys.
struct VaultSecrets {
    /// How many retired class masters are kept; a rotation beyond this drops the oldest.
    static let maximumRetiredClassMasters = 16

    var classMaster: SecretBytes
    /// Retired application keys, newest first, each with its key id.
    var retired: [(id: [UInt8], key: SecretBytes)]
    /// Class masters of earlier generations, newest first (for opening only).
    var retiredClassMasters: [SecretBytes] = []

    func wipe() {
        classMaster.wipe()
        for entry in retired { entry.key.wipe() }
        for master in retiredClassMasters { master.wipe() }
    }

    func serialize() throws -> SecretBytes {
        guard classMaster.count == 32, retired.count <= 255 else { throw VaultError.invalidArgument("too many retired keys (at most 255)") }
        guard retiredClassMasters.count <= VaultSecrets.maximumRetiredClassMasters,
              retiredClassMasters.allSatisfy({ $0.count == 32 }) else {
            throw VaultError.invalidArgument("a retired class master is malformed")
        }
        let total = 1 + 32 + 1 + retired.reduce(0) { $0 + 1 + $1.id.count + 32 } + 1 + 32 * retiredClassMasters.count
        return try SecretBytes(count: total) { target in
            var offset = 0
            func put(_ bytes: UnsafeRawBufferPointer) {
                (target.baseAddress! + offset).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
                offset += bytes.count
            }
            target[0] = 2
            offset = 1
            classMaster.withUnsafeBytes { put($0) }
            target[offset] = UInt8(retired.count)
            offset += 1
            for entry in retired {
                guard entry.key.count == 32, (1...255).contains(entry.id.count) else { throw VaultError.invalidArgument("a retired key is malformed") }
                target[offset] = UInt8(entry.id.count)
                offset += 1
                entry.id.withUnsafeBytes { put($0) }
                entry.key.withUnsafeBytes { put($0) }
            }
            target[offset] = UInt8(retiredClassMasters.count)
            offset += 1
            for master in retiredClassMasters { master.withUnsafeBytes { put($0) } }
        }
    }

    static func parse(_ plaintext: SecretBytes) throws -> VaultSecrets {
        try plaintext.withUnsafeBytes { bytes in
            guard bytes.count >= 34, bytes[0] == 1 || bytes[0] == 2 else { throw VaultError.corrupted("the secret section has an unknown layout") }
            let layout = bytes[0]
            var result = VaultSecrets(classMaster: SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[1..<33])) },
                                      retired: [])
            func fail(_ why: String) -> VaultError {
                result.wipe()
                return VaultError.corrupted("the secret section \(why)")
            }
            let count = Int(bytes[33])
            var offset = 34
            for _ in 0..<count {
                guard offset < bytes.count else { throw fail("is truncated") }
                let idLength = Int(bytes[offset])
                offset += 1
                guard idLength > 0, offset + idLength + 32 <= bytes.count else { throw fail("is truncated") }
                let id = Array(bytes[offset..<offset + idLength])
                offset += idLength
                let start = offset
                let key = SecretBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 32])) }
                offset += 32
                result.retired.append((id, key))
            }
            if layout == 2 {
                guard offset < bytes.count else { throw fail("is truncated") }
                let classCount = Int(bytes[offset])
                offset += 1
                guard classCount <= maximumRetiredClassMasters else { throw fail("holds too many class masters") }
                for _ in 0..<classCount {
                    guard offset + 32 <= bytes.count else { throw fail("is truncated") }
                    let start = offset
                    result.retiredClassMasters.append(SecretBytes(count: 32) {
                        $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 32]))
                    })
                    offset += 32
                }
            }
            guard offset == bytes.count else { throw fail("has trailing bytes") }
            return result
        }
    }
}
