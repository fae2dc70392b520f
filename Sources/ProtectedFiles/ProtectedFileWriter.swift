import Age
import Cipher
import Foundation

/// A protected file written piece by piece, for bytes that arrive in parts (a network
/// transfer): each piece is encrypted as it comes (the same age format as
/// ``ProtectedFiles/write(from:to:protection:progress:)``, in constant memory) into a new file, which
/// holds a complete protected file once ``finish()`` returned (synced to disk). The caller then
/// moves it into place (`rename` or `link`, and a sync of the directory): the writer creates
/// the file at a staging path, never at its final name, so that no partial file is ever seen
/// there. ``abort()`` (or dropping an unfinished writer) removes it.
///
/// Not thread-safe: one thread (or one task at a time) drives it.
public final class ProtectedFileWriter {
    /// Where the file is being written.
    public let path: String
    private let cls: FileProtectionClass
    private var fd: Int32
    private var encryptor: AgeEncryptor?
    /// The plaintext bytes written so far.
    public private(set) var count: UInt64 = 0

    init(path: String, fd: Int32, cls: FileProtectionClass, recipient: any AgeRecipient) throws {
        self.path = path
        self.fd = fd
        self.cls = cls
        encryptor = try AgeEncryptor(recipients: [recipient]) { bytes in
            try SecureFile.writeAll(fd, bytes, path: path)
        }
    }

    deinit {
        if encryptor != nil { abort() }
    }

    /// Encrypts and writes more plaintext.
    /// - Parameter bytes: The next plaintext bytes.
    /// - Throws: ``ProtectedFileError/io(_:)`` (a failed write: disk full...), or
    ///   ``ProtectedFileError/invalidArgument(_:)`` after ``finish()`` or ``abort()``.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ProtectedFileError) {
        guard let encryptor else { throw ProtectedFileError.invalidArgument("\(path) is already finished or abandoned") }
        try map { try encryptor.update(bytes) }
        count += UInt64(bytes.count)
    }

    /// Writes the final chunk and syncs the file to disk; the file is then complete.
    /// - Throws: ``ProtectedFileError/io(_:)``; the file is removed on failure.
    public func finish() throws(ProtectedFileError) {
        guard let encryptor else { throw ProtectedFileError.invalidArgument("\(path) is already finished or abandoned") }
        defer { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        do throws(ProtectedFileError) {
            try map { try encryptor.finish() }
            do throws(SystemCallError) { try FileCalls.sync(fd) } catch {
                throw ProtectedFileError.io("fsync of \(path) failed: \(String(cString: strerror(error.code)))")
            }
        } catch {
            abort()
            throw error
        }
        self.encryptor = nil
        close(fd)
        fd = -1
    }

    /// Gives up: the file is closed and removed.
    public func abort() {
        encryptor = nil
        if fd >= 0 {
            close(fd)
            fd = -1
            unlink(path)
        }
    }

    private func map(_ body: () throws -> Void) throws(ProtectedFileError) {
        do { try body() } catch {
            if let error = error as? AgeError { throw ProtectedFiles.map(error, path: path, cls) }
            if let failure = error as? SecureFile.Failure { throw ClassKeyTable.map(failure, path: path) }
            throw ProtectedFileError.mapping(error)
        }
    }
}

extension ProtectedFiles {
    /// Starts a protected file of class `protection` written piece by piece at `path`, which
    /// must not exist yet (created 0600, never following a link) in an existing directory.
    /// See ``ProtectedFileWriter``.
    /// - Parameters:
    ///   - path: Where the file is created (a staging path, not its final name).
    ///   - protection: The file's class.
    /// - Returns: The writer; call ``ProtectedFileWriter/finish()`` or ``ProtectedFileWriter/abort()``.
    /// - Throws: ``ProtectedFileError``: ``ProtectedFileError/locked(_:_:)`` when the class is
    ///   not writable now (every class but completeUnlessOpen needs its class key);
    ///   ``ProtectedFileError/io(_:)`` when the file cannot be created.
    public func makeWriter(creating path: String, protection: FileProtectionClass) throws(ProtectedFileError) -> ProtectedFileWriter {
        let recipient = try Self.typed { try writableRecipient(protection) }
        let fd = createExclusively(path)
        guard fd >= 0 else { throw ProtectedFileError.io("cannot create \(path): \(String(cString: strerror(errno)))") }
        do {
            return try ProtectedFileWriter(path: path, fd: fd, cls: protection, recipient: recipient)
        } catch {
            close(fd)
            unlink(path)
            throw ProtectedFileError.io("cannot start \(path): \(error)")
        }
    }
}

/// Creates `path` (0600), failing if anything is there, a link included.
private func createExclusively(_ path: String) -> Int32 {
    open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
}
