import Foundation
import Cipher
import EmbeddedSecrets

/// Turns a manifest and its values into Swift source holding the sealed secrets. The build-tool
/// plugin and `securefoundation secrets generate` both call ``generate(manifest:sources:manifestName:)``.
package enum SecretsGenerator {
    /// How many XOR shares the per-build key is split into.
    static let shareCount = 4

    /// The result of one generation.
    package struct Output: Sendable {
        /// The Swift file to compile into the target.
        package let swiftSource: String
        /// The sealed blob embedded in it.
        package let blob: [UInt8]
        /// The per-build key's shares (4 big-endian words each), as placed in the source.
        package let shares: [[UInt64]]
        /// The names sealed (optional secrets without a value are left out).
        package let sealedNames: [String]
    }

    /// One line of `secrets check`: never a value.
    package struct Status: Sendable, Equatable {
        package let name: String
        package let type: EmbeddedSecretType
        package let required: Bool
        /// Where the value was found, or nil.
        package let origin: SecretValueSources.Origin?
    }

    /// Which secrets of the manifest have values, and where from.
    package static func check(manifest: SecretsManifest, sources: SecretValueSources) throws -> [Status] {
        try manifest.secrets.map { spec in
            let found = try sources.find(variable: spec.variable(for: sources.environmentName), credentialName: spec.name)
            defer { found?.bytes.wipe() }
            return Status(name: spec.name, type: spec.type, required: spec.required, origin: found?.origin)
        }
    }

    /// Seals every secret of `manifest` under a new random per-build key and writes the Swift
    /// source: a new key, salt and nonces each time, so two generations never share bytes.
    ///
    /// - Throws: ``SecretsManifestError`` naming the secret whose value is missing or invalid.
    package static func generate(manifest: SecretsManifest, sources: SecretValueSources,
                                manifestName: String = "secrets.json") throws -> Output {
        var entries = [SealedSecretsFormat.Entry]()
        defer { for entry in entries { entry.value.wipe() } }
        for spec in manifest.secrets {
            let variable = spec.variable(for: sources.environmentName)
            guard let found = try sources.find(variable: variable, credentialName: spec.name) else {
                if spec.required {
                    throw SecretsManifestError.missingValue(secret: spec.name,
                                                            lookedIn: sources.describeLookup(variable: variable, credentialName: spec.name))
                }
                continue
            }
            defer { found.bytes.wipe() }
            entries.append(.init(name: spec.name, type: spec.type, value: try encode(found, spec: spec)))
        }
        var runtimeShare: SecretBytes?
        defer { runtimeShare?.wipe() }
        if let share = manifest.runtimeShare {
            guard let found = try sources.find(variable: share.name, credentialName: share.name) else {
                throw SecretsManifestError.runtimeShareMissing(name: share.name,
                                                               lookedIn: sources.describeLookup(variable: share.name, credentialName: share.name))
            }
            var bytes = found.bytes
            if share.source == .provided && !found.isRawFile {
                // The program provides raw bytes (for example a device sub-key); the build gets
                // them as base64, as `securefoundation secrets device-share` prints them.
                let decoded = bytes.withUnsafeBytes { try? Encoding.fromBase64(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }
                bytes.wipe()
                guard var decoded else {
                    throw SecretsManifestError.invalidValue(secret: share.name, type: "run-time share",
                                                            reason: "a provided share is given to the build as base64")
                }
                bytes = SecretBytes(copying: decoded)
                for index in decoded.indices { decoded[index] = 0 }
            }
            guard bytes.count >= SealedSecretsFormat.minimumRuntimeShareLength else {
                let length = bytes.count
                bytes.wipe()
                throw SecretsManifestError.runtimeShareTooShort(name: share.name, length: length)
            }
            runtimeShare = bytes
        }
        let buildKey = try SecretBytes.random(count: SealedSecretsFormat.keyLength)
        defer { buildKey.wipe() }
        let shares = try split(buildKey)
        let blob = try SealedSecretsFormat.seal(entries, manifestVersion: manifest.version, buildKey: buildKey,
                                                runtimeShare: runtimeShare)
        let source = try emit(manifest: manifest, blob: blob, shares: shares, manifestName: manifestName)
        return Output(swiftSource: source, blob: blob, shares: shares, sealedNames: entries.map(\.name))
    }

    /// Converts a found value to the bytes sealed for its type.
    static func encode(_ found: SecretValueSources.Found, spec: SecretSpec) throws -> SecretBytes {
        let typeName = spec.type.manifestName
        switch spec.type {
        case .string:
            let valid = found.bytes.withUnsafeBytes { String(validating: $0, as: UTF8.self) != nil }
            guard valid else { throw SecretsManifestError.invalidValue(secret: spec.name, type: typeName, reason: "not UTF-8 text") }
            return found.bytes.slice(0..<found.bytes.count)
        case .int:
            let text = found.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }.trimmingCharacters(in: .whitespaces)
            guard let number = Int(text) else {
                throw SecretsManifestError.invalidValue(secret: spec.name, type: typeName, reason: "not a whole number in Int's range")
            }
            return SecretBytes(copying: EmbeddedSecretsReader.encodeInt(number))
        case .bool:
            let text = found.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }.trimmingCharacters(in: .whitespaces).lowercased()
            switch text {
            case "true", "yes", "1": return SecretBytes(copying: [1])
            case "false", "no", "0": return SecretBytes(copying: [0])
            default: throw SecretsManifestError.invalidValue(secret: spec.name, type: typeName, reason: "use true/false, yes/no or 1/0")
            }
        case .data:
            if found.isRawFile { return found.bytes.slice(0..<found.bytes.count) }
            let text = found.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }.trimmingCharacters(in: .whitespaces)
            do {
                if text.hasPrefix("hex:") { return SecretBytes(copying: try Encoding.fromHex(String(text.dropFirst(4)))) }
                let base64 = text.hasPrefix("base64:") ? String(text.dropFirst(7)) : text
                return SecretBytes(copying: try Encoding.fromBase64(base64))
            } catch {
                throw SecretsManifestError.invalidValue(secret: spec.name, type: typeName,
                                                        reason: "Data is given as base64 (or hex:…) in variables and .env files, raw in credential files")
            }
        }
    }

    /// Random XOR shares of `key`: `shareCount - 1` random, the last the XOR of the key and those.
    static func split(_ key: SecretBytes) throws -> [[UInt64]] {
        var shares = [[UInt64]]()
        var last = key.withUnsafeBytes { bytes in
            (0..<4).map { word in (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[word * 8 + $1]) } }
        }
        for _ in 1..<shareCount {
            let random = try SecureRandom.bytes(32)
            let words = (0..<4).map { word in (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(random[word * 8 + $1]) } }
            for index in 0..<4 { last[index] ^= words[index] }
            shares.append(words)
        }
        shares.append(last)
        defer { for index in last.indices { last[index] = 0 } }
        return shares
    }

    /// The Swift source: accessors, the blob, and the shares spread through the type and the file.
    static func emit(manifest: SecretsManifest, blob: [UInt8], shares: [[UInt64]], manifestName: String) throws -> String {
        let type = manifest.typeName
        var shareNames = [String]()
        for _ in shares {
            shareNames.append("_sfes" + Encoding.hex(try SecureRandom.bytes(4)))
        }
        func shareFunction(_ index: Int, isStatic: Bool) -> String {
            let words = shares[index].map { "0x" + String($0, radix: 16, uppercase: true) }.joined(separator: ", ")
            return """
                @inline(never) \(isStatic ? "fileprivate static " : "fileprivate ")func \(shareNames[index])() -> [UInt64] { [\(words)] }
            """
        }
        // Accessors, with share functions placed among them at random positions.
        var members = [String]()
        for spec in manifest.secrets {
            members.append(accessor(spec))
        }
        let staticShares = shares.count - 1
        for index in 0..<staticShares {
            let position = Int(try SecureRandom.uniform(below: UInt64(members.count + 1)))
            members.insert(shareFunction(index, isStatic: true), at: position)
        }
        let shareList = shareNames.enumerated().map { index, name in
            index < staticShares ? "{ \(type).\(name)() }" : "{ \(name)() }"
        }.joined(separator: ", ")
        let runtime: String
        switch manifest.runtimeShare?.source {
        case nil: runtime = "nil"
        case let .environment(name)?: runtime = ".environment(\(literal(name)))"
        case let .credential(name)?: runtime = ".credential(\(literal(name)))"
        case .provided?: runtime = ".provided"
        }
        var text = """
        // Generated by SecureFoundation's embedded-secrets generator from \(manifestName). Do not edit or commit.
        // Each value is sealed with ChaCha20-Poly1305 under a key made at build time; see docs/EMBEDDED-SECRETS.md.
        import EmbeddedSecrets

        enum \(type) {
            /// The manifest's `version`: store it, and wipe what was cached from older secrets when it changes.
            static let secretsVersion: Int = \(manifest.version)


        """
        if manifest.runtimeShare?.source == .provided {
            text += """
                /// Supplies the run-time share before the first read (the library keeps a copy in locked memory).
                static func provideRuntimeShare(_ share: SecretBytes) { RuntimeShare.provide(share, for: \(literal(type))) }

                /// Wipes the run-time share supplied with `provideRuntimeShare`.
                static func clearRuntimeShare() { RuntimeShare.clear(for: \(literal(type))) }


            """
        }
        text += members.joined(separator: "\n\n")
        text += """


            private static let _sfesReader = EmbeddedSecretsReader(
                blob: "\(Encoding.base64(blob))",
                shares: [\(shareList)],
                runtimeShare: \(runtime),
                namespace: \(literal(type))
            )
        }

        \(shareFunction(shares.count - 1, isStatic: false).trimmingCharacters(in: .whitespaces))

        """
        return text
    }

    static func accessor(_ spec: SecretSpec) -> String {
        let name = spec.name
        let capitalized = name.prefix(1).uppercased() + name.dropFirst()
        let quoted = literal(name)
        let optional = spec.required ? "" : "?"
        let note = spec.required ? "required" : "optional: nil when it had no value at build time"
        switch spec.type {
        case .string:
            return """
                /// `\(name)` (String, \(note)). A String cannot be wiped: prefer `with\(capitalized)`.
                static var \(name): String\(optional) {
                    get throws { try _sfesReader.\(spec.required ? "string" : "optionalString")(\(quoted)) }
                }

                /// Calls `body` with the bytes of `\(name)` (UTF-8) and wipes them afterwards.
                static func with\(capitalized)<Result>(_ body: (SecretBytes) throws -> Result) throws -> Result\(optional) {
                    \(spec.required ? "" : "guard try _sfesReader.bytes(\(quoted), type: .string).map({ $0.wipe(); return true }) == true else { return nil }\n            ")return try _sfesReader.withSecret(\(quoted), type: .string, body)
                }
            """
        case .int:
            return """
                /// `\(name)` (Int, \(note)).
                static var \(name): Int\(optional) {
                    get throws { try _sfesReader.\(spec.required ? "int" : "optionalInt")(\(quoted)) }
                }
            """
        case .bool:
            return """
                /// `\(name)` (Bool, \(note)).
                static var \(name): Bool\(optional) {
                    get throws { try _sfesReader.\(spec.required ? "bool" : "optionalBool")(\(quoted)) }
                }
            """
        case .data:
            return """
                /// `\(name)` (Data, \(note)) in locked memory: call `wipe()` when done, or use `with\(capitalized)`.
                static var \(name): SecretBytes\(optional) {
                    get throws { try _sfesReader.\(spec.required ? "secretBytes" : "optionalSecretBytes")(\(quoted)) }
                }

                /// Calls `body` with `\(name)` and wipes it afterwards.
                static func with\(capitalized)<Result>(_ body: (SecretBytes) throws -> Result) throws -> Result\(optional) {
                    \(spec.required ? "" : "guard try _sfesReader.bytes(\(quoted), type: .data).map({ $0.wipe(); return true }) == true else { return nil }\n            ")return try _sfesReader.withSecret(\(quoted), type: .data, body)
                }
            """
        }
    }

    /// A Swift string literal for a name already checked to be an identifier.
    static func literal(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// Writes the generated source to `path` atomically (0600), creating nothing else.
    package static func write(_ output: Output, to path: String) throws {
        _ = try SecureFile.writeOutput(Array(output.swiftSource.utf8), to: path, mode: 0o600)
    }
}
