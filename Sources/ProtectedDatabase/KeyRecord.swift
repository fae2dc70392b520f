import Foundation
import Cipher

/// The plaintext of a database's key record (`DB-key`, itself a protected file of the
/// database's class): the magic `sfdb-key`, a version byte (1), a count byte (1 or 2), then
/// per key its salt (16 bytes, the first 16 bytes of the database file it opens) and the raw
/// SQLCipher key (32 bytes). Two keys are present only while a ``ProtectedDatabase/rekey(at:files:)``
/// is under way (the old key and the new one): whichever database file is in place, one of
/// them opens it.
struct KeyRecord {
    static let magic = Array("sfdb-key".utf8)
    static let version: UInt8 = 1
    static let saltSize = 16
    static let keySize = 32
    /// The largest record: two keys.
    static let maximumEncodedSize = magic.count + 2 + 2 * (saltSize + keySize)

    struct Key {
        var salt: [UInt8]
        var key: SecretBytes
    }

    var keys: [Key]

    /// The record's bytes, in locked memory.
    func encoded() -> SecretBytes {
        let count = Self.magic.count + 2 + keys.count * (Self.saltSize + Self.keySize)
        return SecretBytes(count: count) { out in
            var at = 0
            func put<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
                for byte in bytes { out[at] = byte; at += 1 }
            }
            put(Self.magic)
            put([Self.version, UInt8(keys.count)])
            for key in keys {
                put(key.salt)
                key.key.withUnsafeBytes { put($0) }
            }
        }
    }

    /// Parses a record; nil when it is not one.
    static func decode(_ bytes: SecretBytes) -> KeyRecord? {
        bytes.withUnsafeBytes { raw -> KeyRecord? in
            let header = magic.count + 2
            guard raw.count >= header, Array(raw[0..<magic.count]) == magic, raw[magic.count] == version else { return nil }
            let count = Int(raw[magic.count + 1])
            let entry = saltSize + keySize
            guard count == 1 || count == 2, raw.count == header + count * entry else { return nil }
            var keys: [Key] = []
            for index in 0..<count {
                let start = header + index * entry
                let salt = Array(raw[start..<(start + saltSize)])
                let key = SecretBytes(copying: UnsafeRawBufferPointer(rebasing: raw[(start + saltSize)..<(start + entry)]))
                keys.append(Key(salt: salt, key: key))
            }
            return KeyRecord(keys: keys)
        }
    }

    /// A new key and salt.
    static func fresh() throws(ProtectedDatabaseError) -> Key {
        do {
            return Key(salt: try SecretBytes.random(count: saltSize).withUnsafeBytes { Array($0) }, key: try SecretBytes.random(count: keySize))
        } catch {
            throw ProtectedDatabaseError.io("\(error)")
        }
    }
}
