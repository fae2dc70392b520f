import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion with a deadline: the command line under test, the helper
/// executables, and peer tools (openssl, age, sha256sum). Every wait is bounded: a program that
/// outlives its deadline is killed (SIGKILL) and reaped, and the call throws ``TimedOut``.
public enum ChildProcess {
    /// What the program reads as standard input.
    public enum Input: Sendable {
        /// `/dev/null`.
        case nullDevice
        /// A pipe fed these bytes, then closed.
        case bytes([UInt8])
        /// The file at this path (as the shell's `< FILE`).
        case file(String)
        /// A pipe left open for ``Running/write(_:)``; only with
        /// ``start(_:_:stdin:environment:directory:)``.
        case pipe

        /// A pipe fed the UTF-8 bytes of `text`, then closed.
        public static func text(_ text: String) -> Input { .bytes(Array(text.utf8)) }
    }

    /// How the program ended and what it wrote.
    public struct Result: Sendable {
        /// The exit status, or the signal's number when a signal ended it (see ``signalled``).
        public let status: Int32
        /// Whether an uncaught signal ended the program.
        public let signalled: Bool
        public let stdout: [UInt8]
        public let stderr: [UInt8]

        /// Standard output as UTF-8 text.
        public var text: String { String(decoding: stdout, as: UTF8.self) }
        /// Standard error as UTF-8 text.
        public var errorText: String { String(decoding: stderr, as: UTF8.self) }
    }

    /// Where the program's standard output goes.
    public enum Output: Sendable {
        /// A pipe read as it comes (``Result/stdout``, ``Running/stdout``).
        case collected
        /// The file at this path, opened for writing without truncating it (as the shell's
        /// `1<>FILE`): the program writes to that inode through the descriptor.
        case file(String)
    }

    /// The program did not finish before its deadline; it was killed.
    public struct TimedOut: Error, CustomStringConvertible {
        public let command: [String]
        public let seconds: Double
        public let stdout: [UInt8]
        public let stderr: [UInt8]
        public var description: String {
            "\(command.joined(separator: " ")) did not finish within \(seconds) s and was killed; stderr: "
                + String(decoding: stderr.suffix(2000), as: UTF8.self)
        }
    }

    /// Runs `executable arguments…` to completion.
    /// - Parameters:
    ///   - executable: the program's path (see ``which(_:)`` and ``BuiltProducts``).
    ///   - arguments: its arguments.
    ///   - stdin: what it reads as standard input (`/dev/null` by default).
    ///   - stdout: where its standard output goes (collected by default).
    ///   - environment: variables added to (or replacing those of) this process's environment.
    ///   - directory: the working directory (this process's by default).
    ///   - timeout: how long it may run before it is killed.
    /// - Returns: the exit status, standard output and standard error.
    /// - Throws: ``TimedOut`` when it outlived `timeout`; the launch error when it cannot start.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String] = [], stdin: Input = .nullDevice, stdout: Output = .collected,
        environment: [String: String] = [:], directory: String? = nil, timeout: Duration = .seconds(60)
    ) throws -> Result {
        try start(executable, arguments, stdin: stdin, stdout: stdout, environment: environment, directory: directory)
            .wait(timeout: timeout)
    }

    /// Starts `executable arguments…` and returns at once: for programs that run beside the test
    /// (servers, concurrent writers, a process killed at a chosen moment). The program is killed
    /// (SIGKILL) when the returned value goes away while it still runs.
    /// - Parameters: as ``run(_:_:stdin:stdout:environment:directory:timeout:)``; with
    ///   `stdin: .pipe` the test writes the input with ``Running/write(_:)``.
    /// - Throws: the launch error when it cannot start.
    public static func start(
        _ executable: String, _ arguments: [String] = [], stdin: Input = .nullDevice, stdout: Output = .collected,
        environment: [String: String] = [:], directory: String? = nil
    ) throws -> Running {
        try Running(executable, arguments, stdin: stdin, stdout: stdout, environment: environment, directory: directory)
    }

    /// A program started by ``start(_:_:stdin:stdout:environment:directory:)``. Its standard output and
    /// error are read as they come (a full pipe never blocks it) and can be looked at while it runs.
    public final class Running: @unchecked Sendable {
        private let process = Process()
        private let command: [String]
        private let exited = DispatchSemaphore(value: 0)
        private let drained = DispatchGroup()
        private let output = Collector(), errors = Collector()
        private let input: FileHandle?

        /// The program's process id.
        public var processIdentifier: Int32 { process.processIdentifier }
        /// Whether it still runs.
        public var isRunning: Bool { process.isRunning }
        /// What it wrote to standard output so far.
        public var stdout: [UInt8] { output.bytes }
        /// What it wrote to standard error so far.
        public var stderr: [UInt8] { errors.bytes }

        fileprivate init(_ executable: String, _ arguments: [String], stdin: Input, stdout: Output,
                         environment: [String: String], directory: String?) throws {
            ChildProcess.ignoreBrokenPipes
            command = [executable] + arguments
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            // New vaults made by the command line under test use the KDF floor (`minimum`,
            // scrypt 2^15) unless the test names another: scrypt at 2^16, compiled without
            // optimisation in debug builds, was most of the suite's CPU time.
            var merged = ProcessInfo.processInfo.environment
            if merged["SECUREFOUNDATION_KDF"] == nil { merged["SECUREFOUNDATION_KDF"] = "minimum" }
            for (key, value) in environment { merged[key] = value }
            process.environment = merged
            if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
            let outputPipe = Pipe(), errorPipe = Pipe()
            switch stdout {
            case .collected:
                process.standardOutput = outputPipe
            case .file(let path):
                guard let handle = FileHandle(forWritingAtPath: path) else { throw CocoaError(.fileWriteNoPermission) }
                process.standardOutput = handle
            }
            process.standardError = errorPipe
            var feed: [UInt8]?
            switch stdin {
            case .nullDevice:
                process.standardInput = FileHandle.nullDevice
                input = nil
            case .bytes(let bytes):
                let pipe = Pipe()
                process.standardInput = pipe
                input = pipe.fileHandleForWriting
                feed = bytes
            case .pipe:
                let pipe = Pipe()
                process.standardInput = pipe
                input = pipe.fileHandleForWriting
            case .file(let path):
                guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
                process.standardInput = handle
                input = nil
            }
            let exited = self.exited
            process.terminationHandler = { _ in exited.signal() }
            try process.run()
            // Drain both pipes and feed stdin on threads of their own, so that a program writing
            // more than a pipe holds, or reading its input late, cannot block on this side.
            var pipes = [(errorPipe, errors)]
            if case .collected = stdout { pipes.append((outputPipe, output)) }
            for (pipe, collector) in pipes {
                let handle = pipe.fileHandleForReading
                let drained = self.drained
                drained.enter()
                Thread {
                    collector.drain(handle)
                    drained.leave()
                }.start()
            }
            if let feed, let input {
                Thread {
                    try? input.write(contentsOf: feed)
                    try? input.close()
                }.start()
            }
        }

        /// Standard output so far, as UTF-8 text.
        public var text: String { String(decoding: stdout, as: UTF8.self) }

        /// Writes `bytes` to the program's standard input (started with `stdin: .pipe`); a write
        /// to a program that exited fails silently.
        public func write(_ bytes: [UInt8]) {
            try? input?.write(contentsOf: bytes)
        }

        /// Closes the program's standard input (started with `stdin: .pipe`): it reads end of file.
        public func closeInput() {
            try? input?.close()
        }

        /// Waits (at most `timeout`) until `condition` holds for the standard output written so
        /// far; returns false when the program exited or the time ran out first.
        public func waitForOutput(timeout: Duration = .seconds(60), until condition: ([UInt8]) -> Bool) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if condition(stdout) { return true }
                if !process.isRunning { return condition(stdout) }
                usleep(5_000)
            }
            return condition(stdout)
        }

        /// Waits (at most `timeout`) for a line of standard output starting with `prefix`; returns
        /// the line, or nil when the program exited or the time ran out first.
        public func waitForLine(startingWith prefix: String, timeout: Duration = .seconds(60)) -> String? {
            var found: String?
            _ = waitForOutput(timeout: timeout) { bytes in
                found = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init)
                return found != nil
            }
            return found
        }

        /// Sends `signal` (SIGKILL by default) to the program; ``wait(timeout:)`` then reaps it.
        public func kill(_ signal: Int32 = SIGKILL) {
            if process.isRunning { _ = sendSignal(process.processIdentifier, signal) }
        }

        /// Waits (at most `timeout`) for the program to end.
        /// - Returns: its exit status and everything it wrote.
        /// - Throws: ``TimedOut`` (after killing and reaping it) when it outlived `timeout`.
        @discardableResult
        public func wait(timeout: Duration = .seconds(60)) throws -> Result {
            if exited.wait(timeout: .now() + .nanoseconds(ChildProcess.nanoseconds(timeout))) == .timedOut {
                kill()
                _ = exited.wait(timeout: .now() + 10)
                _ = drained.wait(timeout: .now() + 2)
                exited.signal()
                throw TimedOut(command: command, seconds: Double(ChildProcess.nanoseconds(timeout)) / 1e9,
                               stdout: stdout, stderr: stderr)
            }
            exited.signal()
            process.waitUntilExit()
            // A descendant that inherited the pipes may hold them open after the program exited:
            // what was written by then is kept, the rest is not waited for.
            _ = drained.wait(timeout: .now() + 10)
            return Result(status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
                          stdout: stdout, stderr: stderr)
        }

        deinit {
            if process.isRunning {
                _ = sendSignal(process.processIdentifier, SIGKILL)
                _ = exited.wait(timeout: .now() + 10)
            }
            try? input?.close()
        }
    }

    /// The path of the program `name` on `PATH`, or nil when it is not installed.
    public static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// A write into the pipe of a program that exited fails with EPIPE instead of ending the tests.
    fileprivate static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    fileprivate static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    /// Bytes read from one pipe, readable while the reading goes on.
    private final class Collector: @unchecked Sendable {
        private let lock = NSLock()
        private var data: [UInt8] = []

        /// Reads until end of file, keeping each chunk as it arrives (`FileHandle.read(upToCount:)`
        /// would wait for a full count).
        func drain(_ handle: FileHandle) {
            let fd = handle.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { readSome(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return }
                lock.withLock { data += buffer[0..<count] }
            }
        }

        var bytes: [UInt8] { lock.withLock { data } }
    }
}

/// `kill(2)`, under a name the methods called `kill` do not shadow.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }

/// `read(2)`.
private func readSome(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
