import Foundation
import Age
import Cipher
import Vault

/// A protected file open for streaming, random-access reads (constant memory: only the 64 KiB
/// chunks a read touches are decrypted). The file key lives here until ``close()`` (or the
/// reader is freed).
///
/// For ``FileProtection/complete`` the reader observes the vault's lock state: when the vault
/// locks, the file key is wiped at once (on a task of its own, within moments, without waiting
/// for a read) and every later read fails with ``ProtectedFileError/locked(_:_:)``, as on iOS;
/// each read also checks that the vault is unlocked first. A
/// ``FileProtection/completeUnlessOpen`` file stays readable after a lock until it is closed.
///
/// Reads may come from one task at a time; the lock observer may wipe the key concurrently.
public final class ProtectedFileReader {
    /// The class of the file.
    public let protection: FileProtectionClass
    /// The plaintext size in bytes.
    public let size: Int64
    /// The path it was opened from.
    public let path: String
    /// The offset of the next ``read(upToCount:)``.
    public private(set) var position: Int64 = 0
    private let key: KeyHolder
    private let manager: CryptoManager
    private let observer: Task<Void, Never>?

    /// The file key (inside the age reader) and the descriptor, shared with the lock observer.
    final class KeyHolder: @unchecked Sendable {
        private let lock = NSLock()
        private var reader: AgeRandomAccessReader?
        private var fd: Int32
        /// Whether the key was wiped because the vault locked.
        private(set) var wipedByLock = false

        init(reader: AgeRandomAccessReader, fd: Int32) {
            self.reader = reader
            self.fd = fd
        }

        func withReader<Result, Failure: Error>(_ body: (AgeRandomAccessReader?, Bool) throws(Failure) -> Result) throws(Failure) -> Result {
            lock.lock()
            defer { lock.unlock() }
            return try body(reader, wipedByLock)
        }

        var holdsKey: Bool { withReader { reader, _ in reader != nil } }

        /// Frees the age reader (its payload cipher wipes the key) and scrubs this thread's
        /// recently freed heap chunks, where the AEAD contexts land.
        func wipe(byLock: Bool) {
            lock.lock()
            let had = reader != nil
            reader = nil
            if byLock && had { wipedByLock = true }
            lock.unlock()
            if had { HeapScrub.scrubRecentlyFreed(stackDepth: 32) }
        }

        func closeDescriptor() {
            lock.lock()
            defer { lock.unlock() }
            if fd >= 0 {
                FileCalls.close(fd)
                fd = -1
            }
        }
    }

    init(reader: AgeRandomAccessReader, fd: Int32, cls: FileProtectionClass, path: String, manager: CryptoManager) {
        let key = KeyHolder(reader: reader, fd: fd)
        self.key = key
        self.protection = cls
        self.size = reader.plaintextSize
        self.path = path
        self.manager = manager
        if cls.protection == .complete {
            // The stream yields the current state first, so a lock between the open and this
            // subscription is seen too. The observer runs on a serial queue of its own, not on
            // the cooperative pool, so that tasks blocking every pool thread cannot delay the
            // wipe. The open returns once the observer has its first state (bounded wait), so
            // its start does not run alongside the reads that follow.
            let changes = manager.lockStateChanges
            let started = DispatchSemaphore(value: 0)
            observer = Task(executorPreference: LockWatchExecutor.shared) { [weak key] in
                var signalled = false
                for await state in changes {
                    if !signalled { started.signal(); signalled = true }
                    if state == .locked {
                        key?.wipe(byLock: true)
                        break
                    }
                }
                if !signalled { started.signal() }
                // Whatever the key's owner left on this worker's stack and heap cache.
                HeapScrub.scrubRecentlyFreed(stackDepth: 32)
            }
            _ = started.wait(timeout: .now() + 5)
        } else {
            observer = nil
        }
    }

    deinit { close() }

    /// Whether ``close()`` was called (or the vault locked while a complete file was open).
    public var isClosed: Bool { !key.holdsKey }

    /// Whether the file key is still in memory (false after close, or after the vault locked
    /// for a complete file).
    var holdsFileKey: Bool { key.holdsKey }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    /// - Parameters:
    ///   - offset: The plaintext offset to read at.
    ///   - count: The number of bytes wanted.
    /// - Returns: The authenticated plaintext bytes (empty at or past the end).
    /// - Throws: ``ProtectedFileError/locked(_:_:)`` for a complete file after the vault locked,
    ///   ``ProtectedFileError/tampered(path:reason:)``, ``ProtectedFileError/invalidArgument(_:)``
    ///   after close or for a negative range.
    public func read(offset: Int64, count: Int) throws(ProtectedFileError) -> [UInt8] {
        let complete = protection.protection == .complete
        let locked = complete && !manager.isUnlocked
        if locked { key.wipe(byLock: true) }
        // The AEAD contexts of the chunks just read (which hold the payload key) are freed on
        // this thread; for a complete file they are scrubbed at once, so that wiping the key
        // at a lock, on another thread, leaves no copy here.
        defer { if complete { HeapScrub.scrubRecentlyFreed(stackDepth: 8) } }
        return try key.withReader { (reader, wipedByLock) throws(ProtectedFileError) -> [UInt8] in
            if locked { throw ProtectedFileError.locked(protection, .locked) }
            if wipedByLock {
                if manager.isUnlocked {
                    throw ProtectedFileError.invalidArgument("\(path) was closed when the vault locked; open it again")
                }
                throw ProtectedFileError.locked(protection, .locked)
            }
            guard let reader else { throw ProtectedFileError.invalidArgument("\(path) is closed") }
            guard offset >= 0, count >= 0 else { throw ProtectedFileError.invalidArgument("a negative offset or count") }
            do throws(AgeError) {
                return try reader.read(offset: offset, count: count)
            } catch {
                throw ProtectedFiles.map(error, path: path, protection)
            }
        }
    }

    /// Reads up to `count` bytes from ``position`` and advances it; empty at the end.
    /// - Parameter count: The number of bytes wanted.
    /// - Returns: The bytes read.
    /// - Throws: As ``read(offset:count:)``.
    public func read(upToCount count: Int) throws(ProtectedFileError) -> [UInt8] {
        let bytes = try read(offset: position, count: count)
        position += Int64(bytes.count)
        return bytes
    }

    /// Moves ``position``.
    /// - Parameter offset: The new position (past the end is allowed: reads there are empty).
    /// - Throws: ``ProtectedFileError/invalidArgument(_:)`` for a negative offset.
    public func seek(to offset: Int64) throws(ProtectedFileError) {
        guard offset >= 0 else { throw ProtectedFileError.invalidArgument("a negative offset") }
        position = offset
    }

    /// Frees the file key and closes the file. Reads afterwards fail with
    /// ``ProtectedFileError/invalidArgument(_:)`` (or, after a lock wiped the key of a
    /// complete file, ``ProtectedFileError/locked(_:_:)``).
    public func close() {
        observer?.cancel()
        key.wipe(byLock: false)
        key.closeDescriptor()
    }
}

/// Runs the lock observers of open readers on a serial dispatch queue (an overcommitting
/// thread of its own) instead of the cooperative pool.
final class LockWatchExecutor: TaskExecutor {
    static let shared = LockWatchExecutor()
    private let queue = DispatchQueue(label: "ProtectedFiles.lock-watch")

    /// Starts the queue's thread, from ``ProtectedFiles/init(manager:)``, before a file key is
    /// in use: the memory-scan test found part of a payload key on the stack of a worker thread
    /// started while a reader held it (a thread started earlier does not show it).
    func warmUp() {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        done.wait()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
