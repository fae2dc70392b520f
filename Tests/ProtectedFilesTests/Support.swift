import Foundation
import TestSupport
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

    private let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "protect-test")
        root = directory.path
        home = directory.path("home")
        files = try directory.directory("files")
        deviceKey = try SecretBytes.random(count: 32)
    }

    func manager(deviceKey: SecretBytes? = nil, home: String? = nil) throws -> CryptoManager {
        try CryptoManager(directory: home ?? self.home, deviceKeyProvider: StaticDeviceKeyProvider(key: deviceKey ?? self.deviceKey),
                          policy: .minimum, attemptPolicy: .unlimited)
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
func executable(_ name: String) -> String? { ChildProcess.which(name) }

/// Runs a program (at most 60 s); returns the exit status, stdout and stderr.
func run(_ program: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> (Int32, [UInt8], String) {
    let result = try ChildProcess.run(program, arguments, stdin: .bytes(stdin ?? []))
    return (result.status, result.stdout, result.errorText)
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
