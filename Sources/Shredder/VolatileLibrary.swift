import Cipher
import CPlatform
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

/// Errors of ``VolatileLibrary``.
public enum VolatileLibraryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// dlopen refused the library; `reason` is the loader's message.
    case loadFailed(path: String, reason: String)
    /// dlclose failed.
    case unloadFailed(path: String, reason: String)
    /// The library has no symbol of that name.
    case symbolNotFound(name: String, reason: String)
    /// The library was already closed; a handle can be closed once.
    case alreadyClosed(String)
    /// The operation does not exist on this platform (loading from memory off Linux).
    case unsupported(String)
    /// A system call failed.
    case system(operation: String, errno: Int32)
    /// The library's file could not be shredded (on ``VolatileLibrary/close()``) or would be
    /// refused by the shredder (on ``VolatileLibrary/open(_:shredOptions:)``); the ``ShredError``
    /// says why.
    case shred(ShredError)

    /// A one-line explanation for people.

    public var description: String {
        switch self {
        case let .loadFailed(path, reason): return "cannot load library \(path): \(reason)"
        case let .unloadFailed(path, reason): return "cannot unload library \(path): \(reason)"
        case let .symbolNotFound(name, reason): return "symbol \(name) not found: \(reason)"
        case let .alreadyClosed(path): return "library \(path) is already closed"
        case let .unsupported(what): return "unsupported on this platform: \(what)"
        case let .system(operation, code): return "\(operation) failed: \(String(cString: strerror(code)))"
        case let .shred(error): return error.description
        }
    }
}

/// A shared library that leaves nothing behind: loaded from a file that is shredded when the
/// library is closed (IMSShred's `dlVolatileOpen` / `dlVolatileClose`, with the deletion the
/// original never did), or loaded from decrypted bytes that never touch the disk
/// (`memfd_create` on Linux).
///
/// Thread safety: a final class whose handle is guarded by a lock, so ``symbol(named:)`` and
/// ``close()`` may race from several threads; exactly one close succeeds and the others get
/// ``VolatileLibraryError/alreadyClosed(_:)``. Function pointers obtained from ``symbol(named:)``
/// must not be called after ``close()``.
public final class VolatileLibrary: @unchecked Sendable {
    /// The file the library was loaded from, or `memfd:NAME` for a library loaded from memory.
    public let path: String
    /// Whether ``close()`` shreds ``path``.
    public let shredsFileOnClose: Bool
    private let shredOptions: ShredOptions
    // Guarded by `lock`: nil once closed.
    private var handle: UnsafeMutableRawPointer?
    private let lock = Lock()

    private init(path: String, handle: UnsafeMutableRawPointer, shredsFileOnClose: Bool, shredOptions: ShredOptions) {
        self.path = path
        self.handle = handle
        self.shredsFileOnClose = shredsFileOnClose
        self.shredOptions = shredOptions
    }

    /// Loads the shared library at `path` (dlopen, `RTLD_NOW | RTLD_LOCAL`); ``close()`` unloads
    /// it and shreds the file.
    ///
    /// - Parameters:
    ///   - path: A regular file (symlinks are refused, as by ``FileShredder``).
    ///   - shredOptions: How the file is shredded on close (removal is always on).
    /// - Returns: The loaded library.
    /// - Throws: ``VolatileLibraryError``: ``VolatileLibraryError/shred(_:)`` carrying
    ///   ``ShredError/symlink(_:)`` / ``ShredError/notRegularFile(_:)`` /
    ///   ``ShredError/hardLinked(path:count:)`` for a path that could not be shredded,
    ///   ``VolatileLibraryError/loadFailed(path:reason:)`` when the loader refuses it.
    public static func open(_ path: String, shredOptions: ShredOptions = ShredOptions()) throws(VolatileLibraryError) -> VolatileLibrary {
        let info: FileStatus
        do { info = try FileCalls.linkStatus(path) } catch { throw .shred(ShredError(error, path: path)) }
        switch info.kind {
        case .regular: break
        case .symbolicLink: throw .shred(.symlink(path))
        default: throw .shred(.notRegularFile(path))
        }
        // Refuse now what the shred at close would refuse.
        do { try FileShredder.checkLinks(info, path: path, options: shredOptions) } catch { throw .shred(error) }
        let handle = try DynamicLoader.open(path)
        var options = shredOptions
        options.remove = true
        options.recursive = false
        return VolatileLibrary(path: path, handle: handle, shredsFileOnClose: true, shredOptions: options)
    }

    /// Loads a library from bytes in memory (for example a decrypted code module) without
    /// writing them to disk: an anonymous sealed `memfd` opened as `/proc/self/fd/N`.
    ///
    /// - Parameters:
    ///   - bytes: The shared object; the caller keeps ownership and wipes it.
    ///   - name: A label for the memory file (shown in /proc/PID/maps).
    /// - Returns: The loaded library; ``close()`` unloads it.
    /// - Throws: ``VolatileLibraryError/unsupported(_:)`` off Linux,
    ///   ``VolatileLibraryError/loadFailed(path:reason:)`` when the loader refuses the bytes.
    public static func load(bytes: SecretBytes, name: String = "volatile-library") throws(VolatileLibraryError) -> VolatileLibrary {
        try bytes.withUnsafeBytes { (buffer) throws(VolatileLibraryError) in try load(buffer: buffer, name: name) }
    }

    /// Loads a library from bytes in memory; as the `SecretBytes` variant.
    ///
    /// - Parameters:
    ///   - bytes: The shared object.
    ///   - name: A label for the memory file.
    /// - Returns: The loaded library.
    /// - Throws: ``VolatileLibraryError``.
    public static func load(bytes: [UInt8], name: String = "volatile-library") throws(VolatileLibraryError) -> VolatileLibrary {
        try bytes.withUnsafeBytes { buffer in Result { () throws(VolatileLibraryError) in try load(buffer: buffer, name: name) } }.get()
    }

    private static func load(buffer: UnsafeRawBufferPointer, name: String) throws(VolatileLibraryError) -> VolatileLibrary {
        guard !buffer.isEmpty else { throw VolatileLibraryError.loadFailed(path: "memfd:\(name)", reason: "no bytes") }
        let (fd, procPath) = try DynamicLoader.memoryFile(name: name, bytes: buffer)
        // The loader maps the file; the descriptor is not needed once dlopen returns.
        defer { _ = Glibc.close(fd) }
        let handle: UnsafeMutableRawPointer
        do { handle = try DynamicLoader.open(procPath) } catch {
            guard case .loadFailed(_, let reason) = error else { throw error }
            throw VolatileLibraryError.loadFailed(path: "memfd:\(name)", reason: reason)
        }
        return VolatileLibrary(path: "memfd:\(name)", handle: handle, shredsFileOnClose: false, shredOptions: ShredOptions())
    }

    /// The address of a symbol of the library (cast it with `unsafeBitCast` to a `@convention(c)` type).
    ///
    /// - Parameter name: The symbol name.
    /// - Returns: Its address.
    /// - Throws: ``VolatileLibraryError/symbolNotFound(name:reason:)``, or
    ///   ``VolatileLibraryError/alreadyClosed(_:)`` after ``close()``.
    public func symbol(named name: String) throws(VolatileLibraryError) -> UnsafeMutableRawPointer {
        try lock.withLock { () -> Result<UnsafeMutableRawPointer, VolatileLibraryError> in
            guard let handle else { return .failure(.alreadyClosed(path)) }
            guard let address = DynamicLoader.symbol(handle, name) else {
                return .failure(.symbolNotFound(name: name, reason: DynamicLoader.lastError()))
            }
            return .success(address)
        }.get()
    }

    /// Whether the library is still loaded.
    public var isOpen: Bool { lock.withLock { handle != nil } }

    /// Unloads the library (dlclose) and, for a library opened from a file, shreds the file.
    ///
    /// - Returns: The shred report of the file (empty for a library loaded from memory).
    /// - Throws: ``VolatileLibraryError/alreadyClosed(_:)`` on a second close,
    ///   ``VolatileLibraryError/unloadFailed(path:reason:)``, or ``VolatileLibraryError/shred(_:)``
    ///   carrying the ``ShredError`` from shredding.
    @discardableResult
    public func close() throws(VolatileLibraryError) -> [ShredReport] {
        let taken: UnsafeMutableRawPointer = try lock.withLock { () -> Result<UnsafeMutableRawPointer, VolatileLibraryError> in
            guard let current = handle else { return .failure(.alreadyClosed(path)) }
            handle = nil
            return .success(current)
        }.get()
        try DynamicLoader.close(taken, path: path)
        guard shredsFileOnClose else { return [] }
        do { return try FileShredder.shred(path, options: shredOptions) } catch { throw .shred(error) }
    }

    deinit {
        // A library never closed is unloaded; its file is left for the caller (no I/O in deinit).
        if let handle { _ = sf_dlclose(handle) }
    }
}
