import Cipher
import Foundation
import PinnedTLS
import Testing
import TestSupport
@testable import DeviceSharing

@Suite("Sharing enrolment over the network", .serialized, .onOwnThreads)
struct ShareNetworkEnrolmentTests {
    /// Runs an enrolment server of `device` (until one device joined, or `deadline`) around `body`.
    func withEnrolmentServer(
        _ device: TestDevice, deadline: Date = Date() + 120,
        _ body: @Sendable (Int) async throws -> Void
    ) async throws -> Result<String, ShareError> {
        let server = try await ShareEnrolmentServer.bind(membership: device.group.membership(),
                                                         enrolment: ShareEnrolment(group: device.group))
        let task = Task(executorPreference: TestExecutor.shared) { () async -> Result<String, ShareError> in
            do throws(ShareError) { return .success(try await server.run(until: deadline)) } catch { return .failure(error) }
        }
        do {
            try await body(server.port)
        } catch {
            await server.close()
            _ = await task.value
            throw error
        }
        await server.close()
        return await task.value
    }

    @Test func aDeviceJoinsOverTheNetworkAndTheInvitationIsUsedOnce() async throws {
        let a = try TestDevice(), b = try TestDevice(), c = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let invitation = try ShareEnrolment(group: a.group).invite()
        let outcome = try await withEnrolmentServer(a) { port in
            let membership = try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo",
                                                                           host: "127.0.0.1", port: port)
            #expect(membership.deviceName == "bravo")
            #expect(membership.root == (try a.group.rootCertificate()))
        }
        #expect(outcome == .success("bravo"))
        #expect(try a.group.members().map(\.device).contains("bravo"))
        #expect(try b.group.membership().root == (try a.group.rootCertificate()))

        // The same invitation again (a replay, from another machine): refused, nothing issued.
        let replay = try await withEnrolmentServer(a) { port in
            let error = await shareError {
                _ = try await ShareEnrolment(group: c.group).join(invitation: invitation, deviceName: "charlie",
                                                                  host: "127.0.0.1", port: port)
            }
            guard case .invalidEnrolment(let detail)? = error else {
                Issue.record("expected an invalid enrolment, got \(String(describing: error))")
                return
            }
            #expect(detail.contains("no open invitation"), "\(detail)")
        }
        #expect(replay != .success("charlie"))
        #expect(try !a.group.members().map(\.device).contains("charlie"))
        #expect(throws: ShareError.self) { try c.group.membership() }

        // The enrolled device sends to the inviter.
        let path = try b.write("note.txt", Array("joined over the network".utf8))
        try await withServer(a) { port, _ in
            let sent = try await ShareClient(membership: b.group.membership(), isRevoked: b.isRevoked())
                .send(path, to: "127.0.0.1", port: port, device: "alpha")
            #expect(sent.storedName == "note.txt")
        }
    }

    @Test func aWrongCodeIsRefusedAndTheRightOneStillWorks() async throws {
        let a = try TestDevice(), b = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let invitation = try ShareEnrolment(group: a.group).invite()
        var forged = invitation
        forged.secret = Encoding.base64(try SecureRandom.bytes(32))
        let wrong = forged
        let outcome = try await withEnrolmentServer(a) { port in
            let error = await shareError {
                _ = try await ShareEnrolment(group: b.group).join(invitation: wrong, deviceName: "bravo", host: "127.0.0.1", port: port)
            }
            guard case .invalidEnrolment(let detail)? = error else {
                Issue.record("expected an invalid enrolment, got \(String(describing: error))")
                return
            }
            #expect(detail.contains("not authenticated by the invitation's secret"), "\(detail)")
            #expect(try !a.group.members().map(\.device).contains("bravo"))
            // The invitation is still open for its rightful holder.
            try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo", host: "127.0.0.1", port: port)
        }
        #expect(outcome == .success("bravo"))
    }

    @Test func anExpiredCodeIsRefusedByTheInviter() async throws {
        let a = try TestDevice(), b = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let past = Date() - 600
        let invitation = try ShareEnrolment(group: a.group).invite(validity: 60, now: past)
        // Locally: refused before connecting.
        let local = await shareError {
            _ = try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo", host: "127.0.0.1", port: 1)
        }
        #expect(local == .invalidEnrolment("the invitation has expired"))
        // A joiner whose clock is wrong: the inviter refuses.
        _ = try await withEnrolmentServer(a) { port in
            let error = await shareError {
                _ = try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo",
                                                                  host: "127.0.0.1", port: port, now: past)
            }
            #expect(error == .invalidEnrolment("the inviter refused: the invitation has expired"))
        }
        #expect(try !a.group.members().map(\.device).contains("bravo"))
    }

    @Test func aServerOfAnotherGroupGetsNothing() async throws {
        let a = try TestDevice(), b = try TestDevice(), mallory = try TestDevice()
        try a.group.create(deviceName: "alpha")
        try mallory.group.create(deviceName: "alpha")
        let invitation = try ShareEnrolment(group: a.group).invite()
        // Mallory answers at the address the joiner was given: its certificate is not of the
        // invitation's root, so the joiner refuses during the handshake and sends no request.
        let outcome = try await withEnrolmentServer(mallory, deadline: Date() + 60) { port in
            let error = await shareError {
                _ = try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo", host: "127.0.0.1", port: port)
            }
            guard case .peerRefused? = error else {
                Issue.record("expected the peer to be refused, got \(String(describing: error))")
                return
            }
        }
        #expect(outcome != .success("bravo"))
        // The invitation is still open on the real inviter.
        let real = try await withEnrolmentServer(a) { port in
            try await ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo", host: "127.0.0.1", port: port)
        }
        #expect(real == .success("bravo"))
    }

    @Test func enrolmentMessagesAreBounded() throws {
        let id = [UInt8](repeating: 7, count: 16)
        let request = NetworkEnrolment.request(id: id, device: "bravo", spki: [1, 2, 3], mac: [UInt8](repeating: 9, count: 32))
        let parsed = try #require(try NetworkEnrolment.parseRequest(request))
        #expect(parsed.device == "bravo" && parsed.id == Encoding.hex(id))
        #expect(try NetworkEnrolment.parseRequest(Array(request.dropLast())) == nil)
        #expect(throws: ShareError.self) { try NetworkEnrolment.parseRequest(request + [0]) }
        var hostile = request
        hostile[21] = 0
        #expect(throws: ShareError.self) { try NetworkEnrolment.parseRequest(hostile) }
        hostile = request
        hostile[4] = 2
        #expect(throws: ShareError.self) { try NetworkEnrolment.parseRequest(hostile) }
        #expect(throws: ShareError.self) { try NetworkEnrolment.parseAnswer(Array("SFJA".utf8) + [1, 0, 0xff, 0xff]) }
        #expect(throws: ShareError.self) { try NetworkEnrolment.parseChallenge(Array("SFSH".utf8)) }
    }
}
