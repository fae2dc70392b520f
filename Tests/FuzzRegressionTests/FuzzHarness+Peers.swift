// The entry points of what a peer sends: the sharing offer and reply (DeviceSharing), the
// network enrolment messages and the invitation and request files, and the unlock agent's
// frames (both the agent's and its client's side). Linked into the fuzz package as
// Fuzz/Sources/FuzzHarness, like FuzzHarness.swift; everything here goes through public API
// (`SharePeerMessage`, `AgentServer`, `AgentClient`), so the fuzz binaries and the tests run
// the same code.

import Foundation
import Cipher
import Vault
import DeviceSharing
import UnlockAgent

extension FuzzHarness {
    /// The targets of this file, merged into ``targets``.
    static let peerTargets: [String: @Sendable ([UInt8]) -> Void] = [
        "shareWire": shareWire,
        "enrolment": enrolment,
        "agentFrame": agentFrame,
    ]

    // MARK: Sharing offers and replies

    /// The receiver's limit on offered sizes (the share server's default is far below).
    static let offerLimit: UInt64 = 1 << 40

    /// Parses `bytes` as `message`; a complete message took at most the bytes given, and every
    /// shorter prefix of it is still incomplete (a connection that stops there waits, it never
    /// acts on part of a message).
    static func checkPeerMessage(_ message: SharePeerMessage, _ bytes: [UInt8]) {
        guard let consumed = try? message.parse(bytes, maxOfferSize: offerLimit) else { return }
        precondition(consumed > 0 && consumed <= bytes.count, "\(message) took \(consumed) of \(bytes.count) bytes")
        for cut in Set([consumed - 1, consumed / 2, min(consumed - 1, 7)]) where cut >= 0 {
            let prefix = Array(bytes[0..<cut])
            if (try? message.parse(prefix, maxOfferSize: offerLimit)) != nil {
                preconditionFailure("\(message): a prefix of \(cut) bytes of a \(consumed)-byte message parsed as complete")
            }
        }
    }

    /// An offer header (first byte even) or a reply (odd), the rest being what the peer sent.
    @Sendable public static func shareWire(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        checkPeerMessage(mode % 2 == 0 ? .offer : .reply, Array(data.dropFirst()))
    }

    /// Offers and replies as the format writes them (docs/FORMATS.md, "Sharing wire format"),
    /// each after its mode byte; `FuzzRegressionTests` checks them against the writer.
    static func shareWireSeeds() -> [[UInt8]] {
        func u64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) } }
        let name = Array("report.pdf".utf8)
        let offer3 = Array("SFSH".utf8) + [3, 0, UInt8(name.count)] + name + u64(1_048_576)
        let offer2 = Array("SFSH".utf8) + [2, 0, UInt8(name.count)] + name + u64(1_048_576)
        let offer1 = Array("SFSH".utf8) + [1, 0, 1] + Array("a".utf8) + u64(0) + [UInt8](repeating: 0xE3, count: 32)
        let stored = Array("SFSR".utf8) + [1, 0, 0, 10] + name
        let refused = Array("SFSR".utf8) + [1, 2, 0, 4] + Array("full".utf8)
        let revoked = Array("SFSR".utf8) + [2, 4, 0, 6] + Array("laptop".utf8)
        return [[0] + offer3, [0] + offer2, [0] + offer1, [1] + stored, [1] + refused, [1] + revoked, [1] + Array("SFSR".utf8) + [1, 1, 0, 0]]
    }

    // MARK: Enrolment

    /// Enrolment: the first byte chooses the network challenge (0), request (1) or answer (2),
    /// or the invitation (3) or request (4) file, JSON as `share invite` and `share join` write
    /// them, decoded and checked as far as it goes without a group (names, base64, the key).
    @Sendable public static func enrolment(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        let rest = Array(data.dropFirst())
        switch mode % 5 {
        case 0: checkPeerMessage(.enrolmentChallenge, rest)
        case 1: checkPeerMessage(.enrolmentRequest, rest)
        case 2: checkPeerMessage(.enrolmentAnswer, rest)
        case 3:
            guard let invitation = try? JSONDecoder().decode(ShareEnrolment.Invitation.self, from: Data(rest)) else { return }
            _ = try? Encoding.fromBase64(invitation.root)
            _ = try? Encoding.fromBase64(invitation.secret)
            _ = try? Encoding.fromHex(invitation.id)
        default:
            guard let request = try? JSONDecoder().decode(ShareEnrolment.Request.self, from: Data(rest)) else { return }
            _ = try? ShareGroup.checkDeviceName(request.device)
            _ = try? Encoding.fromBase64(request.publicKey)
            _ = try? Encoding.fromBase64(request.mac)
        }
    }

    static func enrolmentSeeds() -> [[UInt8]] {
        let nonce = [UInt8](repeating: 0x5A, count: 32)
        let device = Array("laptop".utf8)
        let spki = [UInt8](repeating: 0x30, count: 91)
        let request = Array("SFJR".utf8) + [1] + [UInt8](repeating: 0xA1, count: 16) + [UInt8(device.count)] + device
            + [0, UInt8(spki.count)] + spki + [UInt8](repeating: 0x77, count: 32)
        let chain = Array("-----BEGIN CERTIFICATE-----\nMAo=\n-----END CERTIFICATE-----\n".utf8)
        let issued = Array("SFJA".utf8) + [1, 0, 0, UInt8(chain.count)] + chain
        let refused = Array("SFJA".utf8) + [1, 1, 0, 7] + Array("expired".utf8)
        let invitation = #"{"version":1,"root":"MAo=","id":"00112233445566778899aabbccddeeff","secret":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=","expires":1900000000}"#
        let requestFile = #"{"version":1,"id":"00112233445566778899aabbccddeeff","device":"laptop","publicKey":"MAo=","mac":"AAEC"}"#
        return [[0] + Array("SFJC".utf8) + [1] + nonce, [1] + request, [2] + issued, [2] + refused,
                [3] + Array(invitation.utf8), [4] + Array(requestFile.utf8)]
    }

    // MARK: Unlock agent frames

    /// The agent's frames. An even first byte: the rest is what a fake agent answers to a real
    /// `AgentClient` (the second byte chooses the call: status, class keys, unlock, lock or the
    /// lock-state subscription). An odd one: the rest is what a client sends to a real
    /// `AgentServer` (of a vault not set up, so no unlock runs the KDF); a stop request is made
    /// a lock request, so that the agent keeps serving the next inputs.
    @Sendable public static func agentFrame(_ data: [UInt8]) {
        guard data.count >= 2 else { return }
        if data[0] % 2 == 0 {
            agentClientReads(call: data[1], answer: Array(data.dropFirst(2)))
        } else {
            var request = Array(data.dropFirst())
            if request.count >= 6, request[5] == 6 { request[5] = 3 }
            _ = agentServerReads(request)
        }
    }

    /// A listening UNIX socket at `path` (its directory made 0700).
    static func listeningSocket(_ path: String) -> Int32? {
        try? SecureFile.ensurePrivateDirectory(scratchRoot)
        try? SecureFile.ensurePrivateDirectory((path as NSString).deletingLastPathComponent)
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { close(fd); return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes); raw[bytes.count] = 0 }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); return nil }
        return fd
    }

    static func setTimeouts(_ fd: Int32, seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Reads one frame (4-byte length, then that many bytes, at most 64 KiB) or what arrives
    /// before the peer closes or the timeout.
    static func readFrame(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while received.count < 4 + 65536 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += buffer[0..<count]
            if received.count >= 4 {
                let length = Int(received[0]) << 24 | Int(received[1]) << 16 | Int(received[2]) << 8 | Int(received[3])
                if received.count >= 4 + length { break }
            }
        }
        return received
    }

    /// The fake agent the client side talks to.
    static let fakeAgentSocket: (fd: Int32, path: String)? = {
        let path = scratchRoot + "/agent/fake.sock"
        return listeningSocket(path).map { ($0, path) }
    }()

    /// One real client call against the fake agent, which reads the request and sends `answer`.
    /// Returns the request the client sent.
    @discardableResult
    static func agentClientReads(call: UInt8, answer: [UInt8]) -> [UInt8] {
        // One call at a time (the tests run targets in parallel): each fake answer goes to its own call.
        fakeAgentLock.withLock { fakeAgentCall(call: call, answer: answer) }
    }

    static let fakeAgentLock = NSLock()

    private static func fakeAgentCall(call: UInt8, answer: [UInt8]) -> [UInt8] {
        guard let agent = fakeAgentSocket else { return [] }
        let done = DispatchSemaphore(value: 0)
        let request = LockedRequest()
        let server = Thread {
            defer { done.signal() }
            var ready = pollfd(fd: agent.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 2000) == 1 else { return }
            let fd = accept(agent.fd, nil, nil)
            guard fd >= 0 else { return }
            defer { close(fd) }
            setTimeouts(fd, seconds: 1)
            request.bytes = readFrame(fd)
            sendAll(fd, answer)
            shutdown(fd, Int32(SHUT_WR))
            var sink = [UInt8](repeating: 0, count: 512)
            var total = 0
            while total < 1 << 20 {
                let count = sink.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                total += count
            }
        }
        server.start()
        let client = AgentClient(socketPath: agent.path, timeout: 1)
        switch call % 5 {
        case 0: _ = try? client.status()
        case 1: (try? client.classKeys(for: .whenUnlocked, vaultID: Data(repeating: 9, count: 16)))?.forEach { $0.wipe() }
        case 2: _ = try? client.unlock(passcode: SecretBytes(utf8: "1234"))
        case 3: try? client.lock()
        default:
            if let stream = try? client.lockStateChanges() {
                let ended = DispatchSemaphore(value: 0)
                Task {
                    var count = 0
                    for await _ in stream { count += 1; if count > 1000 { break } }
                    ended.signal()
                }
                _ = ended.wait(timeout: .now() + 2)
            }
        }
        _ = done.wait(timeout: .now() + 3)
        return request.bytes
    }

    final class LockedRequest: @unchecked Sendable {
        private let lock = NSLock()
        private var value: [UInt8] = []
        var bytes: [UInt8] {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    /// A real agent of a vault that is not set up, serving on a thread of its own.
    static let realAgent: AgentServer? = {
        let home = scratchRoot + "/agent-home"
        try? SecureFile.ensurePrivateDirectory(scratchRoot)
        guard (try? SecureFile.ensurePrivateDirectory(home)) != nil,
              let manager = try? CryptoManager(directory: home, deviceKeyProvider: StaticDeviceKeyProvider(key: SecretBytes(copying: [UInt8](repeating: 0x55, count: 32))),
                                               attemptPolicy: .unlimited)
        else { return nil }
        guard let server = try? AgentServer(manager: manager, socketPath: scratchRoot + "/agent/agent.sock",
                                            configuration: AgentServer.Configuration(requestTimeout: 1)),
              (try? server.bind()) != nil
        else { return nil }
        Thread { try? server.run() }.start()
        return server
    }()

    /// Sends `request` to the real agent, closes the sending side, and returns its first answer frame.
    @discardableResult
    static func agentServerReads(_ request: [UInt8]) -> [UInt8] {
        guard let agent = realAgent else { return [] }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(agent.socketPath.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: path); raw[path.count] = 0 }
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard connected == 0 else { return [] }
        setTimeouts(fd, seconds: 1)
        sendAll(fd, request)
        shutdown(fd, Int32(SHUT_WR))
        return readFrame(fd)
    }

    /// Requests as the real client writes them (captured by the fake agent) and answers as the
    /// real agent writes them, each after its mode bytes.
    static func agentFrameSeeds() -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        let okStatus = agentServerReads([0, 0, 0, 2, 1, 1])
        var stateFrame: [UInt8] = [0, 0, 0, 2, 0, 0]
        let keys: [UInt8] = [0, 0, 0, 66, 0, 2] + [UInt8](repeating: 0x21, count: 32) + [UInt8](repeating: 0x22, count: 32)
        let empty: [UInt8] = [0, 0, 0, 1, 0]
        for call in UInt8(0)..<5 {
            let answer: [UInt8] = switch call {
            case 0, 2: okStatus
            case 1: keys
            case 3: empty
            default: stateFrame
            }
            let request = agentClientReads(call: call, answer: answer)
            seeds.append([0, call] + answer)
            if !request.isEmpty { seeds.append([1] + request) }
        }
        stateFrame[5] = 1
        seeds.append([0, 4] + stateFrame + [0, 0, 0, 2, 0, 0])
        // Refusals as the agent sends them: a class-key request of the wrong size, a bad credential.
        let refusal = agentServerReads([0, 0, 0, 3, 1, 4, 0])
        if !refusal.isEmpty { seeds.append([0, 1] + refusal) }
        let wrongPasscode = Array(#"{"kind":"wrongPasscode","message":"wrong passcode","failures":2,"seconds":60}"#.utf8)
        seeds.append([0, 2, 0, 0, 0, UInt8(wrongPasscode.count + 1), 1] + wrongPasscode)
        seeds.append([1, 0, 0, 0, 10, 1, 2, 1, 2, 0, 1, 0x61, 0, 1, 0x62])
        return seeds
    }
}
