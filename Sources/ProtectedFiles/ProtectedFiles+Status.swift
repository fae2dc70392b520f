import Foundation
import Cipher

/// What ``ProtectedFiles/status(of:)`` found for one regular file.
public struct ProtectedFileStatus: Sendable, Equatable {
    /// What can be done with the file now.
    public enum State: Sendable, Equatable {
        /// Its class key is available: it can be read now.
        case readable
        /// Its class is locked now (the vault, or the agent serving it, is locked).
        case locked(reason: String)
        /// It is bound to another device (a `…ThisDeviceOnly` key of another device key).
        case otherDevice
        /// Its class cannot be read for another reason (a damaged key table, a missing pair).
        case unreadable(reason: String)
        /// Not a protected file.
        case notProtected
        /// The file could not be examined.
        case error(String)
    }

    /// The file.
    public let path: String
    /// Its class (for a protected file).
    public let protection: FileProtectionClass?
    /// What can be done with it now.
    public let state: State
}

extension ProtectedFiles {
    /// The status of every regular file named by `paths` (a directory is walked, sorted, symbolic
    /// links not followed): its class from its header (no key needed), and whether that class
    /// can be read now, asked once per class.
    /// - Parameter paths: Files or directories.
    /// - Returns: One status per regular file, in the order given.
    /// - Throws: ``ProtectedFileError/io(_:)`` or ``ProtectedFileError/permission(path:reason:)``
    ///   for a path that cannot be examined or a directory that cannot be read.
    public func status(of paths: [String]) throws(ProtectedFileError) -> [ProtectedFileStatus] {
        var readable: [FileProtectionClass: ProtectedFileError?] = [:]
        var report: [ProtectedFileStatus] = []
        for path in paths {
            for file in try Self.regularFiles(path) {
                do throws(ProtectedFileError) {
                    let cls = try protection(ofItemAt: file)
                    if readable[cls] == nil { readable[cls] = .some(readError(for: cls)) }
                    let state: ProtectedFileStatus.State
                    switch readable[cls] {
                    case .some(.some(.locked(_, let reason))): state = .locked(reason: "\(reason)")
                    case .some(.some(.wrongDevice)): state = .otherDevice
                    case .some(.some(let error)): state = .unreadable(reason: "\(error)")
                    default: state = .readable
                    }
                    report.append(ProtectedFileStatus(path: file, protection: cls, state: state))
                } catch .notProtectedFile {
                    report.append(ProtectedFileStatus(path: file, protection: nil, state: .notProtected))
                } catch {
                    report.append(ProtectedFileStatus(path: file, protection: nil, state: .error("\(error)")))
                }
            }
        }
        return report
    }

    /// `path` itself, or the regular files under it (sorted), without following symbolic links.
    static func regularFiles(_ path: String) throws(ProtectedFileError) -> [String] {
        let info: FileStatus
        do { info = try FileCalls.linkStatus(path) } catch {
            throw ProtectedFileError.io("cannot examine \(path): \(String(cString: strerror(error.code)))")
        }
        guard info.kind == .directory else { return [path] }
        guard let enumerator = FileManager.default.enumerator(atPath: path) else {
            throw ProtectedFileError.permission(path: path, reason: "the directory cannot be read")
        }
        let base = path.hasSuffix("/") ? path : path + "/"
        var result: [String] = []
        while let relative = enumerator.nextObject() as? String {
            let file = base + relative
            if (try? FileCalls.linkStatus(file))?.isRegularFile == true { result.append(file) }
        }
        return result.sorted()
    }
}
