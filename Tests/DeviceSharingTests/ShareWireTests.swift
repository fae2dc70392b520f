import Foundation
import Testing
@testable import DeviceSharing

@Suite("Sharing wire format")
struct ShareWireTests {
    @Test func offerKnownAnswer() throws {
        let offer = try ShareWire.Offer(name: "a.txt", size: 0x0102, digest: [UInt8](repeating: 0xab, count: 32))
        let expected: [UInt8] = Array("SFSH".utf8) + [1, 0, 5] + Array("a.txt".utf8) + [0, 0, 0, 0, 0, 0, 1, 2]
            + [UInt8](repeating: 0xab, count: 32)
        #expect(offer.encoded == expected)
        #expect(try ShareWire.parseOffer(expected, maxSize: 1 << 20) == .complete(offer, consumed: expected.count))
        // Every strict prefix asks for more.
        for cut in 0..<expected.count {
            #expect(try ShareWire.parseOffer(expected[0..<cut], maxSize: 1 << 20) == .needMore)
        }
    }

    /// Version 2 (older senders): no digest in the offer, it follows the bytes.
    @Test func offerVersion2KnownAnswer() throws {
        let offer = try ShareWire.Offer.version2(name: "a.txt", size: 0x0102)
        #expect(offer.version == 2 && offer.digest == nil && offer.trailerLength == 32)
        let expected: [UInt8] = Array("SFSH".utf8) + [2, 0, 5] + Array("a.txt".utf8) + [0, 0, 0, 0, 0, 0, 1, 2]
        #expect(offer.encoded == expected)
        // The file's first bytes may follow in the same read: they are not part of the offer.
        #expect(try ShareWire.parseOffer(expected + [0xab, 0xcd], maxSize: 1 << 20) == .complete(offer, consumed: expected.count))
        for cut in 0..<expected.count {
            #expect(try ShareWire.parseOffer(expected[0..<cut], maxSize: 1 << 20) == .needMore)
        }
        #expect(throws: ShareError.tooLarge(size: 0x0102, limit: 0x0101)) { _ = try ShareWire.parseOffer(expected, maxSize: 0x0101) }
    }

    /// Version 3, written: as version 2 with a 4-byte end marker after the bytes.
    @Test func offerVersion3KnownAnswer() throws {
        let offer = try ShareWire.Offer(name: "a.txt", size: 0x0102)
        #expect(offer.version == 3 && offer.digest == nil && offer.trailerLength == 4)
        #expect(ShareWire.endMarker == [0x53, 0x46, 0x53, 0x45])
        let expected: [UInt8] = Array("SFSH".utf8) + [3, 0, 5] + Array("a.txt".utf8) + [0, 0, 0, 0, 0, 0, 1, 2]
        #expect(offer.encoded == expected)
        #expect(try ShareWire.parseOffer(expected + [0xab, 0xcd], maxSize: 1 << 20) == .complete(offer, consumed: expected.count))
        for cut in 0..<expected.count {
            #expect(try ShareWire.parseOffer(expected[0..<cut], maxSize: 1 << 20) == .needMore)
        }
        // Version 2 and 3 offers differ only in their version byte, and are not equal.
        #expect(try ShareWire.Offer.version2(name: "a.txt", size: 0x0102) != offer)
        #expect(throws: ShareError.protocolViolation("offer version 4 is not supported (this side reads versions 1 to 3): update the sender or the receiver")) {
            _ = try ShareWire.parseOffer(Array("SFSH".utf8) + [4], maxSize: 1 << 20)
        }
    }

    @Test func replyKnownAnswer() throws {
        let reply = ShareWire.Reply(status: .stored, text: "a.txt")
        let expected: [UInt8] = Array("SFSR".utf8) + [1, 0, 0, 5] + Array("a.txt".utf8)
        #expect(reply.encoded == expected)
        #expect(try ShareWire.parseReply(expected + [9, 9]) == .complete(reply, consumed: expected.count))
        #expect(throws: ShareError.protocolViolation("unknown reply status 9 in reply version 1")) {
            _ = try ShareWire.parseReply(Array("SFSR".utf8) + [1, 9, 0, 0])
        }
    }

    /// Reply version 2: status 4, the sender's device is revoked (the text is its name).
    @Test func replyVersion2KnownAnswer() throws {
        let reply = ShareWire.Reply(status: .revoked, text: "bravo")
        let expected: [UInt8] = Array("SFSR".utf8) + [2, 4, 0, 5] + Array("bravo".utf8)
        #expect(reply.encoded == expected)
        #expect(try ShareWire.parseReply(expected) == .complete(reply, consumed: expected.count))
        // The other statuses are still written as version 1, and read in either version.
        #expect(ShareWire.Reply(status: .refused, text: "").encoded == Array("SFSR".utf8) + [1, 2, 0, 0])
        #expect(try ShareWire.parseReply(Array("SFSR".utf8) + [2, 0, 0, 1, 0x61]) == .complete(ShareWire.Reply(status: .stored, text: "a"), consumed: 9))
        #expect(throws: ShareError.protocolViolation("unknown reply status 4 in reply version 1")) {
            _ = try ShareWire.parseReply(Array("SFSR".utf8) + [1, 4, 0, 0])
        }
        #expect(throws: ShareError.protocolViolation("reply version 3 is not supported (this side reads versions 1 to 2): update the sender")) {
            _ = try ShareWire.parseReply(Array("SFSR".utf8) + [3, 0, 0, 0])
        }
    }

    @Test func hostileOffersAreRefused() throws {
        func offer(name: [UInt8], length: Int? = nil, size: UInt64 = 1, magic: [UInt8] = ShareWire.offerMagic, version: UInt8 = 1) -> [UInt8] {
            let length = length ?? name.count
            var out = magic + [version, UInt8(length >> 8), UInt8(length & 0xff)] + name
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((size >> UInt64(shift)) & 0xff)) }
            return out + [UInt8](repeating: 0, count: 32)
        }
        let limit: UInt64 = 1000
        #expect(throws: ShareError.protocolViolation("not a sharing offer (wrong magic)")) {
            _ = try ShareWire.parseOffer(offer(name: Array("a".utf8), magic: Array("GET ".utf8)), maxSize: limit)
        }
        #expect(throws: ShareError.protocolViolation("offer version 4 is not supported (this side reads versions 1 to 3): update the sender or the receiver")) {
            _ = try ShareWire.parseOffer(offer(name: Array("a".utf8), version: 4), maxSize: limit)
        }
        #expect(throws: ShareError.self) { _ = try ShareWire.parseOffer(offer(name: Array("a".utf8), version: 0), maxSize: limit) }
        #expect(throws: ShareError.invalidFileName("the name length 0 is not between 1 and 255")) {
            _ = try ShareWire.parseOffer(offer(name: []), maxSize: limit)
        }
        #expect(throws: ShareError.invalidFileName("the name length 256 is not between 1 and 255")) {
            _ = try ShareWire.parseOffer(offer(name: [UInt8](repeating: 0x61, count: 256)), maxSize: limit)
        }
        #expect(throws: ShareError.tooLarge(size: 1001, limit: 1000)) {
            _ = try ShareWire.parseOffer(offer(name: Array("a".utf8), size: 1001), maxSize: limit)
        }
        #expect(throws: ShareError.tooLarge(size: UInt64.max, limit: 1000)) {
            _ = try ShareWire.parseOffer(offer(name: Array("a".utf8), size: .max), maxSize: limit)
        }
        #expect(throws: ShareError.invalidFileName("the name is not UTF-8")) {
            _ = try ShareWire.parseOffer(offer(name: [0xff, 0xfe]), maxSize: limit)
        }
        for bad in ["../x", "a/b", "..", ".", ".incoming", "a\\b", "x\u{0}y", "x\ny", "a..b"] {
            #expect(throws: ShareError.self, "\(bad)") { _ = try ShareWire.parseOffer(offer(name: Array(bad.utf8)), maxSize: limit) }
            #expect(throws: ShareError.self, "\(bad)") { try ShareWire.checkName(bad) }
        }
        try ShareWire.checkName("photo 2026-11-23.jpg")
        try ShareWire.checkName("été.txt")
        try ShareWire.checkName(String(repeating: "a", count: 255))
    }
}
