import Foundation
import Cipher
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
    private let files: ProtectedFiles

    private struct Shared {
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
    private struct Connection {
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

    private let shared = NSLock()
    private nonisolated(unsafe) var state = Shared()
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// - Parameters:
    ///   - manager: The vault to serve (made without an unlocked-key source).
    ///   - socketPath: Where to listen; its directory is created 0700 and checked.
    ///   - configuration: TTLs and limits.
    ///   - log: Receives one line per notable event.
    public init(manager: CryptoManager, socketPath: String, configuration: Configuration = Configuration(),
                log: (@Sendable (String) -> Void)? = nil) throws {
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

    private func locked<Result>(_ body: (inout Shared) throws -> Result) rethrows -> Result {
        shared.lock()
        defer { shared.unlock() }
        return try body(&state)
    }

    /// Seconds since boot, counting suspend (CLOCK_BOOTTIME), so a TTL runs while a laptop sleeps.
    static func now() -> Double { AgentSystem.bootTime() }

    // MARK: Binding

    /// Takes the socket: checks its directory, takes `SOCKET.lock` (else
    /// ``AgentError/alreadyRunning(socket:)``), removes a stale socket left by a killed agent,
    /// binds (0600) and listens.
    public func bind() throws {
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
        do {
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
    public func run() throws {
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

    private func wake() { AgentSystem.poke(wakeWrite) }

    private func shutdown() {
        manager.lock()
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

    private func acceptOne(_ listenFD: Int32) {
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

    private static let busy = AgentProtocol.errorResponse(WireError(kind: "other", message: "the agent is busy; try again"))

    /// Shuts down the writing side and discards what the peer sent (at most 64 KiB, within one
    /// second in all), so that closing does not reset the connection before the peer reads.
    private static func drainBeforeClose(_ fd: Int32) {
        UnixSocket.shutdownWriting(fd)
        UnixSocket.discard(fd, limit: 64 * 1024, until: UnixSocket.monotonicNow() + 1)
    }

    /// Whether connection `id` lost its slot to a newcomer.
    private func wasEvicted(_ id: UInt64) -> Bool {
        locked { $0.connections[id]?.evicted ?? false }
    }

    /// Serves one connection, whose whole request must arrive by `deadline`
    /// (``UnixSocket/monotonicNow()``); returns true when the descriptor became a subscriber.
    private func serve(_ fd: Int32, id: UInt64, deadline: Double) -> Bool {
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

    private func handle(_ request: SecretBytes, fd: Int32) throws -> Bool {
        let (version, code) = request.withUnsafeBytes { bytes in bytes.count >= 2 ? (bytes[0], bytes[1]) : (0, 0) }
        guard version == AgentProtocol.version else {
            throw AgentError.protocolViolation("protocol version \(version) is not supported (this agent speaks \(AgentProtocol.version))")
        }
        guard let operation = AgentProtocol.Operation(rawValue: code) else {
            throw AgentError.protocolViolation("unknown request \(code)")
        }
        expireIfDue()
        forgetIfVaultChanged()
        switch operation {
        case .status:
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse(try JSONEncoder().encode(status()).map { $0 }))
        case .unlock:
            try unlock(request)
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse(try JSONEncoder().encode(status()).map { $0 }))
        case .lock:
            lockNow()
            try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse())
        case .classKeys:
            let response = try classKeys(request)
            defer { response.wipe() }
            try AgentProtocol.writeFrame(fd, response)
        case .unwrapFileKey:
            let key = try unwrapFileKey(request)
            defer { key.wipe() }
            let response = SecretBytes(count: 1 + key.count) { target in
                target[0] = 0
                key.withUnsafeBytes { (target.baseAddress! + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            }
            defer { response.wipe() }
            try AgentProtocol.writeFrame(fd, response)
        case .subscribe:
            let admitted = locked { state -> Bool in
                guard state.subscribers.count + state.pendingSubscribers.count < configuration.maximumSubscribers else { return false }
                state.pendingSubscribers.append(fd)
                return true
            }
            guard admitted else { throw AgentError.remote("too many lock-state subscribers") }
            // The run loop owns the descriptor from here: it sends the current state, then every change.
            wake()
            return true
        case .stop:
            try? AgentProtocol.writeFrame(fd, AgentProtocol.okResponse())
            log?("stopping on request")
            stop()
        }
        return false
    }

    /// The agent's status (no secret).
    public func status() -> AgentStatus {
        let now = Self.now()
        let unlocked = manager.isUnlocked
        return locked { state in
            var idle: Int?, max: Int?
            if unlocked, let unlockedAt = state.unlockedAt, let lastUse = state.lastUse {
                idle = Swift.max(0, Int((Double(configuration.idleTTL) - (now - lastUse)).rounded(.up)))
                max = Swift.max(0, Int((Double(configuration.maxTTL) - (now - unlockedAt)).rounded(.up)))
            }
            return AgentStatus(state: unlocked ? .unlocked : .locked, firstUnlockDone: state.firstUnlockDone, home: manager.directory,
                               idleTTL: configuration.idleTTL, maxTTL: configuration.maxTTL, idleRemaining: idle, maxRemaining: max,
                               pid: getpid(), uid: UInt32(geteuid()))
        }
    }

    private func unlock(_ request: SecretBytes) throws {
        let (passcode, answers) = try request.withUnsafeBytes { bytes -> (SecretBytes?, [SecretBytes]) in
            guard bytes.count >= 3 else { throw AgentError.protocolViolation("an unlock request without a credential") }
            func secret(_ range: Range<Int>) -> SecretBytes {
                SecretBytes(count: range.count) { target in
                    if !range.isEmpty { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[range])) }
                }
            }
            switch bytes[2] {
            case 0:
                guard bytes.count > 3 else { throw AgentError.protocolViolation("an empty passcode") }
                return (secret(3..<bytes.count), [])
            case 1:
                guard bytes.count >= 4, (1...CryptoManager.maximumQuestions).contains(Int(bytes[3])) else {
                    throw AgentError.protocolViolation("an unlock request with a bad answer count")
                }
                var answers: [SecretBytes] = []
                var offset = 4
                for _ in 0..<Int(bytes[3]) {
                    guard offset + 2 <= bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("a truncated answer") }
                    let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
                    offset += 2
                    guard offset + length <= bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("a truncated answer") }
                    answers.append(secret(offset..<offset + length))
                    offset += length
                }
                guard offset == bytes.count else { answers.forEach { $0.wipe() }; throw AgentError.protocolViolation("trailing bytes after the answers") }
                return (nil, answers)
            default:
                throw AgentError.protocolViolation("an unknown credential kind")
            }
        }
        defer {
            passcode?.wipe()
            answers.forEach { $0.wipe() }
        }
        if let passcode { try manager.unlock(passcode: passcode) } else { try manager.unlock(answers: answers) }
        // Taken after the unlock, which rewrites a state of an older version in the current one.
        let identity = manager.stateIdentity
        let vaultID = try? manager.vaultID
        let now = Self.now()
        locked {
            $0.unlockedAt = now
            $0.lastUse = now
            $0.firstUnlockDone = true
            $0.servedVault = (vaultID, identity)
        }
        log?("unlocked")
        wake()
    }

    private func lockNow() {
        locked {
            $0.unlockedAt = nil
            $0.lastUse = nil
        }
        manager.lock()
        log?("locked on request")
        wake()
    }

    /// Locks and forgets every key (afterFirstUnlock ones too, and the device key) when the
    /// vault's files are no longer those unlocked: erased, rewritten (a passcode or questions
    /// change, a rotation of the application, class or device key) or put back from a copy. A
    /// vault restored from a backup is thus never served with keys held from before; it needs
    /// an unlock again.
    private func forgetIfVaultChanged() {
        guard let served = locked({ $0.servedVault }) else { return }
        let current = manager.stateIdentity
        guard !current.matches(served.identity) else { return }
        let forget = locked { state -> Bool in
            // Another thread forgot first, or a new unlock recorded another identity.
            guard let now = state.servedVault, now.identity == served.identity else { return false }
            state.servedVault = nil
            state.unlockedAt = nil
            state.lastUse = nil
            state.firstUnlockDone = false
            return true
        }
        guard forget else { return }
        manager.forgetHeldKeys(vaultID: served.id)
        log?(current.hasState
             ? "locked and forgot every key: the vault's files changed (a new passcode or questions, a key rotation, or files put back)"
             : "locked and forgot every key: the vault was erased")
        wake()
    }

    /// Locks when the idle or the maximum TTL has run out.
    private func expireIfDue() {
        let now = Self.now()
        let expired = locked { state -> String? in
            guard let unlockedAt = state.unlockedAt, let lastUse = state.lastUse else { return nil }
            var why: String?
            if now - lastUse >= Double(configuration.idleTTL) { why = "idle TTL" }
            if now - unlockedAt >= Double(configuration.maxTTL) { why = "maximum TTL" }
            if why != nil {
                state.unlockedAt = nil
                state.lastUse = nil
            }
            return why
        }
        if let expired {
            manager.lock()
            log?("locked: the \(expired) ran out")
            wake()
        }
    }

    private func classKeys(_ request: SecretBytes) throws -> SecretBytes {
        let (classCode, deviceOnly, vaultID) = try request.withUnsafeBytes { bytes -> (UInt8, UInt8, Data) in
            guard bytes.count == 2 + 2 + 16 else { throw AgentError.protocolViolation("a class-key request of \(bytes.count) bytes") }
            return (bytes[2], bytes[3], Data(bytes[4..<20]))
        }
        guard let protectionClass = AgentProtocol.protectionClass(classCode), deviceOnly <= 1 else {
            throw AgentError.protocolViolation("an unknown class")
        }
        guard protectionClass != .always else {
            throw AgentError.remote("the always class needs no agent; read its key from the data directory")
        }
        guard try manager.vaultID == vaultID else {
            throw AgentError.remote("this agent serves another vault (\(manager.directory))")
        }
        let accessibility = Accessibility(protectionClass, thisDeviceOnly: deviceOnly == 1)
        // The agent's own state decides, not the process's: a program that embeds the agent
        // and unlocked the vault elsewhere (the afterFirstUnlock keys are kept per process)
        // must not serve them before the agent itself was unlocked.
        let firstUnlockDone = locked { $0.firstUnlockDone }
        switch protectionClass {
        case .whenUnlocked where !manager.isUnlocked:
            throw VaultError.classKeyUnavailable(accessibility, .locked)
        case .afterFirstUnlock where !firstUnlockDone:
            throw VaultError.classKeyUnavailable(accessibility, .noFirstUnlockYet)
        default:
            break
        }
        let current = try manager.classKey(for: accessibility)
        var keys = [current]
        defer { keys.forEach { $0.wipe() } }
        keys += try manager.retiredClassKeys(for: accessibility)
        let count = min(keys.count, 255)
        locked { if $0.lastUse != nil { $0.lastUse = Self.now() } }
        // status 0 ‖ count ‖ keys
        return SecretBytes(count: 2 + 32 * count) { target in
            target[0] = 0
            target[1] = UInt8(count)
            for index in 0..<count {
                keys[index].withUnsafeBytes { (target.baseAddress! + 2 + 32 * index).copyMemory(from: $0.baseAddress!, byteCount: min(32, $0.count)) }
            }
        }
    }

    /// Unwraps a protected file's key with the class identity, which never leaves the agent.
    /// The same rules as for class keys decide which classes are served: whenUnlocked ones
    /// (complete, completeUnlessOpen) only while unlocked, afterFirstUnlock ones from the
    /// agent's own first unlock, the none class always (its key is in the data directory anyway).
    private func unwrapFileKey(_ request: SecretBytes) throws -> SecretBytes {
        let (onlyClassName, stanzas) = try request.withUnsafeBytes { try AgentProtocol.parseUnwrapRequest(Array($0)) }
        var onlyClass: FileProtectionClass?
        if let onlyClassName {
            guard let cls = FileProtectionClass(name: onlyClassName) else {
                throw AgentError.protocolViolation("an unknown protection class \(onlyClassName.prefix(60).debugDescription)")
            }
            onlyClass = cls
        }
        let firstUnlockDone = locked { $0.firstUnlockDone }
        let key = try files.unwrapFileKey(stanzas: stanzas, onlyClass: onlyClass) { cls in
            switch cls.accessibility.protectionClass {
            case .whenUnlocked where !manager.isUnlocked: throw ProtectedFileError.locked(cls, .locked)
            case .afterFirstUnlock where !firstUnlockDone: throw ProtectedFileError.locked(cls, .noFirstUnlockYet)
            default: break
            }
        }
        locked { if $0.lastUse != nil { $0.lastUse = Self.now() } }
        log?("unwrapped a file key for age-plugin-securefoundation")
        return key
    }

    // MARK: Lock-state subscribers (run-loop thread only)

    private func publishState() {
        let current: LockState = manager.isUnlocked ? .unlocked : .locked
        let subscribers = locked { state -> [Int32]? in
            guard state.published != current else { return nil }
            state.published = current
            return state.subscribers
        }
        guard let subscribers else { return }
        for fd in subscribers {
            UnixSocket.setTimeouts(fd, seconds: 1)
            do {
                try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse([AgentProtocol.stateCode(current)]))
            } catch {
                dropSubscriber(fd)
            }
        }
    }

    /// Sends each new subscriber the current state and adds it to the list.
    private func admitSubscribers() {
        let pending = locked { state -> [Int32] in
            defer { state.pendingSubscribers = [] }
            return state.pendingSubscribers
        }
        for fd in pending {
            let current: LockState = manager.isUnlocked ? .unlocked : .locked
            UnixSocket.setTimeouts(fd, seconds: 1)
            do {
                try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse([AgentProtocol.stateCode(current)]))
                locked { $0.subscribers.append(fd) }
            } catch {
                close(fd)
            }
        }
    }

    private func dropSubscriber(_ fd: Int32) {
        let removed = locked { state -> Bool in
            guard let index = state.subscribers.firstIndex(of: fd) else { return false }
            state.subscribers.remove(at: index)
            return true
        }
        if removed { close(fd) }
    }
}
