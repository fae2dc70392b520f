@testable import DeviceSharing
import Foundation
import Testing

/// What the DNS-SD announcement carries, and how a TXT record from anyone on the link is read.
@Suite("share discovery: TXT record and group tag")
struct ShareDiscoveryTests {
    @Test("the TXT record is v=1 and the group's tag; the device name only when asked; both members share the tag")
    func announcement() throws {
        let (a, b) = try makeGroup()
        let alpha = try a.group.membership(), bravo = try b.group.membership()
        let tag = try ShareDiscovery.groupTag(of: alpha.root)
        #expect(tag.count == 16 && tag.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(try ShareDiscovery.groupTag(of: bravo.root) == tag)
        #expect(try ShareDiscovery.txtRecord(for: alpha, showDeviceName: false) == ["v=1", "g=\(tag)"])
        #expect(try ShareDiscovery.txtRecord(for: alpha, showDeviceName: true) == ["v=1", "g=\(tag)", "n=alpha"])
        // Another group: another tag.
        let other = try TestDevice()
        try other.group.create(deviceName: "alpha")
        #expect(try ShareDiscovery.groupTag(of: other.group.membership().root) != tag)
    }

    @Test("TXT bytes: encoded as length-prefixed strings; a hostile record is read without a crash, first key wins")
    func txtBytes() {
        let encoded = ShareDiscovery.encodeTXT(["v=1", "g=0123456789abcdef"])
        #expect(encoded == [3] + Array("v=1".utf8) + [18] + Array("g=0123456789abcdef".utf8))
        #expect(encoded.withUnsafeBufferPointer { ShareDiscovery.parseTXT($0) } == ["v": "1", "g": "0123456789abcdef"])
        // A length past the end, an entry without "=", a repeated key, upper-case keys, empty.
        let hostile: [UInt8] = [1, 0x78] + [3] + Array("V=2".utf8) + [3] + Array("v=3".utf8) + [0] + [200, 0x67, 0x3d]
        #expect(hostile.withUnsafeBufferPointer { ShareDiscovery.parseTXT($0) } == ["v": "2"])
        #expect([UInt8]().withUnsafeBufferPointer { ShareDiscovery.parseTXT($0) } == [:])
        // An entry longer than 255 bytes is cut to 255 (a TXT string's limit).
        #expect(ShareDiscovery.encodeTXT([String(repeating: "x", count: 300)]).count == 256)
    }
}
