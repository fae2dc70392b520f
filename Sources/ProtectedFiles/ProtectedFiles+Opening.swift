import Foundation
import Cipher
import Age
import Vault

// Opening a protected file: its class, its identity, and the mapping of errors.
extension ProtectedFiles {
    // MARK: Plumbing

    /// The recipient to write `cls` with, after checking that the class is writable now.
    func writableRecipient(_ cls: FileProtectionClass) throws -> ProtectionClassRecipient {
        if cls.protection != .completeUnlessOpen {
            let key = try Self.vaultCall(cls, path: table.path) { try manager.classKey(for: cls.accessibility) }
            key.wipe()
        }
        return ProtectionClassRecipient(cls: cls, recipient: try table.trustedRecipient(cls))
    }

    /// The identity of `cls` (needs its class key).
    func identity(_ cls: FileProtectionClass, path: String) throws -> X25519Identity {
        guard let entry = try table.entry(cls) else {
            throw ProtectedFileError.notProtectedFile(path: path, reason: "this vault has no \(cls.name) key pair (the file was written under another vault)")
        }
        do {
            return try table.openIdentity(entry, cls)
        } catch ProtectedFileError.wrongDevice(let c, _) {
            throw ProtectedFileError.wrongDevice(c, path: path)
        }
    }

    /// The identity of `cls` followed by its retired ones (files not yet re-wrapped after a
    /// key-pair rotation). Needs the class key.
    func identities(_ cls: FileProtectionClass, path: String) throws -> [any AgeIdentity] {
        [try identity(cls, path: path)] + (try table.retiredIdentities(cls))
    }

    /// A file opened by ``open(_:)``: its descriptor, class, header and identity.
    struct OpenedFile {
        var fd: Int32
        var cls: FileProtectionClass
        var hasClassStanza: Bool
        var header: AgeFileHeader
        var stamp: FileStamp
    }

    /// Opens `path` and determines its class.
    func open(_ path: String) throws -> OpenedFile {
        let fd: Int32
        do { fd = try FileCalls.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } catch {
            let code = error.code
            if code == EACCES || code == EPERM || code == ELOOP {
                throw ProtectedFileError.permission(path: path, reason: code == ELOOP ? "it is a symbolic link" : String(cString: strerror(code)))
            }
            throw ProtectedFileError.io("cannot open \(path): \(String(cString: strerror(code)))")
        }
        do {
            guard let info = try? FileCalls.status(fd), info.isRegularFile else {
                throw ProtectedFileError.notProtectedFile(path: path, reason: "it is not a regular file")
            }
            let header: AgeFileHeader
            do throws(AgeError) { header = try AgeFileHeader.read(fileDescriptor: fd) } catch {
                switch error {
                case .io(let why): throw ProtectedFileError.io(why)
                default:
                    // A file that starts as an age file but whose header does not parse was damaged.
                    var start = [UInt8](repeating: 0, count: 22)
                    let n = start.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
                    if n == start.count && start == Array("age-encryption.org/v1\n".utf8) {
                        throw ProtectedFileError.tampered(path: path, reason: "\(error)")
                    }
                    throw ProtectedFileError.notProtectedFile(path: path, reason: "\(error)")
                }
            }
            if let cls = try ProtectionClassRecipient.declaredClass(in: header.stanzas, path: path) {
                return OpenedFile(fd: fd, cls: cls, hasClassStanza: true, header: header, stamp: FileStamp(info))
            }
            // No class stanza: the class whose identity (current or retired) opens the header.
            let keys = try table.loadFile()
            for entry in keys.entries {
                guard let cls = FileProtectionClass(name: entry.name), let identity = try? table.openIdentity(entry, cls) else { continue }
                let retired = keys.retired.filter { $0.name == cls.name }.compactMap { try? table.openIdentity($0, cls, retired: true) }
                do throws(AgeError) {
                    try header.verify(identities: [identity] + retired)
                    return OpenedFile(fd: fd, cls: cls, hasClassStanza: false, header: header, stamp: FileStamp(info))
                } catch {
                    if case .noMatchingIdentity = error { continue }
                    throw Self.map(error, path: path, cls)
                }
            }
            throw ProtectedFileError.notProtectedFile(path: path, reason: "it has no class stanza and no class identity available now opens it")
        } catch {
            close(fd)
            throw error
        }
    }

    /// Runs a vault call, mapping its errors for class `cls`.
    static func vaultCall<Result>(_ cls: FileProtectionClass, path: String, _ body: () throws -> Result) throws(ProtectedFileError) -> Result {
        do { return try body() } catch {
            guard let error = error as? VaultError else { throw ProtectedFileError.mapping(error) }
            switch error {
            case .classKeyUnavailable(_, .deviceKeyMissing): throw ProtectedFileError.wrongDevice(cls, path: path)
            case .classKeyUnavailable(_, let reason): throw ProtectedFileError.locked(cls, reason)
            case .notSetUp: throw ProtectedFileError.locked(cls, .notSetUp)
            case let .insecurePermissions(path, reason, fix): throw ProtectedFileError.permission(path: path, reason: "\(reason); fix it with: \(fix)")
            default: throw ProtectedFileError.vault(error)
            }
        }
    }

    /// Runs an age call on `path`, mapping its errors.
    func mapAge<Result>(path: String, _ cls: FileProtectionClass, _ body: () throws -> Result) throws(ProtectedFileError) -> Result {
        do { return try body() } catch {
            if let error = error as? AgeError { throw Self.map(error, path: path, cls) }
            if let failure = error as? SecureFile.Failure { throw ClassKeyTable.map(failure, path: path) }
            throw ProtectedFileError.mapping(error)
        }
    }

    /// Runs `body` (the internal plumbing, which throws ``ProtectedFileError`` and maps what
    /// the modules below throw as it goes), giving what escapes as a ``ProtectedFileError``:
    /// the public functions' typed boundary (see ``ProtectedFileError/mapping(_:)``).
    static func typed<Result>(_ body: () throws -> Result) throws(ProtectedFileError) -> Result {
        do { return try body() } catch { throw ProtectedFileError.mapping(error) }
    }

    static func map(_ error: AgeError, path: String, _ cls: FileProtectionClass) -> ProtectedFileError {
        switch error {
        case .headerMACFailure:
            return .tampered(path: path, reason: "the header MAC does not match (the class stanza or a wrapped key was altered)")
        case .noMatchingIdentity:
            return .tampered(path: path, reason: "its file key is not wrapped to this vault's \(cls.name) key (the class stanza was changed, or the file was written under another vault)")
        case .payloadFailure(let why): return .tampered(path: path, reason: "the payload does not authenticate: \(why)")
        case .headerFailure(let why): return .tampered(path: path, reason: "the header is malformed: \(why)")
        case .io(let why): return .io(why)
        case .invalidArgument(let why): return .invalidArgument(why)
        default: return .io("\(error)")
        }
    }
}

extension ProtectedFileError {
    /// `error` as a protected-file error with the message it prints today: itself when it is
    /// one; a vault error becomes ``vault(_:)``; anything else from below that the plumbing
    /// did not map already (a file call's `SecureFile.Failure`, an `AgeError`, a random-generator
    /// `CipherError`) becomes ``io(_:)`` with its own message.
    static func mapping(_ error: any Error) -> ProtectedFileError {
        switch error {
        case let error as ProtectedFileError: return error
        case let error as VaultError: return .vault(error)
        default: return .io("\(error)")
        }
    }
}
