import Foundation
import Testing
import Cipher
import Vault
import ProtectedFiles
@testable import UnlockAgent

/// `AgentClient`'s and `AgentServer`'s public functions throw `AgentError`: a caller switches
/// over its cases with no cast and no `default`; the vault's refusal is a case carrying it.
@Suite("Unlock agent typed throws", .serialized)
struct AgentTypedThrowsTests {
    /// The exit-status-like class of an agent error, by an exhaustive switch.
    static func kind(_ error: AgentError) -> String {
        switch error {
        case .notRunning: return "no connection"
        case .timedOut: return "timed out"
        case .insecureDirectory: return "io"
        case .vault(.wrongPasscode), .vault(.wrongAnswers): return "wrong secret"
        case .vault: return "vault"
        case .protectedFile: return "protected file"
        case .alreadyRunning, .pathInUse, .refused, .protocolViolation, .remote, .io: return "failure"
        }
    }

    @Test func aWrongPasscodeAndNoAgentAreCasesOfAgentError() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let client = try fixture.start()
        do {
            try client.unlock(passcode: SecretBytes(utf8: "wrong"))
            Issue.record("unlocked with a wrong passcode")
        } catch {
            #expect(Self.kind(error) == "wrong secret")
            #expect("\(error)" == "\(VaultError.wrongPasscode(failures: 1, nextAttemptAfter: nil))")
        }
        fixture.stop()
        do {
            _ = try client.status()
            Issue.record("a stopped agent answered")
        } catch {
            #expect(Self.kind(error) == "no connection")
        }
    }
}
