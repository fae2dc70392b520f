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
import Cipher

/// Push-mode age encryption: feed plaintext with `update(_:)`, then call ``finish()``.
/// The encrypted bytes go to the sink given at creation, in order.
///
/// Memory is bounded by the batch (16 chunks of 64 KiB by default), whatever the input size.
/// Not thread-safe: drive one instance from one task at a time.
public final class AgeEncryptor {
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let armor: ArmorEncoder?
    /// The header and nonce, until written ahead of the first payload bytes.
    private var header: [UInt8]?
    private let cipher: PayloadCipher
    private let batchChunks: Int
    private let parallel: Bool
    /// The chunk batch, allocated on the first plaintext (or at ``finish()``).
    private var batch: StreamEncryptor?
    private var finished = false

    /// Creates an encryptor for `recipients`.
    /// - Parameters:
    ///   - recipients: One or more recipients; an ``ScryptRecipient`` must be alone.
    ///   - armor: Write ASCII armor (PEM) instead of binary.
    ///   - sink: Receives the encrypted bytes; the buffer is only valid during the call.
    /// - Throws: ``AgeError/invalidArgument(_:)`` for no recipients or scrypt mixed with others,
    ///   ``AgeError/cipher(_:)`` when the random generator fails, a recipient's own error as
    ///   ``AgeError/external(_:)``.
    public convenience init(recipients: [any AgeRecipient], armor: Bool = false,
                            sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws(AgeError) {
        let fileKey: SecretBytes
        do throws(CipherError) { fileKey = try SecretBytes.random(count: 16) } catch { throw .cipher(error) }
        defer { fileKey.wipe() }
        let nonce: [UInt8]
        do throws(CipherError) { nonce = try SecureRandom.bytes(16) } catch { throw .cipher(error) }
        try self.init(recipients: recipients, armor: armor, fileKey: fileKey, nonce: nonce, sink: sink)
    }

    /// Internal: deterministic file key and nonce (for tests of parallel/sequential equality).
    init(recipients: [any AgeRecipient], armor: Bool, fileKey: SecretBytes, nonce: [UInt8],
         batchChunks: Int = 16, parallel: Bool = true, sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws(AgeError) {
        let start = try PayloadStart.make(recipients: recipients, fileKey: fileKey, nonce: nonce)
        header = start.bytes
        cipher = start.cipher
        self.batchChunks = batchChunks
        self.parallel = parallel
        self.armor = armor ? ArmorEncoder() : nil
        self.sink = sink
    }

    private var stream: StreamEncryptor {
        if let batch { return batch }
        let created = StreamEncryptor(cipher: cipher, batchChunks: batchChunks, parallel: parallel)
        batch = created
        return created
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) throws {
        if let armor { try armor.update(bytes, sink: sink) } else { try sink(bytes) }
    }

    private func emitHeader() throws {
        if let header {
            self.header = nil
            try header.withUnsafeBytes { try emit($0) }
        }
    }

    /// Encrypts more plaintext. Untyped: it throws ``AgeError`` and, unchanged, what the sink throws.
    /// - Parameter plaintext: The next plaintext bytes.
    /// - Throws: ``AgeError/invalidArgument(_:)`` after ``finish()``, or what the sink throws.
    public func update(_ plaintext: UnsafeRawBufferPointer) throws {
        guard !finished else { throw AgeError.invalidArgument("update after finish") }
        try emitHeader()
        try stream.update(plaintext) { try emit($0) }
    }

    /// Encrypts more plaintext.
    /// - Parameter plaintext: The next plaintext bytes.
    /// - Throws: As ``update(_:)-(UnsafeRawBufferPointer)``.
    public func update<Bytes: DataProtocol>(_ plaintext: Bytes) throws {
        for region in plaintext.regions { try region.withUnsafeBytes { try update($0) } }
    }

    /// Reads plaintext from `fd` straight into the chunk batch (no intermediate copy).
    /// - Returns: The number of bytes read; 0 at end of file.
    func update(readingFrom fd: Int32) throws -> Int {
        guard !finished else { throw AgeError.invalidArgument("update after finish") }
        try emitHeader()
        return try stream.update(readingFrom: fd) { try emit($0) }
    }

    /// Writes the final chunk (and the armor's END line). Calling it again does nothing.
    /// Untyped: it throws ``AgeError`` and, unchanged, what the sink throws.
    /// - Throws: ``AgeError``, or what the sink throws.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        try emitHeader()
        try stream.finish { try emit($0) }
        try armor?.finish(sink: sink)
    }
}
