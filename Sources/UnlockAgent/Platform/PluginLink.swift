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
        if let replacing, resolves(link, to: replacing) {
            // One staging name, so a run stopped by kill -9 leaves at most that one link, which
            // the next run replaces; anything else there (not a symbolic link) is left and refused.
            let staged = link + ".new"
            if let info = try? FileCalls.linkStatus(staged) {
                guard info.kind == .symbolicLink else {
                    throw AgentError.pathInUse(path: staged, reason: "exists and is not a symbolic link (a link staged here is swapped in place of \(link))")
                }
                _ = unlink(staged)
            }
            guard symlink(target, staged) == 0 else { throw AgentError.system("symlink", staged) }
            // Checked again right before the swap: a link changed meanwhile is not replaced. (A
            // writer of this directory can put any program here anyway; see SECURITY.md.)
            guard resolves(link, to: replacing) else {
                _ = unlink(staged)
                throw AgentError.pathInUse(path: link, reason: "changed while it was being replaced")
            }
            do { try FileCalls.rename(staged, link) } catch {
                _ = unlink(staged)
                throw AgentError.io("\(error)")
            }
            return link
        }
        throw AgentError.pathInUse(path: link, reason: "is a link to \(existing), not to \(target)")
    }

    /// Whether `link` resolves to the very file `program` names (device and inode).
    private static func resolves(_ link: String, to program: String) -> Bool {
        guard let old = try? FileCalls.status(atPath: program), let linked = try? FileCalls.status(atPath: link) else { return false }
        return old.device == linked.device && old.inode == linked.inode
    }
}
