import Cipher
import Foundation
import NIOCore
import NIOPosix
import PinnedTLS
import NIOConcurrencyHelpers
import X509

/// Sends files to a device of the group over mutual TLS.
///
/// The receiver must present a certificate issued by the group's root (the only anchor) that
/// carries the group's member name, whose key is not revoked, and, when a device name is given,
/// that names that device.
public struct ShareClient: Sendable {
    /// What ``send(_:to:port:as:device:timeout:progress:)`` reports.
    public struct Sent: Sendable, Equatable {
        /// The name the receiver stored the file under.
        public var storedName: String
        /// The bytes sent.
        public var size: UInt64
        /// The receiving device's name.
        public var device: String
    }

    /// The chunk size of reads and writes.
    package static let chunkSize = 256 * 1024

    private let isRevoked: @Sendable (String) -> Bool
    /// Mutual TLS always, except for the package's benchmark (see ``init(withoutTLS:)``).
    private let client: PinnedTLSClient?

    /// - Parameters:
    ///   - membership: this device's identity and the group root.
    ///   - isRevoked: whether a `sha256/` pin is revoked.
    /// - Throws: ``ShareError/storage(_:)`` when this device's identity cannot be used for TLS.
    public init(membership: ShareMembership, isRevoked: @escaping @Sendable (String) -> Bool) throws(ShareError) {
        self.isRevoked = isRevoked
        _ = AllocatorTuning.bulkTransfers
        let pattern: HostPattern
        do {
            pattern = try HostPattern(ShareGroup.memberName)
        } catch {
            throw .storage("\(error)")
        }
        let policy = TrustPolicy(hosts: [HostPolicy(pattern: pattern, anchors: .only([membership.root]))], defaultAnchors: nil)
        do {
            client = try PinnedTLSClient(policy: policy, identity: membership.identity)
        } catch {
            throw .storage("this device's identity cannot be used for TLS: \(error)")
        }
    }

    /// The same sender over plain TCP, without TLS: no encryption on the wire and no check of
    /// the receiver's identity. For this package's benchmark only, to measure what TLS itself
    /// costs: not part of the public API nor of the command line. The wire format, the file
    /// reading, the hashing and the reply are those of the mutual TLS sender.
    package init(withoutTLS: Void) {
        isRevoked = { _ in true }
        client = nil
        _ = AllocatorTuning.bulkTransfers
    }

    /// Sends the file at `path`.
    /// - Parameters:
    ///   - path: the file to send.
    ///   - host: the receiver's address.
    ///   - port: its port.
    ///   - name: the name to offer (default: the file's last path component).
    ///   - device: the receiving device's name, if it must be that one.
    ///   - timeout: the bound on connecting, the handshake and waiting for the reply, and on a
    ///     receiver that takes none of the file's bytes while they are sent.
    ///   - progress: called with the bytes sent so far and the total.
    /// - Throws: ``ShareError``.
    /// - Returns: the name the receiver stored the file under, the bytes sent and the receiving device's name.
    @discardableResult
    public func send(_ path: String, to host: String, port: Int, as name: String? = nil, device: String? = nil,
                     timeout: Duration = .seconds(30),
                     progress: @escaping @Sendable (UInt64, UInt64) -> Void = { _, _ in }) async throws(ShareError) -> Sent {
        let components = timeout.components
        let timeout = TimeAmount.nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
        let offeredName = name ?? (path as NSString).lastPathComponent
        try ShareWire.checkName(offeredName)
        // The file is opened (and its size taken) before connecting; the end marker follows its
        // bytes once all were read and the file did not change (offer version 3).
        let file = try SourceFile(path)
        let size = file.size
        let offer = try ShareWire.Offer(name: offeredName, size: size)
        guard let client else {
            return try await transfer(over: try await Self.connectWithoutTLS(host: host, port: port, timeout: timeout),
                                      file: file, offer: offer, device: "(plain TCP, no identity)", timeout: timeout,
                                      progress: progress)
        }
        let connection: PinnedTLSConnection
        do {
            connection = try await client.connect(host: host, port: port, serverName: ShareGroup.memberName, timeout: timeout)
        } catch let error as TLSTrustError {
            throw .peerRefused(error.reason.description)
        } catch {
            throw .connectionFailed("\(error)")
        }
        guard let leaf = connection.peerChain.first else { throw .peerRefused("no certificate") }
        let names = ShareGroup.deviceNames(of: leaf)
        let found = names.first ?? "?"
        do {
            if isRevoked(try ShareGroup.pin(leaf)) { throw ShareError.revoked(device: found) }
            if let device, !names.contains(device.lowercased()) {
                throw ShareError.deviceMismatch(expected: device, found: names)
            }
        } catch {
            try? await connection.channel.channel.close()
            try? await connection.channel.executeThenClose { _, _ in }
            throw error as? ShareError ?? .peerRefused("\(error)")
        }
        return try await transfer(over: connection.channel, file: file, offer: offer, device: found, timeout: timeout,
                                  progress: progress)
    }

    /// Sends the file at `path` to a peer found by ``ShareDiscovery/browse(for:)``, at its first
    /// address. The discovery proves nothing: the receiver is checked exactly as by
    /// ``send(_:to:port:as:device:timeout:progress:)`` (the group's root, the member name, not
    /// revoked, and `device` if given); a service of another group is refused by the handshake.
    /// - Parameters:
    ///   - path: the file to send.
    ///   - peer: the receiver, as discovered.
    ///   - name: the name to offer (default: the file's last path component).
    ///   - device: the receiving device's name, if it must be that one.
    ///   - timeout: as for ``send(_:to:port:as:device:timeout:progress:)``.
    ///   - progress: called with the bytes sent so far and the total.
    /// - Returns: the name the receiver stored the file under, the bytes sent and the receiving device's name.
    /// - Throws: the errors of ``send(_:to:port:as:device:timeout:progress:)``.
    @discardableResult
    public func send(_ path: String, to peer: DiscoveredPeer, as name: String? = nil, device: String? = nil,
                     timeout: Duration = .seconds(30),
                     progress: @escaping @Sendable (UInt64, UInt64) -> Void = { _, _ in }) async throws(ShareError) -> Sent {
        try await send(path, to: peer.address, port: peer.port, as: name, device: device, timeout: timeout, progress: progress)
    }

    /// Who a discovered peer is: connects, checks its certificate as ``send(_:to:as:device:timeout:progress:)``
    /// does (the group's root and member name; the revocation list is not applied, so a revoked
    /// device is reported as such) and hangs up without sending anything.
    /// - Returns: the device's name, its `sha256/` pin, and whether that pin is revoked here.
    /// - Throws: ``ShareError/peerRefused(_:)`` (not of this group), ``ShareError/connectionFailed(_:)``.
    /// - Parameters:
    ///   - peer: the peer to ask.
    ///   - timeout: the bound on connecting and the handshake.
    public func identify(_ peer: DiscoveredPeer, timeout: Duration = .seconds(10)) async throws(ShareError)
        -> (device: String, pin: String, revoked: Bool) {
        guard let client else { throw .peerRefused("no identity") }
        let components = timeout.components
        let amount = TimeAmount.nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
        let connection: PinnedTLSConnection
        do {
            connection = try await client.connect(host: peer.address, port: peer.port, serverName: ShareGroup.memberName, timeout: amount)
        } catch let error as TLSTrustError {
            throw .peerRefused(error.reason.description)
        } catch {
            throw .connectionFailed("\(error)")
        }
        try? await connection.channel.channel.close()
        try? await connection.channel.executeThenClose { _, _ in }
        guard let leaf = connection.peerChain.first else { throw .peerRefused("no certificate") }
        let pin = try ShareGroup.pin(leaf)
        return (ShareGroup.deviceNames(of: leaf).first ?? "?", pin, isRevoked(pin))
    }

    /// Connects over plain TCP (the benchmark's transport only).
    private static func connectWithoutTLS(host: String, port: Int, timeout: TimeAmount) async throws(ShareError)
        -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        do {
            return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(timeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw .connectionFailed("\(error)")
        }
    }

    /// Sends the offer, the bytes and the end marker over an established (and, over TLS, checked)
    /// connection, and waits for the receiver's reply.
    ///
    /// The reply is read from the start, beside the sending: a receiver that refuses this device
    /// (revoked) replies at once, before reading anything, and the sender stops as soon as that
    /// reply is in, whatever it was still sending. The receiver reads on until the sender hangs
    /// up, so the connection is never reset under the reply: the refusal is the outcome every time.
    private func transfer(over connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, file: SourceFile,
                          offer: ShareWire.Offer, device found: String, timeout: TimeAmount,
                          progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws(ShareError) -> Sent {
        let size = offer.size
        let channel = connection.channel
        // Up to 1 MiB of encrypted bytes may wait for the socket before a write waits (NIO's
        // default is 64 KiB): the task reading and hashing the file runs ahead of the event
        // loop encrypting and sending, on another core.
        try? await channel.setOption(ChannelOptions.writeBufferWaterMark,
                                     value: .init(low: Self.chunkSize, high: 4 * Self.chunkSize)).get()
        // A receiver that stops reading would hold a write, and with it the sender, for ever:
        // when it takes no byte for `timeout`, the connection is closed.
        let watch = SendWatch()
        let watchdog = channel.eventLoop.scheduleRepeatedTask(initialDelay: timeout, delay: timeout) { _ in
            if watch.idle() { channel.close(promise: nil) }
        }
        defer { watchdog.cancel() }
        let idleSeconds = timeout.nanoseconds / 1_000_000_000
        do {
            return try await connection.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: TransferStep.self) { group in
                    group.addTask { .replied(try await Self.readReply(inbound)) }
                    group.addTask {
                        do {
                            try await self.sendBytes(outbound, file: file, offer: offer, channel: channel, watch: watch, progress: progress)
                            return .sent
                        } catch let error as ShareError {
                            return .failedHere(error)
                        } catch {
                            return .writeFailed("\(error)")
                        }
                    }
                    var sent = false
                    var writeFailure: String?
                    var timer: Scheduled<Void>?
                    defer { timer?.cancel() }
                    while true {
                        let next: TransferStep?
                        do {
                            next = try await group.next()
                        } catch {
                            // Bytes that are not a reply: nothing more to send or read.
                            channel.close(promise: nil)
                            throw error
                        }
                        guard let step = next else { break }
                        switch step {
                        case .replied(let reply):
                            // Whatever is still being sent is of no use now.
                            if !sent { channel.close(promise: nil) }
                            group.cancelAll()
                            guard let reply else {
                                if watch.stalled {
                                    throw ShareError.connectionFailed("the receiver took none of the file's bytes for \(idleSeconds) s; nothing was stored (is it still running? try again)")
                                }
                                if let writeFailure { throw ShareError.connectionFailed(writeFailure) }
                                if watch.timedOut {
                                    // This side gave up: not a refusal, and the file may yet be stored.
                                    throw ShareError.connectionFailed("no reply from the receiver within \(idleSeconds) s after the file was sent; it may be overloaded or still storing the file (look in its inbox before sending again, or raise --timeout)")
                                }
                                throw ShareError.connectionFailed("the receiver closed the connection without a reply (it may have refused this device)")
                            }
                            switch reply.status {
                            case .stored:
                                guard sent else { throw ShareError.protocolViolation("the receiver replied \"stored\" before the file was sent") }
                                return Sent(storedName: reply.text, size: size, device: found)
                            case .digestMismatch: throw ShareError.digestMismatch
                            case .refused, .failed: throw ShareError.rejected(reply.text)
                            case .revoked:
                                // This device is revoked in the receiver's group.
                                throw ShareError.revoked(device: reply.text)
                            }
                        case .sent:
                            sent = true
                            watchdog.cancel()
                            // The reply is awaited for `timeout` at most.
                            timer = channel.eventLoop.scheduleTask(in: timeout) {
                                watch.replyTimedOut()
                                channel.close(promise: nil)
                            }
                        case .failedHere(let error):
                            // This side failed (the file changed or could not be read): that is the outcome.
                            channel.close(promise: nil)
                            group.cancelAll()
                            throw error
                        case .writeFailed(let detail):
                            // The connection broke while the bytes went out, typically because the
                            // receiver refused early and hung up: its reply may still be on its
                            // way, so the channel is not closed here. The reader gets the reply,
                            // or the end of the connection (the transport closes a channel whose
                            // write failed once it has read what was left), within `timeout` at most.
                            writeFailure = detail
                            if timer == nil {
                                timer = channel.eventLoop.scheduleTask(in: timeout) {
                                    watch.replyTimedOut()
                                    channel.close(promise: nil)
                                }
                            }
                        }
                    }
                    throw ShareError.connectionFailed("the transfer ended without a reply")
                }
            }
        } catch let error as ShareError {
            throw error
        } catch {
            throw .connectionFailed("\(error)")
        }
    }

    /// Whether the connection took any of the file's bytes between two looks of the watchdog.
    final class SendWatch: Sendable {
        // A lock rather than `Synchronization.Atomic`, which needs macOS 15 and iOS 18.
        private struct Counts {
            /// Writes the connection accepted so far.
            var writes: UInt64 = 0
            /// The count the watchdog saw last.
            var seen: UInt64 = 0
            var stalled = false
            var replyTimedOut = false
        }
        private let counts = NIOLockedValueBox(Counts())

        /// A write was accepted.
        func advanced() { counts.withLockedValue { $0.writes &+= 1 } }

        /// The watchdog's look: true (and marked stalled) when no write was accepted since the last.
        func idle() -> Bool {
            counts.withLockedValue { counts in
                guard counts.seen == counts.writes else {
                    counts.seen = counts.writes
                    return false
                }
                counts.stalled = true
                return true
            }
        }

        /// Whether the watchdog closed the connection.
        var stalled: Bool { counts.withLockedValue { $0.stalled } }

        /// The wait for the reply ran out and this side closed the connection.
        func replyTimedOut() { counts.withLockedValue { $0.replyTimedOut = true } }

        /// Whether this side closed the connection because no reply came in time.
        var timedOut: Bool { counts.withLockedValue { $0.replyTimedOut } }
    }

    /// What one side of a transfer (sending, or reading the reply) came to.
    private enum TransferStep: Sendable {
        /// The reply, or nil when the connection ended without one.
        case replied(ShareWire.Reply?)
        /// Every byte and the end marker were handed to the connection.
        case sent
        /// Sending stopped for a reason of this side (the file).
        case failedHere(ShareError)
        /// A write failed: the connection broke.
        case writeFailed(String)
    }

    /// Reads the receiver's reply: nil when the connection ends (or breaks) without a complete one.
    /// - Throws: ``ShareError/protocolViolation(_:)`` for bytes that are not a reply.
    private static func readReply(_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>) async throws(ShareError) -> ShareWire.Reply? {
        var buffer: [UInt8] = []
        do {
            for try await var part in inbound {
                buffer += part.readBytes(length: part.readableBytes) ?? []
                if case let .complete(reply, _) = try ShareWire.parseReply(buffer) { return reply }
            }
        } catch let error as ShareError {
            throw error
        } catch {
            // The connection broke (reset, closed under a write): no reply.
        }
        return nil
    }

    /// Sends the offer, the file's bytes, then the end marker (offer version 3). A file that
    /// changes while it is sent ends the transfer without the marker: the receiver stores
    /// nothing.
    private func sendBytes(_ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, file: SourceFile, offer: ShareWire.Offer,
                           channel: any Channel, watch: SendWatch, progress: @Sendable (UInt64, UInt64) -> Void) async throws {
        let size = offer.size
        try await outbound.write(ByteBuffer(bytes: offer.encoded))
        watch.advanced()
        var sent: UInt64 = 0
        progress(0, size)
        while sent < size {
            let want = Int(min(UInt64(Self.chunkSize), size - sent))
            // Read straight into the buffer handed to the channel: no copy in between.
            var chunk = channel.allocator.buffer(capacity: want)
            var count = 0
            var failure: Int32 = 0
            chunk.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { target in
                count = read(file.fd, target.baseAddress, want)
                failure = count < 0 ? errno : 0
                return max(0, count)
            }
            if failure == EINTR { continue }
            guard count > 0 else {
                let detail = count < 0 ? String(cString: strerror(failure)) : "the file changed while it was sent (\(sent) of \(size) bytes read)"
                throw ShareError.io(path: file.path, detail: detail)
            }
            try Task.checkCancellation()
            try await outbound.write(chunk)
            watch.advanced()
            sent += UInt64(count)
            progress(sent, size)
        }
        try file.checkUnchanged()
        try await outbound.write(ByteBuffer(bytes: ShareWire.endMarker))
    }

    /// The file being sent: open, a regular file, and what identifies its contents.
    final class SourceFile: Sendable {
        let path: String
        let fd: Int32
        let size: UInt64
        private let stamp: [Int64]

        init(_ path: String) throws(ShareError) {
            self.path = path
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw .io(path: path, detail: String(cString: strerror(errno))) }
            guard let info = try? FileCalls.status(fd), info.isRegularFile else {
                close(fd)
                throw .io(path: path, detail: "not a regular file")
            }
            size = UInt64(info.size)
            stamp = Self.stamp(info)
        }

        deinit { close(fd) }

        static func stamp(_ info: FileStatus) -> [Int64] {
            [info.size, info.modified.seconds, info.modified.nanoseconds, info.changed.seconds, info.changed.nanoseconds]
        }

        /// Throws when the file was written to since it was opened (its size or times moved).
        func checkUnchanged() throws(ShareError) {
            guard let info = try? FileCalls.status(fd), Self.stamp(info) == stamp else {
                throw .io(path: path, detail: "the file changed while it was sent: nothing was stored, send it again")
            }
        }
    }
}
