import Age
import Cipher
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Shredder

/// Shared plumbing of the age commands.
package enum AgeCLI {
    /// The size of a regular file behind `fd`, or nil (pipe, terminal).
    package static func regularFileSize(_ fd: Int32) -> Int64? {
        guard let info = try? FileCalls.status(fd), info.isRegularFile else { return nil }
        return info.size
    }

    /// Runs `body` under the command line's one progress style (``ProgressLine``: `LABEL… 42%
    /// 3.0/7.1 MiB 120 MiB/s 3 s`, cleared at the end), with the amount of `input` consumed; the
    /// callback is nil (no work at all) when progress is not drawn.
    package static func withProgress<T>(_ label: String, input: Int32, _ body: (Age.Progress?) throws -> T) rethrows -> T {
        guard ProgressLine.enabled else { return try body(nil) }
        return try ProgressLine.run(label, total: regularFileSize(input)) { report in try body(report) }
    }

    /// Writes to `output` as ``SecureFile/writeOutput(to:mode:_:)`` does (a regular file or new
    /// path atomically; a device or FIFO in place; `/dev/stdout` into the descriptor; a symlink
    /// refused), or streams to stdout without one.
    package static func withOutput(_ output: String?, _ body: (Int32) throws -> Void) throws {
        try CLI.writeOutput(to: output ?? "-", body)
    }

    /// Plugins talk to the user on the terminal: messages on stderr, PINs and values read
    /// from /dev/tty without echo (refused without a terminal), confirmations as 1 (yes) or 2 (no).
    package static let pluginUI = AgePluginUI(
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
    package static func recipient(of identity: any AgeIdentity) throws -> any AgeRecipient {
        if let plugin = identity as? AgePluginIdentity { return plugin.recipient }
        guard let text = AgeKeys.recipient(of: identity) else {
            throw AgeError.invalidIdentity("an identity of type \(type(of: identity)) has no recipient to encrypt to")
        }
        return try AgeKeys.recipient(text, ui: pluginUI)
    }

    /// Parses the identity files given to `-i` (`-` is standard input): age identities, SSH
    /// private keys, plugin identities and passphrase-encrypted identity files, whose
    /// passphrase comes from `passphraseFile` or the terminal when first needed.
    package static func identities(files: [String], passphrase given: SecretBytes?) throws -> [any AgeIdentity] {
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

/// What `encrypt` is asked to do, as plain values: ``EncryptCommand`` builds it from the parsed
/// options, and a plain command line builds it directly without the argument parser
/// (``AgeFastPath``); either way the checks and the work below are the same.
package struct EncryptRequest: Equatable, AgeRequest {
    package var recipients: [String] = []
    package var recipientsFiles: [String] = []
    package var identityFiles: [String] = []
    package var plugins: [String] = []
    package var passphrase = false
    package var passphraseFile: String?
    package var armor = false
    package var output: String?
    package var input: String?

    package init(recipients: [String] = [], recipientsFiles: [String] = [], identityFiles: [String] = [], plugins: [String] = [],
                 passphrase: Bool = false, passphraseFile: String? = nil, armor: Bool = false, output: String? = nil, input: String? = nil) {
        self.recipients = recipients
        self.recipientsFiles = recipientsFiles
        self.identityFiles = identityFiles
        self.plugins = plugins
        self.passphrase = passphrase
        self.passphraseFile = passphraseFile
        self.armor = armor
        self.output = output
        self.input = input
    }

    package func validate() throws(UsageError) {
        let usesPassphrase = passphrase || passphraseFile != nil
        let hasRecipients = !(recipients.isEmpty && recipientsFiles.isEmpty && identityFiles.isEmpty && plugins.isEmpty)
        if usesPassphrase && hasRecipients {
            throw UsageError("-p/--passphrase-file cannot be combined with -r/-R/-i/-j: a passphrase file has exactly one recipient")
        }
        if !usesPassphrase && !hasRecipients {
            throw UsageError("give at least one -r RECIPIENT, -R FILE, -i IDENTITY_FILE, -j PLUGIN, -p or --passphrase-file")
        }
        if passphraseFile == "-" && (input == nil || input == "-") {
            throw UsageError("stdin cannot hold both the passphrase and the input")
        }
        if recipientsFiles.contains("-") {
            if recipientsFiles.filter({ $0 == "-" }).count > 1 {
                throw UsageError("-R - can be given once")
            }
            if input == nil || input == "-" {
                throw UsageError("stdin cannot hold both the recipients (-R -) and the input; name the input file")
            }
        }
        if recipientsFiles.filter({ $0 == "-" }).count + identityFiles.filter({ $0 == "-" }).count > 1 {
            throw UsageError("stdin can hold one of -R - and -i -, once")
        }
        if identityFiles.contains("-") && (input == nil || input == "-") {
            throw UsageError("stdin cannot hold both the identities (-i -) and the input; name the input file")
        }
    }

    /// The recipients these options name (`-r`, `-R`, `-i`, `-j`, or a passphrase, read and
    /// confirmed now); the passphrase is returned too, for the caller to wipe once encrypted.
    package func recipientList() throws -> (recipients: [any AgeRecipient], passphrase: SecretBytes?) {
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
        if passphrase || passphraseFile != nil {
            let value = try CLI.passphrase(file: passphraseFile, confirm: true)
            do {
                list.append(try ScryptRecipient(passphrase: value, policy: .sensitive))
            } catch {
                value.wipe()
                throw error
            }
            return (list, value)
        }
        return (list, nil)
    }

    package func run() throws {
        let (list, secret) = try recipientList()
        defer { secret?.wipe() }
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
        // OUTPUT is the file being read (given as INPUT, or redirected to stdin): in place.
        if let output, output != "-", AgeIO.isSameFile(inputFD, output) {
            let report = try AgeCLI.withProgress("encrypt", input: inputFD) { progress in
                try Age.encryptFileInPlace(at: output, recipients: list, armor: armor, progress: progress)
            }
            CLI.warn("securefoundation: encrypted \(output) in place; old plaintext: \(report)")
            for warning in report.warnings { CLI.warn("securefoundation: warning: \(warning)") }
            return
        }
        try AgeCLI.withProgress("encrypt", input: inputFD) { progress in
            if let output, output != "-" {
                try Age.encrypt(from: inputFD, toFile: output, recipients: list, armor: armor, progress: progress)
            } else {
                try Age.encrypt(from: inputFD, to: 1, recipients: list, armor: armor, progress: progress)
            }
        }
    }
}

/// What `decrypt` is asked to do, as plain values (see ``EncryptRequest``).
package struct DecryptRequest: Equatable, AgeRequest {
    package var identityFiles: [String] = []
    package var plugins: [String] = []
    package var passphraseFile: String?
    package var output: String?
    package var input: String?

    package init(identityFiles: [String] = [], plugins: [String] = [], passphraseFile: String? = nil, output: String? = nil, input: String? = nil) {
        self.identityFiles = identityFiles
        self.plugins = plugins
        self.passphraseFile = passphraseFile
        self.output = output
        self.input = input
    }

    package func validate() throws(UsageError) {
        if passphraseFile == "-" && (input == nil || input == "-") {
            throw UsageError("stdin cannot hold both the passphrase and the input")
        }
        if identityFiles.filter({ $0 == "-" }).count + (passphraseFile == "-" ? 1 : 0) > 1 {
            throw UsageError("only one of -i and --passphrase-file can read stdin")
        }
    }

    /// The identities these options name (`-i`, `-j`, `--passphrase-file`, else a passphrase
    /// asked on the terminal when needed); the passphrase is returned too, for the caller to wipe.
    package func identityList() throws -> (identities: [any AgeIdentity], passphrase: SecretBytes?) {
        // --passphrase-file serves a passphrase-encrypted input and encrypted identity files.
        var secret: SecretBytes?
        if let passphraseFile { secret = try CLI.passphrase(file: passphraseFile) }
        do {
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
            return (identities, secret)
        } catch {
            secret?.wipe()
            throw error
        }
    }

    package func run() throws {
        let (identities, secret) = try identityList()
        defer { secret?.wipe() }
        let inputFD = try AgeIO.openInput(input)
        defer { if inputFD != 0 { close(inputFD) } }
        try AgeCLI.withProgress("decrypt", input: inputFD) { progress in
            if let output, output != "-" {
                try Age.decrypt(from: inputFD, toFile: output, identities: identities, progress: progress)
            } else {
                try Age.decrypt(from: inputFD, to: 1, identities: identities, progress: progress)
            }
        }
    }
}
