import Foundation
import TestSupport
import Testing

/// A passphrase prompt killed by a signal gives the terminal back its echo.
@Suite("terminal restored after a signal at a prompt",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")
                    && FileManager.default.isExecutableFile(atPath: "/usr/bin/stty"),
                "util-linux script or stty is not installed; the pseudo-terminal tests are skipped"))
struct TerminalCLITests {
    /// The pid of a child of `parent`, found through /proc.
    static func child(of parent: Int32) -> Int32? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for entry in entries {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 2, Int32(fields[1]) == parent { return pid }
        }
        return nil
    }

    /// Waits (at most `seconds`) until `condition` holds.
    static func wait(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// Runs `securefoundation arguments` at a prompt on a pseudo-terminal, sends `signal` to it
    /// while it waits for the passphrase, and returns what `stty -a` then says on that terminal
    /// and the command's exit status as the shell saw it.
    static func interrupt(_ arguments: [String], with signal: Int32, in scratch: ScratchDirectory) throws -> (echo: Bool?, status: String, transcript: String) {
        let binary = try BuiltProducts.commandLine
        let command = "echo SH=$$\n\(([binary] + arguments).map { "'\($0)'" }.joined(separator: " ")) </dev/null >/dev/null\n"
            + "echo rc=$?\nstty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo\necho done\n"
        let script = try scratch.file("run.sh", Array(command.utf8))
        // The terminal's transcript is `script`'s standard output.
        let collected = try ChildProcess.start("/usr/bin/script", ["-qec", "/bin/sh \(script)", "/dev/null"], stdin: .pipe)
        defer {
            collected.closeInput()
            collected.kill(SIGTERM)
        }
        #expect(wait(seconds: 20) { collected.text.contains("Passphrase:") }, "no prompt: \(collected.text)")
        // (The shell prints its pid before it starts the command.)
        let shell = collected.text.split(whereSeparator: \.isNewline).first { $0.hasPrefix("SH=") }
            .flatMap { Int32($0.dropFirst(3).trimmingCharacters(in: .whitespacesAndNewlines)) }
        let pid = try #require(shell.flatMap { shell in
            var found: Int32?
            _ = wait(seconds: 10) { found = child(of: shell); return found != nil }
            return found
        })
        // Signal only once echo is really off on the command's terminal.
        let echoOff = wait(seconds: 10) {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            for fd in fds {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                      target.hasPrefix("/dev/pts/") else { continue }
                guard let text = (try? ChildProcess.run("/usr/bin/stty", ["-a", "-F", target], timeout: .seconds(10)))?.text else { return false }
                if text.split(whereSeparator: { $0 == " " || $0 == ";" || $0.isNewline }).contains("-echo") { return true }
            }
            return false
        }
        #expect(echoOff, "echo never went off at the prompt: \(collected.text)")
        kill(pid, signal)
        #expect(wait(seconds: 20) { collected.text.contains("done") }, "the shell did not finish: \(collected.text)")
        let lines = collected.text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        let echo: Bool? = lines.contains("-echo") ? false : (lines.contains("echo") ? true : nil)
        let status = lines.first { $0.hasPrefix("rc=") } ?? "?"
        return (echo, status, collected.text)
    }

    @Test("SIGINT at seal's passphrase prompt: the process dies of SIGINT and echo is back on")
    func sigintRestoresEcho() throws {
        let scratch = try ScratchDirectory()
        let input = try scratch.file("in", Array("x".utf8))
        let result = try Self.interrupt(["seal", input], with: SIGINT, in: scratch)
        #expect(result.status == "rc=130", "\(result.transcript)")
        #expect(result.echo == true, "\(result.transcript)")
    }

    @Test("SIGTERM at seal's passphrase prompt: the process dies of SIGTERM and echo is back on")
    func sigtermRestoresEcho() throws {
        let scratch = try ScratchDirectory()
        let input = try scratch.file("in", Array("x".utf8))
        let result = try Self.interrupt(["seal", "--policy", "interactive", input], with: SIGTERM, in: scratch)
        #expect(result.status == "rc=143", "\(result.transcript)")
        #expect(result.echo == true, "\(result.transcript)")
    }

    @Test("encrypt -o /dev/stdout or /dev/tty refuses binary output to the terminal, as without -o", arguments: ["/dev/stdout", "/dev/tty"])
    func binaryToTerminalByName(output: String) throws {
        let scratch = try ScratchDirectory()
        let dir = scratch.path
        let (_, recipient) = try AgeCLITests.keygen(dir)
        let input = try scratch.file("in", Array("x".utf8))
        let binary = try BuiltProducts.commandLine
        let script = try scratch.file("run.sh", Array("'\(binary)' encrypt -r \(recipient) -o \(output) '\(input)'\necho rc=$?\n".utf8))
        let ran = try ChildProcess.run("/usr/bin/script", ["-qec", "/bin/sh \(script)", "/dev/null"], timeout: .seconds(120))
        let text = ran.text + ran.errorText
        #expect(text.contains("refusing to write binary to the terminal"), "\(text)")
        #expect(text.split(whereSeparator: \.isNewline).contains("rc=64"), "\(text)")
        // A refusal found while running prints the error alone, not the usage text.
        #expect(!text.contains("USAGE:"), "\(text)")
    }
}
