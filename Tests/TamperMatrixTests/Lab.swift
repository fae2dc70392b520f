import Foundation
import Testing
import TestSupport

/// What one command did.
struct Outcome {
    let status: Int32
    let stdout: [UInt8]
    let stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
    var all: String { text + stderr }
}

/// One data directory with its device key, passcode and environment: the victim's, a peer's or
/// the attacker's. Every command runs the built `securefoundation` with a deadline.
final class Machine: @unchecked Sendable {
    let root: String
    let name: String
    var home: String { root + "/home" }
    var config: String { root + "/config" }
    var deviceKey: String { config + "/device.key" }
    let pin: String
    let environment: [String: String]

    init(root: String, name: String, passcode: String, runtime: String) throws {
        self.root = root
        self.name = name
        try FileManager.default.createDirectory(atPath: root + "/config", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(atPath: root + "/secrets", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        pin = root + "/secrets/pin"
        try Lab.write(pin, Array(passcode.utf8))
        environment = [
            "SECUREFOUNDATION_AGENT": "off", "XDG_RUNTIME_DIR": runtime, "XDG_CONFIG_HOME": root + "/xdg-config",
            "XDG_DATA_HOME": root + "/xdg-data", "HOME": root,
        ]
    }

    /// `securefoundation arguments… --home HOME [--device-key KEY]`, killed after `timeout`.
    @discardableResult
    func run(_ arguments: [String], stdin: [UInt8] = [], deviceKey withKey: Bool = true, agent: Bool = false,
             extra: [String: String] = [:], timeout: Duration = .seconds(180)) throws -> Outcome {
        var environment = environment.merging(extra) { $1 }
        if agent { environment["SECUREFOUNDATION_AGENT"] = nil }
        let result = try ChildProcess.run(try BuiltProducts.commandLine,
                                          arguments + ["--home", home] + (withKey ? ["--device-key", deviceKey] : []),
                                          stdin: .bytes(stdin), environment: environment, timeout: timeout)
        return Outcome(status: result.signalled ? 128 + result.status : result.status, stdout: result.stdout, stderr: result.errorText)
    }

    /// As `run`, and the command must succeed.
    @discardableResult
    func must(_ arguments: [String], stdin: [UInt8] = [], deviceKey withKey: Bool = true, agent: Bool = false,
              sourceLocation: SourceLocation = #_sourceLocation) throws -> Outcome {
        let outcome = try run(arguments, stdin: stdin, deviceKey: withKey, agent: agent)
        #expect(outcome.status == 0, "\(name): \(arguments.prefix(3).joined(separator: " ")): \(outcome.stderr)", sourceLocation: sourceLocation)
        return outcome
    }

    /// Starts `share serve` on a free loopback port; nil when it stopped before listening.
    func serve(passcodeFile: String) throws -> (ChildProcess.Running, Int)? {
        let process = try ChildProcess.start(try BuiltProducts.commandLine,
                                             ["share", "serve", "--listen", "127.0.0.1:0", "--max-transfers", "1",
                                              "--passcode-file", passcodeFile, "--home", home, "--device-key", deviceKey],
                                             environment: environment)
        if let line = process.waitForLine(startingWith: "listening on ", timeout: .seconds(120)),
           let colon = line.lastIndex(of: ":"),
           let port = Int(line[line.index(after: colon)...].prefix(while: \.isNumber)) {
            return (process, port)
        }
        process.kill()
        return nil
    }
}

/// Files, trees and copies.
enum Lab {
    static func write(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
    }

    static func read(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

    static func remove(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFDIR { chmod(path, 0o700) }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `cp -a source destination` (modes, links and times kept).
    static func copy(_ source: String, to destination: String) throws {
        remove(destination)
        let copied = try ChildProcess.run("/bin/cp", ["-a", source, destination], timeout: .seconds(60))
        guard copied.status == 0 else { throw Failure(description: "cp -a \(source) \(destination): \(copied.errorText)") }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    enum Kind: Equatable { case file, directory, link, other }

    static func kind(_ path: String) -> Kind? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .link
        default: return .other
        }
    }

    /// Every entry under `directory` (relative paths, directories with a trailing `/`), sorted.
    static func entries(under directory: String, prefix: String = "") -> [String] {
        var result: [String] = []
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/" + prefix)) ?? []).sorted() {
            let relative = prefix + name
            if kind(directory + "/" + relative) == .directory {
                result.append(relative + "/")
                result += entries(under: directory, prefix: relative + "/")
            } else {
                result.append(relative)
            }
        }
        return result
    }

    /// What a tree holds, byte for byte: each entry's kind, mode, contents or link target.
    static func fingerprint(_ directory: String, skipping: Set<String> = []) -> [String: String] {
        var result: [String: String] = [:]
        for entry in entries(under: directory) where !skipping.contains(where: { entry.hasPrefix($0) }) {
            let path = directory + "/" + entry
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            let mode = String(info.st_mode, radix: 8)
            switch kind(path) {
            case .file: result[entry] = mode + " " + (read(path).map { Data($0).base64EncodedString() } ?? "?")
            case .link: result[entry] = mode + " -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")
            default: result[entry] = mode
            }
        }
        return result
    }
}
