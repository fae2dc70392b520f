import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// Options shared by `seal` and `open`.
struct SealKeyOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-file"), help: "Read the passphrase from this file (`-` for stdin; one trailing newline is dropped).")
    var passphraseFile: String?

    @Option(name: .customLong("key-file"), help: "Use a 32-byte key from this file: exactly 32 raw bytes (no newline is stripped), or 64 hex digits with at most one trailing newline (make one with `securefoundation random -n 32 > key`).")
    var keyFile: String?

    @Option(name: .customLong("context"), help: "Associated data the sealed data is bound to; opening needs the same context.")
    var context: String = ""

    func validate() throws {
        guard passphraseFile == nil || keyFile == nil else { throw ValidationError("give --passphrase-file or --key-file, not both") }
    }

    /// Loads the key file as a sealing key (Cipher's ``KeyFile``: docs/FORMATS.md, "Key files").
    func loadKey() throws -> SealingKey? {
        guard let keyFile else { return nil }
        // The sealing key keeps these bytes (wiped when it goes).
        return try SealingKey(key: try KeyFile.read(keyFile))
    }
}

struct SealCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Seal data (authenticated encryption) with a passphrase or a key file.",
        usage: "securefoundation seal [options] [-o OUTPUT] [INPUT]",
        discussion: """
        Reads INPUT (or stdin) and writes the sealed-data envelope (FORMATS.md in the documentation) to OUTPUT \
        (or stdout). Without --key-file or --passphrase-file the passphrase is read from the \
        terminal without echo.

        Examples:
          securefoundation seal --passphrase-file pass.txt config.json > config.sealed
          securefoundation random -n 32 > app.key
          securefoundation seal --key-file app.key --context invoices \\
              -o note.sealed note.txt
        """
    )

    enum Policy: String, ExpressibleByArgument, CaseIterable {
        case interactive, sensitive, fipsInteractive = "fips-interactive", fipsSensitive = "fips-sensitive"
        var policy: KDFPolicy {
            switch self {
            case .interactive: return .interactive
            case .sensitive: return .sensitive
            case .fipsInteractive: return .fipsInteractive
            case .fipsSensitive: return .fipsSensitive
            }
        }
    }

    enum Algorithm: String, ExpressibleByArgument, CaseIterable {
        case aesGCM = "aes-256-gcm", chachaPoly = "chacha20-poly1305"
        var value: SealAlgorithm { self == .aesGCM ? .aes256GCM : .chaCha20Poly1305 }
    }

    @OptionGroup var keys: SealKeyOptions

    @Option(help: "KDF policy for passphrases: interactive, sensitive, fips-interactive, fips-sensitive.")
    var policy: Policy = .sensitive

    @Option(help: "AEAD: aes-256-gcm or chacha20-poly1305.")
    var algorithm: Algorithm = .aesGCM

    @Option(name: .shortAndLong, help: "Write here instead of stdout: a file atomically with mode 0600, a device or FIFO in place; a symlink is refused.")
    var output: String?

    @Argument(help: "The file to seal; `-` or none for stdin.")
    var input: String?

    func run() throws {
        try CLI.run {
            let plaintext = try CLI.readInput(input)
            let context = Array(keys.context.utf8)
            let sealed: [UInt8]
            if let key = try keys.loadKey() {
                sealed = try Sealed.seal(plaintext, with: key, algorithm: algorithm.value, context: context)
            } else {
                let passphrase = try CLI.passphrase(file: keys.passphraseFile, confirm: true)
                defer { passphrase.wipe() }
                sealed = try Sealed.seal(plaintext, passphrase: passphrase, policy: policy.policy,
                                         algorithm: algorithm.value, context: context)
            }
            try CLI.writeOutput(sealed, to: output)
        }
    }
}

struct OpenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open data sealed by `seal`.",
        usage: "securefoundation open [options] [-o OUTPUT] [INPUT]",
        discussion: """
        Writes the whole plaintext or nothing: a wrong passphrase or key exits with status 3; \
        tampering, truncation or an unknown version with status 2 (CLI.md in the documentation); a message goes \
        to stderr and no output is written.

        Example:
          securefoundation open --passphrase-file pass.txt config.sealed > config.json
        """
    )

    @OptionGroup var keys: SealKeyOptions

    @Option(name: .shortAndLong, help: "Write here instead of stdout: a file atomically with mode 0600, a device or FIFO in place; a symlink is refused.")
    var output: String?

    @Flag(name: .customLong("legacy-kdf-ceiling"), help: "Accept the costlier KDF parameters earlier versions accepted (scrypt up to 16 GiB, PBKDF2 up to 100,000,000 rounds); only for trusted data.")
    var legacyKDFCeiling = false

    @Argument(help: "The sealed file; `-` or none for stdin.")
    var input: String?

    func run() throws {
        try CLI.run {
            let sealed = try CLI.readInput(input)
            let context = Array(keys.context.utf8)
            let plaintext: [UInt8]
            if let key = try keys.loadKey() {
                plaintext = try Sealed.open(sealed, with: key, context: context)
            } else {
                let passphrase = try CLI.passphrase(file: keys.passphraseFile)
                defer { passphrase.wipe() }
                plaintext = try Sealed.open(sealed, passphrase: passphrase, context: context,
                                            ceiling: legacyKDFCeiling ? .legacy : .standard)
            }
            try CLI.writeOutput(plaintext, to: output)
        }
    }
}
