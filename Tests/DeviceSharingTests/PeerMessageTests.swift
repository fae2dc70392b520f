import Foundation
import Testing
@testable import DeviceSharing

/// `SharePeerMessage`: the public parsers of what a peer sends, one message at a time.
@Suite("Peer messages")
struct PeerMessageTests {
    @Test func offerTakesItsHeaderAndAsksForMoreBefore() throws {
        let header = try ShareWire.Offer(name: "a.txt", size: 9).encoded
        #expect(try SharePeerMessage.offer.parse(header + [1, 2, 3]) == header.count)
        #expect(try SharePeerMessage.offer.parse(Array(header.dropLast())) == nil)
        #expect(try SharePeerMessage.offer.parse([]) == nil)
        #expect(throws: ShareError.tooLarge(size: 9, limit: 8)) { try SharePeerMessage.offer.parse(header, maxOfferSize: 8) }
        #expect(throws: ShareError.protocolViolation("not a sharing offer (wrong magic)")) { try SharePeerMessage.offer.parse(Array("SFSR".utf8)) }
    }

    @Test func replyAndEnrolmentMessages() throws {
        let reply = ShareWire.Reply(status: .refused, text: "no").encoded
        #expect(try SharePeerMessage.reply.parse(reply) == reply.count)
        let challenge = NetworkEnrolment.challenge([UInt8](repeating: 1, count: 32))
        #expect(try SharePeerMessage.enrolmentChallenge.parse(challenge) == 37)
        #expect(try SharePeerMessage.enrolmentChallenge.parse(Array(challenge.prefix(36))) == nil)
        let request = NetworkEnrolment.request(id: [UInt8](repeating: 2, count: 16), device: "pc", spki: [3, 4], mac: [UInt8](repeating: 5, count: 32))
        #expect(try SharePeerMessage.enrolmentRequest.parse(request) == request.count)
        #expect(throws: ShareError.protocolViolation("bytes after the request")) { try SharePeerMessage.enrolmentRequest.parse(request + [0]) }
        let answer = NetworkEnrolment.answer(issued: false, text: "expired")
        #expect(try SharePeerMessage.enrolmentAnswer.parse(answer + [9]) == answer.count)
        #expect(throws: ShareError.protocolViolation("unknown enrolment status 2")) {
            try SharePeerMessage.enrolmentAnswer.parse(Array("SFJA".utf8) + [1, 2, 0, 0])
        }
    }
}
