import Cipher
import Foundation
import Keychain
import Testing
import Vault
import X509
@testable import PinnedTLS

/// A temporary directory (0700) removed when the value goes away.
final class IdentityScratch: @unchecked Sendable {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/sf-ident-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { path + "/" + name }

    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let full = sub(name)
        try Data(bytes).write(to: URL(fileURLWithPath: full))
        return full
    }

    func read(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: sub(name))))
    }

    /// A keychain in this directory under a fixed master key (no lock state).
    func keychain(master: [UInt8] = Array(repeating: 7, count: 32)) throws -> Keychain {
        try Keychain(directory: sub("keychain"), keySource: StaticKeySource(masterKey: SecretBytes(copying: master)))
    }
}

/// The real `openssl` command, for making inputs and checking outputs.
enum IdentityOpenSSL {
    static let path: String? = {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/openssl"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }()

    static var available: Bool { path != nil }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs openssl in `directory` (at most 60 s).
    @discardableResult
    static func run(_ arguments: [String], in directory: String) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(path, "openssl is not installed"))
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        nonisolated(unsafe) var errorData = Data()
        let reader = Thread { errorData = error.fileHandleForReading.readDataToEndOfFile() }
        reader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        var spins = 0
        while !reader.isFinished && spins < 6_000 { usleep(1_000); spins += 1 }
        return Result(status: process.terminationStatus, stdout: String(decoding: outputData, as: UTF8.self),
                      stderr: String(decoding: errorData, as: UTF8.self))
    }

    /// Runs openssl and requires success.
    @discardableResult
    static func require(_ arguments: [String], in directory: String) throws -> Result {
        let result = try run(arguments, in: directory)
        #expect(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.stderr)")
        if result.status != 0 { throw Failed(message: result.stderr) }
        return result
    }

    struct Failed: Error { var message: String }

    /// A self-signed P-256 certificate and its key: `key.pem` (PKCS#8) and `cert.pem`, with `prefix`.
    static func selfSigned(_ prefix: String, in directory: String, key: String = "ec", subject: String = "/CN=test.example") throws {
        var arguments = ["req", "-x509", "-nodes", "-days", "30", "-subj", subject, "-keyout", "\(prefix)key.pem", "-out", "\(prefix)cert.pem"]
        switch key {
        case "ec": arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        case "ec384": arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"]
        default: arguments += ["-newkey", key]
        }
        try require(arguments, in: directory)
    }
}

/// The error a throwing call threw, as an `IdentityError`.
func identityError(_ body: () throws -> Void) -> IdentityError? {
    do { try body(); return nil } catch let error as IdentityError { return error } catch {
        Issue.record("expected an IdentityError, got \(error)")
        return nil
    }
}
