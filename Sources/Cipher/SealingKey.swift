#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto

/// A 256-bit key for sealed data, with the key id recorded in everything it seals.
public struct SealingKey: Sendable {
    /// The id written into sealed data (1–255 bytes). By default the key's fingerprint.
    public let id: [UInt8]
    /// The 32 key bytes.
    public let key: SecretBytes

    /// Wraps existing key bytes.
    /// - Parameters:
    ///   - key: Exactly 32 bytes.
    ///   - id: An explicit id, or nil for the fingerprint (first 8 bytes of HMAC-SHA256 keyed by the key).
    /// - Throws: ``CipherError/invalidParameter(_:)`` for a key that is not 32 bytes or an id not 1–255 bytes.
    public init(key: SecretBytes, id: [UInt8]? = nil) throws(CipherError) {
        guard key.count == 32 else { throw CipherError.invalidParameter("a sealing key is 32 bytes, not \(key.count)") }
        let resolved = id ?? SealingKey.fingerprint(of: key)
        guard (1...255).contains(resolved.count) else { throw CipherError.invalidParameter("a key id is 1–255 bytes") }
        self.key = key
        self.id = resolved
    }

    /// A new random key.
    /// - Parameter id: An explicit id, or nil for the fingerprint.
    /// - Returns: A key of 32 random bytes.
    /// - Throws: ``CipherError/randomUnavailable(_:)``, ``CipherError/invalidParameter(_:)`` for an id not 1–255 bytes.
    public static func generate(id: [UInt8]? = nil) throws(CipherError) -> SealingKey {
        try SealingKey(key: SecretBytes.random(count: 32), id: id)
    }

    /// The default key id: the first 8 bytes of HMAC-SHA256(key, "SecureFoundation key id v1").
    /// It identifies the key without revealing anything about it.
    /// - Parameter key: The key.
    /// - Returns: 8 bytes.
    public static func fingerprint(of key: SecretBytes) -> [UInt8] {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("SecureFoundation key id v1".utf8), using: key.symmetricKey)
        return Array(Array(mac).prefix(8))
    }
}

/// Several keys, so that data sealed under any of them opens: seal with the newest, keep the old
/// ones until nothing sealed under them remains (key rotation).
public struct Keyring: Sendable {
    /// The keys, newest first. The first one seals.
    public private(set) var keys: [SealingKey]

    /// - Parameter keys: The keys, newest (sealing) first.
    /// - Throws: ``CipherError/invalidParameter(_:)`` for an empty list or two keys with one id.
    public init(_ keys: [SealingKey]) throws(CipherError) {
        guard !keys.isEmpty else { throw CipherError.invalidParameter("a keyring needs at least one key") }
        guard Set(keys.map { Encoding.hex($0.id) }).count == keys.count else {
            throw CipherError.invalidParameter("two keys in a keyring share one key id")
        }
        self.keys = keys
    }

    /// The key that seals new data.
    public var primary: SealingKey { keys[0] }

    /// Makes `key` the primary key, keeping the others for opening.
    /// - Parameter key: The new primary key.
    /// - Throws: ``CipherError/invalidParameter(_:)`` when another key has its id.
    public mutating func rotate(to key: SealingKey) throws(CipherError) {
        guard !keys.contains(where: { $0.id == key.id }) else {
            throw CipherError.invalidParameter("the keyring already holds a key with this id")
        }
        keys.insert(key, at: 0)
    }

    /// The key with this id, if any.
    /// - Parameter id: A key id, as recorded in sealed data.
    /// - Returns: The key, or nil.
    public func key(withID id: [UInt8]) -> SealingKey? {
        keys.first { ConstantTime.equals($0.id, id) }
    }
}
