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
import Cipher
import Shredder

/// age v1 file encryption (age-encryption.org/v1): streaming, constant memory, parallel.
///
/// ```swift
/// let identity = X25519Identity.generate()
/// try Age.encryptFile(at: "report.pdf", to: "report.pdf.age", recipients: [identity.recipient])
/// try Age.decryptFile(at: "report.pdf.age", to: "copy.pdf", identities: [identity])
/// ```
public enum Age {
    /// The size of the reads used by the streaming functions.
    static let readSize = 1 << 20

    /// Progress callback: the number of input bytes consumed so far.
    public typealias Progress = (Int64) -> Void

    // MARK: File descriptors

    /// Encrypts everything readable from `input` to `output`.
    ///
    /// - Parameters:
    ///   - input: A readable descriptor (file, pipe, socket); read to end of file.
    ///   - output: A writable descriptor.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: ``AgeError``.
    public static func encrypt(from input: Int32, to output: Int32, recipients: [any AgeRecipient],
                               armor: Bool = false, progress: Progress? = nil) throws(AgeError) {
        try ageCall {
            if !armor {
                // Binary: the header, then a chunk pipeline on every core (this thread included),
                // reading in turn.
                let cipher = try PayloadStart.write(to: output, recipients: recipients)
                try ChunkPipeline(direction: .seal, input: input, output: output, cipher: cipher)
                    .run(workers: ChunkWorkers.all, progress: progress)
                return
            }
            let encryptor = try AgeEncryptor(recipients: recipients, armor: armor) { try AgeIO.writeAll(output, $0) }
            var total: Int64 = 0
            while true {
                let n = try encryptor.update(readingFrom: input)
                if n == 0 { break }
                total += Int64(n)
                progress?(total)
            }
            try encryptor.finish()
        }
    }

    /// Decrypts everything readable from `input` to `output`. Armor is detected.
    ///
    /// Plaintext is written only once authenticated; after a payload failure, `output` holds
    /// the verified plaintext before the damaged chunk (use ``decryptFile(at:to:identities:armor:progress:)``
    /// to get all or nothing).
    ///
    /// - Parameters:
    ///   - input: A readable descriptor.
    ///   - output: A writable descriptor.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: ``AgeError``: header, header MAC, no match, payload or armor failure, or I/O.
    public static func decrypt(from input: Int32, to output: Int32, identities: [any AgeIdentity],
                               armor: AgeArmorMode = .auto, progress: Progress? = nil) throws(AgeError) {
        try ageCall {
            // The first bytes tell armor from binary: whitespace alone is read on up to 4 KiB.
            var leading = [UInt8]()
            if armor == .auto {
                var piece = [UInt8](repeating: 0, count: 4096)
                while leading.count < 4096 && leading.allSatisfy(Armor.isWhitespace) {
                    let n = try AgeIO.read(input, into: &piece)
                    if n == 0 { break }
                    leading += piece[0..<n]
                }
            }
            let armored = armor == .required || (armor == .auto && leading.first(where: { !Armor.isWhitespace($0) }) == 0x2D)
            if !armored {
                // Binary: the header and nonce read here, then the payload through a chunk pipeline.
                let start = try PayloadStart.read(from: input, leading: leading, identities: identities)
                progress?(start.length)
                let pipeline = ChunkPipeline(direction: .open, input: input, output: output, cipher: start.cipher, prefix: start.payloadPrefix)
                // Progress stays the input consumed: the header, then the payload written.
                try pipeline.run(workers: ChunkWorkers.all, progress: progress.map { report in { report(start.length + $0) } })
                return
            }
            // Armored: through the push-mode decryptor, its verified plaintext written on a
            // background thread while the next batch is opened.
            let writer = BackgroundWriter(fd: output)
            let decryptor = AgeDecryptor(identities: identities, armor: armor) { try writer.writeAsync($0) }
            // A writer with real work (file, pipe) gets a core of its own.
            if ChunkWorkers.writesCostCPU(output) { decryptor.workers = ChunkWorkers.besideWriter }
            defer {
                // Never free the batch buffers under a queued write.
                try? writer.finish()
                withExtendedLifetime(decryptor) {}
            }
            var scratch = [UInt8](repeating: 0, count: 64 * 1024)
            var total = Int64(leading.count)
            do {
                try decryptor.update(leading)
                progress?(total)
                while true {
                    let n = try decryptor.update(readingFrom: input, scratch: &scratch)
                    if n == 0 { break }
                    total += Int64(n)
                    progress?(total)
                }
                try decryptor.finish()
            } catch {
                try? writer.finish()
                throw error
            }
            try writer.finish()
        }
    }

    // MARK: In memory

    /// Encrypts a buffer (for small data; use the streaming functions for files).
    /// - Parameters:
    ///   - plaintext: The bytes to encrypt.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    /// - Returns: The age file.
    /// - Throws: ``AgeError``.
    public static func encrypt<Bytes: DataProtocol>(_ plaintext: Bytes, recipients: [any AgeRecipient], armor: Bool = false) throws(AgeError) -> [UInt8] {
        return try ageCall {
            var out = [UInt8]()
            let encryptor = try AgeEncryptor(recipients: recipients, armor: armor) { out += $0 }
            try encryptor.update(plaintext)
            try encryptor.finish()
            return out
        }
    }

    /// Decrypts a buffer holding a whole age file; all or nothing.
    /// - Parameters:
    ///   - file: The whole age file.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    /// - Returns: The plaintext.
    /// - Throws: ``AgeError``.
    public static func decrypt<Bytes: DataProtocol>(_ file: Bytes, identities: [any AgeIdentity], armor: AgeArmorMode = .auto) throws(AgeError) -> [UInt8] {
        return try ageCall {
            var out = [UInt8]()
            let decryptor = AgeDecryptor(identities: identities, armor: armor) { out += $0 }
            do {
                try decryptor.update(file)
                try decryptor.finish()
            } catch {
                for i in out.indices { out[i] = 0 }
                throw error
            }
            return out
        }
    }

    // MARK: Async sequences

    /// Encrypts an async byte sequence (for example `FileHandle.bytes` or `URL.resourceBytes`),
    /// handing the encrypted bytes to `output` in pieces of up to a few MiB.
    /// - Parameters:
    ///   - input: The plaintext.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    ///   - output: Receives the age file, in order.
    /// - Throws: ``AgeError`` or what the sequence or `output` throws (untyped: both are passed on).
    public static func encrypt<Input: AsyncSequence>(_ input: Input, recipients: [any AgeRecipient], armor: Bool = false,
                                                     output: ([UInt8]) async throws -> Void) async throws where Input.Element == UInt8 {
        let pending = PendingOutput()
        let encryptor = try AgeEncryptor(recipients: recipients, armor: armor) { pending.bytes += $0 }
        try await pending.pump(bytes: input, into: { try encryptor.update($0) }, finish: encryptor.finish, output: output)
    }

    /// Encrypts an async sequence of byte buffers (`Data`, `[UInt8]`).
    /// - Parameters:
    ///   - input: The plaintext.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    ///   - output: Receives the age file, in order.
    /// - Throws: ``AgeError`` or what the sequence or `output` throws (untyped: both are passed on).
    public static func encrypt<Input: AsyncSequence>(_ input: Input, recipients: [any AgeRecipient], armor: Bool = false,
                                                     output: ([UInt8]) async throws -> Void) async throws where Input.Element: DataProtocol {
        let pending = PendingOutput()
        let encryptor = try AgeEncryptor(recipients: recipients, armor: armor) { pending.bytes += $0 }
        try await pending.pump(buffers: input, into: { try encryptor.update($0) }, finish: encryptor.finish, output: output)
    }

    /// Decrypts an async byte sequence, handing verified plaintext to `output`.
    /// - Parameters:
    ///   - input: The age file.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - output: Receives the verified plaintext, in order.
    /// - Throws: ``AgeError`` or what the sequence or `output` throws (untyped: both are passed on).
    public static func decrypt<Input: AsyncSequence>(_ input: Input, identities: [any AgeIdentity], armor: AgeArmorMode = .auto,
                                                     output: ([UInt8]) async throws -> Void) async throws where Input.Element == UInt8 {
        let pending = PendingOutput()
        let decryptor = AgeDecryptor(identities: identities, armor: armor) { pending.bytes += $0 }
        try await pending.pump(bytes: input, into: { try decryptor.update($0) }, finish: decryptor.finish, output: output)
    }

    /// Decrypts an async sequence of byte buffers, handing verified plaintext to `output`.
    /// - Parameters:
    ///   - input: The age file.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - output: Receives the verified plaintext, in order.
    /// - Throws: ``AgeError`` or what the sequence or `output` throws (untyped: both are passed on).
    public static func decrypt<Input: AsyncSequence>(_ input: Input, identities: [any AgeIdentity], armor: AgeArmorMode = .auto,
                                                     output: ([UInt8]) async throws -> Void) async throws where Input.Element: DataProtocol {
        let pending = PendingOutput()
        let decryptor = AgeDecryptor(identities: identities, armor: armor) { pending.bytes += $0 }
        try await pending.pump(buffers: input, into: { try decryptor.update($0) }, finish: decryptor.finish, output: output)
    }

    /// What a push-mode encryptor or decryptor produced since `output` last had it: the async
    /// sequence functions feed the input in, and hand this on after every piece.
    private final class PendingOutput {
        var bytes = [UInt8]()

        private func drain(_ output: ([UInt8]) async throws -> Void) async throws {
            guard !bytes.isEmpty else { return }
            try await output(bytes)
            bytes.removeAll(keepingCapacity: true)
        }

        /// Feeds the bytes of `input` to `update` in pieces of ``Age/readSize``, then finishes.
        func pump<Input: AsyncSequence>(bytes input: Input, into update: ([UInt8]) throws -> Void, finish: () throws -> Void,
                                        output: ([UInt8]) async throws -> Void) async throws where Input.Element == UInt8 {
            var piece = [UInt8]()
            piece.reserveCapacity(Age.readSize)
            for try await byte in input {
                piece.append(byte)
                if piece.count == Age.readSize {
                    try update(piece)
                    piece.removeAll(keepingCapacity: true)
                    try await drain(output)
                }
            }
            try update(piece)
            try finish()
            try await drain(output)
        }

        /// Feeds each buffer of `input` to `update`, then finishes.
        func pump<Input: AsyncSequence>(buffers input: Input, into update: (Input.Element) throws -> Void, finish: () throws -> Void,
                                        output: ([UInt8]) async throws -> Void) async throws where Input.Element: DataProtocol {
            for try await buffer in input {
                try update(buffer)
                try await drain(output)
            }
            try finish()
            try await drain(output)
        }
    }

    // MARK: Files

    /// Encrypts the file at `source` into `destination` atomically (temporary file beside the
    /// destination, fsync, rename, fsync of the directory; mode 0600). A failure leaves no
    /// destination file and no partial output. A `destination` that is a character device or
    /// FIFO is written in place, `/dev/stdout` or `/dev/fd/N` writes into that descriptor, and a
    /// symbolic link, directory, socket or block device is refused (`SecureFile.writeOutput(to:mode:_:)`).
    ///
    /// - Parameters:
    ///   - source: The plaintext file.
    ///   - destination: The age file to create or replace. It must not be `source` (see
    ///     ``encryptFileInPlace(at:recipients:armor:shredOptions:progress:)``).
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor.
    ///   - progress: Called with the plaintext bytes consumed.
    /// - Throws: ``AgeError``.
    public static func encryptFile(at source: String, to destination: String, recipients: [any AgeRecipient],
                                   armor: Bool = false, progress: Progress? = nil) throws(AgeError) {
        let input = try AgeIO.openForReading(source)
        defer { close(input) }
        try encrypt(from: input, toFile: destination, recipients: recipients, armor: armor, progress: progress)
    }

    /// Encrypts everything readable from `input` (a file, pipe or socket, e.g. standard input)
    /// into the file `destination`, atomically: a temporary file beside it (mode 0600), fsync,
    /// rename, fsync of the directory. On any failure nothing is left behind and an existing
    /// `destination` is untouched. Devices, FIFOs, descriptors and refused kinds of path as in
    /// ``encryptFile(at:to:recipients:armor:progress:)``.
    ///
    /// - Parameters:
    ///   - input: A readable descriptor; read to end of file.
    ///   - destination: The age file to make.
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor instead of binary.
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: ``AgeError``; ``AgeError/invalidArgument(_:)`` when `destination` is the file
    ///   `input` reads (use ``encryptFileInPlace(at:recipients:armor:shredOptions:progress:)``).
    public static func encrypt(from input: Int32, toFile destination: String, recipients: [any AgeRecipient],
                               armor: Bool = false, progress: Progress? = nil) throws(AgeError) {
        if AgeIO.isSameFile(input, destination) {
            throw AgeError.invalidArgument("\(destination) is the source file; use encryptFileInPlace(at:recipients:) to replace it")
        }
        try writeOutput(destination) { (output: Int32) throws(AgeError) in
            try encrypt(from: input, to: output, recipients: recipients, armor: armor, progress: progress)
        }
    }

    /// Encrypts a file in place: the age file atomically replaces the plaintext (temporary file
    /// beside it, fsync, rename, fsync of the directory), then the old plaintext inode, kept
    /// open across the rename, has its allocated blocks overwritten by `FileShredder`.
    ///
    /// - Parameters:
    ///   - path: The plaintext file, replaced by its encryption (mode 0600).
    ///   - recipients: One or more recipients.
    ///   - armor: Write ASCII armor.
    ///   - shredOptions: How the old blocks are overwritten.
    ///   - progress: Called with the plaintext bytes consumed.
    /// - Returns: The shredder's report on the old plaintext: read its warnings (copy-on-write
    ///   file systems, SSDs and snapshots may keep old blocks whatever is overwritten).
    /// - Throws: ``AgeError``; ``AgeError/plaintextNotShredded(_:)`` when the encryption
    ///   succeeded but the overwrite failed.
    @discardableResult
    public static func encryptFileInPlace(at path: String, recipients: [any AgeRecipient], armor: Bool = false,
                                          shredOptions: ShredOptions = ShredOptions(), progress: Progress? = nil) throws(AgeError) -> ShredReport {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw AgeError.io("cannot open \(path) for reading and writing: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard let info = try? FileCalls.status(fd), info.isRegularFile else {
            throw AgeError.invalidArgument("\(path) is not a regular file")
        }
        if info.links > 1 && !shredOptions.allowHardLinks {
            throw AgeError.invalidArgument("\(path) has \(info.links) hard links; the other names would keep the plaintext")
        }
        try atomically(path) { (output: Int32) throws(AgeError) in
            try encrypt(from: fd, to: output, recipients: recipients, armor: armor, progress: progress)
        }
        do {
            return try FileShredder.overwrite(fileDescriptor: fd, path: path + " (old plaintext)", options: shredOptions)
        } catch {
            throw AgeError.plaintextNotShredded("\(error)")
        }
    }

    /// Decrypts the age file at `source` into `destination` atomically: the destination appears
    /// only once the whole payload authenticated; on any failure nothing is left behind.
    /// `destination` may be `source` (the plaintext then replaces the age file).
    ///
    /// - Parameters:
    ///   - source: The age file.
    ///   - destination: The plaintext file to make.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: ``AgeError``.
    public static func decryptFile(at source: String, to destination: String, identities: [any AgeIdentity],
                                   armor: AgeArmorMode = .auto, progress: Progress? = nil) throws(AgeError) {
        let input = try AgeIO.openForReading(source)
        defer { close(input) }
        try decrypt(from: input, toFile: destination, identities: identities, armor: armor, progress: progress)
    }

    /// Decrypts everything readable from `input` (a file, pipe or socket, e.g. standard input)
    /// into the file `destination`, atomically: the destination appears only once the whole
    /// payload authenticated; on any failure nothing is left behind and an existing
    /// `destination` is untouched. `destination` may be the file `input` reads. A character
    /// device, FIFO or descriptor (`/dev/stdout`, `/dev/fd/N`) is written as it is verified, as
    /// standard output is, so a failure there stops the output part way; a symbolic link,
    /// directory, socket or block device is refused.
    ///
    /// - Parameters:
    ///   - input: A readable descriptor holding the age file; read to end of file.
    ///   - destination: The plaintext file to make.
    ///   - identities: Keys and passphrases to try.
    ///   - armor: Armor handling (detected by default).
    ///   - progress: Called as it goes with the input consumed so far.
    /// - Throws: ``AgeError``.
    public static func decrypt(from input: Int32, toFile destination: String, identities: [any AgeIdentity],
                               armor: AgeArmorMode = .auto, progress: Progress? = nil) throws(AgeError) {
        try writeOutput(destination) { (output: Int32) throws(AgeError) in
            try decrypt(from: input, to: output, identities: identities, armor: armor, progress: progress)
        }
    }

    // MARK: Plumbing

    static func atomically(_ destination: String, _ body: (Int32) throws(AgeError) -> Void) throws(AgeError) {
        do {
            try SecureFile.replaceAtomically(destination, body)
        } catch {
            throw AgeError.wrap(error)
        }
    }

    /// Writes to a path named as output (`SecureFile.writeOutput(to:mode:_:)`): a new path or a
    /// regular file is replaced atomically; a character device or FIFO is written in place;
    /// `/dev/stdout` and `/dev/fd/N` write into that descriptor; a symlink, directory, socket or
    /// block device is refused.
    static func writeOutput(_ destination: String, _ body: (Int32) throws(AgeError) -> Void) throws(AgeError) {
        do {
            try SecureFile.writeOutput(to: destination, body)
        } catch {
            throw AgeError.wrap(error)
        }
    }
}

/// Runs `body`, whose errors are those of the age module's internals (``AgeError``, Cipher's
/// errors, and those of identities, recipients and passphrase providers it calls), and throws
/// what it throws as an ``AgeError`` (``AgeError/wrap(_:)``): the printed text is unchanged.
@inline(__always)
func ageCall<Result>(_ body: () throws -> Result) throws(AgeError) -> Result {
    do { return try body() } catch { throw AgeError.wrap(error) }
}
