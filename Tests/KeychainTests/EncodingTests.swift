import Foundation
import Testing
import GRDB
import Cipher
import Crypto
@testable import Keychain

/// The byte encodings of docs/FORMATS.md (section Keychain), written out by hand.
@Suite struct EncodingTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The row MAC of FORMATS.md, against a value computed with Python's hmac module.
    @Test func rowMACKnownAnswer() throws {
        let key = SymmetricKey(data: Array(0..<32) as [UInt8])
        var idBytes: [UInt8] = [1]
        for index in 0..<32 { idBytes.append(UInt8(0xA0 + index % 16)) }
        let id = try #require(ItemID(Data(idBytes)))
        let sealed = bytes("SFSD") + Array(0..<20)
        let keychain = Array(UInt8(0xC0)...UInt8(0xCF))
        let mac = ItemCodec.rowMAC(keychain: keychain, id: id, accessibility: 0x13, sealed: sealed, prototype: HMAC<SHA256>(key: key))
        #expect(Encoding.hex(mac) == "601af9fdf3a9b8e33abcbbc42f0f6165")
    }

    @Test func nameIndexInputOfAGenericPassword() {
        let input = ItemCodec.nameIndexInput(.generic(service: "svc", account: "é"))
        let expected = bytes("SFKC name v1") + [0, 1]
            + [1, 0, 0, 0, 3] + bytes("svc")
            + [1, 0, 0, 0, 2, 0xC3, 0xA9]
            + [0, 0, 0, 0]
        #expect(input == expected)
    }

    @Test func nameIndexInputOfAnInternetPassword() {
        let key = ItemKey.internet(server: "example.org", account: "me", networkProtocol: "https", port: 443, path: "/x")
        let expected = bytes("SFKC name v1") + [0, 2]
            + [1, 0, 0, 0, 0]
            + [1, 0, 0, 0, 2] + bytes("me")
            + [1, 0, 0, 0, 11] + bytes("example.org")
            + [1, 0, 0, 0, 5] + bytes("https")
            + [1, 0, 0, 0, 3] + bytes("443")
            + [1, 0, 0, 0, 2] + bytes("/x")
        #expect(ItemCodec.nameIndexInput(key) == expected)
        let bare = ItemKey.internet(server: "example.org", account: "me")
        #expect(ItemCodec.nameIndexInput(bare) == bytes("SFKC name v1") + [0, 2] + [1, 0, 0, 0, 0]
            + [1, 0, 0, 0, 2] + bytes("me") + [1, 0, 0, 0, 11] + bytes("example.org") + [0, 0, 0])
    }

    @Test func serviceIndexInputAndItemContext() {
        #expect(ItemCodec.serviceIndexInput(itemClass: .genericPassword, name: "svc")
            == bytes("SFKC service v1") + [0, 1, 0, 0, 0, 3] + bytes("svc"))
        #expect(ItemCodec.serviceIndexInput(itemClass: .internetPassword, name: "")
            == bytes("SFKC service v1") + [0, 2, 0, 0, 0, 0])
        let id = ItemID(itemClass: 1, group: (0x0102_0304_0506_0708, 0x090A_0B0C_0D0E_0F10),
                        name: (0x1112_1314_1516_1718, 0x191A_1B1C_1D1E_1F20))
        #expect(ItemCodec.itemContext(accessibility: 0x13, id: id) == bytes("SFKC item v2") + [0, 0x13] + id.bytes)
    }

    @Test func itemIDBytesAndBlob() throws {
        let id = ItemID(itemClass: 2, group: (0x0102_0304_0506_0708, 0x090A_0B0C_0D0E_0F10),
                        name: (0x1112_1314_1516_1718, 0x191A_1B1C_1D1E_1F20))
        #expect(id.bytes == [2] + Array(1...32))
        #expect(id.data == Data([2] + Array(1...32)))
        #expect(ItemID(id.data) == id)
        #expect(ItemID(Data([2] + Array(1...31))) == nil)
        let (lower, upper) = ItemID.range(itemClass: 2, group: id.groupWords)
        #expect(lower == Data([2] + Array(1...16) + [UInt8](repeating: 0, count: 16)))
        #expect(upper == Data([2] + Array(1...16) + [UInt8](repeating: 0xFF, count: 16)))
    }

    /// The id stored in the file is the class, then the first 16 bytes of HMAC-SHA256 of the
    /// service input, then of the name input (one-shot HMAC here; the keychain uses a keyed copy).
    @Test func storedIDIsTheDocumentedBlindIndex() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source)
        try keychain.setPassword("value", forService: "svc", account: "acct")
        try keychain.flush()
        let indexKey = try source.blindIndexKey().symmetricKey
        let group = ItemCodec.mac(ItemCodec.serviceIndexInput(itemClass: .genericPassword, name: "svc"), key: indexKey).prefix(16)
        let name = ItemCodec.mac(ItemCodec.nameIndexInput(.generic(service: "svc", account: "acct")), key: indexKey).prefix(16)
        let stored = try DatabaseQueue(path: keychain.path).read { db in try Data.fetchAll(db, sql: "SELECT item_id FROM keychain_items") }
        #expect(stored == [Data([1]) + group + name])
        try keychain.close()
    }

    /// GRDB's WAL set-up selects synchronous = NORMAL; the keychain sets FULL again, so that a
    /// commit (and so flush()) syncs the WAL.
    @Test func everyCommitIsSynced() throws {
        let dir = try TemporaryDirectory()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: try TestKeySource())
        let settings = try keychain.synchronousSettings()
        #expect(settings.writer == 2)
        #expect(settings.reader == 2)
        try keychain.close()
    }

    /// A row the database refuses (here a trigger raises) fails the commit: flush() throws a
    /// database error naming SQLite's message, the change stays pending, and the next flush
    /// commits it once the cause is gone.
    @Test func refusedRowFailsTheFlushAndIsRetried() throws {
        let dir = try TemporaryDirectory()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .seconds(3600)
        let source = try TestKeySource()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let other = try DatabaseQueue(path: keychain.path)
        try other.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON keychain_items BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
        }
        try keychain.setPassword("value", forService: "svc", account: "acct")
        do {
            try keychain.flush()
            Issue.record("the flush succeeded")
        } catch {
            guard case .database(let message) = error else { throw error }
            #expect(message.contains("refused by test"))
        }
        #expect(try keychain.password(forService: "svc", account: "acct") == "value")
        try other.write { db in try db.execute(sql: "DROP TRIGGER refuse") }
        try keychain.flush()
        let stored = try other.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items") }
        #expect(stored == 1)
        try keychain.close()
        let reopened = try Keychain(directory: dir.sub("kc"), keySource: source)
        #expect(try reopened.password(forService: "svc", account: "acct") == "value")
        try reopened.close()
    }
}
