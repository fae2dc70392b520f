#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Cipher
import CPlatform
#if canImport(Glibc)
import Glibc
#endif

// The client side of the age plugin protocol (C2SP age-plugin.md): recipients `age1NAME1…` and
// identities `AGE-PLUGIN-NAME-1…` are handled by the program `age-plugin-NAME` on the PATH,
// driven over its standard input and output through the `recipient-v1` and `identity-v1` state
// machines.

/// How a plugin talks to the user: its messages, and its requests for a PIN, a value or a
/// confirmation. Every function may refuse (nil, false), which the plugin is told as `fail`.
public struct AgePluginUI: Sendable {
    /// Shows a message from the plugin; false when it cannot be shown.
    public var message: @Sendable (_ plugin: String, _ text: String) -> Bool
    /// Asks for a secret (a PIN); nil when it cannot be asked.
    public var requestSecret: @Sendable (_ plugin: String, _ prompt: String) -> SecretBytes?
    /// Asks for a public value; nil when it cannot be asked.
    public var requestPublic: @Sendable (_ plugin: String, _ prompt: String) -> String?
    /// Asks to choose between `yes` and `no` (nil: only `yes` is offered); true for yes,
    /// false for no, nil when it cannot be asked.
    public var confirm: @Sendable (_ plugin: String, _ prompt: String, _ yes: String, _ no: String?) -> Bool?

    /// - Parameters:
    ///   - message: Shows a message from the plugin; false when it cannot be shown.
    ///   - requestSecret: Asks for a secret (a PIN); nil when it cannot be asked.
    ///   - requestPublic: Asks for a public value; nil when it cannot be asked.
    ///   - confirm: Asks to choose between `yes` and `no`; nil when it cannot be asked.
    public init(message: @escaping @Sendable (String, String) -> Bool,
                requestSecret: @escaping @Sendable (String, String) -> SecretBytes?,
                requestPublic: @escaping @Sendable (String, String) -> String?,
                confirm: @escaping @Sendable (String, String, String, String?) -> Bool?) {
        self.message = message
        self.requestSecret = requestSecret
        self.requestPublic = requestPublic
        self.confirm = confirm
    }

    /// Messages go to standard error as `[age-plugin-NAME] text`; requests are refused.
    public static let standardError = AgePluginUI(
        message: { plugin, text in
            let line = Array("[age-plugin-\(plugin)] \(text)\n".utf8)
            line.withUnsafeBytes { _ = try? FileCalls.writeAll(2, $0) }
            return true
        },
        requestSecret: { _, _ in nil },
        requestPublic: { _, _ in nil },
        confirm: { _, _, _, _ in nil })
}

/// Names and encodings of plugin recipients and identities.
public enum AgePlugin {
    /// The plugin name of an `age1NAME1…` recipient, or nil for a native or malformed one.
    /// - Parameter recipient: The recipient string.
    /// - Returns: The plugin name, or nil.
    public static func name(ofRecipient recipient: String) -> String? {
        guard let (hrp, _) = Bech32.decode(recipient), hrp.hasPrefix("age1"), hrp.count > 4, hrp != "age1pq" else { return nil }
        let name = String(hrp.dropFirst(4))
        return isValidName(name) ? name : nil
    }

    /// The plugin name of an `AGE-PLUGIN-NAME-1…` identity, or nil.
    /// - Parameter identity: The identity string.
    /// - Returns: The plugin name, or nil.
    public static func name(ofIdentity identity: String) -> String? {
        guard let (hrp, _) = Bech32.decode(identity), hrp.hasPrefix("age-plugin-"), hrp.hasSuffix("-"), hrp.count > 12 else { return nil }
        let name = String(hrp.dropFirst(11).dropLast())
        return isValidName(name) ? name : nil
    }

    /// The identity `age -j NAME` means: `AGE-PLUGIN-NAME-1` with no data, which asks the
    /// plugin for its default key.
    /// - Parameter name: The plugin name.
    /// - Returns: The identity string.
    /// - Throws: ``AgeError/invalidArgument(_:)`` for a name that is not a plugin name.
    public static func defaultIdentity(name: String) throws(AgeError) -> String {
        try identity(name: name, data: [])
    }

    /// The identity `AGE-PLUGIN-NAME-1…` carrying `data` (what a plugin's own identities encode).
    /// - Parameters:
    ///   - name: The plugin name.
    ///   - data: The identity's data.
    /// - Returns: The identity string.
    /// - Throws: ``AgeError/invalidArgument(_:)`` for a name that is not a plugin name.
    public static func identity(name: String, data: [UInt8]) throws(AgeError) -> String {
        guard isValidName(name) else { throw AgeError.invalidArgument("\(name.prefix(40).debugDescription) is not a plugin name (letters, digits, `.`, `_`, `+`, `-`)") }
        return String(decoding: Bech32.encode(hrp: "age-plugin-\(name.lowercased())-", data: data, uppercase: true), as: UTF8.self)
    }

    /// The plugin name and data of an `AGE-PLUGIN-NAME-1…` identity, or nil when it is not one.
    /// - Parameter identity: The identity string.
    /// - Returns: The plugin name and the identity's data, or nil.
    public static func decode(identity: String) -> (name: String, data: [UInt8])? {
        guard let name = name(ofIdentity: identity), let (_, data) = Bech32.decode(identity) else { return nil }
        return (name, data)
    }

    /// Names are the suffix of a program name: lowercase letters, digits and `._+-`, so no
    /// name reaches outside the PATH's directories.
    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2b || $0 == 0x2d }
            && !name.hasPrefix(".")
    }

    /// The path of `age-plugin-NAME` in an absolute directory of `searchPath` (directories
    /// separated by `:`; nil: `$PATH`), or nil (``ProgramSearch``).
    static func locate(_ name: String, searchPath: String? = nil) -> String? {
        ProgramSearch.locate("age-plugin-" + name, searchPath: searchPath)
    }

    /// Groups the plugin recipients of `recipients` by plugin, one ``AgePluginRecipient`` each,
    /// so each plugin runs once per file; other recipients are kept as they are, in order.
    /// - Parameter recipients: The recipients.
    /// - Returns: The recipients with plugin ones grouped.
    public static func grouped(_ recipients: [any AgeRecipient]) -> [any AgeRecipient] {
        var result = [any AgeRecipient]()
        var groups = [String: Int]()
        for recipient in recipients {
            guard let plugin = recipient as? AgePluginRecipient else { result.append(recipient); continue }
            if let index = groups[plugin.name], let existing = result[index] as? AgePluginRecipient {
                result[index] = AgePluginRecipient(name: plugin.name, recipients: existing.recipients + plugin.recipients,
                                                   identities: existing.identities + plugin.identities, ui: existing.ui,
                                                   searchPath: existing.searchPath)
            } else {
                groups[plugin.name] = result.count
                result.append(plugin)
            }
        }
        return result
    }

    /// Groups the plugin identities of `identities` by plugin, as ``grouped(_:)-(_)`` does for recipients.
    /// - Parameter identities: The identities.
    /// - Returns: The identities with plugin ones grouped.
    public static func grouped(_ identities: [any AgeIdentity]) -> [any AgeIdentity] {
        var result = [any AgeIdentity]()
        var groups = [String: Int]()
        for identity in identities {
            guard let plugin = identity as? AgePluginIdentity else { result.append(identity); continue }
            if let index = groups[plugin.name], let existing = result[index] as? AgePluginIdentity {
                result[index] = AgePluginIdentity(name: plugin.name, identities: existing.identities + plugin.identities, ui: existing.ui,
                                                  searchPath: existing.searchPath)
            } else {
                groups[plugin.name] = result.count
                result.append(plugin)
            }
        }
        return result
    }
}

/// Recipients handled by a plugin (`age1NAME1…`, or identities `AGE-PLUGIN-NAME-1…` encrypted
/// to): wrapping runs `age-plugin-NAME --age-plugin=recipient-v1`.
public struct AgePluginRecipient: AgeRecipient, CustomStringConvertible {
    /// The plugin name.
    public let name: String
    /// The `age1NAME1…` recipients.
    public let recipients: [String]
    /// Identities to encrypt to (`AGE-PLUGIN-NAME-1…`), as the protocol allows.
    public let identities: [String]
    let ui: AgePluginUI
    let searchPath: String?

    /// Parses an `age1NAME1…` recipient.
    /// - Parameters:
    ///   - recipient: The `age1NAME1…` recipient string.
    ///   - ui: How the plugin talks to the user.
    ///   - searchPath: Where to look for `age-plugin-NAME` (directories separated by `:`); nil: `$PATH`.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ recipient: String, ui: AgePluginUI = .standardError, searchPath: String? = nil) throws(AgeError) {
        guard let name = AgePlugin.name(ofRecipient: recipient) else {
            throw AgeError.invalidRecipient("\(recipient.prefix(24))… is not a plugin recipient (age1NAME1…)")
        }
        self.init(name: name, recipients: [recipient.lowercased()], identities: [], ui: ui, searchPath: searchPath)
    }

    init(name: String, recipients: [String], identities: [String], ui: AgePluginUI, searchPath: String? = nil) {
        self.name = name
        self.recipients = recipients
        self.identities = identities
        self.ui = ui
        self.searchPath = searchPath
    }

    public var description: String { recipients.joined(separator: "\n") }

    /// Runs the plugin's `recipient-v1` state machine for this file key.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/invalidRecipient(_:)`` with the plugin's error, or when the plugin
    ///   is missing, fails or breaks the protocol.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        let session = try PluginSession(name: name, stateMachine: "recipient-v1", searchPath: searchPath, failure: AgeError.invalidRecipient)
        defer { session.end() }
        for recipient in recipients { try session.send("add-recipient", [recipient]) }
        for identity in identities { try session.send("add-identity", [identity]) }
        try fileKey.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try session.send("wrap-file-key", [], body: Array(bytes)) }
        try session.send("done", [])
        var stanzas = [AgeStanza]()
        for _ in 0..<PluginSession.maxCommands {
            let command = try session.receive()
            switch command.type {
            case "recipient-stanza":
                guard command.arguments.count >= 2, command.arguments[0] == "0" else {
                    throw session.failure("sent a recipient-stanza for a file it was not given")
                }
                stanzas.append(AgeStanza(type: command.arguments[1], arguments: Array(command.arguments.dropFirst(2)), body: command.body))
                try session.send("ok", [])
            case "error":
                // As age: the first error ends the run (the plugin may exit right after it).
                try? session.send("ok", [])
                throw session.failure(String(decoding: command.body, as: UTF8.self))
            case "done":
                guard !stanzas.isEmpty else { throw session.failure("returned no stanza") }
                guard stanzas.count <= recipients.count + identities.count else { throw session.failure("returned more stanzas than recipients") }
                if stanzas.contains(where: { $0.type == "scrypt" }) { throw session.failure("returned an scrypt stanza") }
                return stanzas
            default:
                try session.interact(command, ui: ui)
            }
        }
        throw session.failure("sent more than \(PluginSession.maxCommands) commands")
    }
}

/// Identities handled by a plugin (`AGE-PLUGIN-NAME-1…`): unwrapping runs
/// `age-plugin-NAME --age-plugin=identity-v1` with every stanza of the header.
public struct AgePluginIdentity: AgeIdentity {
    /// The plugin name.
    public let name: String
    /// The `AGE-PLUGIN-NAME-1…` identities.
    public let identities: [String]
    let ui: AgePluginUI
    let searchPath: String?

    /// Parses an `AGE-PLUGIN-NAME-1…` identity.
    /// - Parameters:
    ///   - identity: The `AGE-PLUGIN-NAME-1…` identity string.
    ///   - ui: How the plugin talks to the user.
    ///   - searchPath: Where to look for `age-plugin-NAME` (directories separated by `:`); nil: `$PATH`.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(_ identity: String, ui: AgePluginUI = .standardError, searchPath: String? = nil) throws(AgeError) {
        guard let name = AgePlugin.name(ofIdentity: identity) else {
            throw AgeError.invalidIdentity("not a plugin identity (AGE-PLUGIN-NAME-1…)")
        }
        self.init(name: name, identities: [identity.uppercased()], ui: ui, searchPath: searchPath)
    }

    init(name: String, identities: [String], ui: AgePluginUI, searchPath: String? = nil) {
        self.name = name
        self.identities = identities
        self.ui = ui
        self.searchPath = searchPath
    }

    /// The recipient for encrypting to these identities through the plugin (`-e -i` in age).
    public var recipient: AgePluginRecipient {
        AgePluginRecipient(name: name, recipients: [], identities: identities, ui: ui, searchPath: searchPath)
    }

    /// Runs the plugin's `identity-v1` state machine on the header's stanzas.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError/headerFailure(_:)`` when the plugin finds a stanza of its type
    ///   malformed, ``AgeError/invalidIdentity(_:)`` for its other errors, a missing plugin or
    ///   a protocol failure.
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        let session = try PluginSession(name: name, stateMachine: "identity-v1", searchPath: searchPath, failure: AgeError.invalidIdentity)
        defer { session.end() }
        for identity in identities { try session.send("add-identity", [identity]) }
        for stanza in stanzas { try session.send("recipient-stanza", ["0", stanza.type] + stanza.arguments, body: stanza.body) }
        try session.send("done", [])
        var fileKey: SecretBytes?
        for _ in 0..<PluginSession.maxCommands {
            let command = try session.receive()
            switch command.type {
            case "file-key":
                guard command.arguments == ["0"] else { throw session.failure("sent a file key for a file it was not given") }
                guard fileKey == nil else { throw session.failure("sent two file keys for one file") }
                guard command.body.count == 16 else { throw session.failure("sent a \(command.body.count)-byte file key, not 16") }
                fileKey = SecretBytes(copying: command.body)
                Scrub.zero(command.body)
                try session.send("ok", [])
            case "error":
                // As age: the first error ends the run (the plugin may exit right after it, as
                // the project's own plugin does), and it is what the user sees.
                fileKey?.wipe()
                try? session.send("ok", [])
                let text = String(decoding: command.body, as: UTF8.self)
                if command.arguments.first == "stanza" { throw AgeError.headerFailure("age-plugin-\(name): \(text)") }
                throw session.failure(text)
            case "done":
                return fileKey
            default:
                try session.interact(command, ui: ui)
            }
        }
        fileKey?.wipe()
        throw session.failure("sent more than \(PluginSession.maxCommands) commands")
    }
}

/// One run of a plugin program: stanzas written to its standard input and read from its
/// standard output; its standard error is the caller's.
final class PluginSession {
    /// Bounds on what a plugin may send: commands per session (lines and bodies: ``StanzaChannel``).
    static let maxCommands = 10_000

    let name: String
    let pid: pid_t
    let input: Int32
    let output: Int32
    let makeFailure: (String) -> AgeError
    private let channel: StanzaChannel
    private var closed = false

    init(name: String, stateMachine: String, searchPath: String?, failure: @escaping (String) -> AgeError) throws(AgeError) {
        self.name = name
        self.makeFailure = failure
        guard let path = AgePlugin.locate(name, searchPath: searchPath) else {
            if let entry = ProgramSearch.refusedEntry("age-plugin-" + name, searchPath: searchPath) {
                throw failure("age-plugin-\(name) was found only through the relative PATH entry \(entry.debugDescription), which names a directory of the working directory: it was not run (age refuses this too); put the plugin's directory in PATH as an absolute path")
            }
            throw failure("age-plugin-\(name) is not on the PATH; install the plugin (or put it in a directory of $PATH)")
        }
        let stdinPipe: (read: Int32, write: Int32), stdoutPipe: (read: Int32, write: Int32)
        do { stdinPipe = try ProcessSpawn.pipe() } catch { throw AgeError.io("pipe: \(String(cString: strerror(error.code)))") }
        do { stdoutPipe = try ProcessSpawn.pipe() } catch {
            close(stdinPipe.read); close(stdinPipe.write)
            throw AgeError.io("pipe: \(String(cString: strerror(error.code)))")
        }
        let child: pid_t
        do {
            child = try ProcessSpawn.spawn([path, "--age-plugin=\(stateMachine)"],
                                           actions: [.duplicate(stdinPipe.read, as: 0), .duplicate(stdoutPipe.write, as: 1)])
        } catch {
            close(stdinPipe.read); close(stdoutPipe.write)
            close(stdinPipe.write); close(stdoutPipe.read)
            throw failure("cannot run \(path): \(String(cString: strerror(error.code)))")
        }
        close(stdinPipe.read); close(stdoutPipe.write)
        // A plugin that exits early must not end this process by SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        pid = child
        input = stdinPipe.write
        output = stdoutPipe.read
        let label = "age-plugin-\(name)"
        channel = StanzaChannel(input: stdoutPipe.read, output: stdinPipe.write,
                                failure: { failure("\(label): \($0)") },
                                peerStoppedReading: "stopped reading its input (it exited, or failed; see its messages above)",
                                peerEnded: "exited before the end of the protocol (see its messages above)")
    }

    func failure(_ text: String) -> AgeError { makeFailure("age-plugin-\(name): \(text)") }

    /// Closes the pipes and reaps the plugin: a plugin exits once its input ends; one that
    /// has not after 5 s (checked every 10 ms) is killed.
    func end() {
        guard !closed else { return }
        closed = true
        Glibc.close(input)
        Glibc.close(output)
        _ = ProcessSpawn.wait(pid, timeout: 5)
        channel.wipe()
    }

    deinit { end() }

    func send(_ command: String, _ arguments: [String], body: [UInt8] = []) throws(AgeError) {
        try channel.send(command, arguments, body: body)
    }

    /// Reads one stanza: `-> COMMAND ARGS…` and its base64 body, up to the short line.
    func receive() throws(AgeError) -> AgeStanza { try channel.receive() }

    /// Answers the requests both state machines share (messages, PINs, confirmations) and
    /// `unsupported` to anything else.
    func interact(_ command: AgeStanza, ui: AgePluginUI) throws(AgeError) {
        let text = String(decoding: command.body, as: UTF8.self)
        switch command.type {
        case "msg":
            try send(ui.message(name, text) ? "ok" : "fail", [])
        case "request-secret":
            if let secret = ui.requestSecret(name, text) {
                defer { secret.wipe() }
                try secret.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(AgeError) in try send("ok", [], body: Array(bytes)) }
            } else {
                try send("fail", [])
            }
        case "request-public":
            if let value = ui.requestPublic(name, text) { try send("ok", [], body: Array(value.utf8)) } else { try send("fail", []) }
        case "confirm":
            guard let yesArgument = command.arguments.first, let yes = AgeBase64.decode(Array(yesArgument.utf8)) else {
                throw failure("sent a confirm request without its yes string")
            }
            let no = command.arguments.count > 1 ? AgeBase64.decode(Array(command.arguments[1].utf8)).map { String(decoding: $0, as: UTF8.self) } : nil
            switch ui.confirm(name, text, String(decoding: yes, as: UTF8.self), no) {
            case true?: try send("ok", ["yes"])
            case false?: try send("ok", ["no"])
            case nil: try send("fail", [])
            }
        default:
            try send("unsupported", [])
        }
    }
}
