import Foundation
import Age
import Cipher
import Vault

/// A protected file open for streaming, random-access reads (constant memory: only the 64 KiB
/// chunks a read touches are decrypted). The file key lives here until ``close()`` (or the
/// reader is freed). For ``FileProtection/complete`` each read first checks that the vault is
/// still unlocked and, when it is not, closes the reader and fails, as on iOS; a
/// ``FileProtection/completeUnlessOpen`` file stays readable after a lock until it is closed.
///
/// Not thread-safe: use one reader from one task at a time.
public final class ProtectedFileReader {
    /// The class of the file.
    public let protection: FileProtectionClass
    /// The plaintext size in bytes.
    public let size: Int64
    /// The path it was opened from.
    public let path: String
    /// The offset of the next ``read(upToCount:)``.
    public private(set) var position: Int64 = 0
    private var reader: AgeRandomAccessReader?
    private var fd: Int32
    private let manager: CryptoManager

    init(reader: AgeRandomAccessReader, fd: Int32, cls: FileProtectionClass, path: String, manager: CryptoManager) {
        self.reader = reader
        self.fd = fd
        self.protection = cls
        self.size = reader.plaintextSize
        self.path = path
        self.manager = manager
    }

    deinit { close() }

    /// Whether ``close()`` was called (or a read after a lock closed it).
    public var isClosed: Bool { reader == nil }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    /// - Throws: ``ProtectedFileError/locked(_:_:)`` for a complete file after the vault locked,
    ///   ``ProtectedFileError/tampered(path:reason:)``, ``ProtectedFileError/invalidArgument(_:)``
    ///   after close or for a negative range.
    public func read(offset: Int64, count: Int) throws -> [UInt8] {
        guard let reader else { throw ProtectedFileError.invalidArgument("\(path) is closed") }
        guard offset >= 0, count >= 0 else { throw ProtectedFileError.invalidArgument("a negative offset or count") }
        if protection.protection == .complete && !manager.isUnlocked {
            close()
            throw ProtectedFileError.locked(protection, .locked)
        }
        do {
            return try reader.read(offset: offset, count: count)
        } catch let error as AgeError {
            throw ProtectedFiles.map(error, path: path, protection)
        }
    }

    /// Reads up to `count` bytes from ``position`` and advances it; empty at the end.
    public func read(upToCount count: Int) throws -> [UInt8] {
        let bytes = try read(offset: position, count: count)
        position += Int64(bytes.count)
        return bytes
    }

    /// Moves ``position``.
    public func seek(to offset: Int64) throws {
        guard offset >= 0 else { throw ProtectedFileError.invalidArgument("a negative offset") }
        position = offset
    }

    /// Frees the file key and closes the file.
    public func close() {
        if reader != nil {
            reader = nil
            HeapScrub.scrubRecentlyFreed(stackDepth: 32)
        }
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }
}
