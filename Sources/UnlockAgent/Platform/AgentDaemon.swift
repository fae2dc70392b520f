import Foundation
import Cipher
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Running the unlock agent as a daemon, for the command line and for an application that runs
/// its own agent program: ``start(arguments:timeout:)`` starts the program detached and waits
/// until it listens; ``serve(readyDescriptor:listening:make:)``, in the agent's process, detaches it
/// from the starter's session, binds, says `ready` (or why it could not start) on the readiness
/// descriptor and serves until SIGTERM, SIGINT or SIGHUP. ``AgentServer/bind()`` makes the
/// process non-dumpable itself, so an agent embedded without this type keeps that protection.
public enum AgentDaemon {
    /// The descriptor the started program gets its readiness pipe on.
    public static let readyDescriptor: Int32 = 3

    /// Starts `arguments` (the agent program's path first) detached: standard input, output and
    /// error on `/dev/null`, the write end of a pipe as descriptor 3 (``readyDescriptor``; the
    /// arguments must make the program call ``serve(readyDescriptor:listening:make:)`` with it), every
    /// other descriptor of this process closed on exec (a caller's pipe would never see
    /// end-of-file). Waits at most `timeout` seconds for `ready`.
    /// - Returns: The agent's pid.
    /// - Throws: ``AgentError/io(_:)`` when it cannot be started; ``AgentError/remote(_:)`` with
    ///   what the agent said when it did not start (or that it exited without saying why).
    public static func start(arguments: [String], timeout: TimeInterval = 30) throws(AgentError) -> pid_t {
        let ready: (read: Int32, write: Int32)
        do { ready = try ProcessSpawn.pipe() } catch { throw AgentError.io("pipe: \(String(cString: strerror(error.code)))") }
        let pid: pid_t
        do {
            pid = try ProcessSpawn.spawn(arguments, actions: [.open(fd: 0, path: "/dev/null", flags: O_RDONLY),
                                                              .open(fd: 1, path: "/dev/null", flags: O_WRONLY),
                                                              .open(fd: 2, path: "/dev/null", flags: O_WRONLY),
                                                              .duplicate(ready.write, as: readyDescriptor),
                                                              // Nothing else of this process (a caller's pipe would never see end-of-file).
                                                              .closeFrom(readyDescriptor + 1)])
        } catch {
            close(ready.read); close(ready.write)
            throw AgentError.io("starting \(arguments.first ?? "the agent"): \(String(cString: strerror(error.code)))")
        }
        close(ready.write)
        defer { close(ready.read) }
        // The agent writes "ready" once it listens, or why it could not start.
        var message = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 1024)
        let rounds = max(1, Int(timeout * 10))
        for _ in 0..<rounds {
            var entry = pollfd(fd: ready.read, events: Int16(POLLIN), revents: 0)
            guard waitReadable(&entry) >= 0 || errno == EINTR else { break }
            guard entry.revents != 0 else { continue }
            let n = read(ready.read, &buffer, buffer.count)
            if n > 0 { message += buffer[0..<n]; if message.count > 65536 { break }; continue }
            if n < 0 && errno == EINTR { continue }
            break
        }
        let text = String(decoding: message, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text == "ready" else {
            // One that is still starting would bind after this reported failure: stopped.
            if ProcessSpawn.poll(pid) == nil {
                kill(pid, SIGKILL)
                _ = ProcessSpawn.wait(pid)
                throw AgentError.remote(text.isEmpty ? "the agent did not say it was ready within \(Int(timeout)) s; it was stopped" : text)
            }
            throw AgentError.remote(text.isEmpty ? "the agent exited without saying why" : text)
        }
        return pid
    }

    /// Runs the agent in this process: with a readiness descriptor (started by
    /// ``start(arguments:timeout:)``) it leaves the starter's session first; SIGPIPE is ignored;
    /// `make` builds the server, which is bound (the process becomes non-dumpable there); then
    /// `ready` is written to the descriptor (or the error, and this throws it), and the server
    /// runs until SIGTERM, SIGINT or SIGHUP (which stop it: the vault is locked and the socket
    /// removed) or a stop request.
    /// - Parameters:
    ///   - readyDescriptor: Where to say `ready` or why not (nil: attached, nothing to tell).
    ///   - listening: Called once the socket listens, before `ready` is written (a foreground
    ///     agent's log line).
    ///   - make: Builds the server (opens the manager): its errors are told and thrown.
    /// - Throws: What `make` or ``AgentServer/bind()`` throws, and ``AgentServer/run()``'s errors.
    public static func serve(readyDescriptor: Int32?, listening: (() -> Void)? = nil,
                             make: () throws -> AgentServer) throws {
        func tell(_ text: String) {
            guard let readyDescriptor else { return }
            _ = Array((text + "\n").utf8).withUnsafeBytes { write(readyDescriptor, $0.baseAddress!, $0.count) }
            close(readyDescriptor)
        }
        if readyDescriptor != nil { _ = setsid() }
        // Before anything is loaded (the device-key provider, a token's module): no ptrace, no
        // /proc/PID/mem, no core dump (bind() says so again for an embedded server).
        _ = sf_set_nondumpable()
        signal(SIGPIPE, SIG_IGN)
        let server: AgentServer
        do {
            server = try make()
            try server.bind()
        } catch {
            tell(String(describing: error))
            throw error
        }
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT, SIGHUP] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { server.stop() }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }
        listening?()
        tell("ready")
        try server.run()
    }
}

/// `poll` on one descriptor for 100 ms.
private func waitReadable(_ entry: inout pollfd) -> Int32 {
    #if canImport(Glibc)
    return Glibc.poll(&entry, 1, 100)
    #else
    return Darwin.poll(&entry, 1, 100)
    #endif
}
