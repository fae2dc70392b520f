import Foundation
import Testing
@testable import Cipher

@Suite("Byte fields")
struct ByteFieldsTests {
    /// The one binary form of KDF parameters (docs/FORMATS.md), as the sealed envelope and the
    /// vault state's associated data have always written it.
    @Test func kdfParametersKnownBytes() throws {
        var writer = ByteWriter()
        writer.kdfParameters(.scrypt(logN: 16, r: 8, p: 1))
        writer.kdfParameters(.pbkdf2SHA256(rounds: 2_000_000))
        #expect(writer.bytes == [1, 16, 0, 0, 0, 8, 0, 0, 0, 1, 2, 0x00, 0x1E, 0x84, 0x80])
        var reader = ByteReader(writer.bytes)
        #expect(try reader.kdfParameters() == .scrypt(logN: 16, r: 8, p: 1))
        #expect(try reader.kdfParameters() == .pbkdf2SHA256(rounds: 2_000_000))
        #expect(reader.remaining == 0)
        var unknown = ByteReader([9, 0, 0, 0, 0])
        #expect(throws: CipherError.unsupportedAlgorithm("KDF id 9")) { try unknown.kdfParameters() }
    }

    @Test func fieldsRoundTripAndShortReadsAreTruncated() throws {
        var writer = ByteWriter([0xAA])
        writer.byte(7)
        writer.uint32(0x0102_0304)
        writer.uint64(0x0506_0708_090A_0B0C)
        writer.field([1, 2, 3])
        try writer.shortField([4, 5], "id")
        writer.raw([6])
        #expect(writer.bytes == [0xAA, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 3, 1, 2, 3, 2, 4, 5, 6])
        #expect(throws: CipherError.invalidParameter("the id is 256 bytes; at most 255")) {
            try writer.shortField([UInt8](repeating: 0, count: 256), "id")
        }
        var reader = ByteReader(writer.bytes)
        #expect(try reader.byte("marker") == 0xAA)
        #expect(try reader.byte("small") == 7)
        #expect(try reader.uint32("word") == 0x0102_0304)
        #expect(try reader.uint64("long") == 0x0506_0708_090A_0B0C)
        #expect(Array(try reader.field("field")) == [1, 2, 3])
        #expect(Array(try reader.shortField("id")) == [4, 5])
        #expect(Array(try reader.take(1)) == [6])
        #expect(throws: CipherError.truncated("ends before the tail at offset 25")) { try reader.uint32("tail") }
        var short = ByteReader([0, 0, 0, 9, 1])
        #expect(throws: CipherError.truncated("needed 9 bytes at offset 4, 1 left")) { try short.field("field") }
        var long = ByteReader([0, 0, 1, 0])
        #expect(throws: CipherError.invalidParameter("the field is 256 bytes; at most 16")) { try long.field("field", maximum: 16) }
    }

    /// The passphrase envelope's header is the writer's output: magic, version, algorithm, mode,
    /// KDF parameters, salt with a 1-byte length, nonce.
    @Test func sealedHeaderIsWrittenByTheWriter() throws {
        let salt = [UInt8](repeating: 0x11, count: 16)
        let sealed = try Sealed.seal([1, 2, 3], passphrase: SecretBytes(utf8: "pw"), policy: .init(parameters: .scrypt(logN: 15, r: 8, p: 1)),
                                     algorithm: .aes256GCM, context: [], salt: salt, nonce: [UInt8](repeating: 0x22, count: 12))
        var expected = ByteWriter(Sealed.magic + [Sealed.version, SealAlgorithm.aes256GCM.rawValue, 2])
        expected.kdfParameters(.scrypt(logN: 15, r: 8, p: 1))
        try expected.shortField(salt, "salt")
        expected.raw([UInt8](repeating: 0x22, count: 12))
        #expect(Array(sealed.prefix(expected.bytes.count)) == expected.bytes)
        #expect(try Sealed.parseHeader(sealed).keySource == .passphrase(.scrypt(logN: 15, r: 8, p: 1), salt: salt))
    }
}
