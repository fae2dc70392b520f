import Cipher
import Crypto
import Foundation
import HardwareKeys
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinnedTLS
import SwiftASN1
import X509

/// Enrolment over the network (docs/SHARING.md, "Enrolment over the network"): the inviter
/// serves its invitations with ``ShareEnrolmentServer``; the new machine joins with
/// ``ShareEnrolment/join(invitation:deviceName:host:port:now:timeout:deviceKey:)``.
///
/// The invitation authenticates both sides. The joiner trusts the group root carried in the
/// invitation only, so only a machine holding a certificate of that root can answer; the
/// inviter accepts a request only with an HMAC under the invitation's one-time secret, bound to
/// the server's fresh challenge and certificate. The secret never travels, not even inside TLS;
/// an invitation is used once and expires.
///
/// ```
/// challenge (server): "SFJC" | version u8 (1) | nonce (32)
/// request (client):   "SFJR" | version u8 (1) | invitation id (16) | name length u8 (1...63) | name
///                     | key length u16 BE (1...1024) | SubjectPublicKeyInfo DER | HMAC-SHA256 (32)
/// answer (server):    "SFJA" | version u8 (1) | status u8 (0 issued, 1 refused)
///                     | text length u16 BE (0...16384) | text (the certificate chain, PEM; or why not)
/// ```
public enum NetworkEnrolment {
    static let challengeMagic: [UInt8] = Array("SFJC".utf8)
    static let requestMagic: [UInt8] = Array("SFJR".utf8)
    static let answerMagic: [UInt8] = Array("SFJA".utf8)
    static let version: UInt8 = 1
    static let maxText = 16384
    static let maxKey = 1024

    /// What the request's MAC is bound to: the challenge and the SHA-256 of the server's leaf.
    static func binding(nonce: [UInt8], serverLeaf: [UInt8]) -> [UInt8] {
        nonce + Array(SHA256.hash(data: serverLeaf))
    }

    static func challenge(_ nonce: [UInt8]) -> [UInt8] { challengeMagic + [version] + nonce }

    static func parseChallenge(_ bytes: [UInt8]) throws(ShareError) -> [UInt8]? {
        try checkHeader(bytes, magic: challengeMagic, what: "challenge")
        guard bytes.count >= 37 else { return nil }
        return Array(bytes[5..<37])
    }

    static func request(id: [UInt8], device: String, spki: [UInt8], mac: [UInt8]) -> [UInt8] {
        let name = Array(device.utf8)
        return requestMagic + [version] + id + [UInt8(name.count)] + name
            + [UInt8(spki.count >> 8), UInt8(spki.count & 0xff)] + spki + mac
    }

    static func parseRequest(_ bytes: [UInt8]) throws(ShareError) -> ShareEnrolment.Request? {
        try checkHeader(bytes, magic: requestMagic, what: "request")
        guard bytes.count >= 22 else { return nil }
        let nameLength = Int(bytes[21])
        guard (1...63).contains(nameLength) else { throw .protocolViolation("a device name of \(nameLength) bytes") }
        guard bytes.count >= 24 + nameLength else { return nil }
        let keyLength = Int(bytes[22 + nameLength]) << 8 | Int(bytes[23 + nameLength])
        guard (1...maxKey).contains(keyLength) else { throw .protocolViolation("a key of \(keyLength) bytes") }
        let total = 24 + nameLength + keyLength + 32
        guard bytes.count >= total else { return nil }
        guard bytes.count == total else { throw .protocolViolation("bytes after the request") }
        guard let device = String(validating: bytes[22..<(22 + nameLength)], as: UTF8.self) else {
            throw .invalidDeviceName("(not UTF-8)")
        }
        let spki = Array(bytes[(24 + nameLength)..<(24 + nameLength + keyLength)])
        let mac = Array(bytes[(24 + nameLength + keyLength)..<total])
        return ShareEnrolment.Request(version: ShareEnrolment.version, id: Encoding.hex(Array(bytes[5..<21])), device: device,
                                      publicKey: Encoding.base64(spki), mac: Encoding.base64(mac))
    }

    static func answer(issued: Bool, text: String) -> [UInt8] {
        var bytes = Array(text.utf8.prefix(maxText))
        while String(validating: bytes, as: UTF8.self) == nil, !bytes.isEmpty { bytes.removeLast() }
        return answerMagic + [version, issued ? 0 : 1, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xff)] + bytes
    }

    static func parseAnswer(_ bytes: [UInt8]) throws(ShareError) -> (issued: Bool, text: String)? {
        try checkHeader(bytes, magic: answerMagic, what: "answer")
        guard bytes.count >= 8 else { return nil }
        guard bytes[5] <= 1 else { throw .protocolViolation("unknown enrolment status \(bytes[5])") }
        let length = Int(bytes[6]) << 8 | Int(bytes[7])
        guard length <= maxText else { throw .protocolViolation("an answer of \(length) bytes") }
        guard bytes.count >= 8 + length else { return nil }
        guard let text = String(validating: bytes[8..<(8 + length)], as: UTF8.self) else {
            throw .protocolViolation("the answer is not UTF-8")
        }
        return (bytes[5] == 0, text)
    }

    private static func checkHeader(_ bytes: [UInt8], magic: [UInt8], what: String) throws(ShareError) {
        if bytes.count >= 4 && Array(bytes[0..<4]) != magic { throw .protocolViolation("not an enrolment \(what) (wrong magic)") }
        if bytes.count >= 5 && bytes[4] != version {
            throw .protocolViolation("enrolment \(what) version \(bytes[4]) is not supported (this side speaks \(version))")
        }
    }

    /// Reads until `parse` returns a value; at most `limit` bytes.
    static func read<Value>(
        _ iterator: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator, limit: Int,
        _ parse: ([UInt8]) throws(ShareError) -> Value?
    ) async throws -> Value {
        var buffer: [UInt8] = []
        while true {
            guard var chunk = try await iterator.next() else {
                throw ShareError.connectionFailed("the peer closed the connection during enrolment")
            }
            buffer += chunk.readBytes(length: chunk.readableBytes) ?? []
            guard buffer.count <= limit else { throw ShareError.protocolViolation("an enrolment message over \(limit) bytes") }
            if let value = try parse(buffer) { return value }
        }
    }
}

/// Serves this machine's open invitations over TLS: a new device connects (without a client
/// certificate), proves it holds an invitation's secret, and receives its certificate.
public final class ShareEnrolmentServer: Sendable {
    /// What happened to a connection.
    public enum Event: Sendable {
        /// A device was enrolled.
        case enrolled(device: String, peer: String)
        /// A request was refused (wrong secret, expired or used invitation, bad message).
        case refused(peer: String, ShareError)
    }

    private let server: PinnedTLSServer
    private let enrolment: ShareEnrolment
    private let serverLeaf: [UInt8]
    private let outcome = NIOLockedValueBox<String?>(nil)
    private let refusals = NIOLockedValueBox<Int>(0)

    /// The port it listens on.
    public var port: Int { server.port }

    private init(server: PinnedTLSServer, enrolment: ShareEnrolment, serverLeaf: [UInt8]) {
        self.server = server
        self.enrolment = enrolment
        self.serverLeaf = serverLeaf
    }

    /// Listens on `host:port` with this device's certificate (issued by the group root, which
    /// the joiner pins from its invitation).
    /// - Parameters:
    ///   - host: the address to listen on.
    ///   - port: the port (0: one the system chooses, see ``port``).
    ///   - membership: this device's membership, whose identity the server presents.
    ///   - enrolment: the enrolment that approves the requests.
    /// - Returns: the listening server; ``run(until:maxRefusals:now:onEvent:)`` serves it.
    /// - Throws: ``ShareError/storage(_:)`` when this device's certificate cannot be encoded,
    ///   ``ShareError/connectionFailed(_:)`` when the address cannot be listened on.
    public static func bind(host: String = "127.0.0.1", port: Int = 0, membership: ShareMembership,
                            enrolment: ShareEnrolment) async throws(ShareError) -> ShareEnrolmentServer {
        let leaf = try enrolment.der(membership.identity.leaf)
        do {
            let server = try await PinnedTLSServer.bind(host: host, port: port, identity: membership.identity,
                                                        handshakeTimeout: ShareServer.handshakeTimeout)
            return ShareEnrolmentServer(server: server, enrolment: enrolment, serverLeaf: leaf)
        } catch {
            throw .connectionFailed("cannot listen on \(host):\(port): \(error)")
        }
    }

    /// Serves until one device is enrolled (returns its name), `deadline` passes or
    /// `maxRefusals` requests were refused (both throw ``ShareError/invalidEnrolment(_:)``).
    /// - Parameters:
    ///   - deadline: when to stop serving (the invitation's expiry).
    ///   - maxRefusals: how many refused requests end the serving.
    ///   - now: the clock requests are checked against.
    ///   - onEvent: called for each enrolment and each refused request.
    /// - Returns: the enrolled device's name.
    /// - Throws: ``ShareError/invalidEnrolment(_:)`` when `deadline` passes or `maxRefusals`
    ///   requests were refused, ``ShareError/connectionFailed(_:)`` when the server fails.
    public func run(until deadline: Date, maxRefusals: Int = 10, now: @escaping @Sendable () -> Date = { Date() },
                    onEvent: @escaping @Sendable (Event) -> Void = { _ in }) async throws(ShareError) -> String {
        let seconds = max(0, deadline.timeIntervalSinceNow)
        let server = self.server
        let expiry = Task.detached {
            try? await Task.sleep(for: .seconds(seconds))
            await server.close()
        }
        defer { expiry.cancel() }
        do {
            try await server.run(onRefused: { error in
                onEvent(.refused(peer: "client", .connectionFailed("\(error)")))
            }) { connection in
                await self.serve(connection, now: now(), maxRefusals: maxRefusals, onEvent: onEvent)
            }
        } catch {
            throw .connectionFailed("\(error)")
        }
        if let device = outcome.withLockedValue({ $0 }) { return device }
        if refusals.withLockedValue({ $0 }) >= maxRefusals {
            throw .invalidEnrolment("\(maxRefusals) requests were refused; no device was enrolled")
        }
        throw .invalidEnrolment("the invitation expired before a device joined")
    }

    /// Stops listening.
    public func close() async {
        await server.close()
    }

    private func serve(_ connection: PinnedTLSServer.Connection, now: Date, maxRefusals: Int,
                       onEvent: @Sendable (Event) -> Void) async {
        let peer = connection.remoteAddress
        let channel = connection.channel.channel
        let timer = channel.eventLoop.scheduleTask(in: ShareServer.idleTimeout) { channel.close(promise: nil) }
        defer { timer.cancel() }
        let nonce: [UInt8]
        do { nonce = try SecureRandom.bytes(32) } catch {
            onEvent(.refused(peer: peer, .storage("no randomness: \(error)")))
            return
        }
        do {
            let device: String = try await connection.channel.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(bytes: NetworkEnrolment.challenge(nonce)))
                var iterator = inbound.makeAsyncIterator()
                do {
                    let request = try await NetworkEnrolment.read(&iterator, limit: 2048, NetworkEnrolment.parseRequest)
                    let binding = NetworkEnrolment.binding(nonce: nonce, serverLeaf: serverLeaf)
                    let pem = try enrolment.approve(request: request, now: now, binding: binding)
                    try await outbound.write(ByteBuffer(bytes: NetworkEnrolment.answer(issued: true, text: pem)))
                    return request.device
                } catch {
                    let shareError = error as? ShareError ?? .connectionFailed("\(error)")
                    let text: String
                    if case .invalidEnrolment(let detail) = shareError { text = detail } else { text = shareError.description }
                    try? await outbound.write(ByteBuffer(bytes: NetworkEnrolment.answer(issued: false, text: text)))
                    throw shareError
                }
            }
            outcome.withLockedValue { $0 = device }
            onEvent(.enrolled(device: device, peer: peer))
            await server.close()
        } catch {
            onEvent(.refused(peer: peer, error as? ShareError ?? .connectionFailed("\(error)")))
            if refusals.withLockedValue({ $0 += 1; return $0 }) >= maxRefusals { await server.close() }
        }
    }
}

extension ShareEnrolment {
    /// Joins over the network: connects to the inviter at `host:port`, trusting the invitation's
    /// root only; proves the invitation's secret with an HMAC bound to the server's challenge
    /// and certificate; stores the certificate returned (needs the vault unlocked).
    /// - Throws: ``ShareError/peerRefused(_:)`` when the server is not of the invitation's
    ///   group (nothing is sent), ``ShareError/invalidEnrolment(_:)`` when the inviter refuses.
    /// - Parameters:
    ///   - invitation: the invitation the inviter made.
    ///   - deviceName: this device's name (see ``ShareGroup/checkDeviceName(_:)``).
    ///   - host: the inviter's address.
    ///   - port: the inviter's enrolment port.
    ///   - now: the current time, checked against the invitation's expiry.
    ///   - timeout: the bound on connecting, the handshake and the exchange.
    ///   - deviceKey: this device's key in hardware; nil makes a key in the keychain.
    /// - Returns: this device's membership.
    @discardableResult
    public func join(invitation: Invitation, deviceName: String, host: String, port: Int, now: Date = Date(),
                     timeout: Duration = .seconds(30), deviceKey: (any HardwareSigningKey)? = nil) async throws(ShareError) -> ShareMembership {
        let prepared = try prepareJoin(invitation: invitation, deviceName: deviceName, now: now, deviceKey: deviceKey)
        defer { prepared.secret.wipe() }
        let components = timeout.components
        let amount = TimeAmount.nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
        let client: PinnedTLSClient
        do {
            let pattern = try HostPattern(ShareGroup.memberName)
            client = try PinnedTLSClient(policy: TrustPolicy(hosts: [HostPolicy(pattern: pattern, anchors: .only([prepared.root]))],
                                                             defaultAnchors: nil))
        } catch {
            throw .storage("\(error)")
        }
        let connection: PinnedTLSConnection
        do {
            connection = try await client.connect(host: host, port: port, serverName: ShareGroup.memberName, timeout: amount)
        } catch let error as TLSTrustError {
            throw .peerRefused(error.reason.description)
        } catch {
            throw .connectionFailed("\(error)")
        }
        guard let leaf = connection.peerChain.first else { throw .peerRefused("no certificate") }
        let leafDER = try der(leaf)
        guard let id = try? Encoding.fromHex(invitation.id), id.count == 16 else {
            throw .invalidEnrolment("the invitation is damaged")
        }
        let channel = connection.channel.channel
        let timer = channel.eventLoop.scheduleTask(in: amount) { channel.close(promise: nil) }
        defer { timer.cancel() }
        let answer: (issued: Bool, text: String)
        do {
            answer = try await connection.channel.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                let nonce = try await NetworkEnrolment.read(&iterator, limit: 64, NetworkEnrolment.parseChallenge)
                let binding = NetworkEnrolment.binding(nonce: nonce, serverLeaf: leafDER)
                let mac = Self.mac(secret: prepared.secret, id: invitation.id, device: prepared.name, spki: prepared.spki,
                                   binding: binding)
                try await outbound.write(ByteBuffer(bytes: NetworkEnrolment.request(id: id, device: prepared.name,
                                                                                    spki: prepared.spki, mac: mac)))
                return try await NetworkEnrolment.read(&iterator, limit: 8 + NetworkEnrolment.maxText, NetworkEnrolment.parseAnswer)
            }
        } catch let error as ShareError {
            throw error
        } catch {
            throw .connectionFailed("\(error)")
        }
        guard answer.issued else { throw .invalidEnrolment("the inviter refused: \(answer.text)") }
        return try complete(chainPEM: Array(answer.text.utf8))
    }
}
