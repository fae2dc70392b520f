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

/// Push-mode age decryption: feed the encrypted file with `update(_:)`, then call ``finish()``.
/// Plaintext goes to the sink as soon as it is authenticated, never before. On a payload
/// failure the plaintext already released is exactly the verified part before the damage.
///
/// Not thread-safe: drive one instance from one task at a time.
public final class AgeDecryptor {
    private let identities: [any AgeIdentity]
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let mode: AgeArmorMode
    private let parallel: Bool
    private var detecting: [UInt8]? = []
    private var armor: ArmorDecoder?
    private var parser = AgeHeaderParser()
    private var nonce = [UInt8]()
    private var stream: StreamDecryptor?
    /// Unwrapped once the header ends; wiped once the payload cipher is made from it and the nonce.
    private var fileKey: SecretBytes?
    private var failure: (any Error)?
    private var finished = false
    /// Threads opening each batch once the payload starts; nil for the default (see ``ChunkWorkers``).
    var workers: Int? {
        didSet { if let workers, let stream { stream.workers = max(1, workers) } }
    }

    /// The stanzas of the header, once parsed.
    public private(set) var stanzas: [AgeStanza] = []
    /// Whether the input was armored (known after the first bytes).
    public private(set) var isArmored = false

    /// Creates a decryptor.
    /// - Parameters:
    ///   - identities: Keys and passphrases to try, in order.
    ///   - armor: Armor handling; ``AgeArmorMode/auto`` detects it.
    ///   - sink: Receives the plaintext; the buffer is only valid during the call.
    public convenience init(identities: [any AgeIdentity], armor: AgeArmorMode = .auto,
                sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.init(identities: identities, armor: armor, parallel: true, sink: sink)
    }

    init(identities: [any AgeIdentity], armor: AgeArmorMode, parallel: Bool, sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.identities = identities
        self.mode = armor
        self.parallel = parallel
        self.sink = sink
        switch armor {
        case .auto: detecting = []
        case .required: detecting = nil; self.armor = ArmorDecoder(); isArmored = true
        case .none: detecting = nil
        }
    }

    deinit { fileKey?.wipe() }

    /// Decrypts more of the encrypted file. Untyped: it throws ``AgeError`` and, unchanged, what
    /// the sink throws.
    /// - Parameter bytes: The next bytes of the age file.
    /// - Throws: ``AgeError`` (header, MAC, no match, payload or armor failure), or what the sink throws.
    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        do { try feedRaw(bytes) } catch { failure = error; throw error }
    }

    /// Reads encrypted bytes from `fd` through `scratch` and decrypts them.
    /// - Returns: The number of bytes read; 0 at end of file.
    func update(readingFrom fd: Int32, scratch: inout [UInt8]) throws -> Int {
        if let failure { throw failure }
        let n = try AgeIO.read(fd, into: &scratch)
        if n > 0 { try scratch.withUnsafeBytes { try update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) } }
        return n
    }

    /// Decrypts more of the encrypted file.
    /// - Parameter bytes: The next bytes of the age file.
    /// - Throws: As ``update(_:)-(UnsafeRawBufferPointer)``.
    public func update<Bytes: DataProtocol>(_ bytes: Bytes) throws {
        for region in bytes.regions { try region.withUnsafeBytes { try update($0) } }
    }

    /// Ends the input: checks the armor END line, the header, and that a final chunk was seen.
    /// Untyped: it throws ``AgeError`` and, unchanged, what the sink throws.
    /// - Throws: ``AgeError`` (a truncated file, armor or payload failure), or what the sink throws.
    public func finish() throws {
        if let failure { throw failure }
        guard !finished else { return }
        finished = true
        do {
            if let pending = detecting {
                detecting = nil
                try pending.withUnsafeBytes { try feedBinary($0) }
            }
            try armor?.finish { try feedBinary($0) }
            try parser.finish()
            guard nonce.count == PayloadCipher.nonceSize, let stream else {
                throw AgeError.headerFailure("the file ends before the 16-byte payload nonce")
            }
            try stream.finish(sink: sink)
        } catch {
            failure = error
            throw error
        }
    }

    private func feedRaw(_ bytes: UnsafeRawBufferPointer) throws {
        if detecting != nil {
            var index = 0
            while index < bytes.count && Armor.isWhitespace(bytes[index]) { index += 1 }
            if index == bytes.count && detecting!.count + bytes.count < 4096 {
                detecting! += bytes
                return
            }
            let pending = detecting! + bytes
            detecting = nil
            let first = pending.first(where: { !Armor.isWhitespace($0) })
            if first == 0x2D {
                armor = ArmorDecoder()
                isArmored = true
            }
            try pending.withUnsafeBytes { all in
                if let armor { try armor.update(all) { try feedBinary($0) } } else { try feedBinary(all) }
            }
            return
        }
        if let armor {
            try armor.update(bytes) { try feedBinary($0) }
        } else {
            try feedBinary(bytes)
        }
    }

    private func feedBinary(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        if parser.header == nil {
            offset = try parser.feed(bytes)
            if let header = parser.header {
                stanzas = header.stanzas
                fileKey = try PayloadStart.unwrapFileKey(header: header, identities: identities)
            }
        }
        if offset < bytes.count && nonce.count < PayloadCipher.nonceSize {
            let take = min(PayloadCipher.nonceSize - nonce.count, bytes.count - offset)
            nonce += UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)])
            offset += take
            if nonce.count == PayloadCipher.nonceSize, let fileKey {
                defer {
                    fileKey.wipe()
                    self.fileKey = nil
                }
                let stream = StreamDecryptor(cipher: try PayloadCipher(fileKey: fileKey, nonce: nonce), parallel: parallel)
                if parallel, let workers { stream.workers = max(1, workers) }
                self.stream = stream
            }
        }
        if offset < bytes.count, let stream {
            try stream.update(UnsafeRawBufferPointer(rebasing: bytes[offset...]), sink: sink)
        }
    }
}
