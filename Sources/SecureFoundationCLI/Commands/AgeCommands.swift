import ArgumentParser
import Foundation
import SecureFoundation

/// Shared plumbing of the age commands.
enum AgeCLI {
    /// Files larger than this get a progress bar when stderr is a terminal.
    static let progressThreshold: Int64 = 8 << 20

    /// The size of a regular file behind `fd`, or nil (pipe, terminal).
    static func regularFileSize(_ fd: Int32) -> Int64? {
        guard let info = try? FileCalls.status(fd), info.isRegularFile else { return nil }
        return info.size
    }

    /// A progress callback drawing a bar on stderr, or nil when stderr is not a terminal or the input is small.
    static func progressBar(total: Int64?) -> Age.Progress? {
        guard isatty(2) == 1, let total, total >= progressThreshold else { return nil }
        let start = Date()
        nonisolated(unsafe) var lastDraw = Date.distantPast
        return { done in
            let now = Date()
            guard now.timeIntervalSince(lastDraw) >= 0.1 || done >= total else { return }
            lastDraw = now
            let fraction = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            let rate = Double(done) / max(now.timeIntervalSince(start), 0.001) / 1_048_576
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            var line = String(format: "\r[%@] %3d%%  %.0f MiB/s", bar, Int(fraction * 100), rate)
            if done >= total { line += "\n" }
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// Writes to `output` as ``SecureFile/writeOutput(to:mode:_:)`` does (a regular file or new
    /// path atomically; a device or FIFO in place; `/dev/stdout` into the descriptor; a symlink
    /// refused), or streams to stdout without one.
    static func withOutput(_ output: String?, _ body: (Int32) throws -> Void) throws {
        if let output, output != "-" {
            try CLI.writeOutput(to: output, body)
        } else {
            try body(1)
        }
    }

    /// Plugins talk to the user on the terminal: messages on stderr, PINs and values read
    /// from /dev/tty without echo (refused without a terminal), confirmations as 1 (yes) or 2 (no).
    static let pluginUI = AgePluginUI(
        message: { plugin, text in
            CLI.warn("[age-plugin-\(plugin)] \(text)")
            return true
        },
        requestSecret: { plugin, prompt in
            CLI.warn("[age-plugin-\(plugin)] \(prompt)")
            return try? Terminal.readSecret(prompt: "[age-plugin-\(plugin)] Enter value: ")
        },
        requestPublic: { plugin, prompt in
            CLI.warn("[age-plugin-\(plugin)] \(prompt)")
            guard let value = try? Terminal.readSecret(prompt: "[age-plugin-\(plugin)] Enter value: ") else { return nil }
            defer { value.wipe() }
            return value.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        },
        confirm: { plugin, prompt, yes, no in
            CLI.warn("[age-plugin-\(plugin)] \(prompt)")
            let choices = no.map { "[1] \(yes), [2] \($0)" } ?? "[1] \(yes)"
            guard let answer = try? Terminal.readSecret(prompt: "[age-plugin-\(plugin)] \(choices): ") else { return nil }
            defer { answer.wipe() }
            switch answer.withUnsafeBytes({ Array($0) }) {
            case [0x31]: return true
            case [0x32] where no != nil: return false
            default: return nil
            }
        })

    /// The recipient that encrypts to `identity` (`age -e -i`).
    /// - Throws: ``AgeError/invalidIdentity(_:)`` for an identity that names no recipient.
    static func recipient(of identity: any AgeIdentity) throws -> any AgeRecipient {
        if let plugin = identity as? AgePluginIdentity { return plugin.recipient }
        guard let text = AgeKeys.recipient(of: identity) else {
            throw AgeError.invalidIdentity("an identity of type \(type(of: identity)) has no recipient to encrypt to")
        }
        return try AgeKeys.recipient(text, ui: pluginUI)
    }

    /// Parses the identity files given to `-i` (`-` is standard input): age identities, SSH
    /// private keys, plugin identities and passphrase-encrypted identity files, whose
    /// passphrase comes from `passphraseFile` or the terminal when first needed.
    static func identities(files: [String], passphrase given: SecretBytes?) throws -> [any AgeIdentity] {
        var identities = [any AgeIdentity]()
        for file in files {
            // Whole (an encrypted identity file is binary: no newline dropped), at most 16 MiB as
            // age reads. The buffer is locked memory of the size allowed, so a regular file gets
            // one of its own size (locking 16 MiB costs about 10 ms), standard input 1 MiB.
            let contents: SecretBytes
            if file == "-" {
                contents = try SecretBytes(readingFrom: 0, maxLength: 1 << 20, trimNewline: false, name: "standard input")
            } else {
                let fd = open(file, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw CipherError.io("cannot open \(file): \(String(cString: strerror(errno)))") }
                defer { close(fd) }
                let size = (try? FileCalls.status(fd)).flatMap { $0.isRegularFile ? Int($0.size) : nil } ?? (1 << 20)
                guard size <= 16 << 20 else { throw CipherError.io("\(file) is larger than 16 MiB, which no identity file is") }
                contents = try SecretBytes(readingFrom: fd, maxLength: max(size, 1), trimNewline: false, name: file)
            }
            defer { contents.wipe() }
            let name = file == "-" ? "standard input" : file
            let passphrase: @Sendable () throws -> SecretBytes = {
                if let given { return given.slice(0..<given.count) }
                return try CLI.passphrase(file: nil, prompt: "Enter passphrase for identity file \(name.debugDescription): ")
            }
            identities += try AgeKeys.identities(fileContents: contents, name: name, passphrase: passphrase, ui: pluginUI)
        }
        return identities
    }
}

struct EncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt a file to age recipients or a passphrase (age v1 format, interoperable with age).",
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
          securefoundation encrypt -r age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p -o doc.pdf.age doc.pdf
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

    @Option(name: .customLong("passphrase-file"), help: "Encrypt with the passphrase in this file (`-` for stdin; one trailing newline dropped).")
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

    func validate() throws { try request.validate() }

    func run() throws { try request.run() }
}

/// What `encrypt` is asked to do, as plain values: ``EncryptCommand`` builds it from the parsed
/// options, and a plain command line builds it directly without the argument parser
/// (``AgeFastPath``); either way the checks and the work below are the same.
struct EncryptRequest: Equatable, AgeRequest {
    var recipients: [String] = []
    var recipientsFiles: [String] = []
    var identityFiles: [String] = []
    var plugins: [String] = []
    var passphrase = false
    var passphraseFile: String?
    var armor = false
    var output: String?
    var input: String?

    func validate() throws {
        let usesPassphrase = passphrase || passphraseFile != nil
        let hasRecipients = !(recipients.isEmpty && recipientsFiles.isEmpty && identityFiles.isEmpty && plugins.isEmpty)
        if usesPassphrase && hasRecipients {
            throw ValidationError("-p/--passphrase-file cannot be combined with -r/-R/-i/-j: a passphrase file has exactly one recipient")
        }
        if !usesPassphrase && !hasRecipients {
            throw ValidationError("give at least one -r RECIPIENT, -R FILE, -i IDENTITY_FILE, -j PLUGIN, -p or --passphrase-file")
        }
        if passphrase && passphraseFile != nil {
            throw ValidationError("give -p or --passphrase-file, not both")
        }
        if passphraseFile == "-" && (input == nil || input == "-") {
            throw ValidationError("stdin cannot hold both the passphrase and the input")
        }
        if recipientsFiles.contains("-") {
            if recipientsFiles.filter({ $0 == "-" }).count > 1 {
                throw ValidationError("-R - can be given once")
            }
            if input == nil || input == "-" {
                throw ValidationError("stdin cannot hold both the recipients (-R -) and the input; name the input file")
            }
        }
        if recipientsFiles.filter({ $0 == "-" }).count + identityFiles.filter({ $0 == "-" }).count > 1 {
            throw ValidationError("stdin can hold one of -R - and -i -, once")
        }
        if identityFiles.contains("-") && (input == nil || input == "-") {
            throw ValidationError("stdin cannot hold both the identities (-i -) and the input; name the input file")
        }
    }

    func run() throws {
        do {
            var list = [any AgeRecipient]()
            for text in recipients { list.append(try AgeKeys.recipient(text, ui: AgeCLI.pluginUI)) }
            for file in recipientsFiles {
                // `-R -` reads the recipients from standard input, as `-i -` reads identities.
                let contents = String(decoding: try CLI.readInput(file, maxLength: 16 << 20), as: UTF8.self)
                list += try AgeKeys.recipients(fileContents: contents, name: file, ui: AgeCLI.pluginUI) { CLI.warn("securefoundation: warning: \($0)") }
            }
            // `-e -i`: the recipients of identities (an encrypted identity file asks its
            // passphrase on the terminal); plugin identities encrypt through their plugin.
            for identity in try AgeCLI.identities(files: identityFiles, passphrase: nil) {
                for inner in try (identity as? AgeEncryptedIdentityFile)?.identities() ?? [identity] {
                    list.append(try AgeCLI.recipient(of: inner))
                }
            }
            for name in plugins {
                list.append(try AgePluginIdentity(try AgePlugin.defaultIdentity(name: name), ui: AgeCLI.pluginUI).recipient)
            }
            // One run of each plugin per file, for all its recipients.
            list = AgePlugin.grouped(list)
            var secret: SecretBytes?
            defer { secret?.wipe() }
            if passphrase || passphraseFile != nil {
                let value = try CLI.passphrase(file: passphraseFile, confirm: true)
                secret = value
                list.append(try ScryptRecipient(passphrase: value, policy: .sensitive))
            }
            if !armor {
                // Standard output, or a descriptor named as -o (/dev/stdout, /dev/fd/N), on a terminal.
                var descriptor: Int32? = 1
                var terminalDevice = false
                if let output, output != "-" {
                    switch try? SecureFile.outputTarget(of: output) {
                    case .descriptor(let fd)?: descriptor = fd
                    case .inPlace?:
                        // A terminal named as a device (-o /dev/tty, -o /dev/pts/N).
                        // Only a character device is opened to ask: opening a FIFO would
                        // hand its reader an end of file.
                        descriptor = nil
                        if let info = try? FileCalls.linkStatus(output), info.kind == .characterDevice {
                            let fd = open(output, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
                            if fd >= 0 { terminalDevice = isatty(fd) == 1; close(fd) }
                        }
                    default: descriptor = nil
                    }
                }
                if terminalDevice || descriptor.map({ isatty($0) == 1 }) == true {
                    throw CLIFailure("refusing to write binary to the terminal; use -o FILE or -a", status: .usage)
                }
            }
            let inputFD = try AgeIO.openInput(input)
            defer { if inputFD != 0 { close(inputFD) } }
            let progress = AgeCLI.progressBar(total: AgeCLI.regularFileSize(inputFD))
            // OUTPUT is the file being read (given as INPUT, or redirected to stdin): in place.
            if let output, output != "-", AgeIO.isSameFile(inputFD, output) {
                let report = try Age.encryptFileInPlace(at: output, recipients: list, armor: armor, progress: progress)
                CLI.warn("securefoundation: encrypted \(output) in place; old plaintext: \(report)")
                for warning in report.warnings { CLI.warn("securefoundation: warning: \(warning)") }
                return
            }
            if let output, output != "-" {
                try Age.encrypt(from: inputFD, toFile: output, recipients: list, armor: armor, progress: progress)
            } else {
                try Age.encrypt(from: inputFD, to: 1, recipients: list, armor: armor, progress: progress)
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw CLI.fail(error)
        }
    }
}

struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt an age file (binary or armored) with identity files or a passphrase.",
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

        Exit status (docs/CLI.md): 0 success, 2 damaged or tampered (header, header MAC, \
        payload, armor), 3 no identity or passphrase matched, 74 a file cannot be read or \
        written, 1 anything else, 64 usage.

        Examples:
          securefoundation decrypt -i key.txt -o doc.pdf doc.pdf.age
          securefoundation decrypt --passphrase-file pass.txt < secrets.tar.age > secrets.tar
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

    func validate() throws { try request.validate() }

    func run() throws { try request.run() }
}

/// What `decrypt` is asked to do, as plain values (see ``EncryptRequest``).
struct DecryptRequest: Equatable, AgeRequest {
    var identityFiles: [String] = []
    var plugins: [String] = []
    var passphraseFile: String?
    var output: String?
    var input: String?

    func validate() throws {
        if passphraseFile == "-" && (input == nil || input == "-") {
            throw ValidationError("stdin cannot hold both the passphrase and the input")
        }
        if identityFiles.filter({ $0 == "-" }).count + (passphraseFile == "-" ? 1 : 0) > 1 {
            throw ValidationError("only one of -i and --passphrase-file can read stdin")
        }
    }

    func run() throws {
        do {
            // --passphrase-file serves a passphrase-encrypted input and encrypted identity files.
            var secret: SecretBytes?
            defer { secret?.wipe() }
            if let passphraseFile { secret = try CLI.passphrase(file: passphraseFile) }
            var identities = try AgeCLI.identities(files: identityFiles, passphrase: secret)
            for name in plugins {
                identities.append(try AgePluginIdentity(try AgePlugin.defaultIdentity(name: name), ui: AgeCLI.pluginUI))
            }
            // One run of each plugin per file, for all its identities.
            identities = AgePlugin.grouped(identities)
            if let secret { identities.append(ScryptIdentity(passphrase: secret)) }
            if identities.isEmpty {
                identities.append(LazyPassphraseIdentity { try Terminal.readSecret(prompt: "Enter passphrase: ") })
            }
            let inputFD = try AgeIO.openInput(input)
            defer { if inputFD != 0 { close(inputFD) } }
            let progress = AgeCLI.progressBar(total: AgeCLI.regularFileSize(inputFD))
            if let output, output != "-" {
                try Age.decrypt(from: inputFD, toFile: output, identities: identities, progress: progress)
            } else {
                try Age.decrypt(from: inputFD, to: 1, identities: identities, progress: progress)
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw CLI.fail(error)
        }
    }
}

struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Generate an age identity, or print the recipient of one (-y).",
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
