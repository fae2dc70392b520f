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

/// dlopen / dlsym / dlclose and memfd, through CPlatform.
enum DynamicLoader {
    static func lastError() -> String {
        guard let text = sf_dlerror() else { return "unknown dynamic loader error" }
        return String(cString: text)
    }

    /// dlopen(path, RTLD_NOW | RTLD_LOCAL).
    static func open(_ path: String) throws(VolatileLibraryError) -> UnsafeMutableRawPointer {
        _ = sf_dlerror()  // clear a stale message
        guard let handle = sf_dlopen(path) else {
            throw VolatileLibraryError.loadFailed(path: path, reason: lastError())
        }
        return handle
    }

    static func symbol(_ handle: UnsafeMutableRawPointer, _ name: String) -> UnsafeMutableRawPointer? {
        _ = sf_dlerror()
        return sf_dlsym(handle, name)
    }

    static func close(_ handle: UnsafeMutableRawPointer, path: String) throws(VolatileLibraryError) {
        guard sf_dlclose(handle) == 0 else {
            throw VolatileLibraryError.unloadFailed(path: path, reason: lastError())
        }
    }

    /// An anonymous in-memory file holding `bytes`, sealed against writes (Linux only).
    /// - Returns: The descriptor and a path dlopen accepts (`/proc/self/fd/N`).
    static func memoryFile(name: String, bytes: UnsafeRawBufferPointer) throws(VolatileLibraryError) -> (Int32, String) {
        #if os(Linux)
        let fd = sf_memfd_create(name)
        guard fd >= 0 else { throw VolatileLibraryError.system(operation: "memfd_create", errno: errno) }
        do { try FileCalls.writeAll(fd, bytes) } catch {
            FileCalls.close(fd)
            throw VolatileLibraryError.system(operation: "write to memfd", errno: error.code)
        }
        _ = sf_memfd_seal(fd)  // best effort: the library cannot be altered once loaded
        // The loader knows a library by the text of its path first: a `/proc/self/fd/N` that a
        // library still loaded was opened as (its descriptor closed since, the number reused)
        // would give back that library. Move to a number no loaded object is named after.
        var current = fd, moves = 0
        while moves < 64, sf_dl_name_in_use("/proc/self/fd/\(current)") != 0 {
            let higher = sf_dup_above(current, current + 1)
            let code = errno
            FileCalls.close(current)
            guard higher >= 0 else { throw VolatileLibraryError.system(operation: "dup memfd", errno: code) }
            current = higher
            moves += 1
        }
        guard moves < 64 else {
            FileCalls.close(current)
            throw VolatileLibraryError.system(operation: "find a descriptor number for the memfd", errno: EMFILE)
        }
        return (current, "/proc/self/fd/\(current)")
        #else
        throw VolatileLibraryError.unsupported("loading a library from memory needs memfd_create (Linux)")
        #endif
    }
}
