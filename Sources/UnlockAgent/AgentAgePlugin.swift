import Foundation
import Cipher
import Vault
import Age
import ProtectedFiles
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `age-plugin-securefoundation`: the real `age` (and any age client with plugin support)
/// opens protected files through the running unlock agent, and the class identity never leaves
/// the agent.
///
/// `age -d -j securefoundation FILE` (or `-i` with an identity file holding
/// `AGE-PLUGIN-SECUREFOUNDATION-1…`) starts the plugin; the plugin sends the file's `X25519`
/// and class stanzas to the agent of the identity's data directory, which unwraps the file key
/// with the class identity under the class rules (``AgentServer``: complete and
/// completeUnlessOpen only while unlocked, completeUntilFirstUserAuthentication from the first
/// unlock) and returns it; `age` checks the header MAC and decrypts. The plugin only decrypts.
///
/// The identity's data (Bech32, docs/FORMATS.md) names the data directory and, optionally, one
/// class: `1 ‖ class name (1-byte length; 0: any class) ‖ data directory (UTF-8, the rest;
/// empty: the default one)`. No data (`-j securefoundation`) means the default data directory
/// and any class. It holds no secret: it says which agent to ask.
public enum AgentAgePlugin {
    /// The plugin name: the program is `age-plugin-securefoundation`.
    public static let name = "securefoundation"
    /// The program name `age` runs.
    package static let programName = "age-plugin-" + name
    static let dataVersion: UInt8 = 1

    /// What an identity names.
    package struct Identity: Sendable, Equatable {
        /// The data directory whose agent is asked (nil: the default one when the plugin runs).
        package var home: String?
        /// The only class served through this identity (nil: any class).
        package var protection: FileProtectionClass?

        package init(home: String?, protection: FileProtectionClass?) {
            self.home = home
            self.protection = protection
        }

        /// The `AGE-PLUGIN-SECUREFOUNDATION-1…` encoding (`home` made absolute).
        /// - Returns: The identity line.
        /// - Throws: `ProtectedFileError.invalidArgument` for a class name or path too long.
        package func encoded() throws(ProtectedFileError) -> String {
            let className = Array((protection?.name ?? "").utf8)
            let path = Array((home.map { VaultPaths.absolute($0) } ?? "").utf8)
            guard path.count <= 4096 else { throw ProtectedFileError.invalidArgument("a data directory path of \(path.count) bytes (at most 4096)") }
            let data = home == nil && protection == nil ? [] : [AgentAgePlugin.dataVersion, UInt8(className.count)] + className + path
            // Age's error here (only for a name that is not a plugin name) keeps its message.
            do { return try AgePlugin.identity(name: AgentAgePlugin.name, data: data) } catch { throw ProtectedFileError.io("\(error)") }
        }

        /// Parses an `AGE-PLUGIN-SECUREFOUNDATION-1…` identity.
        /// - Parameter identity: The identity line.
        /// - Throws: `ProtectedFileError.invalidArgument` saying what is wrong.
        package init(parsing identity: String) throws(ProtectedFileError) {
            guard let (plugin, data) = AgePlugin.decode(identity: identity), plugin == AgentAgePlugin.name else {
                throw ProtectedFileError.invalidArgument("not an AGE-PLUGIN-SECUREFOUNDATION-1… identity")
            }
            guard let version = data.first else {
                self.init(home: nil, protection: nil)
                return
            }
            guard version == AgentAgePlugin.dataVersion, data.count >= 2, data.count >= 2 + Int(data[1]) else {
                throw ProtectedFileError.invalidArgument("an AGE-PLUGIN-SECUREFOUNDATION identity of an unknown version or malformed (make it again with `securefoundation agent plugin-identity`)")
            }
            let nameLength = Int(data[1])
            var protection: FileProtectionClass?
            if nameLength > 0 {
                let name = String(decoding: data[2..<2 + nameLength], as: UTF8.self)
                guard let cls = FileProtectionClass(name: name) else {
                    throw ProtectedFileError.invalidArgument("the identity names an unknown protection class \(name.prefix(60).debugDescription)")
                }
                protection = cls
            }
            let pathBytes = data[(2 + nameLength)...]
            guard let path = String(validating: pathBytes, as: UTF8.self), pathBytes.isEmpty || path.hasPrefix("/"), !pathBytes.contains(0) else {
                throw ProtectedFileError.invalidArgument("the identity's data directory is not an absolute UTF-8 path")
            }
            self.init(home: path.isEmpty ? nil : path, protection: protection)
        }
    }

    /// Makes `DIRECTORY/age-plugin-securefoundation` a symbolic link to `target` (the program
    /// that runs ``run(arguments:input:output:timeout:)`` when started under that name).
    /// - Parameters:
    ///   - directory: The directory to put the link in (typically one on `$PATH`).
    ///   - target: The path the link points to.
    /// - Returns: The link's path.
    /// - Throws: ``AgentError/pathInUse(path:reason:)`` when something else is at that path,
    ///   ``AgentError/io(_:)`` when the link cannot be made.
    @discardableResult
    public static func installLink(in directory: String, target: String) throws(AgentError) -> String {
        let link = VaultPaths.absolute(directory) + "/" + programName
        if symlink(target, link) == 0 { return link }
        let code = errno
        guard code == EEXIST else { throw AgentError.system("symlink", link, code) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(link, &buffer, buffer.count - 1)
        guard n > 0 else { throw AgentError.pathInUse(path: link, reason: "exists and is not a symbolic link") }
        let existing = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard existing == target else { throw AgentError.pathInUse(path: link, reason: "is a link to \(existing), not to \(target)") }
        return link
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
    public static func run(arguments: [String], input: Int32 = 0, output: Int32 = 1, timeout: Double = 10) -> Int32 {
        let standardError = FileHandle.standardError
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
                standardError.write(Data("\(programName): \(error)\n".utf8))
                return 1
            }
        case ["--age-plugin=recipient-v1"]:
            do {
                try AgePluginServer.refuseRecipientV1(
                    input: input, output: output,
                    message: "\(programName) only decrypts: write protected files with `securefoundation protect write FILE --class CLASS`")
                return 0
            } catch {
                standardError.write(Data("\(programName): \(error)\n".utf8))
                return 1
            }
        default:
            standardError.write(Data("""
                \(programName): the age plugin of SecureFoundation; `age` runs it (`age -d -j \(name) FILE`).
                Usage: \(programName) --age-plugin=identity-v1
                Make an identity naming a data directory and a class with `securefoundation agent plugin-identity`.

                """.utf8))
            return 64
        }
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
            let client = AgentClient(home: identity.home, timeout: timeout)
            do {
                return .fileKey(try client.unwrapFileKey(stanzas: stanzas, onlyClass: identity.protection))
            } catch {
                switch error {
                case .protectedFile(.notProtectedFile):
                    continue
                case let .protectedFile(.invalidArgument(why)):
                    // A file of another class than the identity's: not for this identity.
                    notice = notice ?? why
                case let .protectedFile(.locked(cls, reason)):
                    switch reason {
                    case .locked:
                        failure = failure ?? "the unlock agent at \(client.socketPath) is locked, so the vault's \(cls.name) files stay closed; unlock it with `securefoundation agent unlock`"
                    case .noFirstUnlockYet:
                        failure = failure ?? "the unlock agent at \(client.socketPath) has not been unlocked since it started, so the vault's \(cls.name) files stay closed; unlock it once with `securefoundation agent unlock`"
                    default:
                        failure = failure ?? "\(ProtectedFileError.locked(cls, reason))"
                    }
                default:
                    failure = failure ?? "\(error)"
                }
            }
        }
        return failure.map { .failure($0) } ?? .noMatch(message: notice)
    }
}
