import Foundation
import Cipher
import EmbeddedSecrets

/// Where secret values come from at build time, first match wins: the process environment,
/// then `.env.<environment>`, then `.env`, then `$CREDENTIALS_DIRECTORY/<secret name>`.
package struct SecretValueSources: Sendable {
    package let environment: [String: String]
    /// `.env` files in the order they are consulted (most specific first); missing files are skipped.
    package let envFiles: [String]
    /// `$CREDENTIALS_DIRECTORY` (systemd credentials): files named after the secret.
    package let credentialsDirectory: String?
    /// The environment being built for (`staging`, `production`), selecting per-environment variables.
    package let environmentName: String?

    package init(environment: [String: String], envFiles: [String], credentialsDirectory: String?, environmentName: String?) {
        self.environment = environment
        self.envFiles = envFiles
        self.credentialsDirectory = credentialsDirectory
        self.environmentName = environmentName
    }

    /// The usual sources next to a manifest: the process environment, `DIR/.env.<environment>`
    /// and `DIR/.env`, and `$CREDENTIALS_DIRECTORY`.
    package static func standard(manifestDirectory: String, environmentName: String?,
                                environment: [String: String] = ProcessInfo.processInfo.environment) -> SecretValueSources {
        var files = [String]()
        if let environmentName, !environmentName.isEmpty { files.append(manifestDirectory + "/.env." + environmentName) }
        files.append(manifestDirectory + "/.env")
        let credentials = environment["CREDENTIALS_DIRECTORY"].flatMap { $0.isEmpty ? nil : $0 }
        return SecretValueSources(environment: environment, envFiles: files, credentialsDirectory: credentials,
                                  environmentName: environmentName)
    }

    /// Where a value is found, for `secrets check` (never the value).
    package enum Origin: Sendable, Equatable, CustomStringConvertible {
        case environment(String)
        case envFile(path: String, variable: String)
        case credential(String)

        package var description: String {
            switch self {
            case let .environment(variable): return "environment variable \(variable)"
            case let .envFile(path, variable): return "\(variable) in \(path)"
            case let .credential(path): return "credential file \(path)"
            }
        }
    }

    /// A found value: its bytes (raw for a credential file, the text otherwise) and where from.
    package struct Found {
        package let bytes: SecretBytes
        package let origin: Origin
        /// True when the bytes are a file's raw contents rather than text (Data from a credential file).
        let isRawFile: Bool
    }

    /// Looks `variable` up in the environment and `.env` files, then `credentialName` in the
    /// credentials directory.
    package func find(variable: String, credentialName: String) throws -> Found? {
        if let value = environment[variable] {
            return Found(bytes: SecretBytes(utf8: value), origin: .environment(variable), isRawFile: false)
        }
        for file in envFiles where access(file, F_OK) == 0 {
            let values = try DotEnv.load(path: file)
            if let value = values[variable] {
                return Found(bytes: SecretBytes(utf8: value), origin: .envFile(path: file, variable: variable), isRawFile: false)
            }
        }
        if let credentialsDirectory, !credentialName.contains("/") {
            let path = credentialsDirectory + "/" + credentialName
            if access(path, F_OK) == 0 {
                let bytes = try SecretBytes(contentsOfFile: path, maxLength: SealedSecretsFormat.maximumValueLength)
                return Found(bytes: bytes, origin: .credential(path), isRawFile: true)
            }
        }
        return nil
    }

    /// A summary of where `variable` / `credentialName` would be looked for.
    func describeLookup(variable: String, credentialName: String) -> String {
        var places = ["environment variable \(variable)"]
        places += envFiles.map { "\(variable) in \($0)" }
        if let credentialsDirectory { places.append("\(credentialsDirectory)/\(credentialName)") } else {
            places.append("$CREDENTIALS_DIRECTORY (not set)")
        }
        return places.joined(separator: ", ")
    }
}

/// `.env` files: `NAME=value` lines, `export NAME=value`, `#` comments, values optionally in
/// single quotes (taken literally) or double quotes (`\n`, `\"`, `\\` escapes).
enum DotEnv {
    static func load(path: String) throws -> [String: String] {
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(path, maxLength: 4 << 20)
        } catch {
            throw SecretsManifestError.unreadable(path: path, reason: String(describing: error))
        }
        return try parse(String(decoding: bytes, as: UTF8.self), path: path)
    }

    static func parse(_ text: String, path: String = ".env") throws -> [String: String] {
        var result = [String: String]()
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            line = line.drop(while: { $0 == " " || $0 == "\t" })
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = line.dropFirst(7).drop(while: { $0 == " " }) }
            guard let equals = line.firstIndex(of: "=") else {
                // The line is not echoed: it may be a value pasted on its own.
                throw SecretsManifestError.invalidField("\(path) line \(number + 1) is not NAME=value")
            }
            let name = String(line[..<equals]).trimmingCharacters(in: .whitespaces)
            guard SecretsManifest.isVariableName(name) else {
                throw SecretsManifestError.invalidField("\(path) line \(number + 1): the name is not a variable name")
            }
            var value = line[line.index(after: equals)...].drop(while: { $0 == " " || $0 == "\t" })
            if value.hasPrefix("'") {
                value = value.dropFirst()
                guard let end = value.firstIndex(of: "'") else {
                    throw SecretsManifestError.invalidField("\(path) line \(number + 1): unterminated single quote for \(name)")
                }
                result[name] = String(value[..<end])
            } else if value.hasPrefix("\"") {
                value = value.dropFirst()
                var decoded = ""
                var escaped = false
                var closed = false
                for character in value {
                    if escaped {
                        switch character {
                        case "n": decoded.append("\n")
                        case "t": decoded.append("\t")
                        case "r": decoded.append("\r")
                        default: decoded.append(character)
                        }
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        decoded.append(character)
                    }
                }
                guard closed else {
                    throw SecretsManifestError.invalidField("\(path) line \(number + 1): unterminated double quote for \(name)")
                }
                result[name] = decoded
            } else {
                // Unquoted: up to a ` #` comment, trailing blanks dropped.
                var text = String(value)
                if let comment = text.range(of: " #") { text = String(text[..<comment.lowerBound]) }
                result[name] = text.trimmingCharacters(in: .whitespaces)
            }
        }
        return result
    }
}
