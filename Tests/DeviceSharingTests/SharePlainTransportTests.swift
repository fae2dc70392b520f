import Crypto
import Foundation
import NIOCore
import NIOPosix
import ProtectedFiles
import Testing
import TestSupport
@testable import DeviceSharing

/// The benchmark's transport: the same receiver and sender without the TLS handler. The wire
/// format, the protected-file writer, the digest check and the commit are the same, so the same
/// checks run.
@Suite("Sharing over plain TCP (the benchmark's transport)", .serialized, .onOwnThreads)
struct SharePlainTransportTests {
    /// Runs `body` with a plain-TCP share server of `device` listening on loopback.
    func withPlainServer(_ device: TestDevice, _ body: @Sendable (Int, EventLog) async throws -> Void) async throws {
        try await serving(try await ShareServer.bindWithoutTLS(inbox: device.inbox, files: device.files), body)
    }

    /// A receiver that stops taking bytes (here a listener that never accepts: the kernel
    /// buffers what fits, then nothing moves) ends the send after the timeout, with a message
    /// that says so, instead of holding the sender for ever.
    // The limit guards against a hang only: the send ends a second or two after the buffers
    // fill, but a loaded machine running the whole suite on two cores has taken over a minute
    // to schedule it.
    @Test(.timeLimit(.minutes(5)))
    func aReceiverThatTakesNothingEndsTheSendAfterTheTimeout() async throws {
        let directory = try TemporaryDirectory(prefix: "share-stall")
        // Far more than both sockets' buffers and the connection's 1 MiB can hold.
        let path = directory.path("large.raw")
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        #expect(truncate(path, 256 << 20) == 0)
        let listener = try #require(LoopbackSocket.listening())
        await #expect(throws: ShareError.connectionFailed(
            "the receiver took none of the file's bytes for 1 s; nothing was stored (is it still running? try again)")) {
            try await ShareClient(withoutTLS: ()).send(path, to: "127.0.0.1", port: listener.port, timeout: .seconds(1))
        }
        withExtendedLifetime(listener) {}
    }

    @Test func aFileIsStoredIntactAsAProtectedFile() async throws {
        let a = try TestDevice(), b = try TestDevice()
        // Larger than several read chunks, and not a whole number of them.
        let bytes = content(3 * ShareClient.chunkSize + 12_345)
        let path = try b.write("photo.raw", bytes)
        a.manager.lock()
        try await withPlainServer(a) { port, log in
            let sent = try await ShareClient(withoutTLS: ()).send(path, to: "127.0.0.1", port: port, timeout: .seconds(60))
            #expect(sent == ShareClient.Sent(storedName: "photo.raw", size: UInt64(bytes.count), device: "(plain TCP, no identity)"))
            let events = await log.wait(for: 1)
            #expect(events.count == 1)
            #expect(log.refusals.isEmpty)
        }
        #expect(a.inboxNames() == ["photo.raw"])
        let stored = a.inbox + "/photo.raw"
        #expect(throws: ProtectedFileError.locked(.completeUnlessOpen, .locked)) { _ = try a.files.read(at: stored) }
        try await a.manager.unlock(passcode: a.passcode)
        #expect(try a.files.read(at: stored) == bytes)
        #expect(try a.files.protection(ofItemAt: stored) == .completeUnlessOpen)
    }

    @Test func aWrongDigestIsRefusedAndNothingIsStored() async throws {
        let a = try TestDevice()
        let bytes = content(150_000)
        try await withPlainServer(a) { port, log in
            let offer = try ShareWire.Offer.version2(name: "b.bin", size: UInt64(bytes.count))
            var digest = Array(SHA256.hash(data: bytes))
            digest[31] ^= 1
            try await expectDigestMismatch(try await Self.exchange(port: port, offer.encoded + bytes + digest), log)
        }
        #expect(a.everyInboxFile().isEmpty, "\(a.everyInboxFile())")
    }

    /// Writes `bytes` over plain TCP and returns everything the server sent back until it closed
    /// (bounded: the server's idle timeout, and at most 64 KiB).
    static func exchange(port: Int, _ bytes: [UInt8]) async throws -> [UInt8] {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(30))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: bytes))
            var reply: [UInt8] = []
            for try await var part in inbound {
                reply += part.readBytes(length: part.readableBytes) ?? []
                if reply.count > 65_536 { break }
            }
            return reply
        }
    }
}
