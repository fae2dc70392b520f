import Foundation
import Cipher
internal import CPKCS11

/// A PKCS #11 module (the shared library of a token's vendor), loaded once per process.
///
/// Loading rules: the path is given by the caller (an option, configuration, the API), never
/// found in a data directory; it must be absolute; it is resolved (symbolic links followed)
/// and the resolved file must be a regular file outside every directory in `refusing` (the
/// data directory: a writer of it must not choose code that runs in this process), owned by
/// root or the effective user, and writable by no one else, and so must every directory from
/// the root down to it (owned by root or the user, writable by no one else unless sticky). The
/// file is opened once, through those directories without following a link, and that
/// descriptor is what `dlopen(RTLD_NOW | RTLD_LOCAL)` loads (`/proc/self/fd/N` on Linux), `C_GetFunctionList` is
/// called, and `C_Initialize` with `CKF_OS_LOCKING_OK` once per process; it is never
/// finalized (another part of the process may hold sessions).
public final class PKCS11Module: @unchecked Sendable {
    /// The resolved path the module was loaded from.
    public let path: String
    let handle: OpaquePointer

    private init(path: String, handle: OpaquePointer) {
        self.path = path
        self.handle = handle
    }

    private static let loaded = NSLock()
    nonisolated(unsafe) private static var modules: [String: PKCS11Module] = [:]

    /// Loads (or returns the already loaded) module at `path`.
    ///
    /// - Parameters:
    ///   - path: the module's absolute path.
    ///   - refusing: directories the module must not be in (the data directory).
    /// - Throws: ``HardwareKeyError/moduleRefused(path:reason:)``,
    ///   ``HardwareKeyError/moduleUnavailable(path:reason:)``, or
    ///   ``HardwareKeyError/pkcs11(function:returnValue:)`` when `C_Initialize` fails.
    /// - Returns: the loaded module, shared by every caller that loads the same resolved path.
    public static func load(path: String, refusing: [String] = []) throws(HardwareKeyError) -> PKCS11Module {
        let (resolved, fd) = try openChecked(path: path, refusing: refusing)
        defer { close(fd) }
        loaded.lock()
        defer { loaded.unlock() }
        if let module = modules[resolved] { return module }
        var handle: OpaquePointer?
        var message = [CChar](repeating: 0, count: 512)
        #if os(Linux)
        let rv = cpk_module_load(resolved, fd, &handle, &message, message.count)
        #else
        let rv = cpk_module_load(resolved, -1, &handle, &message, message.count)
        #endif
        switch rv {
        case 0:
            guard let handle else { throw .moduleUnavailable(path: resolved, reason: "no module returned") }
            let module = PKCS11Module(path: resolved, handle: handle)
            modules[resolved] = module
            return module
        case UInt(CPK_LOAD_DLOPEN_FAILED):
            let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw .moduleUnavailable(path: resolved, reason: "dlopen: \(text)")
        case UInt(CPK_LOAD_NO_ENTRY_POINT):
            throw .moduleUnavailable(path: resolved, reason: "it has no C_GetFunctionList: not a PKCS #11 module")
        case UInt(CPK_LOAD_NO_FUNCTION_LIST):
            throw .moduleUnavailable(path: resolved, reason: "C_GetFunctionList returned no function list")
        default:
            throw .pkcs11(function: "C_Initialize", returnValue: rv)
        }
    }

    /// Applies the loading rules and opens the module: the resolved path, walked from the root
    /// one component at a time without following links (`openat`, `O_NOFOLLOW`), every
    /// directory on the way owned by root or this user and writable by no one else (unless
    /// sticky), then the file itself checked on its descriptor. Returns the resolved path and
    /// the open descriptor, which is what gets loaded: a file renamed into place after the
    /// checks is not.
    static func openChecked(path: String, refusing: [String]) throws(HardwareKeyError) -> (String, Int32) {
        let resolved = try check(path: path, refusing: refusing)
        var directory = Foundation.open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw .moduleUnavailable(path: resolved, reason: String(cString: strerror(errno))) }
        var walked = "/"
        var components = resolved.split(separator: "/").map(String.init)
        let name = components.removeLast()
        do throws(HardwareKeyError) {
            try checkDirectory(directory, walked, path: path)
            for component in components {
                let next = openat(directory, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                let code = errno
                close(directory)
                directory = -1
                guard next >= 0 else {
                    if code == ELOOP || code == ENOTDIR {
                        throw HardwareKeyError.moduleRefused(path: path, reason: "\(walked)\(component) changed into a symbolic link or a file while it was checked")
                    }
                    throw HardwareKeyError.moduleUnavailable(path: resolved, reason: String(cString: strerror(code)))
                }
                directory = next
                walked += component + "/"
                try checkDirectory(directory, walked, path: path)
            }
        } catch {
            if directory >= 0 { close(directory) }
            throw error
        }
        let fd = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        let code = errno
        close(directory)
        guard fd >= 0 else {
            if code == ELOOP { throw .moduleRefused(path: path, reason: "\(resolved) changed into a symbolic link while it was checked") }
            throw .moduleUnavailable(path: resolved, reason: String(cString: strerror(code)))
        }
        do throws(HardwareKeyError) {
            let info: FileStatus
            do { info = try FileCalls.status(fd) } catch { throw HardwareKeyError.moduleUnavailable(path: resolved, reason: String(cString: strerror(error.code))) }
            try checkFile(info, path: path)
        } catch {
            close(fd)
            throw error
        }
        return (resolved, fd)
    }

    /// A directory on the module's path: anyone who can rename entries in it can replace the
    /// module.
    private static func checkDirectory(_ fd: Int32, _ name: String, path: String) throws(HardwareKeyError) {
        let info: FileStatus
        do { info = try FileCalls.status(fd) } catch {
            throw .moduleUnavailable(path: path, reason: "\(name): \(String(cString: strerror(error.code)))")
        }
        guard info.owner == 0 || info.owner == geteuid() else {
            throw .moduleRefused(path: path, reason: "the directory \(name) is owned by uid \(info.owner), neither root nor this user: that user can replace the module")
        }
        // A directory writable by others lets them replace the module, unless it is sticky (/tmp).
        if info.permissions & 0o022 != 0, info.permissions & 0o1000 == 0 {
            throw .moduleRefused(path: path, reason: "its directory \(name) is writable by group or others")
        }
    }

    /// The module file itself: a regular file of root or this user, writable by no one else.
    private static func checkFile(_ info: FileStatus, path: String) throws(HardwareKeyError) {
        guard info.kind == .regular else { throw .moduleRefused(path: path, reason: "it is not a regular file") }
        guard info.owner == 0 || info.owner == geteuid() else {
            throw .moduleRefused(path: path, reason: "it is owned by uid \(info.owner), neither root nor this user")
        }
        guard info.permissions & 0o022 == 0 else {
            throw .moduleRefused(path: path, reason: "it is writable by group or others")
        }
    }

    /// Applies the loading rules by path; returns the resolved path.
    static func check(path: String, refusing: [String]) throws(HardwareKeyError) -> String {
        guard path.hasPrefix("/") else { throw .moduleRefused(path: path, reason: "the path is not absolute") }
        // The data-directory rule on the path as given (a link planted there is refused even if
        // it points elsewhere), then on the file it resolves to.
        let roots = refusing.flatMap { directory -> [String] in
            let resolvedRoot = realpath(directory, nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            }
            return [lexical(directory), resolvedRoot].compactMap { $0 }
        }
        func refuse(_ candidate: String) throws(HardwareKeyError) {
            for root in roots where candidate == root || candidate.hasPrefix(root.hasSuffix("/") ? root : root + "/") {
                throw .moduleRefused(path: path, reason: "it is inside the data directory \(root): a writer of that "
                    + "directory would choose code that runs in this process")
            }
        }
        try refuse(lexical(path))
        guard let resolvedPointer = realpath(path, nil) else {
            throw .moduleUnavailable(path: path, reason: String(cString: strerror(errno)))
        }
        let resolved = String(cString: resolvedPointer)
        free(resolvedPointer)
        try refuse(resolved)
        let info: FileStatus
        do { info = try FileCalls.status(atPath: resolved) } catch {
            throw .moduleUnavailable(path: resolved, reason: String(cString: strerror(error.code)))
        }
        try checkFile(info, path: path)
        return resolved
    }

    /// `path` with `.`, `..` and repeated slashes removed, without following links (a link is
    /// judged by where it is, then by where it leads).
    static func lexical(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// A token present in a slot of the module.
    public struct Token: Sendable, Equatable {
        public let slot: UInt
        public let label: String
        public let manufacturer: String
        public let model: String
        public let serial: String
        public let slotDescription: String
        public let slotManufacturer: String
        /// Whether the token needs a login before its private objects can be used.
        public let loginRequired: Bool
        /// Whether the token has been initialized.
        public let initialized: Bool
    }

    /// The tokens present.
    /// - Throws: ``HardwareKeyError/pkcs11(function:returnValue:)``.
    /// - Returns: one ``Token`` per slot with a token; a token removed while it is read is left out.
    public func tokens() throws(HardwareKeyError) -> [Token] {
        var slots = [UInt](repeating: 0, count: 256)
        var count = UInt(slots.count)
        try call("C_GetSlotList", cpk_slots(handle, &slots, &count))
        var result: [Token] = []
        for slot in slots.prefix(Int(min(count, 256))) {
            var label = [UInt8](repeating: 0, count: 32), manufacturer = [UInt8](repeating: 0, count: 32)
            var model = [UInt8](repeating: 0, count: 16), serial = [UInt8](repeating: 0, count: 16)
            var flags: UInt = 0
            let rv = cpk_token_info(handle, slot, &label, &manufacturer, &model, &serial, &flags)
            // A token removed between the two calls is skipped.
            if rv != 0 { continue }
            var description = [UInt8](repeating: 0, count: 64), slotManufacturer = [UInt8](repeating: 0, count: 32)
            _ = cpk_slot_info(handle, slot, &description, &slotManufacturer)
            result.append(Token(slot: slot, label: Self.trimmed(label), manufacturer: Self.trimmed(manufacturer),
                                model: Self.trimmed(model), serial: Self.trimmed(serial),
                                slotDescription: Self.trimmed(description), slotManufacturer: Self.trimmed(slotManufacturer),
                                loginRequired: flags & 0x4 != 0, initialized: flags & 0x400 != 0))
        }
        return result
    }

    /// The library's manufacturer and description (CK_INFO).
    func libraryInfo() throws(HardwareKeyError) -> (manufacturer: String, description: String) {
        var description = [UInt8](repeating: 0, count: 32), manufacturer = [UInt8](repeating: 0, count: 32)
        try call("C_GetInfo", cpk_library_info(handle, &description, &manufacturer))
        return (Self.trimmed(manufacturer), Self.trimmed(description))
    }

    /// The tokens matching the URI's token, slot and library attributes.
    /// - Parameter uri: the URI whose `token`, `manufacturer`, `model`, `serial`, `slot-…` and
    ///   `library-…` attributes must all match; an attribute it does not give matches every token.
    /// - Returns: the matching tokens; none when the library attributes do not match the module.
    /// - Throws: ``HardwareKeyError/pkcs11(function:returnValue:)`` when `C_GetInfo` or
    ///   `C_GetSlotList` fails.
    public func tokens(matching uri: PKCS11URI) throws(HardwareKeyError) -> [Token] {
        if uri.libraryManufacturer != nil || uri.libraryDescription != nil {
            let info = try libraryInfo()
            if let wanted = uri.libraryManufacturer, wanted != info.manufacturer { return [] }
            if let wanted = uri.libraryDescription, wanted != info.description { return [] }
        }
        return try tokens().filter { token in
            (uri.token.map { $0 == token.label } ?? true)
                && (uri.manufacturer.map { $0 == token.manufacturer } ?? true)
                && (uri.model.map { $0 == token.model } ?? true)
                && (uri.serial.map { $0 == token.serial } ?? true)
                && (uri.slotID.map { $0 == token.slot } ?? true)
                && (uri.slotDescription.map { $0 == token.slotDescription } ?? true)
                && (uri.slotManufacturer.map { $0 == token.slotManufacturer } ?? true)
        }
    }

    /// Blank-padded fixed fields of CK_TOKEN_INFO and friends, without the padding.
    static func trimmed(_ bytes: [UInt8]) -> String {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x20 || bytes[end - 1] == 0 { end -= 1 }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }

    func call(_ function: String, _ rv: UInt) throws(HardwareKeyError) {
        if rv != 0 { throw .pkcs11(function: function, returnValue: rv) }
    }
}
