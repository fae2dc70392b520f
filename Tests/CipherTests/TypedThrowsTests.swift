import Foundation
import Testing
import Cipher

/// The library's throwing functions declare their error type, so a caller switches over the
/// cases without a cast.
@Suite struct CipherTypedThrowsTests {
    /// Which case an error is, from an exhaustive switch (no `default`, no `as`).
    static func name(_ error: CipherError) -> String {
        switch error {
        case .randomUnavailable: return "randomUnavailable"
        case .kdfParametersTooWeak: return "kdfParametersTooWeak"
        case .kdfParametersTooExpensive: return "kdfParametersTooExpensive"
        case .invalidParameter: return "invalidParameter"
        case .truncated: return "truncated"
        case .unknownVersion: return "unknownVersion"
        case .unsupportedAlgorithm: return "unsupportedAlgorithm"
        case .wrongKey: return "wrongKey"
        case .tampered: return "tampered"
        case .invalidEncoding: return "invalidEncoding"
        case .coding: return "coding"
        case .io: return "io"
        }
    }

    @Test func openingWithAnotherKeyIsWrongKeyAndAFlippedByteIsTampered() throws {
        let key = try SealingKey.generate(id: [1])
        var sealed = try Sealed.seal(Array("secret".utf8), with: key)
        do {
            _ = try Sealed.open(sealed, with: try SealingKey.generate(id: [2]))
            Issue.record("opened with another key")
        } catch {
            #expect(Self.name(error) == "wrongKey")
        }
        sealed[sealed.count - 1] ^= 1
        do {
            _ = try Sealed.open(sealed, with: key)
            Issue.record("opened tampered data")
        } catch {
            #expect(Self.name(error) == "tampered")
        }
    }

    @Test func badHexIsInvalidEncoding() {
        do {
            _ = try Encoding.fromHex("zz")
            Issue.record("decoded bad hex")
        } catch {
            #expect(Self.name(error) == "invalidEncoding")
        }
    }

    @Test func aDirectoryAsOutputIsInsecurePermissions() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("typed-\(UUID().uuidString)").path
        try SecureFile.ensurePrivateDirectory(directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try SecureFile.writeOutput(Array("x".utf8), to: directory)
            Issue.record("wrote over a directory")
        } catch {
            switch error {
            case .insecurePermissions(let path, _, _): #expect(path == directory)
            case .system(let operation, _, _): Issue.record("system failure \(operation)")
            }
        }
    }
}
