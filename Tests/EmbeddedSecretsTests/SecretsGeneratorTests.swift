import Foundation
import Testing
@testable import EmbeddedSecrets
@testable import EmbeddedSecretsGenerator
import Cipher
import TestSupport

/// The generator the plugin and the CLI share: manifests, value sources, generated code.
@Suite struct SecretsGeneratorTests {
    static let token = "sk_live_Zq8WnVb3kR7pLx2T"

    static let manifestJSON = """
    {
      "version": 3,
      "secrets": [
        { "name": "apiToken", "type": "String" },
        { "name": "retryLimit", "type": "Int" },
        { "name": "verbose", "type": "Bool" },
        { "name": "clientKey", "type": "Data" },
        { "name": "analyticsKey", "type": "String", "required": false }
      ]
    }
    """

    static var environment: [String: String] {
        ["API_TOKEN": token, "RETRY_LIMIT": "-12", "VERBOSE": "yes", "CLIENT_KEY": Encoding.base64(Array("key bytes".utf8))]
    }

    func sources(_ environment: [String: String], envFiles: [String] = [], credentials: String? = nil,
                 environmentName: String? = nil) -> SecretValueSources {
        SecretValueSources(environment: environment, envFiles: envFiles, credentialsDirectory: credentials, environmentName: environmentName)
    }

    func reader(_ output: SecretsGenerator.Output, runtimeShare: RuntimeShareSource? = nil,
                environment: [String: String] = [:]) -> EmbeddedSecretsReader {
        EmbeddedSecretsReader(blob: Encoding.base64(output.blob), shares: output.shares.map { share in { share } },
                              runtimeShare: runtimeShare, namespace: "Secrets", environment: environment)
    }

    func manifest(_ json: String) throws -> SecretsManifest {
        try SecretsManifest.parse(Array(json.utf8))
    }

    @Test func everyTypeRoundTrips() throws {
        let output = try SecretsGenerator.generate(manifest: manifest(Self.manifestJSON), sources: sources(Self.environment))
        let secrets = reader(output)
        #expect(try secrets.string("apiToken") == Self.token)
        #expect(try secrets.int("retryLimit") == -12)
        #expect(try secrets.bool("verbose") == true)
        let key = try secrets.secretBytes("clientKey")
        #expect(key.withUnsafeBytes { Array($0) } == Array("key bytes".utf8))
        #expect(try secrets.optionalString("analyticsKey") == nil)
        #expect(output.sealedNames == ["apiToken", "retryLimit", "verbose", "clientKey"])
        let length = try secrets.withSecret("apiToken", type: .string) { $0.count }
        #expect(length == Self.token.utf8.count)
        #expect(SealedSecretsFormat.manifestVersion(output.blob) == 3)
        #expect(output.swiftSource.contains("static let secretsVersion: Int = 3"))
    }

    @Test func twoGenerationsDiffer() throws {
        let parsed = try manifest(Self.manifestJSON)
        let first = try SecretsGenerator.generate(manifest: parsed, sources: sources(Self.environment))
        let second = try SecretsGenerator.generate(manifest: parsed, sources: sources(Self.environment))
        #expect(first.blob != second.blob)
        #expect(first.shares != second.shares)
        #expect(first.swiftSource != second.swiftSource)
        // Fresh salt, nonces and key: no record's nonce or ciphertext repeats.
        let a = try SealedSecretsFormat.parse(first.blob), b = try SealedSecretsFormat.parse(second.blob)
        #expect(a.salt != b.salt)
        #expect(a.records.count == 4 && b.records.count == 4)
        for (x, y) in zip(a.records, b.records) {
            #expect(x.name == y.name)
            #expect(x.nonce != y.nonce)
            #expect(x.ciphertext != y.ciphertext)
            #expect(x.tag != y.tag)
        }
        #expect(a.check != b.check && a.integrity != b.integrity)
        #expect(try reader(first).string("apiToken") == reader(second).string("apiToken"))
    }

    @Test func flippedByteInGeneratedDataIsDetected() throws {
        let output = try SecretsGenerator.generate(manifest: manifest(Self.manifestJSON), sources: sources(Self.environment))
        var blob = output.blob
        blob[blob.count / 2] ^= 0x20
        let altered = EmbeddedSecretsReader(blob: Encoding.base64(blob), shares: output.shares.map { share in { share } },
                                            runtimeShare: nil, namespace: "Secrets")
        #expect(throws: EmbeddedSecretsError.tampered("the integrity tag does not match")) { _ = try altered.string("apiToken") }
        var shares = output.shares
        shares[2][1] ^= 1 << 40
        let alteredShare = EmbeddedSecretsReader(blob: Encoding.base64(output.blob), shares: shares.map { share in { share } },
                                                 runtimeShare: nil, namespace: "Secrets")
        #expect(throws: EmbeddedSecretsError.tampered("the integrity tag does not match")) { _ = try alteredShare.int("retryLimit") }
    }

    @Test func runtimeShareFromEnvironmentMissingWrongRight() throws {
        let json = """
        { "runtimeShare": { "source": "environment", "name": "APP_SHARE" },
          "secrets": [ { "name": "apiToken", "type": "String" } ] }
        """
        let share = "0123456789abcdef0123456789abcdef"
        let output = try SecretsGenerator.generate(manifest: manifest(json),
                                                   sources: sources(["API_TOKEN": Self.token, "APP_SHARE": share]))
        #expect(SealedSecretsFormat.needsRuntimeShare(output.blob) == true)
        let missing = reader(output, runtimeShare: .environment("APP_SHARE"), environment: [:])
        #expect(throws: EmbeddedSecretsError.runtimeShareMissing("nothing in the environment variable APP_SHARE")) {
            _ = try missing.string("apiToken")
        }
        let wrong = reader(output, runtimeShare: .environment("APP_SHARE"), environment: ["APP_SHARE": "0123456789abcdef0123456789abcdeX"])
        #expect(throws: EmbeddedSecretsError.runtimeShareWrong("the share does not open these secrets")) {
            _ = try wrong.string("apiToken")
        }
        let right = reader(output, runtimeShare: .environment("APP_SHARE"), environment: ["APP_SHARE": share])
        #expect(try right.string("apiToken") == Self.token)
        // With only the binary's shares (the run-time share replaced by the build key alone),
        // nothing opens: the share is part of the key, not a gate in code.
        let binaryOnly = try SecretBytes(count: 32) { buffer in
            for (index, word) in output.shares.reduce([UInt64](repeating: 0, count: 4), { acc, s in zip(acc, s).map { $0 ^ $1 } }).enumerated() {
                for byte in 0..<8 { buffer[index * 8 + byte] = UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * byte)) }
            }
            _ = try #require(buffer.count == 32)
        }
        let salt = Array(output.blob[10..<26])
        let master = SealedSecretsFormat.masterKey(buildKey: binaryOnly, runtimeShare: nil, salt: salt)
        #expect(master != SealedSecretsFormat.masterKey(buildKey: binaryOnly, runtimeShare: SecretBytes(utf8: share), salt: salt))
    }

    @Test func runtimeShareFromCredentialAndProvided() throws {
        let directory = try TemporaryDirectory()
        try directory.write("app-share", Array("credential share 0123456789\n".utf8))
        let json = """
        { "runtimeShare": { "source": "credential", "name": "app-share" },
          "secrets": [ { "name": "apiToken", "type": "String" } ] }
        """
        let output = try SecretsGenerator.generate(manifest: manifest(json),
                                                   sources: sources(["API_TOKEN": Self.token], credentials: directory.path))
        let withCredential = reader(output, runtimeShare: .credential("app-share"), environment: ["CREDENTIALS_DIRECTORY": directory.path])
        #expect(try withCredential.string("apiToken") == Self.token)
        let without = reader(output, runtimeShare: .credential("app-share"), environment: [:])
        #expect(throws: EmbeddedSecretsError.runtimeShareMissing("nothing in the systemd credential app-share in $CREDENTIALS_DIRECTORY")) {
            _ = try without.string("apiToken")
        }

        let provided = """
        { "typeName": "ProvidedSecrets", "runtimeShare": { "source": "provided", "name": "DEVICE_SHARE" },
          "secrets": [ { "name": "apiToken", "type": "String" } ] }
        """
        let deviceShare = try SecretBytes.random(count: 32)
        let shareText = Encoding.base64(deviceShare.withUnsafeBytes { Array($0) })
        let sealed = try SecretsGenerator.generate(manifest: manifest(provided),
                                                   sources: sources(["API_TOKEN": Self.token, "DEVICE_SHARE": shareText]))
        #expect(sealed.swiftSource.contains("static func provideRuntimeShare(_ share: SecretBytes)"))
        let providedReader = EmbeddedSecretsReader(blob: Encoding.base64(sealed.blob), shares: sealed.shares.map { share in { share } },
                                                   runtimeShare: .provided, namespace: "ProvidedSecrets")
        RuntimeShare.clear(for: "ProvidedSecrets")
        #expect(throws: EmbeddedSecretsError.self) { _ = try providedReader.string("apiToken") }
        RuntimeShare.provide(deviceShare, for: "ProvidedSecrets")
        defer { RuntimeShare.clear(for: "ProvidedSecrets") }
        #expect(try providedReader.string("apiToken") == Self.token)
    }

    @Test func unknownTypeNamesTheSecret() throws {
        let json = #"{ "secrets": [ { "name": "apiToken", "type": "Float" } ] }"#
        #expect(throws: SecretsManifestError.unknownType(secret: "apiToken", type: "Float")) { _ = try manifest(json) }
        #expect(SecretsManifestError.unknownType(secret: "apiToken", type: "Float").description
            == "the secret \"apiToken\" has the unknown type \"Float\"; use String, Int, Bool or Data")
    }

    @Test func duplicateNameNamesTheSecret() throws {
        let json = #"{ "secrets": [ { "name": "apiToken", "type": "String" }, { "name": "apiToken", "type": "Int" } ] }"#
        #expect(throws: SecretsManifestError.duplicateName("apiToken")) { _ = try manifest(json) }
    }

    @Test func missingValueNamesTheSecretNotAValue() throws {
        let parsed = try manifest(Self.manifestJSON)
        var environment = Self.environment
        environment["API_TOKEN"] = nil
        do {
            _ = try SecretsGenerator.generate(manifest: parsed, sources: sources(environment))
            Issue.record("generation without apiToken succeeded")
        } catch let error as SecretsManifestError {
            guard case let .missingValue(secret, lookedIn) = error else { Issue.record("\(error)"); return }
            #expect(secret == "apiToken")
            #expect(lookedIn.contains("environment variable API_TOKEN"))
            #expect(!error.description.contains(Self.environment["CLIENT_KEY"]!))
        }
    }

    @Test func invalidValueNeverEchoesTheValue() throws {
        var environment = Self.environment
        environment["RETRY_LIMIT"] = "hunter2-not-a-number"
        do {
            _ = try SecretsGenerator.generate(manifest: manifest(Self.manifestJSON), sources: sources(environment))
            Issue.record("an Int that is not a number was accepted")
        } catch let error as SecretsManifestError {
            #expect(error == .invalidValue(secret: "retryLimit", type: "Int", reason: "not a whole number in Int's range"))
            #expect(!error.description.contains("hunter2"))
        }
    }

    @Test func badNamesAndFieldsAreRefused() throws {
        #expect(throws: SecretsManifestError.invalidName("2fast")) { _ = try manifest(#"{ "secrets": [ { "name": "2fast", "type": "String" } ] }"#) }
        #expect(throws: SecretsManifestError.invalidName("class")) { _ = try manifest(#"{ "secrets": [ { "name": "class", "type": "String" } ] }"#) }
        #expect(throws: SecretsManifestError.invalidName("a-b")) { _ = try manifest(#"{ "secrets": [ { "name": "a-b", "type": "String" } ] }"#) }
        #expect(throws: SecretsManifestError.self) { _ = try manifest(#"{ "secrets": [ { "name": "x", "type": "String", "value": "oops" } ] }"#) }
        #expect(throws: SecretsManifestError.self) { _ = try manifest("not json") }
        #expect(throws: SecretsManifestError.self) { _ = try manifest(#"{ "secrets": {} }"#) }
    }

    @Test func dotEnvFilesAndEnvironments() throws {
        let directory = try TemporaryDirectory()
        try directory.write(".env", Array("""
        # comment
        export API_TOKEN="from \\"dotenv\\""
        RETRY_LIMIT=4 # trailing comment
        VERBOSE='false'
        CLIENT_KEY=hex:6b6579
        STAGING_API_TOKEN=staging-token
        """.utf8))
        try directory.write(".env.staging", Array("RETRY_LIMIT=9\n".utf8))
        let json = """
        { "secrets": [
          { "name": "apiToken", "type": "String", "environments": { "staging": "STAGING_API_TOKEN" } },
          { "name": "retryLimit", "type": "Int" }, { "name": "verbose", "type": "Bool" }, { "name": "clientKey", "type": "Data" } ] }
        """
        let parsed = try manifest(json)
        let plain = try SecretsGenerator.generate(manifest: parsed, sources: .standard(manifestDirectory: directory.path, environmentName: nil, environment: [:]))
        #expect(try reader(plain).string("apiToken") == "from \"dotenv\"")
        #expect(try reader(plain).int("retryLimit") == 4)
        #expect(try reader(plain).bool("verbose") == false)
        #expect(try reader(plain).secretBytes("clientKey").withUnsafeBytes { Array($0) } == Array("key".utf8))
        let staging = try SecretsGenerator.generate(manifest: parsed, sources: .standard(manifestDirectory: directory.path, environmentName: "staging", environment: [:]))
        #expect(try reader(staging).string("apiToken") == "staging-token")
        #expect(try reader(staging).int("retryLimit") == 9)
        // The process environment wins over files.
        let overridden = try SecretsGenerator.generate(manifest: parsed, sources: .standard(manifestDirectory: directory.path, environmentName: nil, environment: ["RETRY_LIMIT": "77"]))
        #expect(try reader(overridden).int("retryLimit") == 77)
        let statuses = try SecretsGenerator.check(manifest: parsed, sources: .standard(manifestDirectory: directory.path, environmentName: nil, environment: [:]))
        #expect(statuses.map(\.name) == ["apiToken", "retryLimit", "verbose", "clientKey"])
        #expect(statuses[0].origin == .envFile(path: directory.path + "/.env", variable: "API_TOKEN"))
    }

    @Test func screamingSnakeNames() {
        #expect(SecretsManifest.screamingSnake("apiToken") == "API_TOKEN")
        #expect(SecretsManifest.screamingSnake("clientID2") == "CLIENT_ID2")
        #expect(SecretsManifest.screamingSnake("oauthClientSecret") == "OAUTH_CLIENT_SECRET")
        #expect(SecretsManifest.screamingSnake("URLKey") == "URL_KEY")
    }

    /// The generated Swift file holds neither the secret nor its base64 or hex (either case).
    @Test func generatedSourceHoldsNoSecretEncoding() throws {
        let output = try SecretsGenerator.generate(manifest: manifest(Self.manifestJSON), sources: sources(Self.environment))
        for needle in SecretNeedles.forms(of: Array(Self.token.utf8)) {
            #expect(!SecretNeedles.contains(Array(output.swiftSource.utf8), needle), "found a form of the secret in the generated source")
        }
        #expect(!output.swiftSource.contains("key bytes"))
    }

    /// Compiles the generated file to an object with swiftc against the built modules, and
    /// searches the object's bytes for the secret, its base64 and its hex.
    @Test func compiledObjectHoldsNoSecret() throws {
        guard let swiftc = SecretNeedles.which("swiftc") else {
            print("skipped: swiftc is not on PATH")
            return
        }
        guard let modules = SecretNeedles.modulesDirectory() else {
            print("skipped: no built EmbeddedSecrets.swiftmodule next to the test bundle")
            return
        }
        let directory = try TemporaryDirectory()
        let output = try SecretsGenerator.generate(manifest: manifest(Self.manifestJSON), sources: sources(Self.environment))
        let source = directory.path + "/Generated.swift"
        try directory.write("Generated.swift", Array(output.swiftSource.utf8))
        let object = directory.path + "/Generated.o"
        let result = try SecretNeedles.run(swiftc, ["-parse-as-library", "-swift-version", "6", "-c", source, "-o", object,
                                                   "-module-name", "GeneratedSecrets", "-I", modules] + SecretNeedles.clangModuleFlags(modules))
        #expect(result.status == 0, "swiftc failed: \(result.output)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: object)))
        #expect(bytes.count > 1000)
        for needle in SecretNeedles.forms(of: Array(Self.token.utf8)) {
            #expect(!SecretNeedles.contains(bytes, needle), "found a form of the secret in the object file")
        }
        // The object does hold the sealed blob (as base64 text): the search looks in the right place.
        #expect(SecretNeedles.contains(bytes, Array(Encoding.base64(output.blob).utf8.prefix(24))))
    }
}

extension TemporaryDirectory {
    func write(_ name: String, _ bytes: [UInt8]) throws {
        try file(name, bytes)
    }
}

/// Byte searches for a secret in its plain, base64 and hex forms.
enum SecretNeedles {
    static func forms(of secret: [UInt8]) -> [[UInt8]] {
        let base64 = Encoding.base64(secret)
        // base64 of the secret at each of the three alignments, without the edge characters
        // that depend on neighbouring bytes.
        var forms = [secret, Array(Encoding.hex(secret).utf8), Array(Encoding.hex(secret).uppercased().utf8),
                     Array(base64.trimmingCharacters(in: CharacterSet(charactersIn: "=")).utf8.dropLast())]
        for shift in 1...2 {
            let shifted = Encoding.base64([UInt8](repeating: 0, count: shift) + secret)
            forms.append(Array(shifted.utf8.dropFirst(4).dropLast(4)))
        }
        forms.append(Array(Encoding.base64URL(secret).utf8.dropLast()))
        return forms
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first, Array(haystack[index..<index + needle.count]) == needle { return true }
            index += 1
        }
        return false
    }

    static func which(_ name: String) -> String? { ChildProcess.which(name) }

    /// The directory holding the built `EmbeddedSecrets.swiftmodule` (`.build/<config>/Modules`).
    static func modulesDirectory() -> String? {
        for directory in BuiltProducts.directories {
            for candidate in [directory + "/Modules", directory] {
                if FileManager.default.fileExists(atPath: candidate + "/EmbeddedSecrets.swiftmodule") { return candidate }
            }
        }
        return nil
    }

    /// `-Xcc -fmodule-map-file=` for every C module map the build wrote (swift-crypto's, CPlatform's).
    static func clangModuleFlags(_ modules: String) -> [String] {
        let build = URL(fileURLWithPath: modules).deletingLastPathComponent().path
        guard let enumerator = FileManager.default.enumerator(atPath: build) else { return [] }
        var flags = [String]()
        var visited = 0
        while let item = enumerator.nextObject() as? String, visited < 200_000 {
            visited += 1
            if item.hasSuffix("module.modulemap"), !item.contains("-tool.build/"), !item.hasPrefix("checkouts") {
                flags += ["-Xcc", "-fmodule-map-file=\(build)/\(item)"]
            }
        }
        return flags
    }

    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try ChildProcess.run(path, arguments, timeout: .seconds(300))
        return (result.status, result.text + result.errorText)
    }
}
