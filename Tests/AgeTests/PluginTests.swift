import Foundation
import TestSupport
import Testing
import Cipher
@testable import Age

/// The Python age plugin of Tests/AgePluginFixture (written from C2SP age-plugin.md), linked
/// into a temporary directory under several names, each a test knob (see the script).
struct PythonPlugin {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("AgePluginFixture/age-plugin-sfpy").path
    /// python3 with the cryptography package (Debian python3-cryptography).
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return false }
        return (try? ChildProcess.run("/usr/bin/python3", ["-c", "import cryptography.hazmat.primitives.ciphers.aead"]).status) == 0
    }()

    let temporary: TemporaryDirectory
    var directory: String { temporary.path }

    init(names: [String] = ["sfpy", "sfpypin", "sfpyfail"]) throws {
        temporary = try TemporaryDirectory(prefix: "age-plugin")
        for name in names {
            try FileManager.default.createSymbolicLink(atPath: directory + "/age-plugin-" + name, withDestinationPath: Self.script)
        }
    }

    /// A new key of plugin `name`: (identity, recipient, hex private key).
    func generate(_ name: String = "sfpy") throws -> (identity: String, recipient: String, hex: String) {
        let result = try ChildProcess.run(directory + "/age-plugin-" + name, ["--generate"])
        try #require(result.status == 0, "\(result.errorText)")
        let lines = result.text.split(separator: "\n").map(String.init)
        try #require(lines.count == 3)
        return (lines[0], lines[1], lines[2])
    }
}

/// Records what a plugin shows and answers its requests as told.
final class RecordingUI: @unchecked Sendable {
    private let lock = NSLock()
    private var shown = [String]()
    let secret: String?

    init(secret: String? = nil) { self.secret = secret }

    var messages: [String] { lock.withLock { shown } }

    var ui: AgePluginUI {
        AgePluginUI(
            message: { plugin, text in self.lock.withLock { self.shown.append("\(plugin): \(text)") }; return true },
            requestSecret: { plugin, prompt in
                self.lock.withLock { self.shown.append("\(plugin) asks: \(prompt)") }
                return self.secret.map { SecretBytes(utf8: $0) }
            },
            requestPublic: { _, _ in nil },
            confirm: { _, _, _, _ in nil })
    }
}

@Suite("age: plugins (client side), against a plugin in Python", .enabled(if: PythonPlugin.available, "python3 with python3-cryptography is not installed"))
struct PluginTests {
    @Test("plugin recipients and identities round-trip; one plugin run per file for several recipients")
    func roundTrip() throws {
        let plugin = try PythonPlugin()
        let a = try plugin.generate(), b = try plugin.generate()
        let log = plugin.directory + "/sfpy.log"
        try SecureFile.writeAtomically([], to: log)
        let recipients = AgePlugin.grouped([try AgePluginRecipient(a.recipient, searchPath: plugin.directory), X25519Identity.generate().recipient,
                                            try AgePluginRecipient(b.recipient, searchPath: plugin.directory)])
        #expect(recipients.count == 2)
        let file = try Age.encrypt(pattern(100_000), recipients: recipients)
        #expect(try AgeFileHeader.read(fromBytes: file).map(\.type) == ["sfpy", "sfpy", "X25519"])
        let ui = RecordingUI()
        let identity = try AgePluginIdentity(b.identity, ui: ui.ui, searchPath: plugin.directory)
        #expect(try Age.decrypt(file, identities: [identity]) == pattern(100_000))
        #expect(ui.messages == ["sfpy: sfpy is unwrapping"])
        // The commands the plugin received, in the order of the specification.
        let commands = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(commands.prefix(6) == ["add-recipient", "add-recipient", "wrap-file-key", "done", "ok", "ok"])
        #expect(Array(commands.dropFirst(6)) == ["add-identity", "recipient-stanza", "recipient-stanza", "recipient-stanza", "done", "ok", "ok"])
        // A plugin identity of another key: no file key, no error.
        let other = try plugin.generate()
        #expect(throws: AgeError.noMatchingIdentity("the file is for 3 recipient(s) of type X25519, sfpy")) {
            try Age.decrypt(file, identities: [try AgePluginIdentity(other.identity, searchPath: plugin.directory)])
        }
        // Encrypting to the identity itself (as age -e -i does).
        let toIdentity = try Age.encrypt([5], recipients: [identity.recipient])
        #expect(try Age.decrypt(toIdentity, identities: [identity]) == [5])
    }

    @Test("the default identity of -j NAME asks the plugin for its own key")
    func defaultIdentity() throws {
        let plugin = try PythonPlugin()
        let key = try plugin.generate()
        try SecureFile.writeAtomically(Array(key.hex.utf8), to: plugin.directory + "/sfpy-default.key")
        #expect(try AgePlugin.defaultIdentity(name: "sfpy").hasPrefix("AGE-PLUGIN-SFPY-1"))
        let file = try Age.encrypt([1, 2], recipients: [try AgePluginRecipient(key.recipient, searchPath: plugin.directory)])
        let identity = try AgePluginIdentity(try AgePlugin.defaultIdentity(name: "sfpy"), searchPath: plugin.directory)
        #expect(try Age.decrypt(file, identities: [identity]) == [1, 2])
        #expect(throws: AgeError.invalidArgument("\"../x\" is not a plugin name (letters, digits, `.`, `_`, `+`, `-`)")) {
            try AgePlugin.defaultIdentity(name: "../x")
        }
    }

    @Test("a PIN asked by the plugin (request-secret) is answered by the UI; no answer is the plugin's error")
    func requestSecret() throws {
        let plugin = try PythonPlugin()
        let key = try plugin.generate("sfpypin")
        let file = try Age.encrypt([9], recipients: [try AgePluginRecipient(key.recipient, searchPath: plugin.directory)])
        let ui = RecordingUI(secret: "1234")
        #expect(try Age.decrypt(file, identities: [try AgePluginIdentity(key.identity, ui: ui.ui, searchPath: plugin.directory)]) == [9])
        #expect(ui.messages == ["sfpypin: sfpy is unwrapping", "sfpypin asks: sfpy PIN"])
        #expect(throws: AgeError.invalidIdentity("age-plugin-sfpypin: sfpy: wrong or no PIN")) {
            try Age.decrypt(file, identities: [try AgePluginIdentity(key.identity, ui: RecordingUI().ui, searchPath: plugin.directory)])
        }
    }

    @Test("plugin failures: its error while wrapping, a missing plugin, a plugin that exits at once, a malformed stanza")
    func failures() throws {
        let plugin = try PythonPlugin()
        let failing = try plugin.generate("sfpyfail")
        #expect(throws: AgeError.invalidRecipient("age-plugin-sfpyfail: sfpy cannot use this recipient: refused (a failing test plugin)")) {
            try Age.encrypt([1], recipients: [try AgePluginRecipient(failing.recipient, searchPath: plugin.directory)])
        }
        #expect(AgePlugin.name(ofRecipient: failing.recipient) == "sfpyfail")
        #expect(throws: AgeError.invalidRecipient("age-plugin-sfpyfail is not on the PATH; install the plugin (or put it in a directory of $PATH)")) {
            try Age.encrypt([1], recipients: [try AgePluginRecipient(failing.recipient, searchPath: "/nonexistent")])
        }
        // A plugin that exits without a word.
        try SecureFile.writeAtomically(Array("#!/bin/sh\nexit 3\n".utf8), to: plugin.directory + "/age-plugin-quits")
        #expect(chmod(plugin.directory + "/age-plugin-quits", 0o755) == 0)
        let quits = try AgePluginRecipient(String(decoding: Bech32.encode(hrp: "age1quits", data: [UInt8](repeating: 1, count: 32)), as: UTF8.self),
                                           searchPath: plugin.directory)
        #expect(throws: AgeError.self) { try Age.encrypt([1], recipients: [quits]) }
        // A malformed sfpy stanza: the plugin's `error stanza` is a header failure.
        let key = try plugin.generate()
        let identity = try AgePluginIdentity(key.identity, searchPath: plugin.directory)
        #expect(throws: AgeError.headerFailure("age-plugin-sfpy: sfpy: malformed sfpy stanza")) {
            try identity.unwrap(stanzas: [AgeStanza(type: "sfpy", arguments: ["a", "b"], body: [])])
        }
        // A plugin that does not exit once the protocol is over is killed (after 5 s), and the
        // stanzas it sent are used.
        let lingering = try PythonPlugin(names: ["sfpylinger"])
        let lingerKey = try lingering.generate("sfpylinger")
        let sealed = try Age.encrypt([3], recipients: [try AgePluginRecipient(lingerKey.recipient, searchPath: lingering.directory)])
        #expect(try AgeFileHeader.read(fromBytes: sealed).map(\.type) == ["sfpy"])
        // Names that would reach outside the PATH are not plugin names.
        #expect(AgePlugin.name(ofIdentity: "AGE-PLUGIN-SFPY-1" + "QQQQ") == nil)
        #expect(!AgePlugin.isValidName("../evil") && !AgePlugin.isValidName(".hidden") && AgePlugin.isValidName("yubikey"))
    }
}

@Suite("age: the same Python plugin with the age command", .enabled(if: PythonPlugin.available && AgeTool.available, "python3-cryptography or age is not installed"))
struct PluginInteropTests {
    @Test("age and this library agree on the plugin: each decrypts what the other encrypted through it, -j included")
    func bothWays() throws {
        let plugin = try PythonPlugin()
        let key = try plugin.generate()
        let dir = plugin.directory
        try SecureFile.writeAtomically(Array((key.identity + "\n").utf8), to: dir + "/identity.txt")
        try SecureFile.writeAtomically(Array(key.hex.utf8), to: dir + "/sfpy-default.key")
        let plaintext = pattern(200_000, seed: 4)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        let environment = ["PATH": dir + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        let age = try #require(AgeTool.path)
        // Ours, then age -d with the identity file and with -j.
        try Age.encryptFile(at: dir + "/plain", to: dir + "/ours.age", recipients: [try AgePluginRecipient(key.recipient, searchPath: dir)])
        for arguments in [["-i", dir + "/identity.txt"], ["-j", "sfpy"]] {
            let result = try ChildProcess.run(age, ["-d"] + arguments + ["-o", dir + "/out", dir + "/ours.age"], environment: environment)
            #expect(result.status == 0, "age \(arguments): \(result.errorText)")
            #expect(try SecureFile.read(dir + "/out") == plaintext)
            try FileManager.default.removeItem(atPath: dir + "/out")
        }
        // age's, then ours.
        let encrypted = try ChildProcess.run(age, ["-r", key.recipient, "-o", dir + "/theirs.age", dir + "/plain"], environment: environment)
        #expect(encrypted.status == 0, "\(encrypted.errorText)")
        #expect(try AgeFileHeader.read(fromBytes: try SecureFile.read(dir + "/theirs.age")).map(\.type) == ["sfpy"])
        try Age.decryptFile(at: dir + "/theirs.age", to: dir + "/out", identities: [try AgePluginIdentity(key.identity, searchPath: dir)])
        #expect(try SecureFile.read(dir + "/out") == plaintext)
    }
}
