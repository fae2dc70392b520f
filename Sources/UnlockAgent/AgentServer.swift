import Foundation
import Cipher
import AgentWire
import Vault
import Age
import ProtectedFiles
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The unlock agent: holds one vault's keys in locked memory and serves its class keys over a
/// UNIX socket to processes of the same user, as gpg-agent and ssh-agent do for theirs.
///
/// - The socket is mode 0600 in a 0700 directory owned by this user (``AgentPaths``); every
///   connection's peer is checked with `SO_PEERCRED` and served only when its uid is in
///   ``Configuration/allowedUIDs`` (this user by default).
/// - It serves class keys, never the passcode (wiped after the KDF) and never the application
///   key; whenUnlocked keys only while unlocked, afterFirstUnlock keys from the first unlock
///   until the agent stops, and nothing for the always class (which needs no agent).
/// - The idle TTL is reset by every key served; the maximum TTL runs from the unlock and is not
///   reset; either locks the vault (wiping the keys) when it runs out, as does a lock request.
/// - One agent per socket: the agent holds an exclusive `flock` on `SOCKET.lock` for its
///   life, so a socket left by a killed agent is known to be stale and is replaced (a symlink or
///   any other file at that path is refused, never followed).
/// - Requests are bounded (64 KiB); a request's whole frame must arrive within
///   ``Configuration/requestTimeout`` of the connection (one deadline on the monotonic clock,
///   however the bytes are spread out); at most ``Configuration/maximumConnections`` are
///   served at once, and when all are taken a new connection takes the slot of a connection
///   still waiting for its request: first one that has sent nothing yet, the longest waiting,
///   then any, the longest waiting; so clients that hold connections silent or trickle bytes
///   cannot keep a real request out. One client (a process, by its `SO_PEERCRED` pid) holds at
///   most ``Configuration/maximumSilentPerClient`` connections that have sent nothing: beyond
///   that, its own oldest silent one gives its slot.
/// - The keys are those of the vault on disk when it was unlocked: before each request (and
///   four times a second) the agent compares the identity of the vault's files
///   (`CryptoManager.stateIdentity`: `vault.state`, the device-key record and journal) with
///   the one it unlocked, and when they differ (an erase, a passcode change, a rotation, files
///   put back from a copy) it locks and forgets every key, afterFirstUnlock ones included.
///
/// Thread safety: ``run()`` serves from its own thread plus one thread per connection; every
/// shared field is behind an internal lock.
public final class AgentServer: @unchecked Sendable {
    /// Limits and time-to-live settings.
    public struct Configuration: Sendable {
        /// Lock after this many seconds without a key served (gpg-agent's default: 600).
        public var idleTTL: Int
        /// Lock this many seconds after the unlock, whatever the use (gpg-agent's default: 7200).
        public var maxTTL: Int
        /// The uids served (default: this process's effective uid only).
        public var allowedUIDs: Set<UInt32>
        /// Seconds a client has to send its whole request, from its connection.
        public var requestTimeout: Double
        /// Connections served at once. A new connection beyond them takes the slot of the one
        /// waiting longest for its request (that one is answered "busy" and closed); when every
        /// slot is handling a request, the new one is answered "busy" and closed.
        public var maximumConnections: Int
        /// Lock-state subscribers at once.
        public var maximumSubscribers: Int
        /// Connections of one client process (by pid) that have sent nothing yet, at once. A
        /// newer one takes the slot of that client's oldest silent connection.
        public var maximumSilentPerClient: Int

        /// Settings with gpg-agent's TTLs by default.
        /// - Parameters:
        ///   - idleTTL: Lock after this many seconds without a key served.
        ///   - maxTTL: Lock this many seconds after the unlock.
        ///   - allowedUIDs: The uids served.
        ///   - requestTimeout: Seconds a client has to send its whole request.
        ///   - maximumConnections: Connections served at once.
        ///   - maximumSubscribers: Lock-state subscribers at once.
        ///   - maximumSilentPerClient: Connections of one client process that have sent nothing yet, at once.
        public init(idleTTL: Int = 600, maxTTL: Int = 7200, allowedUIDs: Set<UInt32> = [UInt32(geteuid())],
                    requestTimeout: Double = 5, maximumConnections: Int = 128, maximumSubscribers: Int = 64,
                    maximumSilentPerClient: Int = 16) {
            self.idleTTL = idleTTL
            self.maxTTL = maxTTL
            self.allowedUIDs = allowedUIDs
            self.requestTimeout = requestTimeout
            self.maximumConnections = maximumConnections
            self.maximumSubscribers = maximumSubscribers
            self.maximumSilentPerClient = max(1, maximumSilentPerClient)
        }
    }

    /// The vault served.
    public let manager: CryptoManager
    /// The socket's path.
    public let socketPath: String
    /// Limits and TTLs.
    public let configuration: Configuration
    /// Where events are logged (refused peers, expiries); nil for silence.
    public let log: (@Sendable (String) -> Void)?
    /// The vault's protected files, whose class identities the agent uses to unwrap file keys
    /// for `age-plugin-securefoundation` (``AgentProtocol/Operation/unwrapFileKey``).
    let files: ProtectedFiles

    struct Shared {
        var listenFD: Int32 = -1
        var lockFD: Int32 = -1
        var socketIdentity: (dev: UInt64, ino: UInt64)?
        var unlockedAt: Double?
        var lastUse: Double?
        var firstUnlockDone = false
        /// The vault unlocked: its id and the identity of its files then.
        var servedVault: (id: Data?, identity: VaultStateIdentity)?
        var connections: [UInt64: Connection] = [:]
        var nextConnection: UInt64 = 0
        var subscribers: [Int32] = []
        var pendingSubscribers: [Int32] = []
        var stopping = false
        var published: LockState?
    }

    /// A connection being served, by the id its thread holds.
    struct Connection {
        let fd: Int32
        /// When it was accepted (``UnixSocket/monotonicNow()``).
        let accepted: Double
        /// The peer's pid (0 when unknown): the client whose silent connections are bounded.
        let pid: Int32
        /// Still waiting for its request (or draining a refusal): its slot may go to a newcomer.
        var waiting = true
        /// Some of its request has arrived: it gives its slot only after every silent one.
        var sentSomething = false
        /// Its slot went to a newcomer; its reading side was shut down.
        var evicted = false

        /// Nothing of its request has arrived (none read, none waiting to be read).
        var isSilent: Bool { !sentSomething && UnixSocket.pendingBytes(fd) == 0 }
    }

    let shared = NSLock()
    nonisolated(unsafe) var state = Shared()
    let wakeRead: Int32
    let wakeWrite: Int32

    /// - Parameters:
    ///   - manager: The vault to serve (made without an unlocked-key source).
    ///   - socketPath: Where to listen; its directory is created 0700 and checked.
    ///   - configuration: TTLs and limits.
    ///   - log: Receives one line per notable event.
    /// - Throws: ``AgentError/protocolViolation(_:)`` for TTLs under one second,
    ///   ``AgentError/io(_:)`` when its wake-up pipe cannot be made.
    public init(manager: CryptoManager, socketPath: String, configuration: Configuration = Configuration(),
                log: (@Sendable (String) -> Void)? = nil) throws(AgentError) {
        guard configuration.idleTTL > 0, configuration.maxTTL > 0 else {
            throw AgentError.protocolViolation("the idle and maximum TTLs must be at least one second")
        }
        self.manager = manager
        self.socketPath = VaultPaths.absolute(socketPath)
        self.configuration = configuration
        self.log = log
        files = ProtectedFiles(manager: manager)
        (wakeRead, wakeWrite) = try AgentSystem.wakePipe()
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    func locked<Result>(_ body: (inout Shared) throws -> Result) rethrows -> Result {
        shared.lock()
        defer { shared.unlock() }
        return try body(&state)
    }

    /// Seconds since boot, counting suspend (CLOCK_BOOTTIME), so a TTL runs while a laptop sleeps.
    static func now() -> Double { AgentSystem.bootTime() }

    // MARK: Binding

    /// Takes the socket: checks its directory, takes `SOCKET.lock` (else
    /// ``AgentError/alreadyRunning(socket:)``), removes a stale socket left by a killed agent,
    /// binds (0600) and listens. The process is made non-dumpable first (`PR_SET_DUMPABLE` 0 on
    /// Linux): another process of the same user can then neither ptrace it nor read its memory
    /// through `/proc/PID/mem`, and it leaves no core dump with the keys it will hold.
    /// - Throws: ``AgentError/alreadyRunning(socket:)``, ``AgentError/pathInUse(path:reason:)``
    ///   when something else is at the socket's or the lock's path,
    ///   ``AgentError/insecureDirectory(path:reason:fix:)``, ``AgentError/io(_:)``.
    public func bind() throws(AgentError) {
        // ENOSYS: a system without the switch (not Linux), where the agent runs as before.
        let dumpable = sf_set_nondumpable()
        guard dumpable == 0 || dumpable == ENOSYS else {
            throw AgentError.io("cannot make the agent non-dumpable (prctl PR_SET_DUMPABLE): \(String(cString: strerror(dumpable)))")
        }
        let directory = (socketPath as NSString).deletingLastPathComponent
        try AgentPaths.ensurePrivateDirectory(directory)
        let lockPath = socketPath + ".lock"
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else {
            if errno == ELOOP { throw AgentError.pathInUse(path: lockPath, reason: "is a symbolic link") }
            throw AgentError.system("open", lockPath)
        }
        guard FileCalls.tryLockExclusive(lockFD) else {
            close(lockFD)
            throw AgentError.alreadyRunning(socket: socketPath)
        }
        do throws(AgentError) {
            let existing: FileStatus?
            do {
                existing = try FileCalls.linkStatus(socketPath)
            } catch where error.code == ENOENT {
                existing = nil
            } catch {
                throw AgentError.system("lstat", socketPath, error.code)
            }
            if let info = existing {
                // Nobody holds the lock, so no agent serves this socket: it is stale. Only a
                // socket is removed; anything else (a symlink, a file) is left for a person.
                guard info.kind == .socket else {
                    throw AgentError.pathInUse(path: socketPath, reason: "exists and is not a socket (a symlink, file or directory)")
                }
                guard info.owner == geteuid() else {
                    throw AgentError.pathInUse(path: socketPath, reason: "is a socket of uid \(info.owner)")
                }
                guard unlink(socketPath) == 0 || errno == ENOENT else { throw AgentError.system("unlink", socketPath) }
                log?("replaced the stale socket \(socketPath)")
            }
            let fd = try AgentSystem.listen(at: socketPath)
            guard let info = try? FileCalls.linkStatus(socketPath) else {
                let code = errno
                close(fd)
                unlink(socketPath)
                throw AgentError.system("lstat", socketPath, code)
            }
            locked {
                $0.listenFD = fd
                $0.lockFD = lockFD
                $0.socketIdentity = (info.device, info.inode)
            }
        } catch {
            close(lockFD)
            throw error
        }
    }

    // MARK: Serving

    /// Serves until ``stop()`` or a stop request, then locks the vault, removes the socket and
    /// returns. Call ``bind()`` first.
    /// - Throws: ``AgentError/notRunning(socket:)`` when not bound, ``AgentError/io(_:)`` when
    ///   waiting for connections fails.
    public func run() throws(AgentError) {
        let listenFD = locked { $0.listenFD }
        guard listenFD >= 0 else { throw AgentError.notRunning(socket: socketPath) }
        while !locked({ $0.stopping }) {
            admitSubscribers()
            let subscribers = locked { $0.subscribers }
            let (ready, failed) = AgentSystem.waitReadable([listenFD, wakeRead] + subscribers, milliseconds: 250)
            if failed { throw AgentError.system("poll", socketPath) }
            expireIfDue()
            forgetIfVaultChanged()
            if ready[1] { AgentSystem.drain(wakeRead) }
            // A subscriber sends nothing after its request: readable means closed (or misbehaving).
            for (index, fd) in subscribers.enumerated() where ready[2 + index] { dropSubscriber(fd) }
            publishState()
            if ready[0] { acceptOne(listenFD) }
        }
        shutdown()
    }

    /// Asks ``run()`` to finish (from any thread).
    public func stop() {
        locked { $0.stopping = true }
        wake()
    }

    func wake() { AgentSystem.poke(wakeWrite) }

    func shutdown() {
        manager.lock()
        DeviceKeyHardware.holdPIN(nil)
        publishState()
        let (listenFD, lockFD, identity, subscribers) = locked { state in
            let result = (state.listenFD, state.lockFD, state.socketIdentity, state.subscribers + state.pendingSubscribers)
            state.listenFD = -1
            state.lockFD = -1
            state.subscribers = []
            state.pendingSubscribers = []
            return result
        }
        // The socket is removed only while it is still the one this agent bound.
        if let identity, let info = try? FileCalls.linkStatus(socketPath), info.device == identity.dev, info.inode == identity.ino {
            unlink(socketPath)
        }
        if listenFD >= 0 { close(listenFD) }
        subscribers.forEach { close($0) }
        if lockFD >= 0 { close(lockFD) }
    }

    func acceptOne(_ listenFD: Int32) {
        guard let fd = AgentSystem.accept(listenFD) else { return }
        let now = UnixSocket.monotonicNow()
        let limit = configuration.maximumConnections
        var uid: UInt32 = 0
        var pid: Int32 = 0
        if sf_peer_credentials(fd, &uid, &pid) != 0 { pid = 0 }
        let perClient = configuration.maximumSilentPerClient
        let admitted = locked { state -> UInt64? in
            /// Takes the slot of `id` (its thread wakes, answers "busy" and closes). Under the
            /// lock: the owning thread closes the descriptor only after removing its entry, so
            /// the descriptor is still that connection's.
            func evict(_ id: UInt64) {
                guard let connection = state.connections[id] else { return }
                state.connections[id]?.evicted = true
                UnixSocket.shutdownReading(connection.fd)
            }
            let candidates = state.connections.filter { $0.value.waiting && !$0.value.evicted }
            let silent = candidates.filter { $0.value.isSilent }
            // One client holds at most `perClient` silent connections: beyond, its own oldest goes.
            let silentOfPeer = pid == 0 ? [:] : silent.filter { $0.value.pid == pid }
            if silentOfPeer.count >= perClient, let oldest = silentOfPeer.min(by: { $0.value.accepted < $1.value.accepted }) {
                evict(oldest.key)
            }
            let live = state.connections.values.reduce(0) { $0 + ($1.evicted ? 0 : 1) }
            if live >= limit {
                // Every slot is taken: a connection still waiting for its request gives its slot
                // up, first the silent one waiting longest, else the one waiting longest.
                // Connections handling a request are never cut.
                let pool = candidates.filter { state.connections[$0.key]?.evicted == false }
                let silentPool = pool.filter { $0.value.isSilent }
                guard let oldest = (silentPool.isEmpty ? pool : silentPool).min(by: { $0.value.accepted < $1.value.accepted }) else { return nil }
                evict(oldest.key)
            }
            // Threads of cut connections still finishing count too.
            guard state.connections.count < 2 * limit else { return nil }
            state.nextConnection += 1
            state.connections[state.nextConnection] = Connection(fd: fd, accepted: now, pid: pid)
            return state.nextConnection
        }
        guard let id = admitted else {
            UnixSocket.setTimeouts(fd, seconds: 0.2)
            try? AgentProtocol.writeFrame(fd, Self.busy)
            close(fd)
            return
        }
        let thread = Thread { [self] in
            let keep = self.serve(fd, id: id, deadline: now + self.configuration.requestTimeout)
            self.locked { _ = $0.connections.removeValue(forKey: id) }
            if !keep { close(fd) }
        }
        thread.start()
    }

    /// What a connection turned away before its request was read is told.
    static var busyMessage: String { AgentFrames.busyMessage }
    static let busy = AgentProtocol.errorResponse(WireError(kind: "other", message: busyMessage))

    /// Shuts down the writing side and discards what the peer sent (at most 64 KiB, within one
    /// second in all), so that closing does not reset the connection before the peer reads.
    static func drainBeforeClose(_ fd: Int32) {
        UnixSocket.shutdownWriting(fd)
        UnixSocket.discard(fd, limit: 64 * 1024, until: UnixSocket.monotonicNow() + 1)
    }

    /// Whether connection `id` lost its slot to a newcomer.
    func wasEvicted(_ id: UInt64) -> Bool {
        locked { $0.connections[id]?.evicted ?? false }
    }

    /// Serves one connection, whose whole request must arrive by `deadline`
    /// (``UnixSocket/monotonicNow()``); returns true when the descriptor became a subscriber.
    func serve(_ fd: Int32, id: UInt64, deadline: Double) -> Bool {
        var uid: UInt32 = 0
        var pid: Int32 = 0
        let code = sf_peer_credentials(fd, &uid, &pid)
        // Writes (answers of at most a few KiB) wait at most this long for a peer that reads nothing.
        UnixSocket.setTimeouts(fd, seconds: configuration.requestTimeout)
        guard code == 0 else {
            log?("refused a connection whose peer cannot be identified: \(String(cString: strerror(code)))")
            return false
        }
        guard configuration.allowedUIDs.contains(uid) else {
            log?("refused a connection from uid \(uid) (pid \(pid)): this agent serves uid \(geteuid())")
            try? AgentProtocol.writeFrame(fd, AgentProtocol.errorResponse(WireError(
                kind: "refused", message: "uid \(uid) is not served by this agent (it serves uid \(geteuid()) only)")))
            // Read what the peer sent before closing: closing a UNIX socket with unread bytes
            // resets the connection, and the peer would lose the refusal it was sent.
            Self.drainBeforeClose(fd)
            return false
        }
        let request: SecretBytes
        do {
            // The first byte marks the connection as one with a request under way: silent
            // connections give their slots before it.
            if try UnixSocket.waitReadable(fd, until: deadline) { locked { $0.connections[id]?.sentSomething = true } }
            request = try AgentProtocol.readFrame(fd, deadline: deadline)
        } catch {
            if wasEvicted(id) {
                try? AgentProtocol.writeFrame(fd, Self.busy)
            } else {
                try? AgentProtocol.writeFrame(fd, AgentProtocol.errorResponse(WireError(kind: "protocol", message: "\(error)")))
            }
            return false
        }
        defer { request.wipe() }
        locked { $0.connections[id]?.waiting = false }
        do {
            return try handle(request, fd: fd)
        } catch {
            try? AgentProtocol.writeFrame(fd, AgentProtocol.errorResponse(WireError(error)))
            return false
        }
    }
}
