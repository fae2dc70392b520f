import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation
import Migration

/// `securefoundation migrate …`: bringing what iMAS Secure Foundation wrote across.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Import what iMAS Secure Foundation wrote: its keychain file, its crypto manager, its encrypted data and files.",
        discussion: """
        imas-keychain imports the legacy keychain file as it is (no passcode needed); imas-data \
        also turns the legacy crypto manager into a vault with the same passcode and questions, \
        decrypts the values, data and files the old library encrypted, and re-seals them in this \
        library's formats. The old format (AES-CBC with an 8-bit checksum, PBKDF2 with 1,000 \
        rounds) is read only here, never written. MIGRATING.md in the documentation walks through a migration.
        """,
        subcommands: [MigrateIMASKeychainCommand.self, MigrateIMASDataCommand.self]
    )
}

struct MigrateIMASKeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imas-keychain",
        abstract: "Import an iMAS keychain file (Library/... or Library/.imskeychain) as keychain items.",
        usage: "securefoundation migrate imas-keychain [options] [--overwrite] FILE",
        discussion: """
        Each entry {service: {account: data}} becomes a generic password of class --accessibility \
        (default always, as the legacy file needed no unlock). Values are imported as they are: \
        entries the old library stored with setSecurePassword stay in the old encrypted format \
        (use `migrate imas-data` to decrypt them). Existing items are kept unless --overwrite.

        Prints one line per entry not imported (with the reason) and a summary:
          imported 3, skipped 1, failed 0

        Exit status (CLI.md in the documentation): 0 every entry imported or skipped, 2 some entries could not \
        be read (the others were imported), 74 the file is missing or unreadable, 1 the file is \
        not a legacy keychain or another error. In an installation of March 2013 or later, \
        Library/.imskeychain is the original's decoy (the same fake entries on every install): \
        import Library/... instead.

        Example:
          securefoundation migrate imas-keychain ./Library/... --home ~/.app
        """
    )

    @Argument(help: "The legacy keychain file.")
    var file: String

    @Flag(name: .customLong("overwrite"), help: "Replace items that exist already.")
    var overwrite = false

    @OptionGroup var items: ItemStoreOptions

    func run() throws {
        try CLI.run {
            let accessibility = try items.accessibility(default: .always)
            let keychain = try items.open()
            let report = try ProgressLine.run("migrate imas-keychain") { _ in
                try keychain.importLegacyKeychain(at: file, accessibility: accessibility, overwrite: overwrite)
            }
            var lines = report.failed.map { "failed: \($0)" }
            lines.append("imported \(report.imported), skipped \(report.skipped), failed \(report.failed.count)")
            try CLI.writeStdout(Array((lines.joined(separator: "\n") + "\n").utf8))
            if !report.failed.isEmpty { throw ExitCode(ExitStatus.damaged.rawValue) }
        }
    }
}

struct MigrateIMASDataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imas-data",
        abstract: "Turn the legacy crypto manager into a vault and re-seal everything the old library encrypted.",
        discussion: """
        Reads the legacy keychain file (--keychain), unwraps the old application key with the \
        old passcode (--passcode-file) or answers (--answers-file, one per line in question \
        order, exactly as typed in the application), and then, in this order:
          1. reads and decrypts every input; any failure stops here with nothing written;
          2. creates the vault in --home with the same passcode and the old questions and answers (an existing vault, from an earlier run, is unlocked and kept);
          3. imports the keychain entries: those of --secure-service services decrypted into whenUnlocked items, the others as they are into always items (the crypto manager's own entries are consumed; a GenItem secret, opened with the answers or the passcode, becomes the whenUnlocked item org.mitre.imas.crypto-manager/gen-item);
          4. writes each --data FILE as FILE.sealed (sealed data under the vault key, opened by CryptoManager.decrypt) and each --file FILE as FILE.protected (a protected file of class --protection), atomically;
          5. with --shred, shreds every legacy input and then the legacy keychain file, each on its own.
        A padding error and a checksum error in the old format give the same error. A GenItem \
        that the credentials given cannot open (the original never re-wrapped it when the \
        passcode or answers changed) stops the run in step 1: include it with --answers-file \
        or --gen-item-passcode-file (the passcode it was made with), or leave it out with \
        --leave-out-gen-item. Running the command again is safe: the vault is unlocked and \
        kept, existing items and outputs holding what their inputs decrypt to are skipped, and \
        after a run whose shredding stopped short it shreds what is left.

        Exit status (CLI.md in the documentation): 0 done, 2 damaged legacy data, 3 wrong old passcode or \
        answers (or a GenItem they do not open), 74 an input missing or unreadable, 1 any \
        other error (nothing was written when the inputs could not all be read), 1 also when \
        the migration is done but some legacy files were not shredded (each listed).

        Example:
          securefoundation migrate imas-data --home ~/.app --keychain ./Library/... \\
              --passcode-file pin.txt --answers-file answers.txt --secure-service api \\
              --data notes.bin --file report.pdf --protection complete --shred
        """
    )

    @OptionGroup var home: HomeOptions

    @Option(name: .customLong("keychain"), help: "The legacy keychain file (Library/...), which holds the crypto manager's state.")
    var keychain: String

    @Option(name: .customLong("passcode-file"), help: "The old passcode (`-` for stdin); the vault keeps it.")
    var passcodeFile: String?

    @Option(name: .customLong("answers-file"), help: "The old answers, one per line in question order; the vault keeps them with the old questions.")
    var answersFile: String?

    @Option(name: .customLong("new-passcode-file"), help: "A passcode for the vault when unlocking with the answers only.")
    var newPasscodeFile: String?

    @Option(name: .customLong("gen-item-passcode-file"), help: "The passcode the GenItem was made with, when the passcode changed since (the original never re-wrapped the GenItem key).")
    var genItemPasscodeFile: String?

    @Flag(name: .customLong("leave-out-gen-item"), help: "Do not migrate the GenItem secret (with --shred it is destroyed with the legacy keychain).")
    var leaveOutGenItem = false

    @Option(name: .customLong("secure-service"), help: "A service whose entries were stored with setSecurePassword (repeat for several).")
    var secureServices: [String] = []

    @Option(name: .customLong("data"), help: "A file of data from IMSCryptoManagerEncryptData, re-sealed as FILE.sealed (repeat).")
    var data: [String] = []

    @Option(name: .customLong("file"), help: "A file encrypted by IMSCryptoUtilsEncryptFileToPath under the application key, written as the protected file FILE.protected (repeat).")
    var files: [String] = []

    @Option(name: .customLong("protection"), help: "The protection class of the --file outputs (default complete).", completion: CompletionValues.fileProtectionClasses)
    var protection = "complete"

    @Flag(name: .customLong("overwrite"), help: "Replace existing items and output files.")
    var overwrite = false

    @Flag(name: .customLong("shred"), help: "Shred the legacy inputs and the legacy keychain file once everything is written.")
    var shred = false

    func validate() throws {
        guard passcodeFile != nil || answersFile != nil else { throw ValidationError("give --passcode-file or --answers-file") }
        guard !(passcodeFile != nil && newPasscodeFile != nil) else {
            throw ValidationError("--new-passcode-file is for unlocking with the answers only; the vault keeps the old passcode")
        }
        guard !(leaveOutGenItem && genItemPasscodeFile != nil) else {
            throw ValidationError("--leave-out-gen-item and --gen-item-passcode-file exclude each other")
        }
        guard FileProtectionClass(name: protection) != nil else {
            throw ValidationError("unknown protection class \(protection); use complete, completeUnlessOpen, completeUntilFirstUserAuthentication or none, optionally with ThisDeviceOnly")
        }
    }

    func run() throws {
        try CLI.run {
            let manager = try home.manager()
            var plan = IMASMigration.Plan(legacyKeychain: keychain)
            plan.passcode = try passcodeFile.map { try CLI.passphrase(file: $0) }
            plan.answers = try answersFile.map { try VaultCLI.readAnswers($0) }
            plan.newPasscode = try newPasscodeFile.map { try CLI.passphrase(file: $0) }
            plan.genItemPasscode = try genItemPasscodeFile.map { try CLI.passphrase(file: $0) }
            defer {
                plan.passcode?.wipe()
                plan.answers?.forEach { $0.wipe() }
                plan.newPasscode?.wipe()
                plan.genItemPasscode?.wipe()
            }
            plan.leaveOutGenItem = leaveOutGenItem
            plan.secureServices = Set(secureServices)
            plan.dataFiles = data
            plan.protectedFiles = files
            plan.protection = FileProtectionClass(name: protection) ?? .complete
            plan.overwrite = overwrite
            plan.shredOriginals = shred
            let report: IMASMigration.Report
            do {
                report = try ProgressLine.run("migrate imas-data") { _ in try IMASMigration.run(plan, manager: manager) }
            } catch let MigrationError.failed(failures) {
                throw CLIFailure(Self.describe(failures), exitCode: ExitStatus.of(MigrationError.failed(failures)))
            }
            manager.lock()
            // The migration first, then the shredding: a shredding that stops short does not
            // hide that everything was migrated.
            var lines = [report.createdVault ? "created vault in \(manager.directory)" : "unlocked the existing vault in \(manager.directory)"]
            if report.legacyKeychainGone {
                lines.append("legacy keychain \(keychain) is gone: migrated and shredded by an earlier run")
            }
            lines += report.imported.map { "imported: \($0)" }
            lines += report.resealed.map { "re-sealed: \($0)" }
            lines += report.skipped.map { "skipped: \($0) (exists; --overwrite replaces it)" }
            lines += report.leftOut.map { "left out: \($0) (--leave-out-gen-item)" }
            lines += report.written.map { "wrote: \($0)" }
            lines += report.skippedFiles.map { "skipped: \($0) (exists with the migrated content; --overwrite rewrites it)" }
            lines.append("migrated: imported \(report.imported.count), re-sealed \(report.resealed.count), skipped \(report.skipped.count + report.skippedFiles.count), files \(report.written.count), failed 0")
            for shredded in report.shredded {
                lines.append("shredded: \(shredded.path)" + (shredded.warnings.isEmpty ? "" : " (\(shredded.warnings.map { "\($0)" }.joined(separator: "; ")))"))
            }
            lines += report.notShredded.map { "not shredded: \($0)" }
            if shred {
                lines.append("shredded \(report.shredded.count), not shredded \(report.notShredded.count)")
            }
            try CLI.writeStdout(Array((lines.joined(separator: "\n") + "\n").utf8))
            if !report.notShredded.isEmpty {
                throw CLIFailure("the migration is done, but \(report.notShredded.count) legacy file(s) were not shredded (listed above); fix the reasons and run the same command again to shred them")
            }
        }
    }

    /// The failures of a run that wrote nothing, with the options that help.
    static func describe(_ failures: [MigrationError.Failure]) -> String {
        var text = "nothing was migrated; fix or leave out these and run again:\n  "
            + failures.map { $0.description.replacingOccurrences(of: "replace it with overwrite", with: "replace it with --overwrite") }
                .joined(separator: "\n  ")
        if failures.contains(where: { $0.subject == IMASMigration.genItemName && $0.kind == .notOpened }) {
            text += "\nthe GenItem: include it with --answers-file (the answers it was made with) or --gen-item-passcode-file (the passcode it was made with), or leave it out with --leave-out-gen-item"
        }
        return text
    }
}
