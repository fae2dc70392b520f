import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

struct EncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt a file to age recipients or a passphrase (age v1 format, interoperable with age).",
        usage: "securefoundation encrypt [options] [-r RECIPIENT ...] [-o OUTPUT] [INPUT]",
        discussion: """
        Reads INPUT (or stdin) and writes the age file to OUTPUT (or stdout). With -o the output \
        is written to a temporary file and renamed into place, so a failure leaves nothing; a \
        device or FIFO (-o /dev/null) is written in place, -o /dev/stdout writes standard \
        output, and a symbolic link, directory or socket is refused. \
        When OUTPUT is INPUT (or the file on stdin), the file is encrypted in place: the age \
        file replaces it atomically and the old plaintext blocks are overwritten (the shredder's \
        report goes to stderr). \
        Recipients are age1… (X25519) and age1pq1… (post-quantum hybrid) public keys, SSH \
        public keys (ssh-ed25519, ssh-rsa of 2048 bits or more; -R reads .pub and \
        authorized_keys files, skipping other SSH key types with a warning), and plugin \
        recipients age1NAME1…, handled by the program age-plugin-NAME on the PATH.

        Examples:
          securefoundation keygen -o key.txt
          securefoundation encrypt -R ~/.ssh/id_ed25519.pub -o doc.pdf.age doc.pdf
          securefoundation encrypt -o doc.pdf.age \\
              -r age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p doc.pdf
          securefoundation encrypt -R team.txt -a < notes.txt > notes.txt.age
          securefoundation encrypt -p -o secrets.tar.age secrets.tar
        """
    )

    @Flag(name: [.customShort("e"), .customLong("encrypt")], help: "Accepted for age's command line; encrypt is the mode anyway.")
    var encryptMode = false

    @Option(name: [.customShort("r"), .customLong("recipient")], help: "Encrypt to this recipient (age1…, age1pq1…, \"ssh-ed25519 AAAA…\", \"ssh-rsa AAAA…\", age1NAME1… of a plugin). Repeatable.")
    var recipients: [String] = []

    @Option(name: [.customShort("R"), .customLong("recipients-file")], help: "Encrypt to the recipients listed in this file, one per line, such as an SSH .pub or authorized_keys file (`-` for stdin). Repeatable.")
    var recipientsFiles: [String] = []

    @Option(name: [.customShort("i"), .customLong("identity")], help: "Encrypt to the recipients of the identities in this file (age keys, SSH private keys, plugin identities, a passphrase-encrypted identity file), as `age -e -i`. Repeatable.")
    var identityFiles: [String] = []

    @Option(name: [.customShort("j")], help: ArgumentHelp("Encrypt to the default identity of the plugin age-plugin-NAME, as `age -e -j`. Repeatable.", valueName: "plugin-name"))
    var plugins: [String] = []

    @Flag(name: [.customShort("p"), .customLong("passphrase")], help: "Encrypt with a passphrase read from the terminal (scrypt, N = 2^18).")
    var passphrase = false

    @Option(name: .customLong("passphrase-file"), help: "Encrypt with the passphrase in this file (`-` for stdin; one trailing newline dropped); with or without -p.")
    var passphraseFile: String?

    @Flag(name: [.customShort("a"), .customLong("armor")], help: "Write PEM-armored text instead of binary.")
    var armor = false

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write here instead of stdout: a file atomically with mode 0600, a device or FIFO in place; a symlink is refused.")
    var output: String?

    @Argument(help: "The file to encrypt; `-` or none for stdin.")
    var input: String?

    /// The request these options make (``EncryptRequest``, which does the work).
    var request: EncryptRequest {
        EncryptRequest(recipients: recipients, recipientsFiles: recipientsFiles, identityFiles: identityFiles, plugins: plugins,
                       passphrase: passphrase, passphraseFile: passphraseFile, armor: armor, output: output, input: input)
    }

    func validate() throws {
        do { try request.validate() } catch { throw ValidationError(error.description) }
    }

    func run() throws {
        do { try request.run() } catch { throw CLI.fail(error) }
    }
}


struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt an age file (binary or armored) with identity files or a passphrase.",
        usage: "securefoundation decrypt [options] [-i IDENTITY ...] [-o OUTPUT] [INPUT]",
        discussion: """
        Reads INPUT (or stdin) and writes the plaintext to OUTPUT (or stdout). With -o FILE the \
        plaintext appears only once the whole file authenticated; on stdout (or a device or \
        FIFO given to -o), plaintext is written as it is verified and a failure stops it. A \
        symbolic link, directory or socket given to -o is refused. Without -i and --passphrase-file, \
        a passphrase-encrypted file asks for the passphrase on the terminal. \
        An identity file (-i) holds AGE-SECRET-KEY-1…, AGE-SECRET-KEY-PQ-1… or AGE-PLUGIN-… \
        lines, or is an SSH private key (ssh-ed25519, ssh-rsa; OpenSSH format without \
        passphrase), or an age file encrypted with a passphrase that holds such lines (asked \
        on the terminal when first needed, or read from --passphrase-file). -j NAME uses the \
        plugin age-plugin-NAME with its default identity.

        Exit status (CLI.md in the documentation): 0 success, 2 damaged or tampered (header, header MAC, \
        payload, armor), 3 no identity or passphrase matched, 74 a file cannot be read or \
        written, 1 anything else, 64 usage.

        Examples:
          securefoundation decrypt -i key.txt -o doc.pdf doc.pdf.age
          securefoundation decrypt --passphrase-file pass.txt < notes.age > notes.txt
          securefoundation decrypt -i ~/.ssh/id_ed25519 -o doc.pdf doc.pdf.age
          securefoundation decrypt -j yubikey -o doc.pdf doc.pdf.age
        """
    )

    @Flag(name: [.customShort("d"), .customLong("decrypt")], help: "Accepted for age's command line; decrypt is the mode anyway.")
    var decryptMode = false

    @Option(name: [.customShort("i"), .customLong("identity")], help: "Use the identities in this file (age keys, plugin identities, an SSH private key, or a passphrase-encrypted identity file). Repeatable.")
    var identityFiles: [String] = []

    @Option(name: [.customShort("j")], help: ArgumentHelp("Use the plugin age-plugin-NAME with its default identity. Repeatable.", valueName: "plugin-name"))
    var plugins: [String] = []

    @Option(name: .customLong("passphrase-file"), help: "Use the passphrase in this file (`-` for stdin).")
    var passphraseFile: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write here instead of stdout: a file atomically with mode 0600, a device or FIFO in place; a symlink is refused.")
    var output: String?

    @Argument(help: "The age file; `-` or none for stdin.")
    var input: String?

    /// The request these options make (``DecryptRequest``, which does the work).
    var request: DecryptRequest {
        DecryptRequest(identityFiles: identityFiles, plugins: plugins, passphraseFile: passphraseFile, output: output, input: input)
    }

    func validate() throws {
        do { try request.validate() } catch { throw ValidationError(error.description) }
    }

    func run() throws {
        do { try request.run() } catch { throw CLI.fail(error) }
    }
}


struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Generate an age identity, or print the recipient of one (-y).",
        usage: """
        securefoundation keygen [--pq] [--passphrase] [-o OUTPUT]
        securefoundation keygen -y [INPUT]
        """,
        discussion: """
        Writes an identity file in age-keygen's format:
          # created: 2026-01-02T15:04:05Z
          # public key: age1…
          AGE-SECRET-KEY-1…
        With -o the file is created with mode 0600 (an existing file is not overwritten) and the \
        public key is also printed on stderr. --pq (or -pq, as age-keygen spells it) makes a \
        post-quantum hybrid identity (AGE-SECRET-KEY-PQ-1…, recipient age1pq1…). With \
        --passphrase (or --passphrase-file) the identity file is written as an armored age file \
        encrypted with that passphrase (as `age-keygen | age -p -a` would), which -i of \
        decrypt reads; the public key is printed on stderr. With -y, prints the recipient of \
        each identity in FILE (or stdin): age keys, SSH private keys, encrypted identity files.

        Examples:
          securefoundation keygen -o key.txt
          securefoundation keygen -pq > pq-key.txt
          securefoundation keygen --passphrase -o key.age
          securefoundation keygen -y key.txt
        """
    )

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write the identity to this file (mode 0600) instead of stdout.")
    var output: String?

    @Flag(name: [.customLong("pq"), .customLong("pq", withSingleDash: true)], help: "Generate a post-quantum hybrid (ML-KEM-768 + X25519) identity.")
    var pq = false

    @Flag(name: .customLong("passphrase"), help: "Encrypt the identity file with a passphrase read from the terminal (twice).")
    var passphrase = false

    @Option(name: .customLong("passphrase-file"), help: "Encrypt the identity file with the passphrase in this file (with -y: the passphrase of an encrypted identity file).")
    var passphraseFile: String?

    @Flag(name: .customShort("y"), help: "Print the recipient (public key) of the identities in INPUT or stdin.")
    var convert = false

    @Argument(help: "With -y: the identity file (`-` or none for stdin).")
    var input: String?

    func validate() throws {
        if input != nil && !convert { throw ValidationError("an input file is only read with -y") }
        if convert && pq { throw ValidationError("-y and --pq cannot be combined") }
        if convert && passphrase { throw ValidationError("-y and --passphrase cannot be combined; -y asks for the passphrase of an encrypted identity file when it needs it") }
        if passphrase && passphraseFile != nil { throw ValidationError("give --passphrase or --passphrase-file, not both") }
        if passphraseFile == "-" && convert && (input == nil || input == "-") {
            throw ValidationError("stdin cannot hold both the passphrase and the identity file")
        }
    }

    func run() throws {
        do {
            if convert {
                var secret: SecretBytes?
                defer { secret?.wipe() }
                if let passphraseFile { secret = try CLI.passphrase(file: passphraseFile) }
                var text = ""
                for identity in try AgeCLI.identities(files: [input ?? "-"], passphrase: secret) {
                    let inner = try (identity as? AgeEncryptedIdentityFile)?.identities() ?? [identity]
                    for identity in inner {
                        if let recipient = AgeKeys.recipient(of: identity) { text += recipient + "\n" }
                    }
                }
                try AgeCLI.withOutput(output) { fd in
                    try Array(text.utf8).withUnsafeBytes { try SecureFile.writeAll(fd, $0) }
                }
                return
            }
            let secret: SecretBytes
            let recipient: String
            if pq {
                let identity = try MLKEM768X25519Identity.generate()
                secret = identity.encoded
                recipient = identity.recipient.description
            } else {
                let identity = X25519Identity.generate()
                secret = identity.encoded
                recipient = identity.recipient.description
            }
            defer { secret.wipe() }
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            formatter.timeZone = .current
            let preamble = Array("# created: \(formatter.string(from: Date()))\n# public key: \(recipient)\n".utf8)
            let file = SecretBytes(count: preamble.count + secret.count + 1) { buffer in
                buffer.copyBytes(from: preamble)
                secret.withUnsafeBytes { (buffer.baseAddress! + preamble.count).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                buffer[buffer.count - 1] = 0x0A
            }
            defer { file.wipe() }
            if let output, output != "-" {
                if try SecureFile.outputTarget(of: output) == .replace && (try? FileCalls.linkStatus(output)) != nil {
                    throw AgeError.invalidArgument("\(output) exists; refusing to overwrite an identity file")
                }
            }
            var written = file
            if passphrase || passphraseFile != nil {
                // An armored age file of the identity file, encrypted with the passphrase.
                let secret = try CLI.passphrase(file: passphraseFile, prompt: "Passphrase for the new identity file: ", confirm: true)
                defer { secret.wipe() }
                written = try Self.encrypted(file, passphrase: secret)
            }
            defer { written.wipe() }
            if let output, output != "-" {
                try CLI.writeOutput(to: output) { fd in try written.withUnsafeBytes { try SecureFile.writeAll(fd, $0) } }
                CLI.warn("Public key: \(recipient)")
            } else {
                try written.withUnsafeBytes { try CLI.writeStdout($0) }
                if passphrase || passphraseFile != nil { CLI.warn("Public key: \(recipient)") }
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw CLI.fail(error)
        }
    }

    /// `file` encrypted with `passphrase` (scrypt, age's work factor), armored.
    static func encrypted(_ file: SecretBytes, passphrase: SecretBytes) throws -> SecretBytes {
        // Ciphertext only: the plaintext goes from locked memory straight into the encryptor.
        var out = [UInt8]()
        let encryptor = try AgeEncryptor(recipients: [try ScryptRecipient(passphrase: passphrase)], armor: true) { out += $0 }
        try file.withUnsafeBytes { try encryptor.update($0) }
        try encryptor.finish()
        return SecretBytes(copying: out)
    }
}
