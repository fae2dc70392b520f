import Cipher
import Foundation
import Logging
import SecureFoundationServices
import ServiceLifecycle
import Testing
import TestSupport
@testable import UnlockAgent

/// The unlock agent run as a swift-service-lifecycle `Service` in an application's ServiceGroup.
@Suite("AgentService: the agent in a ServiceGroup")
struct AgentServiceTests {
    @Test("serves while the group runs; the graceful shutdown stops it, locks the vault and removes the socket; its events are logged")
    func servesUntilShutdown() async throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        try FileManager.default.createDirectory(atPath: fixture.root + "/run", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let log = CapturedLog()
        let manager = try fixture.manager()
        let service = try AgentService(manager: manager, socketPath: fixture.socket,
                                       configuration: AgentServer.Configuration(idleTTL: 1, maxTTL: 600), logger: log.logger())
        let group = ServiceGroup(services: [service], logger: log.logger("group"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // The socket appears once the service has bound it (bounded wait).
            for _ in 0..<600 where !FileManager.default.fileExists(atPath: fixture.socket) {
                try await Task.sleep(for: .milliseconds(50))
            }
            let client = AgentClient(socketPath: fixture.socket, timeout: 30)
            #expect(try client.status().state == .locked)
            #expect(try client.unlock(passcode: SecretBytes(utf8: fixture.passcode)).state == .unlocked)
            // The idle TTL (1 s) locks it again, and the log says so.
            for _ in 0..<200 where (try? client.status().state) != .locked {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try client.status().state == .locked)
            #expect(try client.unlock(passcode: SecretBytes(utf8: fixture.passcode)).state == .unlocked)

            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.socket))
        #expect(!manager.isUnlocked)
        let lines = log.lines.joined(separator: "\n")
        #expect(lines.contains("unlock agent listening"), "\(lines)")
        #expect(lines.contains("unlock agent stopped"), "\(lines)")
        #expect(lines.contains("agent.socket=\(fixture.socket)"), "\(lines)")
        #expect(lines.contains("notice unlocked") && lines.contains("ran out"), "\(lines)")
        #expect(!lines.contains(fixture.passcode), "\(lines)")
    }
}
