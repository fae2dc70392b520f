import Foundation
import Cipher
import CPlatform
#if canImport(Glibc)
import Glibc
#endif

/// Runs a helper program (systemd-creds, tpm2-tools) with secret input on standard input and
/// secret output read from standard output straight into locked memory; never through a file
/// or a `String`. Used by the vault's device-key providers and by the TPM plumbing here
/// (``TPM2``).
package enum ExternalTool {
    package struct Result {
        package var status: Int32
        package var output: SecretBytes
        package var error: String
    }

    /// The program could not be run (no pipe, spawn failed) or wrote more than allowed.
    package struct Failure: Error, CustomStringConvertible {
        package let message: String
        package var description: String { message }
    }

    /// The first executable named `name` on `$PATH` (then /usr/bin, /bin), or nil.
    package static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs `arguments` (the first is the program's path) with `input` on standard input;
    /// collects at most `maxOutput` bytes of standard output and 64 KiB of standard error.
    package static func run(_ arguments: [String], input: SecretBytes? = nil, maxOutput: Int = 4096,
                    environment: [String: String] = [:]) throws -> Result {
        var stdinPipe: [Int32] = [0, 0], stdoutPipe: [Int32] = [0, 0], stderrPipe: [Int32] = [0, 0]
        // Close-on-exec from the start, so no other program started meanwhile (by another
        // thread) keeps an end open and the reads below always see end-of-file.
        guard sf_pipe_cloexec(&stdinPipe) == 0, sf_pipe_cloexec(&stdoutPipe) == 0, sf_pipe_cloexec(&stderrPipe) == 0 else {
            throw Failure(message: "pipe: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, &envp)
        close(stdinPipe[0]); close(stdoutPipe[1]); close(stderrPipe[1])
        guard spawned == 0 else {
            close(stdinPipe[1]); close(stdoutPipe[0]); close(stderrPipe[0])
            throw Failure(message: "cannot run \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        // Input is small (a key): written whole before reading, then closed.
        signal(SIGPIPE, SIG_IGN)
        if let input {
            input.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(stdinPipe[1], bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
        close(stdinPipe[1])
        var total = 0
        var overflow = false
        let output = SecretBytes(count: maxOutput) { buffer in
            while true {
                if total == buffer.count {
                    var sink = [UInt8](repeating: 0, count: 4096)
                    let n = read(stdoutPipe[0], &sink, sink.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    overflow = true
                    continue
                }
                let n = read(stdoutPipe[0], buffer.baseAddress! + total, buffer.count - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                total += n
            }
        }
        close(stdoutPipe[0])
        var errorBytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while errorBytes.count < 65536 {
            let n = read(stderrPipe[0], &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            errorBytes += chunk[0..<n]
        }
        close(stderrPipe[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let result = output.slice(0..<total)
        output.wipe()
        if overflow {
            result.wipe()
            throw Failure(message: "\(arguments[0]) wrote more than \(maxOutput) bytes")
        }
        return Result(status: exit, output: result, error: String(decoding: errorBytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
