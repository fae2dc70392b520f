import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation
import CPlatform

/// `securefoundation agent …`: the unlock agent (as gpg-agent and ssh-agent, for the vault).
struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Keep the vault unlocked in a background agent that serves class keys to this user's commands.",
        discussion: """
        The agent holds the unlocked vault in locked memory and serves its class keys (never the \
        passcode, never the application key) over a UNIX socket, mode 0600 in a 0700 directory \
        ($XDG_RUNTIME_DIR/securefoundation, else /tmp/securefoundation-UID), to processes of the \
        same user only (checked with SO_PEERCRED). While it holds the vault unlocked, keychain \
        and protect commands use it instead of asking for a passcode.

        whenUnlocked keys are served while unlocked; afterFirstUnlock keys from the first unlock \
        until the agent stops; the always class needs no agent. The vault locks after --idle-ttl \
        seconds without use (reset by each key served) and --max-ttl seconds after the unlock \
        (not reset), or at once with `agent lock`.

        Exit status: 0 success, 1 error, 3 wrong passcode or answers, 4 too many attempts (wait), \
        5 the vault was erased, 7 no agent is running, 64 usage error.

        Examples:
          securefoundation agent start --idle-ttl 600 --max-ttl 7200
          securefoundation agent unlock --passcode-file pin.txt
          securefoundation keychain find-generic-password -s mail -a alice -w
          securefoundation agent lock
          securefoundation agent stop

        The real `age` opens protected files through the agent with its plugin: run \
        `securefoundation agent install-plugin` once, then `age -d -j securefoundation FILE` \
        (see `agent plugin-identity`).
        """,
        subcommands: [AgentStartCommand.self, AgentUnlockCommand.self, AgentLockCommand.self, AgentStatusCommand.self,
                      AgentStopCommand.self, AgentPluginIdentityCommand.self, AgentInstallPluginCommand.self, AgentServeCommand.self]
    )
}

/// Which agent: the one of the vault in --home, or the socket given.
struct AgentSocketOptions: ParsableArguments {
    @Option(name: .customLong("home"), help: ArgumentHelp("The vault's data directory (default: as the vault commands).", valueName: "dir"))
    var home: String?

    @Option(name: .customLong("socket"), help: ArgumentHelp(
        "The agent's socket (default: $SECUREFOUNDATION_AGENT_SOCKET, else one per vault in $XDG_RUNTIME_DIR/securefoundation or /tmp/securefoundation-UID).",
        valueName: "path"))
    var socket: String?

    var socketPath: String { socket.map { VaultPaths.absolute($0) } ?? AgentPaths.socket(home: home) }

    var client: AgentClient { AgentClient(socketPath: socketPath) }
}

enum AgentCLI {
    static func describe(_ status: AgentStatus, socket: String) -> String {
        var lines = ["socket: \(socket)", "pid: \(status.pid)", "vault: \(status.home)", "state: \(status.state.rawValue)",
                     "first unlock done: \(status.firstUnlockDone ? "yes" : "no")",
                     "idle ttl: \(status.idleTTL) s", "max ttl: \(status.maxTTL) s"]
        if let idle = status.idleRemaining { lines.append("locks when idle in: \(idle) s") }
        if let max = status.maxRemaining { lines.append("locks at the latest in: \(max) s") }
        return lines.joined(separator: "\n")
    }
}

/// Options of the agent process itself.
struct AgentServeOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @Option(name: .customLong("socket"), help: ArgumentHelp("Listen on this socket instead of the default.", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("idle-ttl"), help: ArgumentHelp("Lock after this many seconds without use (default 600, as gpg-agent).", valueName: "seconds"))
    var idleTTL: Int = 600

    @Option(name: .customLong("max-ttl"), help: ArgumentHelp("Lock this many seconds after the unlock, whatever the use (default 7200, as gpg-agent).", valueName: "seconds"))
    var maxTTL: Int = 7200

    func validate() throws {
        guard idleTTL >= 1, maxTTL >= 1 else { throw ValidationError("--idle-ttl and --max-ttl must be at least 1 second") }
    }

    var socketPath: String { socket.map { VaultPaths.absolute($0) } ?? AgentPaths.socket(home: home.home) }

    /// The arguments that give the same options to the agent process.
    var arguments: [String] {
        var result: [String] = []
        if let home = home.home { result += ["--home", VaultPaths.absolute(home)] }
        if let deviceKey = home.deviceKey { result += ["--device-key", VaultPaths.absolute(deviceKey)] }
        if home.legacyKDFCeiling { result.append("--legacy-kdf-ceiling") }
        result += ["--socket", socketPath, "--idle-ttl", String(idleTTL), "--max-ttl", String(maxTTL)]
        return result
    }
}

struct AgentStartCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Start the agent in the background (locked; then run `agent unlock`).",
        usage: "securefoundation agent start [options] [--foreground]",
        discussion: """
        Prints the socket and the agent's pid once it listens. A socket left by an agent that was \
        killed is replaced; a running agent is not (exit 1). With --foreground the agent stays \
        attached (for a systemd user unit) and logs to standard error.

        Example:
          securefoundation agent start --home ~/.app --idle-ttl 300
        """
    )

    @OptionGroup var options: AgentServeOptions

    @Flag(name: .customLong("foreground"), help: "Run in the foreground instead of detaching.")
    var foreground = false

    func run() throws {
        if foreground {
            try AgentServeCommand.serve(options, readyFD: nil)
            return
        }
        try CLI.run {
            let socket = options.socketPath
            if AgentClient(socketPath: socket).isRunning { throw AgentError.alreadyRunning(socket: socket) }
            var fds: [Int32] = [0, 0]
            guard sf_pipe_cloexec(&fds) == 0 else { throw AgentError.io("pipe: \(String(cString: strerror(errno)))") }
            // The agent must not keep anything this process inherited (a caller's pipes would
            // never see end-of-file): every descriptor from 3 up is closed on exec.
            if let inherited = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
                for name in inherited { if let fd = Int32(name), fd > 2 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } }
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, fds[1], 3)
            let arguments = [CLI.executablePath(), "agent", "serve", "--ready-fd", "3"] + options.arguments
            var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
            close(fds[1])
            defer { close(fds[0]) }
            guard spawned == 0 else { throw AgentError.io("starting \(arguments[0]): \(String(cString: strerror(spawned)))") }
            // The agent writes "ready" once it listens, or why it could not start (at most 30 s).
            var message = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 1024)
            for _ in 0..<300 {
                var entry = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 100) >= 0 || errno == EINTR else { break }
                guard entry.revents != 0 else { continue }
                let n = read(fds[0], &buffer, buffer.count)
                if n > 0 { message += buffer[0..<n]; if message.count > 65536 { break }; continue }
                if n < 0 && errno == EINTR { continue }
                break
            }
            let text = String(decoding: message, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard text == "ready" else {
                var status: Int32 = 0
                _ = waitpid(pid, &status, WNOHANG)
                throw AgentError.remote(text.isEmpty ? "the agent exited without saying why" : text)
            }
            try VaultCLI.say("agent started (pid \(pid)), socket \(socket)")
        }
    }
}

/// The agent process (`agent start` runs it detached; hidden).
struct AgentServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the agent (used by `agent start`).",
        usage: "securefoundation agent serve [options] [--ready-fd FD]",
        discussion: """
        Runs the agent in this process until it is stopped (`agent stop`, SIGTERM, SIGINT or \
        SIGHUP). Without --ready-fd it logs to standard error, as `agent start --foreground` \
        does; with --ready-fd (as `agent start` runs it) it writes `ready`, or why it could not \
        start, to that descriptor, starts a session of its own and logs nothing.

        Example:
          securefoundation agent serve --home ~/.app --idle-ttl 300
        """,
        shouldDisplay: false)

    @OptionGroup var options: AgentServeOptions

    @Option(name: .customLong("ready-fd"), help: "Write `ready` (or the error) to this descriptor, then detach from it.")
    var readyFD: Int32?

    func run() throws {
        try Self.serve(options, readyFD: readyFD)
    }

    static func serve(_ options: AgentServeOptions, readyFD: Int32?) throws {
        func tell(_ text: String) {
            guard let readyFD else { return }
            _ = Array((text + "\n").utf8).withUnsafeBytes { write(readyFD, $0.baseAddress!, $0.count) }
            close(readyFD)
        }
        if readyFD != nil { _ = setsid() }
        // Same-uid processes cannot ptrace the agent or read its memory; no core dumps.
        _ = sf_set_nondumpable()
        signal(SIGPIPE, SIG_IGN)
        let server: AgentServer
        do {
            let manager = try options.home.manager(useAgent: false)
            try VaultCLI.requireSetUp(manager)
            var log: (@Sendable (String) -> Void)?
            if readyFD == nil { log = { (line: String) in CLI.warn("securefoundation agent: " + line) } }
            server = try AgentServer(manager: manager, socketPath: options.socketPath,
                                     configuration: .init(idleTTL: options.idleTTL, maxTTL: options.maxTTL), log: log)
            try server.bind()
        } catch {
            tell(CLI.describe(error))
            if readyFD == nil { throw CLI.fail(error) }
            throw ExitCode(1)
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
        if readyFD == nil { CLI.warn("securefoundation agent: listening on \(options.socketPath) (pid \(getpid()))") }
        tell("ready")
        do { try server.run() } catch { throw CLI.fail(error) }
        sources.forEach { $0.cancel() }
    }
}

struct AgentUnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the agent's vault: the passcode (or the answers) goes to the agent, which runs the KDF.",
        usage: "securefoundation agent unlock [options] [--passcode-file FILE]",
        discussion: """
        Counts as an unlock attempt, as `vault unlock` does. The passcode is wiped in both \
        processes once the KDF has run.

        A vault whose device key is wrapped by a PKCS #11 token (the pkcs11 provider) needs the \
        token's PIN in the agent: --token-pin asks for it on the terminal, --token-pin-file reads \
        it; the agent holds it until it stops (HARDWARE-KEYS.md in the documentation).

        Examples:
          securefoundation agent unlock --passcode-file pin.txt
          securefoundation agent unlock --token-pin
        """
    )

    @OptionGroup var socket: AgentSocketOptions

    @OptionGroup var credentials: VaultCredentialOptions

    @Flag(name: .customLong("token-pin"), help: "Ask for the device key's token PIN on the terminal and give it to the agent.")
    var askTokenPIN = false

    @Option(name: .customLong("token-pin-file"), help: ArgumentHelp("Give the agent the device key's token PIN from this file (first line).",
                                                                   valueName: "file"))
    var tokenPINFile: String?

    func validate() throws {
        if askTokenPIN && tokenPINFile != nil { throw ValidationError("give --token-pin or --token-pin-file, not both") }
        if credentials.recoveryKeyFile != nil {
            throw ValidationError("the unlock agent is unlocked with the passcode or the answers, not the recovery key; to replace a lost passcode, run `securefoundation vault change-passcode --recovery-key-file FILE`")
        }
    }

    func run() throws {
        try CLI.run {
            let client = socket.client
            _ = try client.status()
            if askTokenPIN || tokenPINFile != nil {
                let pin = try tokenPINFile.map { try SecretBytes(contentsOfFile: $0, maxLength: 4096) }
                    ?? CLI.readPassphrase(prompt: "Token PIN: ")
                defer { pin.wipe() }
                try client.giveTokenPIN(pin)
            }
            let status: AgentStatus
            if let answersFile = credentials.answersFile {
                let answers = try VaultCLI.readAnswers(answersFile)
                defer { answers.forEach { $0.wipe() } }
                status = try client.unlock(answers: answers)
            } else {
                let passcode = try VaultCLI.passcode(file: credentials.passcodeFile, prompt: "Passcode: ")
                defer { passcode.wipe() }
                status = try client.unlock(passcode: passcode)
            }
            try VaultCLI.say("unlocked; locks when idle for \(status.idleTTL) s, at the latest in \(status.maxRemaining ?? status.maxTTL) s")
        }
    }
}

struct AgentLockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the agent's vault now (whenUnlocked keys are wiped).",
        discussion: """
        The agent keeps running: afterFirstUnlock keys stay served, and `agent unlock` unlocks \
        it again.

        Examples:
          securefoundation agent lock
          securefoundation agent lock --home ~/.app
        """)

    @OptionGroup var socket: AgentSocketOptions

    func run() throws {
        try CLI.run {
            try socket.client.lock()
            try VaultCLI.say("locked")
        }
    }
}

struct AgentStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether an agent runs, whether it holds the vault unlocked, and its TTLs (exit 7: no agent).",
        discussion: """
        Examples:
          securefoundation agent status
          securefoundation agent status --home ~/.app --json
        """)

    @OptionGroup var socket: AgentSocketOptions

    @Flag(name: .customLong("json"), help: "Print the status as JSON.")
    var json = false

    func run() throws {
        try CLI.run {
            let status = try socket.client.status()
            if json {
                try JSONOutput.write(StatusJSON(status: status))
            } else {
                try VaultCLI.say(AgentCLI.describe(status, socket: socket.socketPath))
            }
        }
    }
}

extension AgentStatusCommand {
    /// The agent's status object with the schema's `"version": 1` beside its fields.
    struct StatusJSON: Encodable {
        var status: AgentStatus

        enum Key: String, CodingKey { case version }

        func encode(to encoder: any Encoder) throws {
            try status.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(JSONOutput.schemaVersion, forKey: .version)
        }
    }
}

struct AgentStopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Lock the vault and stop the agent (afterFirstUnlock keys go too).",
        discussion: """
        Examples:
          securefoundation agent stop
          securefoundation agent stop --home ~/.app
        """)

    @OptionGroup var socket: AgentSocketOptions

    func run() throws {
        try CLI.run {
            try socket.client.stop()
            try VaultCLI.say("agent stopped")
        }
    }
}
