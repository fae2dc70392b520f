import Foundation
import Crypto
import Cipher

/// Whether decryption expects ASCII armor.
public enum AgeArmorMode: Sendable {
    /// Detect it: input whose first non-whitespace byte is `-` is read as armor.
    case auto
    /// The input must be armored; anything else is an ``AgeError/armorFailure(_:)``.
    case required
    /// The input is binary.
    case none
}

/// Push-mode age encryption: feed plaintext with `update(_:)`, then call ``finish()``.
/// The encrypted bytes go to the sink given at creation, in order.
///
/// Memory is bounded by the batch (16 chunks of 64 KiB by default), whatever the input size.
/// Not thread-safe: drive one instance from one task at a time.
public final class AgeEncryptor {
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let armor: ArmorEncoder?
    private var header: [UInt8]?
    private let stream: StreamEncryptor
    private var finished = false

    /// Creates an encryptor for `recipients`.
    /// - Parameters:
    ///   - recipients: One or more recipients; an ``ScryptRecipient`` must be alone.
    ///   - armor: Write ASCII armor (PEM) instead of binary.
    ///   - sink: Receives the encrypted bytes; the buffer is only valid during the call.
    /// - Throws: ``AgeError/invalidArgument(_:)`` for no recipients or scrypt mixed with others.
    public convenience init(recipients: [any AgeRecipient], armor: Bool = false,
                            sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        let fileKey = try SecretBytes.random(count: 16)
        defer { fileKey.wipe() }
        try self.init(recipients: recipients, armor: armor, fileKey: fileKey, nonce: try SecureRandom.bytes(16), sink: sink)
    }

    /// Internal: deterministic file key and nonce (for tests of parallel/sequential equality).
    init(recipients: [any AgeRecipient], armor: Bool, fileKey: SecretBytes, nonce: [UInt8],
         batchChunks: Int = 16, parallel: Bool = true, sink: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !recipients.isEmpty else { throw AgeError.invalidArgument("no recipients") }
        if recipients.contains(where: { $0.requiresSoleStanza }) && recipients.count > 1 {
            throw AgeError.invalidArgument("a passphrase (scrypt) recipient cannot be combined with other recipients")
        }
        guard fileKey.count == 16, nonce.count == 16 else { throw AgeError.invalidArgument("the file key and nonce are 16 bytes") }
        var stanzas = [AgeStanza]()
        for recipient in recipients { stanzas += try recipient.wrap(fileKey: fileKey) }
        header = AgeHeader.encode(stanzas: stanzas, fileKey: fileKey) + nonce
        stream = StreamEncryptor(cipher: PayloadCipher(fileKey: fileKey, nonce: nonce), batchChunks: batchChunks, parallel: parallel)
        self.armor = armor ? ArmorEncoder() : nil
        self.sink = sink
    }

    /// Threads sealing each batch (see ``ChunkWorkers``).
    var workers: Int {
        get { stream.workers }
        set { stream.workers = max(1, newValue) }
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

    /// Encrypts more plaintext.
    /// - Throws: ``AgeError/invalidArgument(_:)`` after ``finish()``, or what the sink throws.
    public func update(_ plaintext: UnsafeRawBufferPointer) throws {
        guard !finished else { throw AgeError.invalidArgument("update after finish") }
        try emitHeader()
        try stream.update(plaintext) { try emit($0) }
    }

    /// Encrypts more plaintext.
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

    /// Encrypts everything readable from `input` straight to `output` (binary only) through an
    /// ``ChunkPipeline`` of `workers` threads, then finishes.
    func encryptPipelined(from input: Int32, to output: Int32, workers: Int, slots: Int = 16, progress: ((Int64) -> Void)?) throws {
        guard !finished else { throw AgeError.invalidArgument("update after finish") }
        guard armor == nil else { throw AgeError.invalidArgument("the pipelined path writes binary output") }
        finished = true
        if let header {
            self.header = nil
            try header.withUnsafeBytes { try Age.writeAll(output, $0) }
        }
        try ChunkPipeline(direction: .seal, input: input, output: output, cipher: stream.cipher, slots: slots).run(workers: workers, progress: progress)
    }

    /// Writes the final chunk (and the armor's END line).
    public func finish() throws {
        guard !finished else { return }
        finished = true
        try emitHeader()
        try stream.finish { try emit($0) }
        try armor?.finish(sink: sink)
    }
}

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
    private var fileKey: SecretBytes?
    private var failure: (any Error)?
    private var finished = false
    /// When set, a binary payload is not opened here: once the nonce is read, the payload key
    /// and the payload bytes already fed wait in ``deferredPayload`` for a ``ChunkPipeline``.
    var deferPayload = false
    private(set) var deferredPayload: (cipher: PayloadCipher, prefix: [UInt8])?
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

    /// Decrypts more of the encrypted file.
    /// - Throws: ``AgeError`` (header, MAC, no match, payload or armor failure), or what the sink throws.
    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        do { try feedRaw(bytes) } catch { failure = error; throw error }
    }

    /// Reads encrypted bytes from `fd`: straight into the chunk batch once in the binary
    /// payload, through a small buffer before that (header, armor).
    /// - Returns: The number of bytes read; 0 at end of file.
    func update(readingFrom fd: Int32, scratch: ScratchBuffer) throws -> Int {
        if let failure { throw failure }
        if let stream, armor == nil, detecting == nil {
            do { return try stream.update(readingFrom: fd, sink: sink) } catch { failure = error; throw error }
        }
        while true {
            let n = read(fd, scratch.pointer.baseAddress!, scratch.pointer.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw AgeError.io("read failed: \(String(cString: strerror(errno)))")
            }
            if n > 0 { try update(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(scratch.pointer)[0..<n])) }
            return n
        }
    }

    /// Decrypts more of the encrypted file.
    public func update<Bytes: DataProtocol>(_ bytes: Bytes) throws {
        for region in bytes.regions { try region.withUnsafeBytes { try update($0) } }
    }

    /// Ends the input: checks the armor END line, the header, and that a final chunk was seen.
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
            if let header = parser.header { try unlock(header) }
        }
        if offset < bytes.count && nonce.count < PayloadCipher.nonceSize {
            let take = min(PayloadCipher.nonceSize - nonce.count, bytes.count - offset)
            nonce += UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)])
            offset += take
            if nonce.count == PayloadCipher.nonceSize, let fileKey {
                let cipher = PayloadCipher(fileKey: fileKey, nonce: nonce)
                fileKey.wipe()
                self.fileKey = nil
                if deferPayload && armor == nil {
                    deferredPayload = (cipher, [])
                } else {
                    let stream = StreamDecryptor(cipher: cipher, parallel: parallel)
                    if parallel, let workers { stream.workers = max(1, workers) }
                    self.stream = stream
                }
            }
        }
        if offset < bytes.count, deferredPayload != nil {
            deferredPayload!.prefix += UnsafeRawBufferPointer(rebasing: bytes[offset...])
            return
        }
        if offset < bytes.count, let stream {
            try stream.update(UnsafeRawBufferPointer(rebasing: bytes[offset...]), sink: sink)
        }
    }

    private func unlock(_ header: AgeHeader) throws {
        stanzas = header.stanzas
        fileKey = try Self.unwrapFileKey(header: header, identities: identities)
    }

    /// Unwraps the file key and checks the header MAC.
    static func unwrapFileKey(header: AgeHeader, identities: [any AgeIdentity]) throws -> SecretBytes {
        if header.stanzas.contains(where: { $0.type == "scrypt" }) && header.stanzas.count != 1 {
            throw AgeError.headerFailure("an scrypt stanza must be the only stanza in the header")
        }
        var found: SecretBytes?
        for identity in identities {
            if let key = try identity.unwrap(stanzas: header.stanzas) { found = key; break }
        }
        guard let fileKey = found else {
            let types = Set(header.stanzas.map(\.type)).sorted().joined(separator: ", ")
            throw AgeError.noMatchingIdentity("the file is for \(header.stanzas.count) recipient(s) of type \(types)")
        }
        guard fileKey.count == 16 else {
            fileKey.wipe()
            throw AgeError.headerFailure("the unwrapped file key is not 16 bytes")
        }
        let mac = AgeHeader.computeMAC(fileKey: fileKey, macInput: header.macInput)
        guard ConstantTime.equals(mac, header.mac) else {
            fileKey.wipe()
            throw AgeError.headerMACFailure
        }
        return fileKey
    }
}
