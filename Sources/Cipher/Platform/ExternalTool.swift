#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CPlatform
#if canImport(Glibc)
import Glibc
#endif

/// Runs a helper program (systemd-creds, tpm2-tools) with secret input on standard input and
/// secret output read from standard output straight into locked memory; never through a file
/// or a `String`. Used by the vault's device-key providers and by the TPM plumbing
/// (`TPM2` in HardwareKeys). Lives in the platform layer beside ``ProcessSpawn``.
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
        // Close-on-exec from the start (ProcessSpawn), so no other program started meanwhile
        // (by another thread) keeps an end open and the reads below always see end-of-file.
        var pipes: [(read: Int32, write: Int32)] = []
        do {
            for _ in 0..<3 { pipes.append(try ProcessSpawn.pipe()) }
        } catch {
            for pipe in pipes { close(pipe.read); close(pipe.write) }
            throw Failure(message: "pipe: \(String(cString: strerror(error.code)))")
        }
        let (stdinPipe, stdoutPipe, stderrPipe) = (pipes[0], pipes[1], pipes[2])
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let pid: pid_t
        do {
            pid = try ProcessSpawn.spawn(arguments, actions: [.duplicate(stdinPipe.read, as: 0), .duplicate(stdoutPipe.write, as: 1),
                                                              .duplicate(stderrPipe.write, as: 2)],
                                         environment: env.map { "\($0.key)=\($0.value)" })
        } catch {
            close(stdinPipe.read); close(stdoutPipe.write); close(stderrPipe.write)
            close(stdinPipe.write); close(stdoutPipe.read); close(stderrPipe.read)
            throw Failure(message: "cannot run \(arguments[0]): \(String(cString: strerror(error.code)))")
        }
        close(stdinPipe.read); close(stdoutPipe.write); close(stderrPipe.write)
        // Input is small (a key): written whole before reading, then closed.
        signal(SIGPIPE, SIG_IGN)
        if let input {
            input.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(stdinPipe.write, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
        close(stdinPipe.write)
        var total = 0
        var overflow = false
        let output = SecretBytes(count: maxOutput) { buffer in
            while true {
                if total == buffer.count {
                    var sink = [UInt8](repeating: 0, count: 4096)
                    let n = read(stdoutPipe.read, &sink, sink.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    overflow = true
                    continue
                }
                let n = read(stdoutPipe.read, buffer.baseAddress! + total, buffer.count - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                total += n
            }
        }
        close(stdoutPipe.read)
        var errorBytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while errorBytes.count < 65536 {
            let n = read(stderrPipe.read, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            errorBytes += chunk[0..<n]
        }
        close(stderrPipe.read)
        let exit = ProcessSpawn.wait(pid)
        let result = output.slice(0..<total)
        output.wipe()
        if overflow {
            result.wipe()
            throw Failure(message: "\(arguments[0]) wrote more than \(maxOutput) bytes")
        }
        return Result(status: exit, output: result, error: String(String(decoding: errorBytes, as: UTF8.self).trimmingWhitespace()))
    }
}
