import CPlatform
import Foundation

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
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                Foundation.close(fd)
                throw VolatileLibraryError.system(operation: "write to memfd", errno: code)
            }
            done += n
        }
        _ = sf_memfd_seal(fd)  // best effort: the library cannot be altered once loaded
        return (fd, "/proc/self/fd/\(fd)")
        #else
        throw VolatileLibraryError.unsupported("loading a library from memory needs memfd_create (Linux)")
        #endif
    }
}
