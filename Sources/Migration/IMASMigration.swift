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
/// lists them all). Then the vault is created (atomically), the items are written and flushed, the
/// output files are written atomically (temporary file, fsync, rename), and only after all that,
/// when asked, the legacy originals are shredded. A run that stops half way through its writes
/// can be run again: an existing vault is unlocked with the same passcode or answers and kept,
/// and items and outputs written before are skipped (or replaced with `overwrite`).
public enum IMASMigration {
    /// What to migrate.
    public struct Plan: Sendable {
        /// The legacy keychain file (`Library/...`, or the older `Library/.imskeychain`), which
        /// holds the crypto manager's salt and wrapped key.
        public var legacyKeychain: String
        /// The old passcode; also the new vault's passcode.
        public var passcode: SecretBytes?
        /// The old answers, in question order; the new vault gets the old questions with them.
        public var answers: [SecretBytes]?
        /// A passcode for the new vault when the old one is not given (unlocking with answers).
        public var newPasscode: SecretBytes?
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

        public init(legacyKeychain: String) { self.legacyKeychain = legacyKeychain }
    }

    /// What a run did.
    public struct Report: Sendable {
        /// Whether the vault was created by this run (false: an existing vault was unlocked).
        public var createdVault = false
        /// Legacy entries imported as they were (`.always`).
        public var imported: [String] = []
        /// Legacy secure entries decrypted and stored as `.whenUnlocked` items.
        public var resealed: [String] = []
        /// Items that existed already and were left alone (without `overwrite`).
        public var skipped: [String] = []
        /// Output files written (sealed data and protected files).
        public var written: [String] = []
        /// The shredding of each legacy original, when asked.
        public var shredded: [ShredReport] = []
    }

    /// The account names the new keychain gives an entry.
    static func name(_ service: String, _ account: String) -> String { "\(service)/\(account)" }

    /// Runs the migration into the vault of `manager` (created when it is not set up).
    /// - Throws: ``MigrationError`` (``MigrationError/failed(_:)`` lists every unreadable
    ///   input, before anything is written), ``VaultError``, ``KeychainError``,
    ///   ``ProtectedFileError``, file errors.
    public static func run(_ plan: Plan, manager: CryptoManager) throws -> Report {
        guard plan.passcode != nil || plan.answers != nil else {
            throw MigrationError.invalidArgument("give the old passcode or the old answers")
        }
        var plan = plan
        // 1. Read and check everything.
        let contents = try Keychain.readLegacyKeychain(at: plan.legacyKeychain)
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

        var failures = contents.failed.map { "\(name($0.service, $0.account)): \($0.reason)" }
        var plain: [(ItemKey, SecretBytes)] = []
        var secure: [(ItemKey, SecretBytes)] = []
        var outputs: [(source: String, output: String, plaintext: SecretBytes, protected: Bool)] = []
        defer {
            plain.forEach { $0.1.wipe() }
            secure.forEach { $0.1.wipe() }
            outputs.forEach { $0.plaintext.wipe() }
        }
        for entry in contents.entries where entry.service != LegacyCryptoManager.service {
            let key = ItemKey.generic(service: entry.service, account: entry.account)
            if plan.secureServices.contains(entry.service) {
                do {
                    secure.append((key, try LegacyCipher.open(entry.value, key: appKey)))
                } catch {
                    failures.append("\(name(entry.service, entry.account)): \(error)")
                }
            } else {
                plain.append((key, SecretBytes(copying: entry.value)))
            }
        }
        if let passcode = plan.passcode, legacy.genItem != nil {
            do {
                if let secret = try legacy.genItemSecret(passcode: passcode) {
                    secure.append((ItemKey.generic(service: LegacyCryptoManager.service, account: "gen-item"), secret))
                }
            } catch {
                failures.append("\(name(LegacyCryptoManager.service, "gen-item")): \(error)")
            }
        }
        for (paths, suffix, protected) in [(plan.dataFiles, ".sealed", false), (plan.protectedFiles, ".protected", true)] {
            for path in paths {
                let output = path + suffix
                do {
                    if !plan.overwrite, FileManager.default.fileExists(atPath: output) {
                        throw MigrationError.invalidArgument("\(output) exists (give overwrite to replace it)")
                    }
                    let blob = try SecureFile.read(path, maxLength: LegacyCipher.maximumLength)
                    outputs.append((path, output, try LegacyCipher.open(blob, key: appKey), protected))
                } catch {
                    failures.append("\(path): \(error)")
                }
            }
        }
        guard failures.isEmpty else { throw MigrationError.failed(failures) }

        // 2. The vault: created with the old passcode (or the new one) and the old questions.
        var report = Report()
        if try manager.isSetUp {
            if let passcode = plan.passcode ?? plan.newPasscode {
                try manager.unlock(passcode: passcode)
            } else {
                try manager.unlock(answers: plan.answers ?? [])
            }
        } else {
            let answers = plan.answers ?? []
            try manager.setUp(passcode: plan.passcode ?? plan.newPasscode,
                              questions: answers.isEmpty ? [] : legacy.questions, answers: answers)
            report.createdVault = true
        }

        // 3. Items, flushed before any output file is written.
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

        // 4. Output files, each atomically.
        let files = ProtectedFiles(manager: manager)
        for output in outputs {
            try output.plaintext.withUnsafeBytes { bytes in
                if output.protected {
                    try files.write(bytes, to: output.output, protection: plan.protection)
                } else {
                    try SecureFile.writeAtomically(try manager.encrypt(bytes), to: output.output)
                }
            }
            report.written.append(output.output)
        }

        // 5. The legacy originals, once everything is durable.
        if plan.shredOriginals {
            for path in [plan.legacyKeychain] + outputs.map(\.source) {
                report.shredded += try FileShredder.shred(path)
            }
        }
        return report
    }
}
