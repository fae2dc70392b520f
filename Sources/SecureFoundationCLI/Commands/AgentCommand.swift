import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

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
            let pid = try AgentDaemon.start(arguments: [CLI.executablePath(), "agent", "serve", "--ready-fd", String(AgentDaemon.readyDescriptor)]
                                                + options.arguments)
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
        // Attached (a systemd user unit): log lines on standard error.
        var log: (@Sendable (String) -> Void)?
        if readyFD == nil { log = { (line: String) in CLI.warn("securefoundation agent: " + line) } }
        do {
            try AgentDaemon.serve(readyDescriptor: readyFD, listening: {
                if readyFD == nil { CLI.warn("securefoundation agent: listening on \(options.socketPath) (pid \(getpid()))") }
            }, make: {
                let manager = try options.home.manager(useAgent: false)
                try VaultCLI.requireSetUp(manager)
                return try AgentServer(manager: manager, socketPath: options.socketPath,
                                       configuration: .init(idleTTL: options.idleTTL, maxTTL: options.maxTTL), log: log)
            })
        } catch {
            if readyFD == nil { throw CLI.fail(error) }
            throw ExitCode(1)
        }
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

    @Option(name: .customLong("token-pin-file"), help: ArgumentHelp("Give the agent the device key's token PIN from this file (first line; `-` for standard input).",
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
                let pin = try tokenPINFile.map { try SecretSource.file($0).read(maxLength: 4096) }
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
            let status: AgentStatus
            do {
                status = try socket.client.status()
            } catch AgentError.notRunning(let path) where json {
                // Scripts read the answer from standard output; the status (7) still tells.
                try JSONOutput.write(NotRunningJSON(socket: path))
                throw AgentError.notRunning(socket: path)
            }
            if json {
                try JSONOutput.write(StatusJSON(status: status))
            } else {
                try VaultCLI.say(AgentCLI.describe(status, socket: socket.socketPath))
            }
        }
    }
}

extension AgentStatusCommand {
    /// The agent's status object with `"running": true` and the schema's `"version": 1`
    /// beside its fields.
    struct StatusJSON: Encodable {
        var status: AgentStatus

        enum Key: String, CodingKey { case running, version }

        func encode(to encoder: any Encoder) throws {
            try status.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(true, forKey: .running)
            try container.encode(JSONOutput.schemaVersion, forKey: .version)
        }
    }

    /// `agent status --json` with no agent: `{"running": false, "socket": PATH, "version": 1}`.
    struct NotRunningJSON: Encodable {
        var running = false
        var socket: String
        var version = JSONOutput.schemaVersion
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
