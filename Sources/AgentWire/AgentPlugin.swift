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
import Age

/// The program `age-plugin-securefoundation` (UnlockAgent's `AgentAgePlugin` documents it and
/// forwards here): the real `age` opens protected files through the running unlock agent, and
/// the class identity never leaves the agent. It is here, below the vault, so that the front
/// program runs it: `age -d -j securefoundation` then starts a program of the age modules alone
/// (docs/AGE.md, "The agent's plugin").
package enum AgentPlugin {
    /// The plugin name: the program is `age-plugin-securefoundation`.
    package static let name = "securefoundation"
    /// The program name `age` runs.
    package static let programName = "age-plugin-" + name
    static let dataVersion: UInt8 = 1
    /// The protection classes an identity may name (ProtectedFiles' `FileProtectionClass.name`
    /// of each class; a test holds the two lists equal).
    package static let protectionClassNames: [String] = ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"]
        .flatMap { [$0, $0 + "ThisDeviceOnly"] }
    /// The stanzas an unwrap request carries: the file key wrapped to a class, and the class stanza.
    static let requestStanzaTypes: Set<String> = ["X25519", "sf-protection"]

    /// An identity that cannot be read or written, with what is wrong.
    package struct IdentityError: Error, Sendable, CustomStringConvertible {
        package let description: String
    }

    /// What an identity names: `1 ‖ class name (1-byte length; 0: any class) ‖ data directory
    /// (UTF-8, the rest; empty: the default one)`, or no data at all for the default data
    /// directory and any class (docs/FORMATS.md, "The agent's plugin identity"). No secret.
    package struct Identity: Sendable, Equatable {
        /// The data directory whose agent is asked (nil: the default one when the plugin runs).
        package var home: String?
        /// The name of the only class served through this identity (nil: any class).
        package var protectionName: String?

        package init(home: String?, protectionName: String?) {
            self.home = home
            self.protectionName = protectionName
        }

        /// The `AGE-PLUGIN-SECUREFOUNDATION-1…` encoding (`home` made absolute).
        /// - Returns: The identity line.
        /// - Throws: ``IdentityError`` for a class name or path too long.
        package func encoded() throws(IdentityError) -> String {
            let className = Array((protectionName ?? "").utf8)
            let path = Array((home.map { DataDirectory.absolute($0) } ?? "").utf8)
            guard path.count <= 4096 else { throw IdentityError(description: "a data directory path of \(path.count) bytes (at most 4096)") }
            guard className.count <= 255 else { throw IdentityError(description: "a class name of \(className.count) bytes") }
            let data = home == nil && protectionName == nil ? [] : [AgentPlugin.dataVersion, UInt8(className.count)] + className + path
            do { return try AgePlugin.identity(name: AgentPlugin.name, data: data) } catch { throw IdentityError(description: "\(error)") }
        }

        /// Parses an `AGE-PLUGIN-SECUREFOUNDATION-1…` identity.
        /// - Parameter identity: The identity line.
        /// - Throws: ``IdentityError`` saying what is wrong.
        package init(parsing identity: String) throws(IdentityError) {
            guard let (plugin, data) = AgePlugin.decode(identity: identity), plugin == AgentPlugin.name else {
                throw IdentityError(description: "not an AGE-PLUGIN-SECUREFOUNDATION-1… identity")
            }
            guard let version = data.first else {
                self.init(home: nil, protectionName: nil)
                return
            }
            guard version == AgentPlugin.dataVersion, data.count >= 2, data.count >= 2 + Int(data[1]) else {
                throw IdentityError(description: "an AGE-PLUGIN-SECUREFOUNDATION identity of an unknown version or malformed (make it again with `securefoundation agent plugin-identity`)")
            }
            let nameLength = Int(data[1])
            var protectionName: String?
            if nameLength > 0 {
                let name = String(decoding: data[2..<2 + nameLength], as: UTF8.self)
                guard AgentPlugin.protectionClassNames.contains(name) else {
                    throw IdentityError(description: "the identity names an unknown protection class \(name.prefix(60).debugDescription)")
                }
                protectionName = name
            }
            let pathBytes = data[(2 + nameLength)...]
            guard let path = String(validating: pathBytes, as: UTF8.self), pathBytes.isEmpty || path.hasPrefix("/"), !pathBytes.contains(0) else {
                throw IdentityError(description: "the identity's data directory is not an absolute UTF-8 path")
            }
            self.init(home: path.isEmpty ? nil : path, protectionName: protectionName)
        }
    }

    /// Asks the agent at `socketPath` for the file key of a header (its `X25519` and class
    /// stanzas are sent; the others stay here).
    /// - Parameters:
    ///   - stanzas: The header's stanzas.
    ///   - onlyClass: The only class to unwrap with (nil: the one the class stanza names, or each).
    ///   - socketPath: The agent's socket.
    ///   - timeout: Seconds to wait for the agent.
    /// - Returns: The 16-byte file key.
    /// - Throws: ``AgentWireError``; the agent's refusal as ``AgentWireError/answered(_:)``.
    package static func requestFileKey(stanzas: [AgeStanza], onlyClass: String?, socketPath: String, timeout: Double) throws(AgentWireError) -> SecretBytes {
        let body = try unwrapRequestBody(stanzas: stanzas, onlyClass: onlyClass)
        defer { body.wipe() }
        return try requestFileKey(body: body, socketPath: socketPath, timeout: timeout)
    }

    /// The request ``requestFileKey(stanzas:onlyClass:socketPath:timeout:)`` sends, built here
    /// without reaching the agent.
    /// - Parameters:
    ///   - stanzas: The header's stanzas (the `X25519` and class stanzas go in).
    ///   - onlyClass: The only class to unwrap with (nil: any).
    /// - Returns: The request frame's body.
    /// - Throws: ``AgentWireError/protocolViolation(_:)`` for too many stanzas or an over-long field.
    package static func unwrapRequestBody(stanzas: [AgeStanza], onlyClass: String?) throws(AgentWireError) -> SecretBytes {
        do {
            return SecretBytes(copying: try AgentFrames.unwrapRequest(onlyClass: onlyClass, stanzas: stanzas.filter { requestStanzaTypes.contains($0.type) }))
        } catch let error as AgentWireError { throw error } catch { throw .protocolViolation("\(error)") }
    }

    /// Sends a request built by ``unwrapRequestBody(stanzas:onlyClass:)`` and checks the answer.
    /// - Parameters:
    ///   - body: The request.
    ///   - socketPath: The agent's socket.
    ///   - timeout: Seconds to wait for the agent.
    /// - Returns: The 16-byte file key.
    /// - Throws: ``AgentWireError``; the agent's refusal as ``AgentWireError/answered(_:)``.
    package static func requestFileKey(body: SecretBytes, socketPath: String, timeout: Double) throws(AgentWireError) -> SecretBytes {
        try fileKey(from: try AgentExchange.request(body, socketPath: socketPath, timeout: timeout))
    }

    /// The file key of an unwrap answer's payload: exactly 16 bytes (anything else is wiped).
    /// - Parameter payload: The answer's payload.
    /// - Returns: `payload`, the file key.
    /// - Throws: ``AgentWireError/protocolViolation(_:)`` for another length.
    package static func fileKey(from payload: SecretBytes) throws(AgentWireError) -> SecretBytes {
        guard payload.count == 16 else {
            payload.wipe()
            throw AgentWireError.protocolViolation("a file-key answer of \(payload.count) bytes")
        }
        return payload
    }

    /// Runs the plugin program: `--age-plugin=identity-v1` answers `age` on standard input and
    /// output; `--age-plugin=recipient-v1` is refused (the plugin only decrypts).
    /// - Parameters:
    ///   - arguments: The program's arguments, without the program name.
    ///   - input: Where `age` writes (the plugin's standard input).
    ///   - output: Where `age` reads (the plugin's standard output).
    ///   - timeout: Seconds to wait for the agent.
    /// - Returns: The exit status (0 when the protocol ran to its end, 1 when it broke off, 64
    ///   for a usage error).
    package static func run(arguments: [String], input: Int32 = 0, output: Int32 = 1, timeout: Double = 10) -> Int32 {
        switch arguments {
        case ["--age-plugin=identity-v1"]:
            do {
                try AgePluginServer.serveIdentityV1(
                    input: input, output: output,
                    checkIdentity: { identity in
                        do { _ = try Identity(parsing: identity); return nil } catch { return "\(error)" }
                    },
                    unwrap: { identities, stanzas in unwrap(identities: identities, stanzas: stanzas, timeout: timeout) })
                return 0
            } catch {
                warn("\(programName): \(error)")
                return 1
            }
        case ["--age-plugin=recipient-v1"]:
            do {
                try AgePluginServer.refuseRecipientV1(
                    input: input, output: output,
                    message: "\(programName) only decrypts: write protected files with `securefoundation protect write FILE --class CLASS`")
                return 0
            } catch {
                warn("\(programName): \(error)")
                return 1
            }
        default:
            warn("""
                \(programName): the age plugin of SecureFoundation; `age` runs it (`age -d -j \(name) FILE`).
                Usage: \(programName) --age-plugin=identity-v1
                Make an identity naming a data directory and a class with `securefoundation agent plugin-identity`.

                """)
            return 64
        }
    }

    private static func warn(_ text: String) {
        Array((text.hasSuffix("\n") ? text : text + "\n").utf8).withUnsafeBytes { _ = try? FileCalls.writeAll(2, $0) }
    }

    /// Asks the agent of each identity in turn; the first key wins. A file no identity's vault
    /// opens is no match (age tries its other identities); a class that is locked, a tampered
    /// header or an agent that does not answer is a failure `age` shows.
    static func unwrap(identities: [String], stanzas: [AgeStanza], timeout: Double) -> AgePluginServer.Outcome {
        guard stanzas.contains(where: { $0.type == "X25519" }) else { return .noMatch(message: nil) }
        var failure: String?
        var notice: String?
        for encoded in identities {
            guard let identity = try? Identity(parsing: encoded) else { continue }
            let socketPath = AgentSocketPath.socket(home: identity.home)
            do {
                return .fileKey(try requestFileKey(stanzas: stanzas, onlyClass: identity.protectionName, socketPath: socketPath, timeout: timeout))
            } catch {
                guard case let .answered(wire) = error else {
                    failure = failure ?? "\(error)"
                    continue
                }
                switch wire.kind {
                case "notProtectedFile":
                    continue
                case "invalidArgument":
                    // A file of another class than the identity's: not for this identity.
                    notice = notice ?? wire.reason ?? wire.message
                case "fileClassUnavailable" where wire.reason == "locked" && protectionClassNames.contains(wire.accessibility ?? ""):
                    failure = failure ?? "the unlock agent at \(socketPath) is locked, so the vault's \(wire.accessibility ?? "") files stay closed; unlock it with `securefoundation agent unlock`"
                case "fileClassUnavailable" where wire.reason == "noFirstUnlockYet" && protectionClassNames.contains(wire.accessibility ?? ""):
                    failure = failure ?? "the unlock agent at \(socketPath) has not been unlocked since it started, so the vault's \(wire.accessibility ?? "") files stay closed; unlock it once with `securefoundation agent unlock`"
                default:
                    failure = failure ?? wire.description
                }
            }
        }
        return failure.map { .failure($0) } ?? .noMatch(message: notice)
    }
}
