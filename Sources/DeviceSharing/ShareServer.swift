import Cipher
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PinnedTLS
import ProtectedFiles
import X509

/// Receives files from the group's devices over mutual TLS and stores each one in the inbox as
/// a protected file of class `completeUnlessOpen` (so receiving works while the vault is
/// locked, and reading needs an unlock).
///
/// A client must present a certificate issued by the group's root (the only anchor: never the
/// system roots) whose key is not revoked and, where this machine enrols the group's devices,
/// was enrolled here; both lists are read again for every connection, so a device revoked while
/// the server runs is refused from its next connection.
public final class ShareServer: Sendable {
    /// What happened to a connection.
    public enum Event: Sendable {
        /// A file was stored: the name it was stored under, its size, the sending device.
        case received(name: String, size: UInt64, from: String)
        /// A connection was refused or a transfer failed (nothing was stored).
        case refused(peer: String, ShareError)
    }

    /// How far a file being received got (see ``run(onEvent:onProgress:)``).
    public struct Progress: Sendable, Equatable {
        /// The name the sender offered.
        public var name: String
        /// The sending device.
        public var device: String
        /// The bytes received so far.
        public var received: UInt64
        /// The file's size.
        public var size: UInt64
    }

    /// Default and largest file size accepted: 64 GiB.
    public static let defaultMaxSize: UInt64 = 64 << 30
    /// The largest read from the socket.
    static let readSize = 256 * 1024
    /// After a refusal (a revoked sender, a refused offer, a failed transfer), how long and how
    /// many bytes of what the sender still sends are read and dropped (it stops as soon as the
    /// reply reaches it).
    static let refusalDrainTime: TimeAmount = .seconds(10)
    static let refusalDrainLimit = 64 << 20
    /// A connection that sends nothing for this long is dropped.
    public static let idleTimeout: TimeAmount = .seconds(30)
    /// A client that has not finished its handshake within this time is dropped (generous: a
    /// loaded machine, or one verifying chains in a debug build, takes seconds).
    public static let handshakeTimeout: TimeAmount = .seconds(30)

    private let listener: Listener
    private let inbox: String
    private let files: ProtectedFiles
    private let protection: FileProtectionClass
    private let isRevoked: @Sendable (String) -> Bool
    private let isEnrolled: @Sendable (String) -> Bool
    private let maxSize: UInt64
    private let idleLimit: TimeAmount

    /// The port the server listens on.
    public var port: Int {
        switch listener {
        case .mutualTLS(let server): server.port
        case .plainTCP(let channel): channel.channel.localAddress?.port ?? 0
        }
    }

    /// What accepts connections: mutual TLS always, except for the package's benchmark (see
    /// ``bindWithoutTLS(host:port:inbox:files:protection:maxSize:idleTimeout:)``).
    private enum Listener: Sendable {
        case mutualTLS(PinnedTLSServer)
        case plainTCP(NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>)
    }

    private init(listener: Listener, inbox: String, files: ProtectedFiles, protection: FileProtectionClass,
                 isRevoked: @escaping @Sendable (String) -> Bool, isEnrolled: @escaping @Sendable (String) -> Bool,
                 maxSize: UInt64, idleLimit: TimeAmount) {
        self.listener = listener
        self.inbox = inbox
        self.files = files
        self.protection = protection
        self.isRevoked = isRevoked
        self.isEnrolled = isEnrolled
        self.maxSize = maxSize
        self.idleLimit = idleLimit
    }

    /// Listens on `host:port`.
    /// - Parameters:
    ///   - host: the address to listen on (default loopback).
    ///   - port: the port to listen on (0: one the system picks).
    ///   - membership: this device's identity and the group root.
    ///   - inbox: the directory received files go to (created 0700).
    ///   - files: the vault's protected files.
    ///   - protection: the class of received files (default `completeUnlessOpen`).
    ///   - isRevoked: whether a `sha256/` pin is revoked (asked for each client; answer true when
    ///     the list cannot be read).
    ///   - isEnrolled: whether a `sha256/` pin belongs to a device enrolled in the group
    ///     (``ShareGroup/isEnrolled(pin:)``; asked for each client that is not revoked; answer
    ///     false when the list cannot be read). A client it refuses gets reply status 2 (refused).
    ///   - maxSize: the largest file accepted.
    ///   - idleTimeout: a client that sends nothing for this long is disconnected.
    /// - Returns: the listening server; ``run(onEvent:onProgress:)`` serves it.
    /// - Throws: ``ShareError/connectionFailed(_:)`` when it cannot listen, ``ShareError/io(path:detail:)``.
    public static func bind(
        host: String = "127.0.0.1", port: Int = 0, membership: ShareMembership, inbox: String, files: ProtectedFiles,
        protection: FileProtectionClass = .completeUnlessOpen, isRevoked: @escaping @Sendable (String) -> Bool,
        isEnrolled: @escaping @Sendable (String) -> Bool,
        maxSize: UInt64 = defaultMaxSize, idleTimeout: TimeAmount = ShareServer.idleTimeout
    ) async throws(ShareError) -> ShareServer {
        try prepare(inbox: inbox)
        let server: PinnedTLSServer
        do {
            server = try await PinnedTLSServer.bind(
                host: host, port: port, identity: membership.identity,
                clientAuthentication: ClientAuthentication(anchors: .only([membership.root])),
                handshakeTimeout: handshakeTimeout)
        } catch {
            throw .connectionFailed("cannot listen on \(host):\(port): \(error)")
        }
        return ShareServer(listener: .mutualTLS(server), inbox: inbox, files: files, protection: protection,
                           isRevoked: isRevoked, isEnrolled: isEnrolled, maxSize: maxSize, idleLimit: idleTimeout)
    }

    private static func prepare(inbox: String) throws(ShareError) {
        // A writer that fails closes its pipe; the next write must fail, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        _ = AllocatorTuning.bulkTransfers
        do {
            try SecureFileAccess.ensureDirectory(inbox)
        } catch {
            throw .io(path: inbox, detail: "\(error)")
        }
        IncomingFile.removeLeftovers(in: inbox)
    }

    /// The same receiver over plain TCP, without TLS: no encryption on the wire and no peer
    /// identity (anyone who connects may store a file). For this package's benchmark only, to
    /// measure what TLS itself costs: not part of the public API nor of the command line. The
    /// wire format, the receiving task, the protected-file writer, the digest check and the
    /// commit are those of ``bind(host:port:membership:inbox:files:protection:isRevoked:isEnrolled:maxSize:idleTimeout:)``.
    package static func bindWithoutTLS(
        host: String = "127.0.0.1", port: Int = 0, inbox: String, files: ProtectedFiles,
        protection: FileProtectionClass = .completeUnlessOpen, maxSize: UInt64 = defaultMaxSize,
        idleTimeout: TimeAmount = ShareServer.idleTimeout
    ) async throws(ShareError) -> ShareServer {
        try prepare(inbox: inbox)
        let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
        do {
            listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.recvAllocator, value: receiveAllocator)
                .bind(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw .connectionFailed("cannot listen on \(host):\(port): \(error)")
        }
        return ShareServer(listener: .plainTCP(listener), inbox: inbox, files: files, protection: protection,
                           isRevoked: { _ in false }, isEnrolled: { _ in true }, maxSize: maxSize, idleLimit: idleTimeout)
    }

    /// Larger reads than NIO's default (at most 64 KiB): fewer system calls, and the TLS layer
    /// hands over larger pieces of plaintext. Memory stays bounded: the channel stops reading
    /// while the pieces the transfer has not taken yet fill its buffer.
    static var receiveAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 64 * 1024, maximum: readSize)
    }

    /// Serves until ``close()``.
    /// - Parameters:
    ///   - onEvent: told what happened to each connection.
    ///   - onProgress: told, for each file being received, the bytes received so far: once the
    ///     offer is read, then after each piece (as often as the connection delivers them).
    /// - Throws: the listener's failure (a SwiftNIO error) when accepting connections fails; a
    ///   connection's failure is reported to `onEvent`, not thrown.
    public func run(onEvent: @escaping @Sendable (Event) -> Void = { _ in },
                    onProgress: (@Sendable (Progress) -> Void)? = nil) async throws {
        guard case .mutualTLS(let server) = listener else {
            return try await runWithoutTLS(onEvent: onEvent)
        }
        try await server.run(onRefused: { error in
            if let refusal = error as? TLSTrustError {
                onEvent(.refused(peer: refusal.host, .peerRefused(refusal.reason.description)))
            } else {
                onEvent(.refused(peer: "client", .connectionFailed("\(error)")))
            }
        }) { connection in
            await self.serve(connection, onProgress: onProgress, onEvent: onEvent)
        }
    }

    /// Stops listening.
    public func close() async {
        switch listener {
        case .mutualTLS(let server): await server.close()
        case .plainTCP(let channel): try? await channel.channel.close()
        }
    }

    /// Accepts plain TCP connections until ``close()`` and receives on each one as ``run(onEvent:onProgress:)``
    /// does after the handshake and the identity checks.
    private func runWithoutTLS(onEvent: @escaping @Sendable (Event) -> Void) async throws {
        guard case .plainTCP(let listener) = listener else { return }
        try await listener.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { group in
                for try await channel in inbound {
                    group.addTask {
                        let peer = channel.channel.remoteAddress?.description ?? "client"
                        await self.receive(on: channel, peer: peer, device: "(plain TCP, no identity)", onProgress: nil,
                                           onEvent: onEvent)
                        try? await channel.executeThenClose { _, _ in }
                    }
                }
            }
        }
    }

    private func serve(_ connection: PinnedTLSServer.Connection, onProgress: (@Sendable (Progress) -> Void)?,
                       onEvent: @Sendable (Event) -> Void) async {
        let peer = connection.remoteAddress
        guard let leaf = connection.peerChain?.first else {
            onEvent(.refused(peer: peer, .peerRefused("the peer presented no certificate")))
            return
        }
        let device = ShareGroup.deviceNames(of: leaf).first ?? "?"
        let pin: String
        do { pin = try ShareGroup.pin(leaf) } catch {
            onEvent(.refused(peer: peer, error))
            return
        }
        if isRevoked(pin) {
            await refuse(connection, ShareWire.Reply(status: .revoked, text: device))
            onEvent(.refused(peer: "\(device) (\(peer))", .revoked(device: device)))
            return
        }
        if !isEnrolled(pin) {
            // A certificate of the group's root that no enrolment here issued (or a members list
            // that cannot be read): refused, fail closed.
            let reason = "the device \(device) (\(pin)) is not enrolled in the receiver's group: enrol it with `share invite` and `share join` on the machine that holds the group root"
            await refuse(connection, ShareWire.Reply(status: .refused, text: reason))
            onEvent(.refused(peer: "\(device) (\(peer))", .peerRefused(reason)))
            return
        }
        try? await connection.channel.channel.setOption(ChannelOptions.recvAllocator, value: Self.receiveAllocator).get()
        let raw = connection.channel.channel
        try? await raw.eventLoop.submit {
            let pipeline = raw.pipeline.syncOperations
            let tls = try pipeline.context(handlerType: NIOSSLServerHandler.self)
            try pipeline.addHandler(PlaintextHandOff(), position: .after(tls.handler))
        }.get()
        await receive(on: connection.channel, peer: peer, device: device, onProgress: onProgress, onEvent: onEvent)
    }

    /// Refuses a sender before using anything it sent: writes the reply (flushed), then closes
    /// this side's output and reads and drops what the sender still sends until it hangs up
    /// (``drain(_:channel:)``), so that closing does not reset the connection and with it the
    /// reply on its way; bounded in bytes and time.
    private func refuse(_ connection: PinnedTLSServer.Connection, _ reply: ShareWire.Reply) async {
        let raw = connection.channel.channel
        try? await connection.channel.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            do {
                try await outbound.write(ByteBuffer(bytes: reply.encoded))
            } catch {
                // The sender is gone already: nothing to tell it.
                return
            }
            await Self.drain(&iterator, channel: raw)
        }
    }

    /// Reads the offer, the bytes and the end marker (or, from older senders, the digest) from
    /// an accepted (and, over TLS, checked) connection, stores the file and replies.
    private func receive(on channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, peer: String, device: String,
                         onProgress: (@Sendable (Progress) -> Void)?, onEvent: @Sendable (Event) -> Void) async {
        do {
            try await channel.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                let idle = IdleWatch(channel: channel.channel, timeout: idleLimit)
                defer { idle.cancel() }
                var buffer: [UInt8] = []
                var offer: ShareWire.Offer?
                var consumed = 0
                do {
                    while offer == nil {
                        guard var chunk = try await idle.next(&iterator) else {
                            throw ShareError.protocolViolation("the connection ended before the offer")
                        }
                        buffer += chunk.readBytes(length: chunk.readableBytes) ?? []
                        if case let .complete(parsed, used) = try ShareWire.parseOffer(buffer, maxSize: maxSize) {
                            offer = parsed
                            consumed = used
                        }
                    }
                } catch let error as ShareError {
                    let status: ShareWire.Reply.Status = .refused
                    try? await outbound.write(ByteBuffer(bytes: ShareWire.Reply(status: status, text: error.description).encoded))
                    await Self.drain(&iterator, channel: channel.channel)
                    throw error
                }
                guard let offer else { return }
                let incoming = try IncomingFile(offer: offer, inbox: inbox, files: files, protection: protection)
                func report() {
                    onProgress?(Progress(name: offer.name, device: device, received: min(incoming.received, offer.size),
                                         size: offer.size))
                }
                do {
                    try buffer[consumed...].withUnsafeBytes { try incoming.append($0) }
                    buffer = []
                    report()
                    while !incoming.isComplete {
                        guard let chunk = try await idle.next(&iterator) else {
                            throw ShareError.protocolViolation(incoming.received < offer.size
                                ? "the connection ended after \(incoming.received) of \(offer.size) bytes"
                                : offer.version == 2 ? "the connection ended before the digest that follows the bytes"
                                : "the connection ended before the end marker that follows the bytes (the sender stopped, or the file changed while it was sent)")
                        }
                        try chunk.withUnsafeReadableBytes { try incoming.append($0) }
                        if onProgress != nil { report() }
                    }
                    let stored = try incoming.finish()
                    try await outbound.write(ByteBuffer(bytes: ShareWire.Reply(status: .stored, text: stored).encoded))
                    onEvent(.received(name: stored, size: offer.size, from: device))
                } catch {
                    incoming.abort()
                    let shareError = error as? ShareError ?? .connectionFailed("\(error)")
                    let status: ShareWire.Reply.Status = shareError == .digestMismatch ? .digestMismatch : .failed
                    try? await outbound.write(ByteBuffer(bytes: ShareWire.Reply(status: status, text: shareError.description).encoded))
                    await Self.drain(&iterator, channel: channel.channel)
                    throw shareError
                }
            }
        } catch {
            onEvent(.refused(peer: "\(device) (\(peer))", error as? ShareError ?? .connectionFailed("\(error)")))
        }
    }

}

extension ShareServer {
    /// After a refusal has been written: closes this side's output (TLS close_notify, then the
    /// TCP half-close), so the peer sees the reply end, and reads and drops what the peer still
    /// sends until it hangs up (at most ``refusalDrainLimit`` bytes and ``refusalDrainTime``):
    /// closing with unread bytes would reset the connection and could drop the reply on its way
    /// to the sender, which stops sending as soon as the reply reaches it.
    static func drain(_ iterator: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator, channel: any Channel) async {
        try? await channel.close(mode: .output).get()
        let deadline = channel.eventLoop.scheduleTask(in: refusalDrainTime) { channel.close(promise: nil) }
        defer { deadline.cancel() }
        var dropped = 0
        do {
            while let chunk = try await iterator.next() {
                dropped += chunk.readableBytes
                if dropped > refusalDrainLimit { break }
            }
        } catch {
            // The connection ended (reset or closed): nothing left to drop.
        }
    }
}

/// Hands each piece of plaintext on in a buffer of its own, so the TLS handler's buffer is free
/// again at once. The TLS handler decrypts into one growing buffer and, once it handed a piece
/// on, writes the next into the same storage: while the piece waits for the task that hashes
/// and stores it (the normal case in bulk), that write copied the storage's whole capacity
/// (often several times the piece) into a fresh allocation, every time. Copying the piece
/// itself here costs its size once.
final class PlaintextHandOff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let piece = unwrapInboundIn(data)
        var copy = context.channel.allocator.buffer(capacity: piece.readableBytes)
        copy.writeImmutableBuffer(piece)
        context.fireChannelRead(wrapInboundOut(copy))
    }
}

/// Closes a connection whose peer sent nothing for `timeout`. One repeated check per second on
/// the channel's event loop; each chunk received only records the time (scheduling and
/// cancelling a timer per chunk cost two event-loop hops each, thousands per second in bulk).
final class IdleWatch: Sendable {
    private let last = NIOLockedValueBox<NIODeadline>(.now())
    private let task: RepeatedTask

    init(channel: any Channel, timeout: TimeAmount) {
        let last = self.last
        let period = min(timeout, .seconds(1))
        task = channel.eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { task in
            if NIODeadline.now() - last.withLockedValue({ $0 }) >= timeout {
                channel.close(promise: nil)
                task.cancel()
            }
        }
    }

    /// The peer just sent something (or this side just finished working on it).
    func touch() { last.withLockedValue { $0 = .now() } }

    func cancel() { task.cancel() }

    /// The next chunk, or nil at the end.
    func next(_ iterator: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator) async throws -> ByteBuffer? {
        touch()
        let chunk = try await iterator.next()
        touch()
        return chunk
    }
}

/// Directory helpers.
enum SecureFileAccess {
    static func ensureDirectory(_ path: String) throws {
        try Cipher.SecureFile.ensurePrivateDirectory(path)
    }
}
