import Testing
@testable import Cipher

@Suite("Byte field widths")
struct ByteFieldsWidthTests {
    /// 2-, 4- and 8-byte integers are big-endian, and a reader cut short names what it was reading.
    @Test func integersAreBigEndian() throws {
        var writer = ByteWriter()
        writer.uint16(0x0102)
        writer.uint32(0x0304_0506)
        writer.uint64(0x0708_090A_0B0C_0D0E)
        #expect(writer.bytes == Array(1...14))
        var reader = ByteReader(writer.bytes)
        #expect(try reader.uint16("a") == 0x0102)
        #expect(try reader.uint32("b") == 0x0304_0506)
        #expect(try reader.uint64("c") == 0x0708_090A_0B0C_0D0E)
        var short = ByteReader([1])
        #expect(throws: CipherError.truncated("ends before the count at offset 0")) { try short.uint16("count") }
    }
}
