// Shared command-line plumbing: standard streams, secret input, failures and their exit status
// (ExitStatus.swift). The full program (`securefoundation`) and the front program that runs
// `encrypt` and `decrypt` itself (`securefoundation-front`) both use it.
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

/// A command line the command refuses (conflicting or missing options): exit status 64. The
/// full program reports it through the argument parser, with the command's usage.
package struct UsageError: Error, CustomStringConvertible, Equatable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A failure found while a command runs (not a mistake in its arguments): reported as
/// `securefoundation: error: …` without the usage text that a `ValidationError` brings.
package struct CLIFailure: Error, CustomStringConvertible {
    package let description: String
    /// The exit status, from the one table (``ExitStatus``): 1, or for example 64 for a
    /// refusal of how the command was used, such as binary output to a terminal.
    package let exitCode: Int32
    package init(_ description: String, exitCode: Int32 = ExitStatus.failure.rawValue) {
        self.description = description
        self.exitCode = exitCode
    }
    package init(_ description: String, status: ExitStatus) {
        self.init(description, exitCode: status.rawValue)
    }
}

package enum CLI {
    /// Writes `message` and a newline to standard error.
    package static func warn(_ message: String) {
        ProgressLine.clearForMessage()
        // Standard error that cannot be written to has nobody to tell.
        Array((message + "\n").utf8).withUnsafeBytes { _ = try? FileCalls.writeAll(2, $0) }
    }

    /// The human message of any error (CustomStringConvertible first, then localized).
    package static func describe(_ error: any Error) -> String {
        String(describing: error)
    }

    /// Set by the front program (`securefoundation-front`) for the full program it starts, to
    /// the front program's own path; the full program takes it out at once
    /// (``takeFrontHandOff()``). A front program that finds it set does not hand off again (a
    /// front program installed where the full one belongs would otherwise loop).
    package static let frontHandOffVariable = "SECUREFOUNDATION_FRONT_HANDOFF"

    /// The front program that started this one, when it did (``takeFrontHandOff()``).
    nonisolated(unsafe) package private(set) static var frontProgramPath: String?

    /// Reads and removes ``frontHandOffVariable``, so that nothing this program starts inherits
    /// it. The full program calls it first thing in `main`, before any other thread exists.
    /// The path is kept only when it names a regular file named `securefoundation` or
    /// `securefoundation-front` that is a front program of this one: this program is what a
    /// front program there starts (`../libexec/securefoundation/
    /// securefoundation` or `securefoundation` beside it, the same file). Anything else (a stray
    /// or planted value) is dropped, and this program behaves as if started directly.
    package static func takeFrontHandOff() {
        guard let value = getenv(frontHandOffVariable) else { return }
        let path = String(cString: value)
        unsetenv(frontHandOffVariable)
        // A front program is installed as `securefoundation` and built as `securefoundation-front`;
        // the path names the plugin link's target, so no other file is taken for one.
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        guard path.hasPrefix("/"), ["securefoundation", "securefoundation-front"].contains(name),
              let front = try? FileCalls.status(atPath: path), front.kind == .regular,
              let own = ownExecutable(), let this = try? FileCalls.status(atPath: own),
              fullProgramCandidates(frontPath: path).contains(where: { candidate in
                  guard let info = try? FileCalls.status(atPath: candidate) else { return false }
                  return info.device == this.device && info.inode == this.inode
              }) else { return }
        frontProgramPath = path
    }

    /// Where a front program at `frontPath` (resolved) looks for the full program, in order
    /// (docs/CLI.md, "Installed programs"): `../libexec/securefoundation/securefoundation` from
    /// its directory, then `securefoundation` in its directory.
    package static func fullProgramCandidates(frontPath: String) -> [String] {
        let components = frontPath.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        let directory = components.joined(separator: "/")
        // The directory's parent, written out (the path is resolved, so `..` would name it too).
        let parent = components.count > 1 ? components.dropLast().joined(separator: "/") : ""
        return [parent + "/libexec/securefoundation/securefoundation", directory + "/securefoundation"]
    }

    /// The program the user ran: the front program when it handed this command line on, else
    /// this one (``executablePath()``). Links meant to be found beside the command
    /// (`agent install-plugin`) go in its directory.
    package static func invokedProgramPath() -> String {
        frontProgramPath ?? executablePath()
    }

    /// This program's own file, symbolic links resolved, as the system knows it (Linux:
    /// `/proc/self/exe`; macOS: `_NSGetExecutablePath`, then `realpath`), or nil when it cannot
    /// be read. Never derived from the program name, the `PATH`, the working directory or the
    /// environment: the front program starts the full one relative to it.
    package static func ownExecutable() -> String? {
        #if os(Linux)
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #elseif canImport(Darwin)
        var size = UInt32(4096)
        var buffer = [CChar](repeating: 0, count: Int(size))
        guard _NSGetExecutablePath(&buffer, &size) == 0, let resolved = realpath(buffer, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
        #else
        return nil
        #endif
    }

    /// This program's own executable (``ownExecutable()``), or else its name made absolute: for
    /// starting this program again (the unlock agent) and naming it in the plugin link.
    package static func executablePath() -> String {
        if let own = ownExecutable() { return own }
        let named = CommandLine.arguments[0]
        return named.hasPrefix("/") ? named : FileManager.default.currentDirectoryPath + "/" + named
    }

    /// Writes bytes to standard output, all of them.
    package static func writeStdout(_ bytes: UnsafeRawBufferPointer) throws {
        try SecureFile.writeAll(1, bytes, path: "standard output")
    }

    package static func writeStdout(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeStdout($0) }
    }

    /// Writes a command's `-o PATH` (`SecureFile.writeOutput`): a new path or regular file is
    /// replaced atomically with mode 0600, a character device or FIFO is written in place,
    /// `/dev/stdout` and `/dev/fd/N` write into that descriptor, and a symbolic link, directory,
    /// socket or block device is refused. `-` is standard output.
    package static func writeOutput(to path: String, _ body: (Int32) throws -> Void) throws {
        if path == "-" { try body(1); return }
        try SecureFile.writeOutput(to: path, body)
    }

    /// Writes `bytes` to `-o PATH` (see ``writeOutput(to:_:)``) or, without one, to standard output.
    package static func writeOutput(_ bytes: [UInt8], to path: String?) throws {
        guard let path else { try writeStdout(bytes); return }
        try writeOutput(to: path) { fd in try bytes.withUnsafeBytes { try SecureFile.writeAll(fd, $0, path: path) } }
    }

    /// Reads all of standard input or a file (`-` is standard input) into memory, up to `maxLength`.
    package static func readInput(_ path: String?, maxLength: Int = 1 << 30) throws -> [UInt8] {
        if let path, path != "-" { return try SecureFile.read(path, maxLength: maxLength) }
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SecureFile.Failure.system(operation: "read", path: "standard input", errno: errno)
            }
            if n == 0 { break }
            result += buffer[0..<n]
            if result.count > maxLength { throw CipherError.io("standard input is larger than \(maxLength) bytes") }
        }
        return result
    }

    /// Reads a passphrase from the terminal without echo (prompting on stderr), or throws if
    /// there is no terminal.
    package static func readPassphrase(prompt: String, confirm: Bool = false) throws -> SecretBytes {
        let first = try Terminal.readSecret(prompt: prompt)
        if confirm {
            let second = try Terminal.readSecret(prompt: "Confirm: ")
            guard first == second else {
                first.wipe(); second.wipe()
                throw CLIFailure("the two entries differ")
            }
            second.wipe()
        }
        guard !first.isEmpty else { throw CLIFailure("an empty passphrase is not accepted") }
        return first
    }

    /// A passphrase from `--passphrase-file` (`-` is standard input) or, without one, from the terminal.
    /// - Parameters:
    ///   - what: what the secret is called in messages ("passphrase", "passcode").
    ///   - option: the option that names the file, for messages.
    package static func passphrase(file: String?, prompt: String = "Passphrase: ", confirm: Bool = false,
                           what: String = "passphrase", option: String = "--passphrase-file") throws -> SecretBytes {
        if let file {
            let secret = try SecretSource.file(file).read()
            guard !secret.isEmpty else {
                throw CLIFailure(file == "-" ? "standard input is empty: \(option) - reads the \(what) from it"
                                             : "the \(what) file \(file) (\(option)) is empty")
            }
            return secret
        }
        do {
            return try readPassphrase(prompt: prompt, confirm: confirm)
        } catch is Terminal.NoTerminal {
            throw Terminal.NoTerminal(option: option, what: what)
        }
    }
}

/// Reading secrets from the controlling terminal with echo off.
///
/// The terminal's settings are restored however the read ends: normally, on an error (a
/// `defer`), and on SIGINT, SIGTERM, SIGHUP or SIGQUIT, whose handler (installed only for the
/// read, and only where the signal had its default action) restores them and then dies of the
/// same signal.
package enum Terminal {
    /// No terminal to read a secret from (a usage error, exit 64): the message names the option
    /// that gives the secret from a file, when the caller knows it.
    package struct NoTerminal: Error, CustomStringConvertible {
        package var option: String?
        package var what: String
        package init(option: String? = nil, what: String = "secret") {
            self.option = option
            self.what = what
        }
        package var description: String {
            if let option { return "no terminal to read the \(what) from; give it with \(option) FILE (`-` for standard input)" }
            return "no terminal to read a secret from; give it with the command's file option (see --help)"
        }
    }

    /// The signals that end the process while echo is off.
    package static let fatalSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    package static func readSecret(prompt: String) throws -> SecretBytes {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw NoTerminal() }
        defer { close(fd) }
        var original = termios()
        guard tcgetattr(fd, &original) == 0 else { throw NoTerminal() }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ICANON)
        // The handlers are in place before echo goes off, and removed after it is back on; the
        // prompt appears once nothing typed can echo.
        let previous = TerminalRestore.arm(fd: fd, settings: original, signals: fatalSignals)
        defer { TerminalRestore.disarm(previous) }
        _ = tcsetattr(fd, TCSAFLUSH, &silent)
        defer {
            _ = tcsetattr(fd, TCSAFLUSH, &original)
            _ = write(fd, "\n", 1)
        }
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        // One line, read byte by byte straight into locked memory.
        var total = 0
        let secret = SecretBytes(count: 4096) { buffer in
            while total < buffer.count {
                var byte: UInt8 = 0
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 || byte == 0x0A || byte == 0x0D { break }
                buffer[total] = byte
                total += 1
            }
        }
        let result = secret.slice(0..<total)
        secret.wipe()
        return result
    }
}

/// What a signal handler needs to give the terminal back its settings: plain globals, since a
/// C signal handler captures nothing. Written only while no handler is installed.
nonisolated(unsafe) private var restoreDescriptor: Int32 = -1
nonisolated(unsafe) private var restoreSettings = termios()

/// Restores the terminal, then dies of `signal` as if no handler had been installed (only
/// async-signal-safe calls: tcsetattr, write, sigaction, raise).
private func restoreTerminalAndDie(_ signal: Int32) {
    if restoreDescriptor >= 0 {
        _ = tcsetattr(restoreDescriptor, TCSAFLUSH, &restoreSettings)
        _ = write(restoreDescriptor, "\n", 1)
    }
    var standard = sigaction()
    setHandler(&standard, SIG_DFL)
    _ = sigaction(signal, &standard, nil)
    // Delivered once this handler returns (the signal is blocked while it runs).
    _ = raise(signal)
}

/// The plain handler of `action` (its field has another name on Linux than on Darwin).
private func handler(of action: sigaction) -> (@convention(c) (Int32) -> Void)? {
    #if os(Linux)
    action.__sigaction_handler.sa_handler
    #else
    action.__sigaction_u.__sa_handler
    #endif
}

/// Sets the plain handler of `action` (async-signal-safe: a field is written).
private func setHandler(_ action: inout sigaction, _ handler: (@convention(c) (Int32) -> Void)?) {
    #if os(Linux)
    action.__sigaction_handler.sa_handler = handler
    #else
    action.__sigaction_u.__sa_handler = handler
    #endif
}

package enum TerminalRestore {
    /// Installs the restoring handler for each of `signals` that has its default action now,
    /// and returns what to put back.
    package static func arm(fd: Int32, settings: termios, signals: [Int32]) -> [(Int32, sigaction)] {
        restoreSettings = settings
        restoreDescriptor = fd
        var replaced: [(Int32, sigaction)] = []
        for signal in signals {
            var current = sigaction()
            guard sigaction(signal, nil, &current) == 0 else { continue }
            // SIG_DFL is the null handler.
            guard handler(of: current) == nil else { continue }
            var handler = sigaction()
            setHandler(&handler, restoreTerminalAndDie)
            sigemptyset(&handler.sa_mask)
            for other in signals { sigaddset(&handler.sa_mask, other) }
            if sigaction(signal, &handler, nil) == 0 { replaced.append((signal, current)) }
        }
        return replaced
    }

    /// Puts back the handlers `arm` replaced.
    package static func disarm(_ replaced: [(Int32, sigaction)]) {
        for (signal, action) in replaced {
            var action = action
            _ = sigaction(signal, &action, nil)
        }
        restoreDescriptor = -1
    }
}
