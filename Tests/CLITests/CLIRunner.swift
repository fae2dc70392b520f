import Foundation
import TestSupport

/// Runs the built `securefoundation` binary and captures what it does.
struct CLIRunner {
    struct Result {
        let status: Int32
        let stdout: [UInt8]
        let stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// The built executable, next to the test bundle (`$SECUREFOUNDATION_BIN` when set).
    static var executable: String {
        BuiltProducts.path(of: "securefoundation", environment: "SECUREFOUNDATION_BIN")
            ?? "securefoundation (not built: run swift build --build-tests)"
    }

    /// Starts `securefoundation arguments…` in the background and waits (at most 60 s) for the
    /// line "listening on …:PORT…" a server prints once ready. Returns the process, the port and
    /// its standard output. On failure the process is killed (SIGKILL: a child of the test
    /// process may inherit a blocked SIGTERM).
    static func startServer(_ arguments: [String], environment: [String: String] = [:]) throws -> (process: Process, port: Int, output: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        var seen = ""
        while Date() < deadline && process.isRunning {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
            if let line = seen.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
               let colon = line.lastIndex(of: ":"),
               let port = Int(line[line.index(after: colon)...].prefix(while: \.isNumber)) {
                return (process, port, output)
            }
        }
        kill(process.processIdentifier, SIGKILL)
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "\(arguments.prefix(2).joined(separator: " ")) did not start: \(seen)"])
    }

    /// Runs `securefoundation arguments…` with `stdin` as standard input.
    @discardableResult
    static func run(_ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:],
                    directory: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let input = Pipe(), output = Pipe(), error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // Feed stdin and drain both pipes concurrently so large outputs cannot deadlock.
        let writer = Thread {
            input.fileHandleForWriting.write(Data(stdin))
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        nonisolated(unsafe) var errorData = Data()
        let errorReader = Thread { errorData = error.fileHandleForReading.readDataToEndOfFile() }
        errorReader.start()
        let outData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while errorReader.isExecuting || !errorReader.isFinished { usleep(1000) }
        return Result(status: process.terminationStatus, stdout: [UInt8](outData),
                      stderr: String(decoding: errorData, as: UTF8.self))
    }

    /// Runs an arbitrary program (for peer tools such as sha256sum or age).
    static func runTool(_ path: String, _ arguments: [String], stdin: [UInt8] = []) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let input = Pipe(), output = Pipe(), error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        input.fileHandleForWriting.write(Data(stdin))
        try? input.fileHandleForWriting.close()
        let outData = output.fileHandleForReading.readDataToEndOfFile()
        let errData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: [UInt8](outData), stderr: String(decoding: errData, as: UTF8.self))
    }

    /// The path of a program on PATH, or nil.
    static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}

/// A private temporary directory removed when the value goes away (the shared one).
typealias ScratchDirectory = TemporaryDirectory
