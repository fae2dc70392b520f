import Foundation
import Cipher
import EmbeddedSecrets

/// What can go wrong reading a manifest or finding its values. Messages name the secret and
/// where it was looked for, never a value.
public enum SecretsManifestError: Error, Equatable, Sendable, CustomStringConvertible {
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

    public var description: String {
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
public struct SecretSpec: Sendable, Equatable {
    /// The accessor's name (a Swift identifier) and the name sealed with the value.
    public let name: String
    public let type: EmbeddedSecretType
    /// A missing required value fails generation; a missing optional one gives a nil accessor.
    public let required: Bool
    /// The variable looked up in the environment and `.env` files (default: the name in
    /// SCREAMING_SNAKE_CASE, `apiToken` → `API_TOKEN`).
    public let variable: String
    /// Per-environment variable names (`"staging": "STAGING_API_TOKEN"`), used with `--environment`.
    public let environments: [String: String]

    /// The variable to look up when building for `environment`.
    public func variable(for environment: String?) -> String {
        guard let environment, let specific = environments[environment] else { return variable }
        return specific
    }
}

/// Where the run-time share comes from (at build time: the same name in the same sources as secrets).
public struct RuntimeShareSpec: Sendable, Equatable {
    public let source: RuntimeShareSource
    /// The name looked up at build time.
    public let name: String
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
public struct SecretsManifest: Sendable, Equatable {
    /// The manifest's version, sealed into every secret and exposed as `secretsVersion`. Raise
    /// it when the secrets change, so a program can wipe what it cached from older ones.
    public let version: UInt32
    /// The generated type's name (default `Secrets`).
    public let typeName: String
    public let runtimeShare: RuntimeShareSpec?
    public let secrets: [SecretSpec]

    /// The largest manifest read.
    public static let maximumSize = 1 << 20

    /// Reads and validates the manifest at `path`.
    public static func load(path: String) throws -> SecretsManifest {
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(path, maxLength: maximumSize)
        } catch {
            throw SecretsManifestError.unreadable(path: path, reason: String(describing: error))
        }
        return try parse(bytes)
    }

    /// Parses and validates manifest JSON.
    public static func parse(_ bytes: [UInt8]) throws -> SecretsManifest {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes))
        } catch {
            throw SecretsManifestError.invalidJSON("\(error.localizedDescription)")
        }
        guard let root = object as? [String: Any] else { throw SecretsManifestError.invalidField("the top level must be an object") }
        let known: Set<String> = ["version", "typeName", "runtimeShare", "secrets", "$schema", "comment"]
        if let unknown = root.keys.sorted().first(where: { !known.contains($0) }) {
            throw SecretsManifestError.invalidField("unknown key \"\(unknown)\" (known: version, typeName, runtimeShare, secrets)")
        }
        var version: UInt32 = 1
        if let raw = root["version"] {
            guard let number = raw as? Int, number >= 0, number <= Int(UInt32.max) else {
                throw SecretsManifestError.invalidField("\"version\" must be a whole number 0...\(UInt32.max)")
            }
            version = UInt32(number)
        }
        var typeName = "Secrets"
        if let raw = root["typeName"] {
            guard let name = raw as? String, isIdentifier(name), name.first?.isUppercase == true else {
                throw SecretsManifestError.invalidField("\"typeName\" must be a Swift type name such as Secrets")
            }
            typeName = name
        }
        var runtimeShare: RuntimeShareSpec?
        if let raw = root["runtimeShare"] {
            guard let share = raw as? [String: Any], let source = share["source"] as? String,
                  let name = share["name"] as? String, !name.isEmpty, !name.contains("/"), !name.contains("=") else {
                throw SecretsManifestError.invalidField("\"runtimeShare\" must be {\"source\": \"environment\" | \"credential\" | \"provided\", \"name\": NAME}")
            }
            switch source {
            case "environment": runtimeShare = RuntimeShareSpec(source: .environment(name), name: name)
            case "credential": runtimeShare = RuntimeShareSpec(source: .credential(name), name: name)
            case "provided": runtimeShare = RuntimeShareSpec(source: .provided, name: name)
            default:
                throw SecretsManifestError.invalidField("unknown run-time share source \"\(source)\"; use environment, credential or provided")
            }
        }
        guard let list = root["secrets"] as? [Any] else { throw SecretsManifestError.invalidField("\"secrets\" must be a list") }
        guard list.count <= SealedSecretsFormat.maximumCount else {
            throw SecretsManifestError.invalidField("\(list.count) secrets; at most \(SealedSecretsFormat.maximumCount)")
        }
        var secrets = [SecretSpec]()
        var seen = Set<String>()
        for (index, item) in list.enumerated() {
            guard let entry = item as? [String: Any] else { throw SecretsManifestError.invalidField("secret #\(index + 1) is not an object") }
            guard let name = entry["name"] as? String else { throw SecretsManifestError.invalidField("secret #\(index + 1) has no \"name\"") }
            let entryKeys: Set<String> = ["name", "type", "required", "variable", "environments", "comment"]
            if let unknown = entry.keys.sorted().first(where: { !entryKeys.contains($0) }) {
                throw SecretsManifestError.invalidField("the secret \"\(name)\" has the unknown key \"\(unknown)\"")
            }
            guard isIdentifier(name), !reserved.contains(name), !name.hasPrefix("_sfes"), name != typeName else {
                throw SecretsManifestError.invalidName(name)
            }
            guard seen.insert(name).inserted else { throw SecretsManifestError.duplicateName(name) }
            guard let typeText = entry["type"] as? String else {
                throw SecretsManifestError.unknownType(secret: name, type: entry["type"].map { "\($0)" } ?? "(none)")
            }
            guard let type = EmbeddedSecretType(manifestName: typeText) else {
                throw SecretsManifestError.unknownType(secret: name, type: typeText)
            }
            var required = true
            if let raw = entry["required"] {
                guard let flag = raw as? Bool else {
                    throw SecretsManifestError.invalidField("\"required\" of the secret \"\(name)\" must be true or false")
                }
                required = flag
            }
            var variable = screamingSnake(name)
            if let raw = entry["variable"] {
                guard let text = raw as? String, isVariableName(text) else {
                    throw SecretsManifestError.invalidField("\"variable\" of the secret \"\(name)\" must be an environment variable name")
                }
                variable = text
            }
            var environments = [String: String]()
            if let raw = entry["environments"] {
                guard let map = raw as? [String: Any] else {
                    throw SecretsManifestError.invalidField("\"environments\" of the secret \"\(name)\" must map environment names to variable names")
                }
                for (environment, value) in map {
                    guard let text = value as? String, isVariableName(text) else {
                        throw SecretsManifestError.invalidField("\"environments.\(environment)\" of the secret \"\(name)\" must be an environment variable name")
                    }
                    environments[environment] = text
                }
            }
            secrets.append(SecretSpec(name: name, type: type, required: required, variable: variable, environments: environments))
        }
        return SecretsManifest(version: version, typeName: typeName, runtimeShare: runtimeShare, secrets: secrets)
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
    public static func screamingSnake(_ name: String) -> String {
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
