import Foundation
import Cipher
import Shredder
import Vault
import Keychain
import ProtectedFiles

/// Brings everything iMAS Secure Foundation wrote across, in one run: its crypto manager becomes
/// a vault, its keychain file becomes keychain items (values it stored "securely" decrypted and
/// re-sealed), and data and files it encrypted under its application key become sealed data or
/// protected files.
///
/// The run is all or nothing up to the first write: every legacy input is read, decrypted and
/// checked first, and any failure stops the run with nothing written (``MigrationError/failed(_:)``
/// lists them all). Every legacy secret the credentials given can open is migrated; one they
/// cannot open (the GenItem under a wrapping the original left stale) stops the run too, unless
/// it is left out explicitly (``Plan/leaveOutGenItem``). Then the vault is created (atomically),
/// the items are written and flushed, the output files are written atomically (temporary file,
/// fsync, rename), and only after all that, when asked, the legacy originals are shredded, each
/// on its own: one that cannot be shredded is listed in ``Report/notShredded`` with the reason
/// and the others are still shredded (the legacy keychain last).
///
/// A run can be repeated: an existing vault is unlocked with the same passcode (or answers) and
/// kept; items that exist are skipped, outputs that exist and hold what their legacy input
/// decrypts to are skipped (other content is a failure unless `overwrite`), and with everything
/// migrated and the legacy keychain shredded by an earlier run, a repeated run only checks the
/// outputs and shreds the legacy inputs still there.
public enum IMASMigration {
    /// The name the reports give the GenItem secret.
    package static let genItemName = "\(LegacyCryptoManager.service)/gen-item"

    /// What to migrate.
    public struct Plan: Sendable {
        /// The legacy keychain file (`Library/...`, or the older `Library/.imskeychain`), which
        /// holds the crypto manager's salt and wrapped key.
        public var legacyKeychain: String
        /// The old passcode; also the new vault's passcode.
        public var passcode: SecretBytes?
        /// The old answers, in question order; the new vault gets the old questions with them.
        /// They also open the GenItem secret when they are the answers it was made with.
        public var answers: [SecretBytes]?
        /// A passcode for the new vault when the old one is not given (unlocking with answers).
        public var newPasscode: SecretBytes?
        /// The passcode in force when the GenItem was made (or last reset), when it is not
        /// ``passcode``: the original's passcode change re-wrapped the application key but never
        /// the GenItem key (`gen-itemk`). Used for the GenItem only.
        public var genItemPasscode: SecretBytes?
        /// Leave the GenItem secret out: it is not migrated (and, with ``shredOriginals``, it is
        /// destroyed with the legacy keychain).
        public var leaveOutGenItem = false
        /// Services whose entries the application stored with `setSecurePassword…` (encrypted
        /// under the legacy application key); they become `.whenUnlocked` items holding the
        /// plaintext. Other entries are imported as they are, as `.always` items.
        public var secureServices: Set<String> = []
        /// Blobs of `IMSCryptoManagerEncryptData` (or `IMSCryptoUtilsEncryptData` under the
        /// application key), each re-sealed under the new vault key as `PATH.sealed`.
        public var dataFiles: [String] = []
        /// Files of `IMSCryptoUtilsEncryptFileToPath` under the application key, each written as a
        /// protected file `PATH.protected` of class ``protection``.
        public var protectedFiles: [String] = []
        /// The protection class of the files in ``protectedFiles``.
        public var protection: FileProtectionClass = .complete
        /// Replace existing items and output files.
        public var overwrite = false
        /// Shred the legacy keychain file and the legacy data files and files once everything is
        /// written.
        public var shredOriginals = false

        /// Options with the defaults above.
        /// - Parameter legacyKeychain: The path of the iMAS keychain file to migrate.
        public init(legacyKeychain: String) { self.legacyKeychain = legacyKeychain }
    }

    /// A legacy original that was not shredded, and why.
    public struct ShredFailure: Sendable, Equatable, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "\(path): \(reason)" }
    }

    /// What a run did.
    public struct Report: Sendable {
        /// Whether the vault was created by this run (false: an existing vault was unlocked).
        public var createdVault = false
        /// The legacy keychain was gone (shredded by an earlier run that migrated it): this run
        /// only checked the outputs and shredded what was left.
        public var legacyKeychainGone = false
        /// Legacy entries imported as they were (`.always`).
        public var imported: [String] = []
        /// Legacy secure entries decrypted and stored as `.whenUnlocked` items.
        public var resealed: [String] = []
        /// Items that existed already and were left alone (without `overwrite`).
        public var skipped: [String] = []
        /// Legacy secrets left out on request (the GenItem with ``Plan/leaveOutGenItem``).
        public var leftOut: [String] = []
        /// Output files written (sealed data and protected files).
        public var written: [String] = []
        /// Output files that existed already with the content of their legacy input (an
        /// earlier run wrote them), left alone.
        public var skippedFiles: [String] = []
        /// The shredding of each legacy original, when asked.
        public var shredded: [ShredReport] = []
        /// Legacy originals that could not be shredded (the migration itself is done); a run
        /// of the same plan once the reasons are fixed shreds them.
        public var notShredded: [ShredFailure] = []
    }

    /// The account names the new keychain gives an entry.
    static func name(_ service: String, _ account: String) -> String { "\(service)/\(account)" }

    /// Whether `error` says the file does not exist.
    static func isMissing(_ error: any Error) -> Bool {
        if case let SecureFile.Failure.system(_, _, code) = error { return code == ENOENT || code == ENOTDIR }
        if case let KeychainError.file(.system(_, _, code)) = error { return code == ENOENT || code == ENOTDIR }
        return false
    }

    /// Runs the migration into the vault of `manager` (created when it is not set up).
    /// - Parameters:
    ///   - plan: What to migrate, from where, and the credentials.
    ///   - manager: The vault to migrate into.
    /// - Returns: What was created, imported, left alone and shredded.
    /// - Throws: ``MigrationError`` (``MigrationError/failed(_:)`` lists every unreadable
    ///   input, before anything is written), `VaultError`, `KeychainError`,
    ///   `ProtectedFileError`, file errors.
    public static func run(_ plan: Plan, manager: CryptoManager) throws -> Report {
        guard plan.passcode != nil || plan.answers != nil else {
            throw MigrationError.invalidArgument("give the old passcode or the old answers")
        }
        guard !(plan.leaveOutGenItem && plan.genItemPasscode != nil) else {
            throw MigrationError.invalidArgument("the GenItem is either left out or opened with its passcode, not both")
        }
        var plan = plan
        // 1. Read and check everything.
        let contents: Keychain.LegacyKeychainContents
        do {
            contents = try Keychain.readLegacyKeychain(at: plan.legacyKeychain)
        } catch {
            guard isMissing(error), (try? manager.isSetUp) == true else { throw error }
            return try finishEarlierRun(plan, manager: manager)
        }
        var managerAccounts: [String: [UInt8]] = [:]
        for entry in contents.entries where entry.service == LegacyCryptoManager.service { managerAccounts[entry.account] = entry.value }
        let legacy = try LegacyCryptoManager(accounts: managerAccounts)
        let appKey: SecretBytes
        if let passcode = plan.passcode {
            appKey = try legacy.applicationKey(passcode: passcode)
            if let answers = plan.answers {
                let other = try legacy.applicationKey(answers: answers)
                defer { other.wipe() }
                guard other == appKey else { appKey.wipe(); throw MigrationError.wrongAnswers }
            }
        } else {
            appKey = try legacy.applicationKey(answers: plan.answers ?? [])
        }
        defer { appKey.wipe() }
        // Empty answers after the last question (a file's final newline) add nothing to the
        // legacy key and are dropped.
        while let answers = plan.answers, answers.count > legacy.questions.count, answers.last?.isEmpty == true {
            plan.answers = Array(answers.dropLast())
        }
        if plan.answers != nil, legacy.questions.isEmpty {
            throw MigrationError.missingLegacyState("security questions (account security-questions) for the answers given")
        }
        if let answers = plan.answers, answers.count != legacy.questions.count {
            throw MigrationError.invalidArgument("\(answers.count) answers were given for \(legacy.questions.count) legacy questions")
        }

        var report = Report()
        var failures = contents.failed.map { MigrationError.Failure(name($0.service, $0.account), $0.reason, kind: .damaged) }
        var plain: [(ItemKey, SecretBytes)] = []
        var secure: [(ItemKey, SecretBytes)] = []
        var outputs: [Output] = []
        defer {
            plain.forEach { $0.1.wipe() }
            secure.forEach { $0.1.wipe() }
            outputs.forEach { $0.plaintext?.wipe() }
        }
        for entry in contents.entries where entry.service != LegacyCryptoManager.service {
            let key = ItemKey.generic(service: entry.service, account: entry.account)
            if plan.secureServices.contains(entry.service) {
                do {
                    secure.append((key, try LegacyCipher.open(entry.value, key: appKey)))
                } catch {
                    failures.append(.init(name(entry.service, entry.account), error: error))
                }
            } else {
                plain.append((key, SecretBytes(copying: entry.value)))
            }
        }
        if legacy.genItem != nil {
            if plan.leaveOutGenItem {
                report.leftOut.append(genItemName)
            } else {
                switch openGenItem(legacy, plan) {
                case .success(let secret):
                    secure.append((ItemKey.generic(service: LegacyCryptoManager.service, account: "gen-item"), secret))
                case .failure(let error):
                    failures.append(.init(genItemName, error: error))
                }
            }
        }
        for (paths, suffix, protected) in [(plan.dataFiles, ".sealed", false), (plan.protectedFiles, ".protected", true)] {
            for path in paths {
                var output = Output(source: path, output: path + suffix, protected: protected)
                output.exists = (try? FileCalls.linkStatus(output.output)) != nil
                do {
                    let blob = try SecureFile.read(path, maxLength: LegacyCipher.maximumLength)
                    output.plaintext = try LegacyCipher.open(blob, key: appKey)
                    output.sourcePresent = true
                } catch where isMissing(error) && output.exists && !plan.overwrite {
                    // Migrated and shredded by an earlier run: the output is checked below.
                    output.sourceMissing = true
                } catch {
                    failures.append(.init(path, error: error))
                }
                outputs.append(output)
            }
        }

        // 2. An existing vault (an earlier run) is unlocked before anything is written, so that
        // outputs already there can be checked against what their inputs decrypt to.
        let setUp = try manager.isSetUp
        if setUp { try unlock(manager, plan) }
        let files = ProtectedFiles(manager: manager)
        for index in outputs.indices where outputs[index].exists && !plan.overwrite {
            let output = outputs[index]
            if !setUp {
                failures.append(.init(output.output, "exists, and no vault exists that an earlier run could have written it with; move it away, or replace it with overwrite", kind: .other))
            } else if holds(output, manager: manager, files: files) {
                outputs[index].skip = true
            } else if output.plaintext != nil {
                failures.append(.init(output.output, "exists with other content than \(output.source) decrypts to; move it away, or replace it with overwrite", kind: .other))
            } else if output.sourceMissing {
                failures.append(.init(output.output, "exists, but does not open under this vault, and \(output.source) is gone", kind: .other))
            }
        }
        guard failures.isEmpty else { throw MigrationError.failed(failures) }

        // 3. The vault: created with the old passcode (or the new one) and the old questions.
        if !setUp {
            let answers = plan.answers ?? []
            try manager.setUp(passcode: plan.passcode ?? plan.newPasscode,
                              questions: answers.isEmpty ? [] : legacy.questions, answers: answers)
            report.createdVault = true
            // As `vault init`: every class's key pair, so completeUnlessOpen writes work locked
            // (a table left by an erased vault of this directory goes first).
            try files.eraseKeyTable()
            try files.prepareClasses()
        }

        // 4. Items, flushed before any output file is written.
        let keychain = try Keychain(manager: manager)
        /// Writes the items; returns the names written and the names skipped.
        func put(_ items: [(ItemKey, SecretBytes)], _ accessibility: Accessibility) throws -> (written: [String], skipped: [String]) {
            var written: [String] = [], skipped: [String] = []
            for (key, value) in items {
                if plan.overwrite {
                    try keychain.addOrUpdate(value, for: key, accessibility: accessibility)
                    written.append(name(key.service, key.account))
                } else {
                    do {
                        try keychain.add(value, for: key, accessibility: accessibility)
                        written.append(name(key.service, key.account))
                    } catch KeychainError.duplicateItem {
                        skipped.append(name(key.service, key.account))
                    }
                }
            }
            return (written, skipped)
        }
        let plainResult = try put(plain, .always)
        let secureResult = try put(secure, .whenUnlocked)
        report.imported = plainResult.written
        report.resealed = secureResult.written
        report.skipped = plainResult.skipped + secureResult.skipped
        try keychain.flush()

        // 5. Output files, each atomically.
        for output in outputs {
            if output.skip {
                report.skippedFiles.append(output.output)
                continue
            }
            guard let plaintext = output.plaintext else { continue }
            try plaintext.withUnsafeBytes { bytes in
                if output.protected {
                    try files.write(bytes, to: output.output, protection: plan.protection)
                } else {
                    try SecureFile.writeAtomically(try manager.encrypt(bytes), to: output.output)
                }
            }
            report.written.append(output.output)
        }

        // 6. The legacy originals, once everything is durable: each on its own, the keychain last.
        if plan.shredOriginals {
            shred(outputs.filter(\.sourcePresent).map(\.source) + [plan.legacyKeychain], into: &report)
        }
        return report
    }

    /// A legacy data file or file and its output.
    struct Output {
        let source: String
        let output: String
        let protected: Bool
        var plaintext: SecretBytes?
        var sourcePresent = false
        var sourceMissing = false
        var exists = false
        var skip = false

        init(source: String, output: String, protected: Bool) {
            self.source = source
            self.output = output
            self.protected = protected
        }
    }

    /// Opens the GenItem with every credential given: the answers (its key is the answers key),
    /// then the GenItem passcode and the passcode (which unwrap that key from `gen-itemk`).
    static func openGenItem(_ legacy: LegacyCryptoManager, _ plan: Plan) -> Result<SecretBytes, any Error> {
        var reasons: [String] = []
        var damaged: (any Error)?
        if let answers = plan.answers {
            do {
                if let secret = try legacy.genItemSecret(answers: answers) { return .success(secret) }
            } catch MigrationError.genItemNotOpened(let detail) {
                reasons.append(detail)
            } catch {
                damaged = error
            }
        }
        for (label, passcode) in [("the GenItem passcode", plan.genItemPasscode), ("the passcode", plan.passcode)] {
            guard let passcode else { continue }
            do {
                if let secret = try legacy.genItemSecret(passcode: passcode) { return .success(secret) }
            } catch MigrationError.genItemNotOpened(let detail) {
                reasons.append(detail.replacingOccurrences(of: "this passcode", with: label))
            } catch {
                damaged = error
            }
        }
        if let damaged { return .failure(damaged) }
        if plan.passcode != nil, plan.answers == nil, plan.genItemPasscode == nil, !reasons.isEmpty {
            reasons[0] = reasons[0].replacingOccurrences(of: "the passcode does not", with: "the passcode unwraps the application key but does not")
        }
        return .failure(MigrationError.genItemNotOpened(reasons.joined(separator: "; ")))
    }

    /// Unlocks the vault of an earlier run with the credentials given.
    static func unlock(_ manager: CryptoManager, _ plan: Plan) throws {
        if let passcode = plan.passcode ?? plan.newPasscode {
            try manager.unlock(passcode: passcode)
        } else {
            try manager.unlock(answers: plan.answers ?? [])
        }
    }

    /// Whether the existing `output` opens under the vault (with the content its input
    /// decrypts to, when the input is there).
    static func holds(_ output: Output, manager: CryptoManager, files: ProtectedFiles) -> Bool {
        guard var content = try? (output.protected
            ? files.read(at: output.output)
            : manager.decrypt(try SecureFile.read(output.output, maxLength: LegacyCipher.maximumLength + (1 << 20)))) else { return false }
        defer { for index in content.indices { content[index] = 0 } }
        guard let plaintext = output.plaintext else { return output.sourceMissing }
        return plaintext.count == content.count && plaintext.withUnsafeBytes { expected in content.withUnsafeBytes { ConstantTime.equals(expected, $0) } }
    }

    /// Shreds each path on its own; a failure is recorded and the others are still shredded.
    static func shred(_ paths: [String], into report: inout Report) {
        for path in paths {
            do {
                report.shredded += try FileShredder.shred(path)
            } catch {
                if case .hardLinked(let path, let count) = error {
                    report.notShredded.append(ShredFailure(path: path, reason:
                        "it has \(count) hard links and its data stays reachable by the other names: remove them (find / -samefile \(path)) and run the migration again"))
                } else {
                    report.notShredded.append(ShredFailure(path: path, reason: "\(error)"))
                }
            }
        }
    }

    /// A run after one that migrated everything and shredded the legacy keychain: the vault is
    /// unlocked, every output is checked (it must open under the vault), and the legacy inputs
    /// still there are shredded.
    static func finishEarlierRun(_ plan: Plan, manager: CryptoManager) throws -> Report {
        try unlock(manager, plan)
        var report = Report()
        report.legacyKeychainGone = true
        let files = ProtectedFiles(manager: manager)
        var failures: [MigrationError.Failure] = []
        var sources: [String] = []
        for (paths, suffix, protected) in [(plan.dataFiles, ".sealed", false), (plan.protectedFiles, ".protected", true)] {
            for path in paths {
                var output = Output(source: path, output: path + suffix, protected: protected)
                output.sourceMissing = true
                if holds(output, manager: manager, files: files) {
                    report.skippedFiles.append(output.output)
                    if (try? FileCalls.linkStatus(path)) != nil { sources.append(path) }
                } else {
                    failures.append(.init(path, "\(plan.legacyKeychain) is gone and \(output.output) does not open under this vault: the legacy keychain is needed to migrate it", kind: .io))
                }
            }
        }
        guard failures.isEmpty else { throw MigrationError.failed(failures) }
        if plan.shredOriginals { shred(sources, into: &report) }
        return report
    }
}
