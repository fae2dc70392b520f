import Foundation
import Crypto
import Cipher
import Vault
#if canImport(Glibc)
import Glibc
#endif

/// A watched folder (`share send --watch`): each regular file of the folder is sent once it is
/// complete, and again only when its content changes. A file is complete when it was closed
/// after writing (inotify's `IN_CLOSE_WRITE`, or renamed into the folder: `IN_MOVED_TO`) and its
/// size and modification time have not changed for the settle time; without inotify (not
/// Linux), the settle time alone decides. What was sent (name, size, modification time,
/// SHA-256) is kept in a state file sealed under the vault's application key, bound to the
/// folder and the receiver, so a restart sends nothing twice and a writer of the data directory
/// cannot mark a file as sent (docs/SHARING.md, "Watched folders").
///
/// Not thread-safe: one task drives it.
public final class ShareFolderWatcher {
    /// What happened to a file.
    public enum Event: Sendable, Equatable {
        /// Sent (the receiver's answer).
        case sent(path: String, ShareClient.Sent)
        /// The send failed; it is tried again after `retryAfter`.
        case failed(path: String, String)
        /// Its content is what was sent already (touched, or rewritten with the same bytes).
        case unchanged(path: String)
    }

    /// A sent file's record.
    struct Entry: Codable, Equatable {
        var size: UInt64
        var modified: Int64
        var sha256: String
    }

    struct State: Codable {
        var version = 1
        var sent: [String: Entry] = [:]
    }

    public let directory: String
    public let stateFile: String
    public let settle: Duration
    public let retryAfter: Duration
    private let manager: CryptoManager
    private let context: [UInt8]
    private var state: State
    /// Files seen: (size, modification time) and when that was first seen.
    private var seen: [String: (size: UInt64, modified: Int64, since: ContinuousClock.Instant)] = [:]
    /// Files being written (a modification seen, no close yet).
    private var dirty: Set<String> = []
    private var failedAt: [String: ContinuousClock.Instant] = [:]
    private var inotify: Int32 = -1

    /// Watches `directory` (not its subdirectories); the state lives in `stateFile`.
    /// - Throws: ``ShareError/io(path:detail:)`` when the folder cannot be read,
    ///   ``ShareError/watchStateTampered(path:folder:)`` when the state file does not open under
    ///   this vault's key (changed, or of another folder or receiver: remove it to send every
    ///   file again),
    ///   ``ShareError/locked(_:)`` when the vault is locked.
    /// - Parameters:
    ///   - directory: the folder to watch.
    ///   - receiver: the receiver the files go to; the state is bound to it and to the folder.
    ///   - stateFile: the sealed file that records what was sent.
    ///   - manager: the vault's crypto manager, which seals the state.
    ///   - settle: how long a file must stay unchanged before it is sent (when closes are not seen).
    ///   - retryAfter: how long to wait before sending a file whose sending failed again.
    public init(directory: String, receiver: String, stateFile: String, manager: CryptoManager,
                settle: Duration = .seconds(2), retryAfter: Duration = .seconds(10)) throws(ShareError) {
        let absolute = (directory as NSString).standardizingPath
        self.directory = absolute
        self.stateFile = stateFile
        self.settle = settle
        self.retryAfter = retryAfter
        self.manager = manager
        context = Array("securefoundation share-watch v1\n\(absolute)\n\(receiver)".utf8)
        guard (try? FileCalls.linkStatus(absolute))?.kind == .directory else {
            throw .io(path: directory, detail: "not a directory")
        }
        state = State()
        if FileManager.default.fileExists(atPath: stateFile) {
            do {
                let sealed = try SecureFile.read(stateFile, maxLength: 16 << 20)
                state = try manager.decrypt(State.self, from: sealed, context: context)
            } catch let error as VaultError {
                if case .locked = error { throw .locked("the vault is locked; give --passcode-file") }
                throw .watchStateTampered(path: stateFile, folder: absolute)
            } catch {
                throw .storage("the watch state \(stateFile) cannot be read: \(error)")
            }
        }
        #if os(Linux)
        inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if inotify >= 0 {
            let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
            if inotify_add_watch(inotify, absolute, mask) < 0 {
                close(inotify)
                inotify = -1
            }
        }
        #endif
    }

    deinit { if inotify >= 0 { close(inotify) } }

    /// Whether the folder's changes are seen as they happen (inotify) or by the settle time alone.
    package var seesCloses: Bool { inotify >= 0 }

    /// Runs until `stop` says so: every quarter second it reads the folder's events and sends
    /// the files that are complete and not sent yet, reporting each. With `stop` returning
    /// `isDone(countingFailures:)`, it ends once everything present was handled (`--once`).
    /// - Parameters:
    ///   - send: sends one file and returns the receiver's answer.
    ///   - report: told what happened to each file.
    ///   - stop: asked before each round; `true` ends the run.
    /// - Throws: ``ShareError/io(path:detail:)`` when the folder cannot be listed or the state
    ///   cannot be written; a failure of `send` is reported as a failed file, not thrown.
    public func run(send: (String) async throws -> ShareClient.Sent, report: (Event) -> Void,
                    stop: (ShareFolderWatcher) -> Bool) async throws(ShareError) {
        while !stop(self) {
            drainEvents()
            for path in try completeFiles() {
                try await handle(path, send: send, report: report)
            }
            if stop(self) { break }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Nothing is being written or waiting to settle, and every regular file is recorded as
    /// sent (with `countingFailures`, or failed at least once, which `--once` reports).
    package func isDone(countingFailures: Bool = false) -> Bool {
        guard dirty.isEmpty else { return false }
        if !countingFailures && !failedAt.isEmpty { return false }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return true }
        return names.allSatisfy { name in
            guard !name.hasPrefix("."), let current = Self.status(directory + "/" + name) else { return true }
            if let entry = state.sent[name], entry.size == current.size, entry.modified == current.modified { return true }
            return countingFailures && failedAt[name] != nil
        }
    }

    private func drainEvents() {
        #if os(Linux)
        guard inotify >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (mask, length) = buffer.withUnsafeBytes { raw -> (UInt32, Int) in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.mask, Int(event.len))
                }
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                offset += header + length
                if mask & UInt32(IN_MODIFY | IN_CREATE) != 0 { dirty.insert(name) }
                if mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) != 0 { dirty.remove(name) }
            }
        }
        #endif
    }

    /// Size and modification time (ns) of a regular file that is not a symbolic link.
    static func status(_ path: String) -> (size: UInt64, modified: Int64)? {
        guard let info = try? FileCalls.linkStatus(path), info.kind == .regular else { return nil }
        return (UInt64(max(0, info.size)), info.modified.seconds * 1_000_000_000 + info.modified.nanoseconds)
    }

    /// The files that are complete now and not recorded as sent with this size and time.
    private func completeFiles() throws(ShareError) -> [String] {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted() } catch {
            throw .io(path: directory, detail: "the folder cannot be listed: \(error.localizedDescription)")
        }
        let now = ContinuousClock.now
        var ready: [String] = []
        var present: Set<String> = []
        for name in names where !name.hasPrefix(".") {
            let path = directory + "/" + name
            guard let current = Self.status(path) else { continue }
            present.insert(name)
            if let entry = state.sent[name], entry.size == current.size, entry.modified == current.modified { continue }
            if dirty.contains(name) { seen[name] = (current.size, current.modified, now); continue }
            if let previous = seen[name], previous.size == current.size, previous.modified == current.modified {
                if now - previous.since >= settle, failedAt[name].map({ now - $0 >= retryAfter }) ?? true { ready.append(path) }
            } else {
                seen[name] = (current.size, current.modified, now)
            }
        }
        for name in seen.keys where !present.contains(name) { seen[name] = nil; failedAt[name] = nil }
        return ready
    }

    private func handle(_ path: String, send: (String) async throws -> ShareClient.Sent, report: (Event) -> Void) async throws(ShareError) {
        let name = (path as NSString).lastPathComponent
        guard let before = Self.status(path) else { return }   // deleted meanwhile
        let digest: String
        do { digest = try Self.sha256(path) } catch { return }   // deleted or unreadable meanwhile
        guard let after = Self.status(path), after == before else { return }   // changed while hashed: next round
        let entry = Entry(size: before.size, modified: before.modified, sha256: digest)
        if let recorded = state.sent[name], recorded.sha256 == digest {
            state.sent[name] = entry
            try save()
            report(.unchanged(path: path))
            return
        }
        do {
            let sent = try await send(path)
            failedAt[name] = nil
            state.sent[name] = entry
            try save()
            report(.sent(path: path, sent))
        } catch {
            failedAt[name] = ContinuousClock.now
            report(.failed(path: path, "\(error)"))
        }
    }

    static func sha256(_ path: String) throws -> String {
        Encoding.hex(try Hashing.digest(.sha256, ofFile: path))
    }

    private func save() throws(ShareError) {
        do {
            let sealed = try manager.encrypt(value: state, context: context)
            try SecureFile.ensurePrivateDirectory((stateFile as NSString).deletingLastPathComponent)
            try SecureFile.writeAtomically(sealed, to: stateFile)
        } catch {
            throw .io(path: stateFile, detail: "the watch state cannot be written: \(error)")
        }
    }

    /// The default state file of a folder and receiver: `HOME/share-watch/<16 hex digits>.state`.
    package static func defaultStateFile(home: String, directory: String, receiver: String) -> String {
        let absolute = (directory as NSString).standardizingPath
        let digest = Encoding.hex(Array(SHA256.hash(data: Data("\(absolute)\n\(receiver)".utf8)).prefix(8)))
        return home + "/share-watch/" + digest + ".state"
    }
}
