import Foundation
import TestSupport
import Testing
import Cipher
import Vault
import ProtectedFiles
@testable import ProtectedDatabase

/// A temporary vault with a passcode and a directory for databases, removed by `cleanup()`.
final class DatabaseFixture: @unchecked Sendable {
    let root: String
    let home: String
    let directory: String
    let deviceKey: SecretBytes
    let passcode = SecretBytes(utf8: "correct horse battery staple")
    private let temporary: TemporaryDirectory

    init() throws {
        temporary = try TemporaryDirectory(prefix: "db-test")
        root = temporary.path
        home = temporary.path("home")
        directory = try temporary.directory("db")
        deviceKey = try SecretBytes.random(count: 32)
    }

    /// A set-up, unlocked vault with every class's key pair, and its protected files.
    func setUp() throws -> (CryptoManager, ProtectedFiles) {
        let manager = try CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: deviceKey),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.setUp(passcode: passcode)
        if !manager.isUnlocked { try manager.unlock(passcode: passcode) }
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        return (manager, files)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }
}

func fileBytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

func writeFileBytes(_ data: [UInt8], _ path: String) throws { try Data(data).write(to: URL(fileURLWithPath: path)) }

/// The hex of a database's raw key, as SQLCipher's `PRAGMA key = "x'…'"` takes it.
func hexKey(_ path: String, _ files: ProtectedFiles) throws -> String {
    try ProtectedDatabase.exportKey(at: path, files: files).withUnsafeBytes { Encoding.hex(Array($0)) }
}

/// Runs Python with SQLCipher 4 (`sqlcipher3`), or returns nil when it is not installed.
func sqlcipher(_ script: String, _ arguments: [String]) throws -> (Int32, String, String)? {
    guard let python = ChildProcess.which("python3") else { return nil }
    let probe = try ChildProcess.run(python, ["-c", "import sqlcipher3"])
    guard probe.status == 0 else { return nil }
    let result = try ChildProcess.run(python, ["-c", script] + arguments)
    return (result.status, String(decoding: result.stdout, as: UTF8.self), result.errorText)
}
