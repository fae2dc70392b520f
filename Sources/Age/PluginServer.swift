#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher

/// The plugin side of the age plugin protocol (C2SP age-plugin.md): what `age-plugin-NAME`
/// runs when `age` starts it with `--age-plugin=identity-v1`. It reads the identities and the
/// stanzas of each file, asks `unwrap` for each file's key, and answers `file-key`, `error` or
/// nothing (no identity of the plugin matches, so `age` tries its other identities).
package enum AgePluginServer {
    /// What `unwrap` decides for one file.
    package enum Outcome {
        /// The file key (16 bytes; wiped once sent).
        case fileKey(SecretBytes)
        /// None of the identities is for this file: `age` goes on with its other identities,
        /// after showing the message, if any (`msg`).
        case noMatch(message: String?)
        /// The plugin's identity is for this file but cannot open it now (locked, refused):
        /// `age` stops and shows the message.
        case failure(String)
    }

    /// The bounds on what a client may send in phase 1.
    static let maxIdentities = 1_000
    static let maxStanzas = 10_000

    /// Serves one `identity-v1` run over `input`/`output` (the plugin's standard input and output).
    /// - Parameters:
    ///   - identities: Checks each `add-identity` (the `AGE-PLUGIN-NAME-1…` string) and returns
    ///     nil when it is acceptable, else the message of an `error identity` for it.
    ///   - unwrap: Called once per file with the accepted identities and the file's stanzas.
    /// - Throws: ``AgeError/invalidArgument(_:)`` when the client breaks the protocol or
    ///   stops reading.
    package static func serveIdentityV1(input: Int32, output: Int32,
                                        checkIdentity: (String) -> String?,
                                        unwrap: (_ identities: [String], _ stanzas: [AgeStanza]) -> Outcome) throws(AgeError) {
        let channel = StanzaChannel(input: input, output: output, failure: { AgeError.invalidArgument("the age client \($0)") },
                                    peerStoppedReading: "stopped reading", peerEnded: "ended before `done`")
        defer { channel.wipe() }
        var identities = [String]()
        var files = [Int: [AgeStanza]]()
        var stanzaCount = 0
        phaseOne: for _ in 0..<(maxIdentities + maxStanzas + 64) {
            let command = try channel.receive()
            switch command.type {
            case "add-identity":
                guard command.arguments.count == 1, identities.count < maxIdentities else {
                    throw AgeError.invalidArgument("the age client sent a malformed add-identity")
                }
                identities.append(command.arguments[0])
            case "recipient-stanza":
                guard command.arguments.count >= 2, let index = Int(command.arguments[0]), index >= 0, index < maxStanzas else {
                    throw AgeError.invalidArgument("the age client sent a malformed recipient-stanza")
                }
                stanzaCount += 1
                guard stanzaCount <= maxStanzas else { throw AgeError.invalidArgument("the age client sent more than \(maxStanzas) stanzas") }
                files[index, default: []].append(AgeStanza(type: command.arguments[1], arguments: Array(command.arguments.dropFirst(2)), body: command.body))
            case "done":
                break phaseOne
            default:
                continue  // grease and later extensions: ignored, as the protocol asks
            }
        }
        var accepted = [String]()
        for (index, identity) in identities.enumerated() {
            if let problem = checkIdentity(identity) {
                try exchange(channel, "error", ["identity", String(index)], body: Array(problem.utf8))
            } else {
                accepted.append(identity)
            }
        }
        if !accepted.isEmpty {
            for index in files.keys.sorted() {
                switch unwrap(accepted, files[index] ?? []) {
                case .fileKey(let key):
                    defer { key.wipe() }
                    try key.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(AgeError) in
                        var body = Array(raw)
                        defer { Scrub.zero(body); body = [] }
                        try exchange(channel, "file-key", [String(index)], body: body)
                    }
                case .noMatch(let message):
                    if let message { try exchange(channel, "msg", [], body: Array(message.utf8)) }
                case .failure(let message):
                    try exchange(channel, "error", ["internal"], body: Array(message.utf8))
                    // age stops at the first error; nothing more is read.
                    return
                }
            }
        }
        try channel.send("done", [])
    }

    /// Answers a `recipient-v1` run with an error (a plugin that only decrypts): reads phase 1
    /// to its `done`, then sends `error internal` with `message`.
    package static func refuseRecipientV1(input: Int32, output: Int32, message: String) throws(AgeError) {
        let channel = StanzaChannel(input: input, output: output, failure: { AgeError.invalidArgument("the age client \($0)") },
                                    peerStoppedReading: "stopped reading", peerEnded: "ended before `done`")
        defer { channel.wipe() }
        for _ in 0..<(maxIdentities + maxStanzas + 64) {
            let command = try channel.receive()
            Scrub.zero(command.body)  // wrap-file-key carries the file key
            if command.type == "done" {
                try exchange(channel, "error", ["internal"], body: Array(message.utf8))
                return
            }
        }
        throw AgeError.invalidArgument("the age client sent too many commands")
    }

    /// Sends a command and reads the client's answer (`ok`, `fail`, or `unsupported`).
    private static func exchange(_ channel: StanzaChannel, _ command: String, _ arguments: [String], body: [UInt8]) throws(AgeError) {
        try channel.send(command, arguments, body: body)
        let answer = try channel.receive()
        guard ["ok", "fail", "unsupported"].contains(answer.type) else {
            throw AgeError.invalidArgument("the age client answered \(answer.type.prefix(40).debugDescription) to \(command)")
        }
    }
}
