import Foundation
import Testing
import Cipher
@testable import Keychain

/// The item record of docs/FORMATS.md (section Keychain, the plaintext of `sealed`), written out
/// by hand: the names record of each item class and the record around it, and what a record
/// that breaks the layout gives.
@Suite struct ItemRecordVectorTests {
    private static let genericNames = "01" + "01" + "00000003" + "737663" + "02" + "00000004" + "61636374"
    private static let internetNames = "01" + "01" + "00000000" + "02" + "00000002" + "6d65"
        + "03" + "0000000b" + "6578616d706c652e6f7267" + "04" + "00000005" + "6874747073"
        + "05" + "00000003" + "343433" + "06" + "00000002" + "2f78"
        + "07" + "00000005" + "4c6162656c" + "08" + "00000002" + "c3a9"

    private static func isCorrupted(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch KeychainError.corrupted {
            return true
        } catch {
            return false
        }
    }

    @Test func namesRecordOfAGenericPassword() throws {
        let names = ItemCodec.encodeNames(key: .generic(service: "svc", account: "acct"), label: nil, comment: nil)
        #expect(Encoding.hex(names) == Self.genericNames)
        let (key, label, comment) = try ItemCodec.decodeNames(names[...], itemClass: .genericPassword)
        #expect(key == .generic(service: "svc", account: "acct"))
        #expect(label == nil && comment == nil)
    }

    @Test func namesRecordOfAnInternetPassword() throws {
        let key = ItemKey.internet(server: "example.org", account: "me", networkProtocol: "https", port: 443, path: "/x")
        let names = ItemCodec.encodeNames(key: key, label: "Label", comment: "é")
        #expect(Encoding.hex(names) == Self.internetNames)
        let decoded = try ItemCodec.decodeNames(names[...], itemClass: .internetPassword)
        #expect(decoded.0 == key)
        #expect(decoded.label == "Label")
        #expect(decoded.comment == "é")
    }

    @Test func itemRecordAroundTheNames() throws {
        let names = ItemCodec.encodeNames(key: .generic(service: "svc", account: "acct"), label: nil, comment: nil)
        let plain = Array("s3cret".utf8).withUnsafeBytes { ItemCodec.itemPlaintext(names: names, value: $0) }
        #expect(Encoding.hex(plain) == "02" + "00000012" + Self.genericNames + "733363726574")
        let (namesRange, valueRange) = try ItemCodec.splitItem(plain)
        #expect(Array(plain[namesRange]) == names)
        #expect(Array(plain[valueRange]) == Array("s3cret".utf8))
        let empty = [UInt8]().withUnsafeBytes { ItemCodec.itemPlaintext(names: names, value: $0) }
        #expect(try ItemCodec.splitItem(empty).value.isEmpty)
    }

    /// Records that break the layout (as a writer holding the class key could seal them) are
    /// `corrupted`, never a crash or a partial read.
    @Test func malformedRecordsAreCorrupted() {
        let names = ItemCodec.encodeNames(key: .generic(service: "svc", account: "acct"), label: nil, comment: nil)
        #expect(Self.isCorrupted { _ = try ItemCodec.splitItem([]) })
        #expect(Self.isCorrupted { _ = try ItemCodec.splitItem([3, 0, 0, 0, 0]) })
        #expect(Self.isCorrupted { _ = try ItemCodec.splitItem([2, 0, 0]) })
        #expect(Self.isCorrupted { _ = try ItemCodec.splitItem([2, 0, 0, 0, 9, 1, 2]) })
        #expect(Self.isCorrupted { _ = try ItemCodec.splitItem([2, 0xFF, 0xFF, 0xFF, 0xFF]) })
        for cut in 2..<names.count where cut != 9 {   // 1 and 9 end a record: no names, the service alone
            #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames(names[..<cut], itemClass: .genericPassword) }, "cut at \(cut)")
        }
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames([][...], itemClass: .genericPassword) })
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames(([2] + names.dropFirst())[...], itemClass: .genericPassword) })
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames((names + [1, 0, 0, 0, 1, 0x61])[...], itemClass: .genericPassword) })
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames((names + [9, 0, 0, 0, 0])[...], itemClass: .genericPassword) })
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames((names + [7, 0, 0, 0, 1, 0xFF])[...], itemClass: .genericPassword) })
        #expect(Self.isCorrupted { _ = try ItemCodec.decodeNames((names + [5, 0, 0, 0, 1, 0x78])[...], itemClass: .genericPassword) })
    }
}
