import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import X509

/// Reads the chain a server presents, trusting nothing: the handshake is abandoned as soon as
/// the certificates arrive. For `tls pin HOST:PORT` and the live check of `tls lint`.
package enum ChainProbe {
    /// The certificates `host:port` presents, leaf first, in the order it sends them.
    ///
    /// - Parameters:
    ///   - serverName: the name sent as SNI; `host` by default.
    ///   - timeout: bounds the connection and the handshake.
    /// - Throws: ``PinnedTLSError`` when nothing arrives.
    package static func presentedChain(
        host: String, port: Int, serverName: String? = nil, timeout: TimeAmount = .seconds(10),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(PinnedTLSError) -> [Certificate] {
        let captured = NIOLockedValueBox<[NIOSSLCertificate]?>(nil)
        var configuration = TLSConfiguration.makeClientConfiguration()
        NIOBridge.restrictVersions(&configuration)
        configuration.certificateVerification = .noHostnameVerification
        configuration.trustRoots = .certificates([])
        let context: NIOSSLContext
        do { context = try NIOSSLContext(configuration: configuration) } catch {
            throw .connectionFailed(host: host, port: port, detail: "TLS context: \(error)")
        }
        let name = serverName ?? host
        let sni = ChainValidation.isIPAddress(name) ? nil : name
        do {
            let channel = try await ClientBootstrap(group: eventLoopGroup)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let callback: NIOSSLCustomVerificationCallback = { certificates, promise in
                            captured.withLockedValue { $0 = certificates }
                            promise.succeed(.failed)
                        }
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: context, serverHostname: sni,
                                                customVerificationCallback: callback))
                    }
                }
                .connect(host: host, port: port).get()
            let timer = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            try? await channel.closeFuture.get()
            timer.cancel()
        } catch {
            throw .connectionFailed(host: host, port: port, detail: "\(error)")
        }
        guard let presented = captured.withLockedValue({ $0 }), !presented.isEmpty else {
            throw .connectionFailed(host: host, port: port, detail: "the server presented no certificate")
        }
        switch NIOBridge.certificates(presented) {
        case .success(let chain): return chain
        case .failure(let reason): throw .connectionFailed(host: host, port: port, detail: reason.description)
        }
    }
}
