import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The symbolic link `age-plugin-securefoundation` (``AgentAgePlugin/installLink(in:target:replacing:)``
/// documents it): made when the path is free, kept when it already names `target`, swapped in
/// one rename when it resolves to `replacing`, refused otherwise.
enum PluginLink {
    static func install(at link: String, target: String, replacing: String?) throws(AgentError) -> String {
        if symlink(target, link) == 0 { return link }
        let code = errno
        guard code == EEXIST else { throw AgentError.system("symlink", link, code) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(link, &buffer, buffer.count - 1)
        guard n > 0 else { throw AgentError.pathInUse(path: link, reason: "exists and is not a symbolic link") }
        let existing = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if existing == target { return link }
        if let replacing, let old = try? FileCalls.status(atPath: replacing), let linked = try? FileCalls.status(atPath: link),
           old.device == linked.device, old.inode == linked.inode {
            let staged = link + ".new-\(getpid())"
            _ = unlink(staged)
            guard symlink(target, staged) == 0 else { throw AgentError.system("symlink", staged) }
            do { try FileCalls.rename(staged, link) } catch {
                _ = unlink(staged)
                throw AgentError.io("\(error)")
            }
            return link
        }
        throw AgentError.pathInUse(path: link, reason: "is a link to \(existing), not to \(target)")
    }
}
