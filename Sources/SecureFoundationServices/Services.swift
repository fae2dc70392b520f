import DeviceSharing
import Foundation
import Logging
import NIOCore
import PinnedTLS
import ServiceLifecycle
import UnlockAgent
import Vault

/// The unlock agent as a swift-service-lifecycle `Service`: it serves the vault's class keys on
/// its socket until the group shuts down gracefully (SIGTERM in a `ServiceGroup` with signals)
/// or the task is cancelled; it then stops accepting, locks the vault and removes its socket.
/// Its events (refused peers, expiries) go to `logger` at `notice`, never a secret.
///
/// ```swift
/// let agent = try AgentService(manager: manager, socketPath: AgentPaths.defaultSocketPath(), logger: logger)
/// let group = ServiceGroup(services: [agent, httpServer], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public final class AgentService: Service, Sendable {
    /// The agent.
    public let server: AgentServer
    private let logger: Logger

    /// - Parameters:
    ///   - manager: the vault to serve (made without an unlocked-key source).
    ///   - socketPath: where to listen; its directory is created 0700 and checked.
    ///   - configuration: TTLs and limits.
    ///   - logger: where the agent's events go (metadata `agent.socket`).
    /// - Throws: `AgentError` as `AgentServer.init` does.
    public init(manager: CryptoManager, socketPath: String, configuration: AgentServer.Configuration = AgentServer.Configuration(),
                logger: Logger) throws(AgentError) {
        var logger = logger
        logger[metadataKey: "agent.socket"] = "\(socketPath)"
        let sink = logger
        server = try AgentServer(manager: manager, socketPath: socketPath, configuration: configuration) { line in
            sink.notice("\(line)")
        }
        self.logger = logger
    }

    /// Binds the socket and serves on a thread of its own (the agent
    /// waits in `poll`, which must not hold a thread of Swift's cooperative pool) until a graceful
    /// shutdown or cancellation.
    public func run() async throws {
        try server.bind()
        logger.info("unlock agent listening")
        let server = self.server
        try await runUntilShutdown(stop: { server.stop() }) {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let thread = Thread {
                    do {
                        try server.run()
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                thread.name = "unlock-agent"
                thread.start()
            }
        }
        logger.info("unlock agent stopped; the vault is locked")
    }
}

/// A sharing receiver (`ShareServer`) as a `Service`: on graceful shutdown it stops listening,
/// the transfers in flight run to their end (each file stored whole or not at all), and `run()`
/// returns once they have; cancellation does the same. Each stored file and each refusal goes
/// to `logger` (metadata: `share.peer`, `share.device`, `share.file`, `share.size`; never a key).
public final class ShareService: Service, Sendable {
    /// The receiver.
    public let server: ShareServer
    private let logger: Logger

    /// - Parameters:
    ///   - server: a bound receiver (`ShareServer.bind`).
    ///   - logger: where its events go.
    public init(server: ShareServer, logger: Logger) {
        self.server = server
        self.logger = logger
    }

    public func run() async throws {
        let server = self.server, logger = self.logger
        logger.info("share receiver listening", metadata: ["share.port": "\(server.port)"])
        try await runUntilShutdown(stop: { await server.close() }) {
            try await server.run { event in
                switch event {
                case .received(let name, let size, let device):
                    logger.notice("received a file", metadata: ["share.file": "\(name)", "share.size": "\(size)", "share.device": "\(device)"])
                case .refused(let peer, let error):
                    logger.warning("refused: \(error)", metadata: ["share.peer": "\(peer)"])
                }
            }
        }
        logger.info("share receiver stopped")
    }
}

/// A `PinnedTLSServer` as a `Service`: it serves connections with `handler` until a graceful
/// shutdown or cancellation, then stops accepting and returns once the handlers running have
/// finished. Refused clients go to `logger` at `warning`, with their typed reason (and the
/// presented chain's pins, which are public).
public final class PinnedTLSServerService: Service, Sendable {
    /// The server.
    public let server: PinnedTLSServer
    private let logger: Logger
    private let handler: @Sendable (PinnedTLSServer.Connection) async throws -> Void

    /// - Parameters:
    ///   - server: a bound server (`PinnedTLSServer.bind`).
    ///   - logger: where refusals go.
    ///   - handler: serves one connection.
    public init(server: PinnedTLSServer, logger: Logger, handler: @escaping @Sendable (PinnedTLSServer.Connection) async throws -> Void) {
        self.server = server
        self.logger = logger
        self.handler = handler
    }

    public func run() async throws {
        let server = self.server, logger = self.logger
        logger.info("TLS server listening", metadata: ["tls.port": "\(server.port)"])
        try await runUntilShutdown(stop: { await server.close() }) {
            try await server.run(onRefused: { error in
                if let refusal = error as? TLSTrustError {
                    logger.warning("refused \(refusal.host): \(refusal.reason)",
                                   metadata: ["tls.peer": "\(refusal.host)", "tls.presentedPins": "\(refusal.presentedPins.map(\.description))"])
                } else {
                    logger.warning("connection failed: \(error)")
                }
            }, handler: handler)
        }
        logger.info("TLS server stopped")
    }
}

/// Runs `body` until it returns; a graceful shutdown of the group or the task's cancellation
/// calls `stop`, after which `body` is expected to return once its work in flight is done.
private func runUntilShutdown(stop: @escaping @Sendable () async -> Void, _ body: () async throws -> Void) async throws {
    try await withGracefulShutdownHandler {
        try await withTaskCancellationHandler {
            try await body()
        } onCancel: {
            Task { await stop() }
        }
    } onGracefulShutdown: {
        Task { await stop() }
    }
}
