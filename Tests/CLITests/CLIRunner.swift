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
    /// line "listening on …:PORT…" a server prints once ready. Returns the process and the port.
    /// On failure the process is killed (SIGKILL: a child of the test process may inherit a
    /// blocked SIGTERM).
    static func startServer(_ arguments: [String], environment: [String: String] = [:]) throws -> (process: ChildProcess.Running, port: Int) {
        let process = try ChildProcess.start(executable, arguments, environment: environment)
        if let line = process.waitForLine(startingWith: "listening on ", timeout: .seconds(60)),
           let colon = line.lastIndex(of: ":"),
           let port = Int(line[line.index(after: colon)...].prefix(while: \.isNumber)) {
            return (process, port)
        }
        process.kill()
        throw CocoaError(.fileReadUnknown, userInfo: [
            NSLocalizedDescriptionKey: "\(arguments.prefix(2).joined(separator: " ")) did not start: "
                + String(decoding: process.stdout, as: UTF8.self) + String(decoding: process.stderr, as: UTF8.self),
        ])
    }

    /// Runs `securefoundation arguments…` with `stdin` as standard input (killed after 300 s).
    @discardableResult
    static func run(_ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:],
                    directory: String? = nil) throws -> Result {
        Result(try ChildProcess.run(executable, arguments, stdin: .bytes(stdin), environment: environment,
                                    directory: directory, timeout: .seconds(300)))
    }

    /// Runs an arbitrary program (for peer tools such as sha256sum or age; killed after 300 s).
    static func runTool(_ path: String, _ arguments: [String], stdin: [UInt8] = []) throws -> Result {
        Result(try ChildProcess.run(path, arguments, stdin: .bytes(stdin), timeout: .seconds(300)))
    }

    /// The path of a program on PATH, or nil.
    static func which(_ name: String) -> String? { ChildProcess.which(name) }
}

extension CLIRunner.Result {
    init(_ result: ChildProcess.Result) {
        self.init(status: result.status, stdout: result.stdout, stderr: result.errorText)
    }
}

/// A private temporary directory removed when the value goes away (the shared one).
typealias ScratchDirectory = TemporaryDirectory
