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

/// Bytes that must not leak: keys, passcodes, answers.
///
/// The storage is allocated apart from the Swift heap, page-locked where the OS allows (`mlock`),
/// excluded from core dumps (`MADV_DONTDUMP` on Linux), zeroed on ``wipe()`` and when the last
/// reference goes away, and never shown by `description`, `debugDescription`, `dump` or
/// string interpolation.
///
/// Reach the bytes only inside ``withUnsafeBytes(_:)``; do not copy them into an `Array`,
/// `Data` or `String` that outlives the closure.
///
/// Thread safety: the instance is guarded by a lock, so it may be read from several threads and
/// wiped from another; a read that starts after a wipe sees zero bytes.
public final class SecretBytes: @unchecked Sendable {
    private let pointer: UnsafeMutableRawPointer
    private let allocated: Int
    private var length: Int
    private let lock = Lock()
    // Key schedules made from these bytes (guarded by `lock`; dropped by `wipe()`).
    private var aesGCMSchedule: AEADSchedule?
    private var chaChaPolySchedule: AEADSchedule?

    /// Whether the pages are locked in memory (false where `RLIMIT_MEMLOCK` forbids it).
    public let isMemoryLocked: Bool

    /// The number of bytes held; 0 after ``wipe()``.
    public var count: Int { lock.withLock { length } }

    /// True when no bytes are held.
    public var isEmpty: Bool { count == 0 }

    /// Creates `count` zero bytes and lets `initializer` fill them in place.
    ///
    /// - Parameters:
    ///   - count: The number of bytes.
    ///   - initializer: Writes the bytes; may throw, in which case the storage is wiped.
    /// - Throws: Whatever `initializer` throws.
    /// - Precondition: `count` is not negative (a programming error, like a negative array count).
    public init<E: Error>(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
        precondition(count >= 0, "SecretBytes: negative count")
        let (pointer, allocated, locked) = MemoryProtection.allocate(count)
        self.pointer = pointer
        self.allocated = allocated
        self.length = count
        self.isMemoryLocked = locked
        do {
            try initializer(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            MemoryProtection.zero(pointer, allocated)
            length = 0
            throw error
        }
    }

    /// Copies the bytes of `bytes`. The source is left as it was: wipe it yourself if you own it.
    /// - Parameter bytes: The bytes to copy.
    public convenience init<Bytes: Sequence>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        // Contiguous sources (arrays, buffers, slices) are copied straight in; anything else goes
        // through a temporary array that is zeroed afterwards.
        if let count = bytes.withContiguousStorageIfAvailable({ $0.count }) {
            self.init(count: count) { buffer in
                _ = bytes.withContiguousStorageIfAvailable { source in
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(source).prefix(count)))
                }
            }
            return
        }
        var array = ContiguousArray(bytes)
        defer { array.withUnsafeMutableBytes { if let base = $0.baseAddress { MemoryProtection.zero(base, $0.count) } } }
        self.init(count: array.count) { buffer in
            array.withUnsafeBytes { source in buffer.copyMemory(from: source) }
        }
    }

    /// Copies the UTF-8 bytes of `string`. Swift strings cannot be wiped; prefer reading secrets
    /// straight into `SecretBytes` (for example with ``SecretBytes/init(contentsOfFile:maxLength:)``).
    /// - Parameter string: The text.
    public convenience init(utf8 string: String) {
        var copy = string
        let count = copy.utf8.count
        self.init(count: count) { buffer in
            copy.withUTF8 { source in
                if let base = source.baseAddress, count > 0 {
                    buffer.baseAddress!.copyMemory(from: base, byteCount: count)
                }
            }
        }
    }

    /// Copies the bytes of a swift-crypto `SymmetricKey`.
    /// - Parameter key: The key.
    public convenience init(_ key: SymmetricKey) {
        self.init(count: key.bitCount / 8) { buffer in
            key.withUnsafeBytes { source in buffer.copyMemory(from: source) }
        }
    }

    /// Creates `count` bytes from the system CSPRNG.
    ///
    /// - Parameter count: How many bytes.
    /// - Returns: The random bytes, in locked memory.
    /// - Throws: ``CipherError/randomUnavailable(_:)`` if the OS generator fails (never a weaker fallback).
    public static func random(count: Int) throws(CipherError) -> SecretBytes {
        guard (0...(1 << 30)).contains(count) else {
            throw CipherError.invalidParameter("a secret of \(count) bytes is outside 0...1 GiB")
        }
        return try SecretBytes(count: count) { (buffer) throws(CipherError) in try SecureRandom.fill(buffer) }
    }

    /// Reads a secret from a file straight into locked memory, dropping one trailing newline
    /// (`\n` or `\r\n`), as passphrase files are usually written.
    ///
    /// - Parameters:
    ///   - path: The file to read.
    ///   - maxLength: Files larger than this are refused.
    /// - Throws: ``CipherError/io(_:)`` when the file cannot be read or is too large.
    public convenience init(contentsOfFile path: String, maxLength: Int = 64 * 1024) throws(CipherError) {
        let fd: Int32
        do { fd = try FileCalls.open(path, O_RDONLY | O_CLOEXEC) } catch {
            throw CipherError.io("cannot open \(path): \(String(cString: strerror(error.code)))")
        }
        defer { FileCalls.close(fd) }
        try self.init(readingFrom: fd, maxLength: maxLength, trimNewline: true, name: path)
    }

    /// Reads a secret from a file descriptor until end of file (for example standard input),
    /// straight into locked memory, optionally dropping one trailing newline.
    ///
    /// - Parameters:
    ///   - fd: The descriptor (not closed).
    ///   - maxLength: Input longer than this is refused.
    ///   - trimNewline: Whether one trailing newline (`\n` or `\r\n`) is dropped.
    ///   - name: What the input is called in error messages.
    /// - Throws: ``CipherError/io(_:)`` on a read error or input longer than `maxLength`.
    public convenience init(readingFrom fd: Int32, maxLength: Int = 64 * 1024, trimNewline: Bool = true, name: String = "input") throws(CipherError) {
        var total = 0
        let scratch = try SecretBytes(count: maxLength + 1) { (buffer) throws(CipherError) in
            do throws(SystemCallError) { total = try FileCalls.readFully(fd, into: buffer) } catch {
                throw CipherError.io("cannot read \(name): \(String(cString: strerror(error.code)))")
            }
            if total > maxLength { throw CipherError.io("\(name) is larger than \(maxLength) bytes; a secret file holds one line") }
        }
        var used = total
        scratch.withUnsafeBytes { bytes in
            if trimNewline, used > 0, bytes[used - 1] == 0x0A {
                used -= 1
                if used > 0, bytes[used - 1] == 0x0D { used -= 1 }
            }
        }
        let finalCount = used
        self.init(count: finalCount) { target in
            scratch.withUnsafeBytes { source in
                if finalCount > 0 { target.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: finalCount) }
            }
        }
        scratch.wipe()
    }

    deinit {
        MemoryProtection.release(pointer, allocated, locked: isMemoryLocked)
    }

    /// Calls `body` with the bytes. Do not let them escape the closure.
    /// - Parameter body: Reads the bytes.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func withUnsafeBytes<Result, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> Result) throws(E) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// Zeroes the bytes now; afterwards ``count`` is 0. Key schedules made from them are dropped
    /// too (zeroed at once, or when a seal or open still using one returns).
    public func wipe() {
        let dropped = lock.withLock { () -> (AEADSchedule?, AEADSchedule?) in
            MemoryProtection.zero(pointer, allocated)
            length = 0
            let dropped = (aesGCMSchedule, chaChaPolySchedule)
            aesGCMSchedule = nil
            chaChaPolySchedule = nil
            return dropped
        }
        withExtendedLifetime(dropped) {} // released here, outside the lock
    }

    /// The key schedule of `algorithm` for these bytes as a 32-byte key, made on first use and kept
    /// with them; nil when they are not 32 bytes (for example after ``wipe()``).
    func schedule(for algorithm: SealAlgorithm) -> AEADSchedule? {
        lock.withLock {
            switch algorithm {
            case .aes256GCM:
                if let made = aesGCMSchedule { return made }
            case .chaCha20Poly1305:
                if let made = chaChaPolySchedule { return made }
            }
            guard length == 32, let made = AEADSchedule(algorithm: algorithm, key: UnsafeRawBufferPointer(start: pointer, count: length))
            else { return nil }
            switch algorithm {
            case .aes256GCM: aesGCMSchedule = made
            case .chaCha20Poly1305: chaChaPolySchedule = made
            }
            return made
        }
    }

    /// A swift-crypto key holding a copy of these bytes (swift-crypto zeroes its own copy when freed).
    public var symmetricKey: SymmetricKey {
        withUnsafeBytes { SymmetricKey(data: $0) }
    }

    /// A new `SecretBytes` holding `range` of these bytes.
    /// - Precondition: `range` lies within `0..<count` (a programming error, like an array index).
    /// - Parameter range: The byte range.
    /// - Returns: A copy of those bytes, in locked memory.
    package func slice(_ range: Range<Int>) -> SecretBytes {
        withUnsafeBytes { bytes in
            precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "SecretBytes.slice out of range")
            return SecretBytes(count: range.count) { target in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[range]))
            }
        }
    }

    /// A new `SecretBytes` holding these bytes followed by `other`'s.
    /// - Parameter other: The bytes to append.
    /// - Returns: A new value; neither input changes.
    package func appending(_ other: SecretBytes) -> SecretBytes {
        withUnsafeBytes { first in
            other.withUnsafeBytes { second in
                SecretBytes(count: first.count + second.count) { target in
                    if first.count > 0 { target.baseAddress!.copyMemory(from: first.baseAddress!, byteCount: first.count) }
                    if second.count > 0 { (target.baseAddress! + first.count).copyMemory(from: second.baseAddress!, byteCount: second.count) }
                }
            }
        }
    }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison of the contents (lengths are compared openly).
    /// - Parameters:
    ///   - lhs: One value.
    ///   - rhs: The other.
    /// - Returns: Whether both hold the same bytes.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        if lhs === rhs { return true }
        return lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in ConstantTime.equals(a, b) } }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
