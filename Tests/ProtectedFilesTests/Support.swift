import Foundation
import Testing
import Cipher
import Vault
@testable import ProtectedFiles

/// A temporary vault with a passcode and a directory for files, removed by `cleanup()`.
final class ProtectFixture: @unchecked Sendable {
    let root: String
    let home: String
    let files: String
    let deviceKey: SecretBytes
    let passcode = SecretBytes(utf8: "correct horse battery staple")

    init() throws {
        root = FileManager.default.temporaryDirectory.path + "/protect-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        home = root + "/home"
        files = root + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        deviceKey = try SecretBytes.random(count: 32)
    }

    func manager(deviceKey: SecretBytes? = nil, home: String? = nil) throws -> CryptoManager {
        try CryptoManager(directory: home ?? self.home, deviceKeyProvider: StaticDeviceKeyProvider(key: deviceKey ?? self.deviceKey),
                          policy: .interactive, attemptPolicy: .unlimited)
    }

    /// A set-up, unlocked vault.
    func setUp() throws -> CryptoManager {
        let manager = try manager()
        try manager.setUp(passcode: passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: passcode) }
        return manager
    }

    func path(_ name: String) -> String { files + "/" + name }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }
}

func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

func writeBytes(_ data: [UInt8], _ path: String) throws { try Data(data).write(to: URL(fileURLWithPath: path)) }

/// The path of an executable on PATH, or nil.
func executable(_ name: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}

/// Runs a program with a time limit; returns the exit status, stdout and stderr.
func run(_ program: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> (Int32, [UInt8], String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin)) }
    try input.fileHandleForWriting.close()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let error = err.fileHandleForReading.readDataToEndOfFile()
    let deadline = Date().addingTimeInterval(60)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    return (process.terminationStatus, Array(output), String(decoding: error, as: UTF8.self))
}

/// A value behind a lock, for test threads.
final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
