import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The inotify events on some files or directories while a piece of work runs (counts of
/// opens and writes of a child process's files).
enum FileEvents {
    struct Event {
        var mask: UInt32
        /// The file's name in a watched directory ("" for a watched file).
        var name: String
    }

    /// Watches `paths` for `mask` while `body` runs, and returns the events in order. Watch
    /// the closes too when counting opens (or the opens when counting closes): inotify merges
    /// identical consecutive events, and the other kind between two keeps them apart.
    static func record(_ paths: [String], mask: UInt32, during body: () throws -> Void) throws -> [Event] {
        #if os(Linux)
        let fd = inotify_init1(0)
        guard fd >= 0 else { throw POSIXError(.ENOSYS) }
        defer { close(fd) }
        for path in paths {
            guard inotify_add_watch(fd, path, mask) >= 0 else { throw POSIXError(.ENOENT) }
        }
        try body()
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        var events: [Event] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<1_000 {
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            guard got > 0 else { break }
            var offset = 0
            while offset + 16 <= got {
                let eventMask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                let length = Int(buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self) })
                let name = buffer[(offset + 16)..<min(got, offset + 16 + length)].prefix { $0 != 0 }
                events.append(Event(mask: eventMask, name: String(decoding: name, as: UTF8.self)))
                offset += 16 + length
            }
        }
        return events
        #else
        throw POSIXError(.ENOSYS)
        #endif
    }
}
