import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation
import EmbeddedSecrets
import EmbeddedSecretsGenerator

struct SecretsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secrets",
        abstract: "Embedded secrets: seal a program's API tokens into generated Swift code.",
        discussion: """
        The same generator the SecretsPlugin build-tool plugin runs. Values come from the \
        environment, `.env.<environment>` and `.env` next to the manifest, and \
        $CREDENTIALS_DIRECTORY; messages name secrets, never values. See EMBEDDED-SECRETS.md in the documentation.

        Examples:
          securefoundation secrets generate --manifest secrets.json -o Generated.swift
          securefoundation secrets check --manifest secrets.json --environment staging
          securefoundation secrets levels
        """,
        subcommands: [SecretsGenerateCommand.self, SecretsCheckCommand.self, SecretsLevelsCommand.self, SecretsDeviceShareCommand.self]
    )
}

struct SecretsSourceOptions: ParsableArguments {
    @Option(help: "The manifest (secrets.json).")
    var manifest: String = "secrets.json"

    @Option(help: "The environment built for: reads .env.<environment> first and per-environment variable names.")
    var environment: String?

    @Option(name: .customLong("env-file"), help: "A .env file to read instead of those next to the manifest (repeatable; first match wins).")
    var envFiles: [String] = []

    func load() throws -> (SecretsManifest, SecretValueSources) {
        let manifest = try SecretsManifest.load(path: manifest)
        var sources = SecretValueSources.standard(manifestDirectory: directory, environmentName: environment)
        if !envFiles.isEmpty {
            sources = SecretValueSources(environment: sources.environment, envFiles: envFiles,
                                         credentialsDirectory: sources.credentialsDirectory, environmentName: environment)
        }
        return (manifest, sources)
    }

    var directory: String {
        let url = URL(fileURLWithPath: manifest)
        return url.deletingLastPathComponent().path
    }
}

struct SecretsGenerateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Seal the manifest's secrets into a Swift file (a new key and different bytes every time).",
        usage: "securefoundation secrets generate [--manifest FILE] [options] -o OUTPUT",
        discussion: """
        A missing required value fails with the secret's name and where it was looked for. \
        Do not commit the output; the plugin writes it into the build directory instead.

        Example:
          API_TOKEN=… securefoundation secrets generate --manifest secrets.json \\
              --output Generated.swift
        """
    )

    @OptionGroup var sources: SecretsSourceOptions

    @Option(name: .shortAndLong, help: "The Swift file to write (`-` for standard output).")
    var output: String

    func run() throws {
        try CLI.run {
            let (manifest, values) = try sources.load()
            let generated = try SecretsGenerator.generate(manifest: manifest, sources: values,
                                                          manifestName: URL(fileURLWithPath: sources.manifest).lastPathComponent)
            try CLI.writeOutput(Array(generated.swiftSource.utf8), to: output == "-" ? nil : output)
            CLI.warn("sealed \(generated.sealedNames.count) of \(manifest.secrets.count) secrets into \(output)"
                + (manifest.runtimeShare == nil ? " (no run-time share: obfuscation with tamper detection)" : " (with a run-time share)"))
        }
    }
}

struct SecretsCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "List the manifest's secrets and whether each has a value (never the value).",
        usage: "securefoundation secrets check [--manifest FILE] [options]",
        discussion: """
        One line per secret: NAME TYPE required|optional set|MISSING and where the value was \
        found. Exits 1 when a required secret has no value.

        Examples:
          securefoundation secrets check
          securefoundation secrets check --manifest secrets.json --environment staging
        """
    )

    @OptionGroup var sources: SecretsSourceOptions

    func run() throws {
        try CLI.run {
            let (manifest, values) = try sources.load()
            let statuses = try SecretsGenerator.check(manifest: manifest, sources: values)
            var missing = 0
            for status in statuses {
                let where_ = status.origin.map { "set (\($0))" } ?? (status.required ? "MISSING" : "not set")
                if status.origin == nil && status.required { missing += 1 }
                print("\(status.name)\t\(status.type)\t\(status.required ? "required" : "optional")\t\(where_)")
            }
            if let share = manifest.runtimeShare {
                let found = try values.find(variable: share.name, credentialName: share.name)
                defer { found?.bytes.wipe() }
                print("run-time share \(share.name)\t\(found.map { "set (\($0.origin))" } ?? "MISSING")")
                if found == nil { missing += 1 }
            }
            if missing > 0 {
                CLI.warn("securefoundation: \(missing) required value(s) missing")
                throw ExitCode(1)
            }
        }
    }
}

struct SecretsLevelsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "levels",
        abstract: "Show what a `strings` scan finds for each level: plaintext, XOR-obfuscated, sealed.",
        usage: "securefoundation secrets levels [--binary PROGRAM [--variable NAME]]",
        discussion: """
        Builds the bytes each level puts into a program for one demonstration token, scans them \
        as `strings` does (runs of 6 or more printable characters) and searches for the token, \
        its hex and its base64. With --binary, scans a built program for the value of \
        --variable instead.

        Examples:
          securefoundation secrets levels
          API_TOKEN=… securefoundation secrets levels --binary .build/debug/App \\
              --variable API_TOKEN
        """
    )

    @Option(help: "A built program to scan.")
    var binary: String?

    @Option(help: "With --binary: the environment variable holding the secret to look for.")
    var variable: String = "API_TOKEN"

    func run() throws {
        try CLI.run {
            if let binary {
                try scan(binary: binary)
            } else {
                try demonstrate()
            }
        }
    }

    /// Scans a built binary for the secret in `variable`: exit 1 if any form is found.
    func scan(binary: String) throws {
        guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
            throw ValidationError("set \(variable) to the secret to search for")
        }
        let bytes = try SecureFile.read(binary, maxLength: 1 << 30)
        let found = LevelScan.formsFound(Array(value.utf8), in: bytes)
        print("\(binary): \(bytes.count) bytes, \(LevelScan.strings(bytes).count) printable strings")
        print(found.isEmpty ? "the secret, its hex and its base64: not found" : "FOUND: \(found.joined(separator: ", "))")
        if !found.isEmpty { throw ExitCode(1) }
    }

    func demonstrate() throws {
        let token = Array("sk_live_" .utf8) + Array(Encoding.base64URL(try SecureRandom.bytes(15)).utf8)
        let tokenText = String(decoding: token, as: UTF8.self)
        print("demonstration token: \(tokenText)\n")

        // Level 1: a string constant, as written in source or a plist.
        let plain = Array("\0\0https://api.example.com\0".utf8) + token + [0]
        // Level 2: XOR with a key stored beside it (what arkana and cocoapods-keys generate).
        let key = try SecureRandom.bytes(token.count)
        let obfuscated = zip(token, key).map { $0 ^ $1 }
        let level2 = key + obfuscated
        let recovered2 = zip(level2.prefix(token.count), level2.suffix(token.count)).map { $0 ^ $1 }
        // Level 3: sealed, with and without a run-time share.
        let manifest = try SecretsManifest.parse(Array(#"{ "secrets": [ { "name": "apiToken", "type": "String" } ] }"#.utf8))
        let sources = SecretValueSources(environment: ["API_TOKEN": tokenText], envFiles: [], credentialsDirectory: nil, environmentName: nil)
        let sealed = try SecretsGenerator.generate(manifest: manifest, sources: sources)
        let level3 = Array(sealed.swiftSource.utf8)
        let reader = EmbeddedSecretsReader(blob: Encoding.base64(sealed.blob), shares: sealed.shares.map { share in { share } },
                                           runtimeShare: nil, namespace: "Secrets")
        let recovered3 = try reader.string("apiToken") == tokenText
        var tampered = sealed.blob
        tampered[tampered.count / 2] ^= 1
        let tamperReader = EmbeddedSecretsReader(blob: Encoding.base64(tampered), shares: sealed.shares.map { share in { share } },
                                                 runtimeShare: nil, namespace: "Secrets")
        let tamperDetected = (try? tamperReader.string("apiToken")) == nil

        let shareManifest = try SecretsManifest.parse(Array(#"{ "runtimeShare": { "source": "environment", "name": "APP_SHARE" }, "secrets": [ { "name": "apiToken", "type": "String" } ] }"#.utf8))
        let share = Encoding.base64(try SecureRandom.bytes(32))
        let shared = try SecretsGenerator.generate(
            manifest: shareManifest,
            sources: SecretValueSources(environment: ["API_TOKEN": tokenText, "APP_SHARE": share], envFiles: [], credentialsDirectory: nil, environmentName: nil))
        let withoutShare = EmbeddedSecretsReader(blob: Encoding.base64(shared.blob), shares: shared.shares.map { share in { share } },
                                                 runtimeShare: .environment("APP_SHARE"), namespace: "Secrets", environment: [:])
        let binaryAloneOpens = (try? withoutShare.string("apiToken")) != nil

        func report(_ title: String, _ bytes: [UInt8], _ attack: String) {
            let found = LevelScan.formsFound(token, in: bytes)
            print(title)
            print("  strings finds the token: \(found.isEmpty ? "no" : "YES (\(found.joined(separator: ", ")))")")
            print("  an attacker with the binary: \(attack)\n")
        }
        report("1. plaintext constant", plain, "runs `strings`; done")
        report("2. XOR-obfuscated (key beside the data)", level2,
               "XORs the two arrays: \(recovered2 == token ? "recovered the token" : "failed"); nothing detects changes")
        report("3a. sealed, no run-time share (this generator, default)", level3,
               "must find the 4 key shares in code and re-implement HKDF + ChaCha20-Poly1305: \(recovered3 ? "possible, with the code's own reader" : "failed"); a changed byte is \(tamperDetected ? "detected" : "NOT detected")")
        report("3b. sealed with a run-time share", Array(shared.swiftSource.utf8),
               "the binary alone opens nothing: \(binaryAloneOpens ? "OPENED (unexpected)" : "reading without the share fails with runtimeShareMissing")")
        print("Levels 2 and 3a are obfuscation: they cost an attacker time, not possibility. Only 3b is encryption.")
    }
}

struct SecretsDeviceShareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-share",
        abstract: "Print (base64) the vault device sub-key a program uses as its run-time share.",
        usage: "securefoundation secrets device-share [options] [-o OUTPUT]",
        discussion: """
        For manifests with "runtimeShare": {"source": "provided", "name": NAME}: give the output \
        to the build as NAME, and in the program call \
        Secrets.provideRuntimeShare(try vault.deviceSubkey(purpose: PURPOSE)). The secrets then \
        open only on a machine holding that device key. The output is key material: pass it to \
        the build through a file or a pipe, never a shell history.

        Example:
          APP_DEVICE_SHARE=$(securefoundation secrets device-share) swift build
        """
    )

    @OptionGroup var home: HomeOptions

    @Option(help: "The sub-key's purpose, as the program passes it to deviceSubkey(purpose:).")
    var purpose: String = "embedded secrets v1"

    @Option(name: .shortAndLong, help: "Write here instead of standard output.")
    var output: String?

    func run() throws {
        try CLI.run {
            let key = try home.manager().deviceSubkey(purpose: purpose)
            defer { key.wipe() }
            let text = key.withUnsafeBytes { Encoding.base64($0) } + "\n"
            try CLI.writeOutput(Array(text.utf8), to: output)
        }
    }
}

/// The scans `secrets levels` prints.
enum LevelScan {
    /// Runs of at least 6 printable ASCII characters, as `strings -n 6` prints.
    static func strings(_ bytes: [UInt8]) -> [String] {
        var result = [String]()
        var run = [UInt8]()
        for byte in bytes {
            if byte >= 0x20 && byte < 0x7F { run.append(byte); continue }
            if run.count >= 6 { result.append(String(decoding: run, as: UTF8.self)) }
            run.removeAll(keepingCapacity: true)
        }
        if run.count >= 6 { result.append(String(decoding: run, as: UTF8.self)) }
        return result
    }

    /// Which of the secret's forms (plain, hex, base64) occur in `bytes`.
    static func formsFound(_ secret: [UInt8], in bytes: [UInt8]) -> [String] {
        var forms: [(String, [UInt8])] = [("plain", secret), ("hex", Array(Encoding.hex(secret).utf8)),
                                          ("HEX", Array(Encoding.hex(secret).uppercased().utf8))]
        let base64 = Encoding.base64(secret).trimmingCharacters(in: CharacterSet(charactersIn: "="))
        forms.append(("base64", Array(base64.utf8.dropLast())))
        for shift in 1...2 {
            let shifted = Encoding.base64([UInt8](repeating: 0, count: shift) + secret)
            forms.append(("base64", Array(shifted.utf8.dropFirst(4).dropLast(4))))
        }
        var found = [String]()
        for (name, needle) in forms where !found.contains(name) && contains(bytes, needle) { found.append(name) }
        return found
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0], haystack[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}
