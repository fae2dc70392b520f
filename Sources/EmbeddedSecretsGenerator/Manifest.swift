import Foundation
import Cipher
import EmbeddedSecrets

/// What can go wrong reading a manifest or finding its values. Messages name the secret and
/// where it was looked for, never a value.
package enum SecretsManifestError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalidJSON(String)
    case invalidField(String)
    case invalidName(String)
    case unknownType(secret: String, type: String)
    case duplicateName(String)
    case missingValue(secret: String, lookedIn: String)
    case invalidValue(secret: String, type: String, reason: String)
    case runtimeShareMissing(name: String, lookedIn: String)
    case runtimeShareTooShort(name: String, length: Int)

    package var description: String {
        switch self {
        case let .unreadable(path, reason):
            return "cannot read the secrets manifest \(path): \(reason)"
        case let .invalidJSON(detail):
            return "the secrets manifest is not valid JSON: \(detail)"
        case let .invalidField(detail):
            return "the secrets manifest is invalid: \(detail)"
        case let .invalidName(name):
            return "the secret name \"\(name)\" is not usable: names are Swift identifiers (letters, digits, _; not starting with a digit or _sfes; not a keyword), at most 64 characters"
        case let .unknownType(secret, type):
            return "the secret \"\(secret)\" has the unknown type \"\(type)\"; use String, Int, Bool or Data"
        case let .duplicateName(name):
            return "the secret \"\(name)\" is declared twice; each name may appear once"
        case let .missingValue(secret, lookedIn):
            return "the required secret \"\(secret)\" has no value; looked in \(lookedIn). Set it there, or mark it \"required\": false"
        case let .invalidValue(secret, type, reason):
            return "the value of the secret \"\(secret)\" is not a valid \(type): \(reason)"
        case let .runtimeShareMissing(name, lookedIn):
            return "the run-time share \"\(name)\" has no value at build time; looked in \(lookedIn). The build needs the share it seals with"
        case let .runtimeShareTooShort(name, length):
            return "the run-time share \"\(name)\" is \(length) bytes; use at least \(SealedSecretsFormat.minimumRuntimeShareLength) random bytes (for example `securefoundation random --base64 32`)"
        }
    }
}

/// A secret declared in `secrets.json`.
package struct SecretSpec: Sendable, Equatable {
    /// The accessor's name (a Swift identifier) and the name sealed with the value.
    package let name: String
    package let type: EmbeddedSecretType
    /// A missing required value fails generation; a missing optional one gives a nil accessor.
    package let required: Bool
    /// The variable looked up in the environment and `.env` files (default: the name in
    /// SCREAMING_SNAKE_CASE, `apiToken` → `API_TOKEN`).
    package let variable: String
    /// Per-environment variable names (`"staging": "STAGING_API_TOKEN"`), used with `--environment`.
    package let environments: [String: String]

    /// The variable to look up when building for `environment`.
    package func variable(for environment: String?) -> String {
        guard let environment, let specific = environments[environment] else { return variable }
        return specific
    }
}

/// Where the run-time share comes from (at build time: the same name in the same sources as secrets).
package struct RuntimeShareSpec: Sendable, Equatable {
    package let source: RuntimeShareSource
    /// The name looked up at build time.
    package let name: String
}

/// `secrets.json`: a typed list of secrets. It holds names and types, never values, so it is committed.
///
/// ```json
/// {
///   "version": 1,
///   "typeName": "Secrets",
///   "runtimeShare": { "source": "environment", "name": "APP_SECRETS_SHARE" },
///   "secrets": [
///     { "name": "apiToken", "type": "String" },
///     { "name": "timeoutSeconds", "type": "Int", "required": false },
///     { "name": "clientCertificate", "type": "Data", "environments": { "staging": "STAGING_CLIENT_CERT" } }
///   ]
/// }
/// ```
package struct SecretsManifest: Sendable, Equatable {
    /// The manifest's version, sealed into every secret and exposed as `secretsVersion`. Raise
    /// it when the secrets change, so a program can wipe what it cached from older ones.
    package let version: UInt32
    /// The generated type's name (default `Secrets`).
    package let typeName: String
    package let runtimeShare: RuntimeShareSpec?
    package let secrets: [SecretSpec]

    /// The largest manifest read.
    package static let maximumSize = 1 << 20

    /// Reads and validates the manifest at `path`.
    package static func load(path: String) throws -> SecretsManifest {
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(path, maxLength: maximumSize)
        } catch {
            throw SecretsManifestError.unreadable(path: path, reason: String(describing: error))
        }
        return try parse(bytes)
    }

    /// Parses and validates manifest JSON (decoded by `JSONDecoder` through ``SecretsManifest``'s
    /// `Decodable` conformance).
    package static func parse(_ bytes: [UInt8]) throws -> SecretsManifest {
        do {
            return try JSONDecoder().decode(SecretsManifest.self, from: Data(bytes))
        } catch let error as SecretsManifestError {
            throw error
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            // Not JSON at all (the decoder's own checks of the values are our typed errors).
            let detail = (context.underlyingError as NSError?)?.localizedDescription ?? context.debugDescription
            throw SecretsManifestError.invalidJSON(detail)
        } catch {
            throw SecretsManifestError.invalidJSON("\(error.localizedDescription)")
        }
    }

    /// Names the generated type already uses, and Swift keywords an accessor cannot take.
    static let reserved: Set<String> = [
        "secretsVersion", "provideRuntimeShare", "clearRuntimeShare", "self", "Self", "Type", "Protocol", "init", "deinit",
        "class", "struct", "enum", "func", "var", "let", "static", "private", "public", "internal", "import",
        "return", "if", "else", "for", "while", "in", "do", "try", "throw", "throws", "true", "false", "nil",
        "switch", "case", "default", "break", "continue", "guard", "where", "as", "is", "super", "operator",
        "protocol", "extension", "subscript", "typealias", "associatedtype", "inout", "repeat", "defer", "fallthrough",
        "any", "some", "await", "async", "fileprivate", "open", "rethrows", "catch", "Any",
    ]

    static func isIdentifier(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        guard !(bytes[0] >= 0x30 && bytes[0] <= 0x39) else { return false }
        return bytes.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    static func isVariableName(_ text: String) -> Bool {
        isIdentifier(text)
    }

    /// `apiToken` → `API_TOKEN`, `clientID2` → `CLIENT_ID2`.
    package static func screamingSnake(_ name: String) -> String {
        var result = ""
        let characters = Array(name)
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) { result += "_" }
            }
            result += character.uppercased()
        }
        return result
    }
}

/// Any key of a JSON object, so that unknown keys are named in the error.
private struct ManifestKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where Key == ManifestKey {
    /// The value at `key` as `T`, nil when the key is absent; `otherwise` when it is there but not
    /// a `T` (null included). A ``SecretsManifestError`` that `T`'s own decoding throws passes through.
    fileprivate func optional<T: Decodable>(_ type: T.Type, _ key: String,
                                            else otherwise: @autoclosure () -> SecretsManifestError) throws -> T? {
        let codingKey = ManifestKey(key)
        guard contains(codingKey) else { return nil }
        do {
            return try decode(T.self, forKey: codingKey)
        } catch let own as SecretsManifestError {
            throw own
        } catch {
            throw otherwise()
        }
    }

    /// The first key, in sorted order, that is not in `known`.
    fileprivate func firstUnknownKey(_ known: Set<String>) -> String? {
        allKeys.map(\.stringValue).sorted().first { !known.contains($0) }
    }
}

extension SecretsManifest: Decodable {
    /// Decodes and validates a manifest; every failure is a ``SecretsManifestError`` that names
    /// the field (and the secret).
    package init(from decoder: any Decoder) throws {
        guard let root = try? decoder.container(keyedBy: ManifestKey.self) else {
            throw SecretsManifestError.invalidField("the top level must be an object")
        }
        if let unknown = root.firstUnknownKey(["version", "typeName", "runtimeShare", "secrets", "$schema", "comment"]) {
            throw SecretsManifestError.invalidField("unknown key \"\(unknown)\" (known: version, typeName, runtimeShare, secrets)")
        }
        let version = try root.optional(UInt32.self, "version",
                                        else: .invalidField("\"version\" must be a whole number 0...\(UInt32.max)")) ?? 1
        let typeNameError = SecretsManifestError.invalidField("\"typeName\" must be a Swift type name such as Secrets")
        let typeName = try root.optional(String.self, "typeName", else: typeNameError) ?? "Secrets"
        guard SecretsManifest.isIdentifier(typeName), typeName.first?.isUppercase == true else { throw typeNameError }
        let runtimeShare = try root.optional(RuntimeShareEntry.self, "runtimeShare", else: RuntimeShareEntry.shapeError)?.spec
        guard root.contains(ManifestKey("secrets")), var list = try? root.nestedUnkeyedContainer(forKey: ManifestKey("secrets")) else {
            throw SecretsManifestError.invalidField("\"secrets\" must be a list")
        }
        if let count = list.count, count > SealedSecretsFormat.maximumCount {
            throw SecretsManifestError.invalidField("\(count) secrets; at most \(SealedSecretsFormat.maximumCount)")
        }
        var secrets = [SecretSpec]()
        var seen = Set<String>()
        while !list.isAtEnd {
            let index = list.currentIndex
            guard let entry = try? list.nestedContainer(keyedBy: ManifestKey.self) else {
                throw SecretsManifestError.invalidField("secret #\(index + 1) is not an object")
            }
            secrets.append(try SecretSpec(entry, index: index, typeName: typeName, seen: &seen))
        }
        self.init(version: version, typeName: typeName, runtimeShare: runtimeShare, secrets: secrets)
    }
}

/// `"runtimeShare": {"source": ..., "name": ...}`.
private struct RuntimeShareEntry: Decodable {
    static let shapeError = SecretsManifestError.invalidField(
        "\"runtimeShare\" must be {\"source\": \"environment\" | \"credential\" | \"provided\", \"name\": NAME}")
    let spec: RuntimeShareSpec

    init(from decoder: any Decoder) throws {
        guard let share = try? decoder.container(keyedBy: ManifestKey.self),
              let source = try? share.decode(String.self, forKey: ManifestKey("source")),
              let name = try? share.decode(String.self, forKey: ManifestKey("name")),
              !name.isEmpty, !name.contains("/"), !name.contains("=") else {
            throw Self.shapeError
        }
        switch source {
        case "environment": spec = RuntimeShareSpec(source: .environment(name), name: name)
        case "credential": spec = RuntimeShareSpec(source: .credential(name), name: name)
        case "provided": spec = RuntimeShareSpec(source: .provided, name: name)
        default:
            throw SecretsManifestError.invalidField("unknown run-time share source \"\(source)\"; use environment, credential or provided")
        }
    }
}

extension SecretSpec {
    /// One entry of `"secrets"` (number `index` from 0), checked in this order: name, unknown
    /// keys, name rules, a name already in `seen`, type, required, variable, environments.
    fileprivate init(_ entry: KeyedDecodingContainer<ManifestKey>, index: Int, typeName: String, seen: inout Set<String>) throws {
        guard let name = try? entry.decode(String.self, forKey: ManifestKey("name")) else {
            throw SecretsManifestError.invalidField("secret #\(index + 1) has no \"name\"")
        }
        if let unknown = entry.firstUnknownKey(["name", "type", "required", "variable", "environments", "comment"]) {
            throw SecretsManifestError.invalidField("the secret \"\(name)\" has the unknown key \"\(unknown)\"")
        }
        guard SecretsManifest.isIdentifier(name), !SecretsManifest.reserved.contains(name), !name.hasPrefix("_sfes"), name != typeName else {
            throw SecretsManifestError.invalidName(name)
        }
        guard seen.insert(name).inserted else { throw SecretsManifestError.duplicateName(name) }
        guard let typeText = try? entry.decode(String.self, forKey: ManifestKey("type")) else {
            throw SecretsManifestError.unknownType(secret: name, type: ManifestScalar.describe(entry, "type"))
        }
        guard let type = EmbeddedSecretType(manifestName: typeText) else {
            throw SecretsManifestError.unknownType(secret: name, type: typeText)
        }
        let required = try entry.optional(Bool.self, "required",
                                          else: .invalidField("\"required\" of the secret \"\(name)\" must be true or false")) ?? true
        let variable = try entry.optional(String.self, "variable", else: Self.variableError(name)) ?? SecretsManifest.screamingSnake(name)
        guard SecretsManifest.isVariableName(variable) else { throw Self.variableError(name) }
        var environments = [String: String]()
        if entry.contains(ManifestKey("environments")) {
            guard let map = try? entry.nestedContainer(keyedBy: ManifestKey.self, forKey: ManifestKey("environments")) else {
                throw SecretsManifestError.invalidField("\"environments\" of the secret \"\(name)\" must map environment names to variable names")
            }
            for key in map.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                guard let text = try? map.decode(String.self, forKey: key), SecretsManifest.isVariableName(text) else {
                    throw SecretsManifestError.invalidField(
                        "\"environments.\(key.stringValue)\" of the secret \"\(name)\" must be an environment variable name")
                }
                environments[key.stringValue] = text
            }
        }
        self.init(name: name, type: type, required: required, variable: variable, environments: environments)
    }

    private static func variableError(_ name: String) -> SecretsManifestError {
        .invalidField("\"variable\" of the secret \"\(name)\" must be an environment variable name")
    }
}

/// A JSON scalar as the error message shows it (the `"type"` of a secret that is not a string).
private enum ManifestScalar {
    static func describe(_ container: KeyedDecodingContainer<ManifestKey>, _ key: String) -> String {
        let codingKey = ManifestKey(key)
        guard container.contains(codingKey) else { return "(none)" }
        if (try? container.decodeNil(forKey: codingKey)) == true { return "null" }
        if let flag = try? container.decode(Bool.self, forKey: codingKey) { return flag ? "true" : "false" }
        if let number = try? container.decode(Int.self, forKey: codingKey) { return "\(number)" }
        if let number = try? container.decode(Double.self, forKey: codingKey) { return "\(number)" }
        return "(not a string)"
    }
}
