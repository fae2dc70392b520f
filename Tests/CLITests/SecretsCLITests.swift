import Foundation
import Testing
import Cipher

/// `securefoundation secrets generate | check | levels`.
@Suite struct SecretsCLITests {
    static let manifest = """
    { "version": 2, "secrets": [
      { "name": "apiToken", "type": "String" },
      { "name": "retryLimit", "type": "Int", "required": false } ] }
    """
    static let token = "cli-token-5f1b9c0e7a"

    /// Runs the CLI through `env`, without the variables these tests set (so a developer's own
    /// API_TOKEN or $CREDENTIALS_DIRECTORY cannot change the outcome), plus `environment`.
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> CLIRunner.Result {
        var command = ["-u", "API_TOKEN", "-u", "RETRY_LIMIT", "-u", "CREDENTIALS_DIRECTORY"]
        command += environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return try CLIRunner.runTool("/usr/bin/env", command + [CLIRunner.executable] + arguments)
    }

    @Test func generateWritesSwiftWithoutTheSecret() throws {
        let scratch = try ScratchDirectory()
        let manifest = try scratch.file("secrets.json", Array(Self.manifest.utf8))
        let output = scratch.path + "/Generated.swift"
        let result = try run(["secrets", "generate", "--manifest", manifest, "--output", output],
                                       environment: ["API_TOKEN": Self.token])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("sealed 1 of 2 secrets"))
        let source = String(decoding: try SecureFile.read(output), as: UTF8.self)
        #expect(source.contains("import EmbeddedSecrets"))
        #expect(source.contains("static let secretsVersion: Int = 2"))
        #expect(source.contains("static var apiToken: String"))
        #expect(source.contains("static var retryLimit: Int?"))
        #expect(!source.contains(Self.token))
        #expect(!source.contains(Encoding.hex(Array(Self.token.utf8))))
        #expect(!source.contains(String(Encoding.base64(Array(Self.token.utf8)).dropLast(4))))
        var info = stat()
        #expect(stat(output, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // Twice: different bytes.
        let again = try run(["secrets", "generate", "--manifest", manifest, "--output", "-"],
                                      environment: ["API_TOKEN": Self.token])
        #expect(again.status == 0)
        #expect(again.text != source)
    }

    @Test func generateMissingValueNamesTheSecret() throws {
        let scratch = try ScratchDirectory()
        let manifest = try scratch.file("secrets.json", Array(Self.manifest.utf8))
        let result = try run(["secrets", "generate", "--manifest", manifest, "--output", scratch.path + "/G.swift"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("the required secret \"apiToken\" has no value; looked in environment variable API_TOKEN"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/G.swift"))
    }

    @Test func generateRefusesBadManifests() throws {
        let scratch = try ScratchDirectory()
        let unknown = try scratch.file("unknown.json", Array(#"{ "secrets": [ { "name": "apiToken", "type": "Float" } ] }"#.utf8))
        let duplicate = try scratch.file("dup.json", Array(#"{ "secrets": [ { "name": "a", "type": "Int" }, { "name": "a", "type": "Int" } ] }"#.utf8))
        let first = try run(["secrets", "generate", "--manifest", unknown, "-o", "-"])
        #expect(first.status == 1)
        #expect(first.stderr.contains("the secret \"apiToken\" has the unknown type \"Float\""))
        let second = try run(["secrets", "generate", "--manifest", duplicate, "-o", "-"])
        #expect(second.status == 1)
        #expect(second.stderr.contains("the secret \"a\" is declared twice"))
    }

    @Test func checkListsNamesNeverValues() throws {
        let scratch = try ScratchDirectory()
        let manifest = try scratch.file("secrets.json", Array(Self.manifest.utf8))
        _ = try scratch.file(".env", Array("RETRY_LIMIT=5\n".utf8))
        let missing = try run(["secrets", "check", "--manifest", manifest])
        #expect(missing.status == 1)
        #expect(missing.text.contains("apiToken\tString\trequired\tMISSING\n"))
        #expect(missing.text.contains("retryLimit\tInt\toptional\tset (RETRY_LIMIT in \(scratch.path)/.env)\n"))
        let set = try run(["secrets", "check", "--manifest", manifest], environment: ["API_TOKEN": Self.token])
        #expect(set.status == 0)
        #expect(set.text.contains("apiToken\tString\trequired\tset (environment variable API_TOKEN)\n"))
        #expect(!set.text.contains(Self.token))
    }

    @Test func levelsShowsWhatStringsFinds() throws {
        let result = try run(["secrets", "levels"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.text.split(separator: "\n").map(String.init)
        let found = lines.filter { $0.hasPrefix("  strings finds the token:") }
        #expect(found.count == 4)
        #expect(found.first?.hasPrefix("  strings finds the token: YES") == true)
        #expect(found.dropFirst().allSatisfy { $0 == "  strings finds the token: no" })
        #expect(result.text.contains("XORs the two arrays: recovered the token"))
        #expect(result.text.contains("a changed byte is detected"))
        #expect(result.text.contains("reading without the share fails with runtimeShareMissing"))
    }

    @Test func levelsScansABinary() throws {
        let scratch = try ScratchDirectory()
        let holding = try scratch.file("holding.bin", [0, 1, 2] + Array("xx\(Self.token)yy".utf8) + [0])
        let clean = try scratch.file("clean.bin", try SecureRandom.bytes(4096))
        let bad = try run(["secrets", "levels", "--binary", holding, "--variable", "SF_TEST_TOKEN"],
                                    environment: ["SF_TEST_TOKEN": Self.token])
        #expect(bad.status == 1)
        #expect(bad.text.contains("FOUND: plain"))
        let good = try run(["secrets", "levels", "--binary", clean, "--variable", "SF_TEST_TOKEN"],
                                     environment: ["SF_TEST_TOKEN": Self.token])
        #expect(good.status == 0)
        #expect(good.text.contains("not found"))
    }

    /// The device share printed at build time opens secrets sealed with it when the program
    /// provides the same sub-key, and it is stable for one device key.
    @Test func deviceShareIsTheVaultSubkey() throws {
        let scratch = try ScratchDirectory()
        let deviceKey = scratch.path + "/keys/device.key"
        let first = try run(["secrets", "device-share", "--home", scratch.path + "/home", "--device-key", deviceKey])
        #expect(first.status == 0, "\(first.stderr)")
        let share = try Encoding.fromBase64(first.text.trimmingCharacters(in: .newlines))
        #expect(share.count == 32)
        let again = try run(["secrets", "device-share", "--home", scratch.path + "/home", "--device-key", deviceKey])
        #expect(again.stdout == first.stdout)
        let other = try run(["secrets", "device-share", "--home", scratch.path + "/home", "--device-key", deviceKey, "--purpose", "other"])
        #expect(other.status == 0 && other.stdout != first.stdout)
        // Build-time use: a manifest with a provided share seals with it.
        let manifest = try scratch.file("secrets.json", Array("""
        { "runtimeShare": { "source": "provided", "name": "APP_DEVICE_SHARE" },
          "secrets": [ { "name": "apiToken", "type": "String" } ] }
        """.utf8))
        let generated = try run(["secrets", "generate", "--manifest", manifest, "-o", "-"],
                                environment: ["API_TOKEN": Self.token, "APP_DEVICE_SHARE": first.text.trimmingCharacters(in: .newlines)])
        #expect(generated.status == 0, "\(generated.stderr)")
        #expect(generated.text.contains("static func provideRuntimeShare(_ share: SecretBytes)"))
        let bad = try run(["secrets", "generate", "--manifest", manifest, "-o", "-"],
                          environment: ["API_TOKEN": Self.token, "APP_DEVICE_SHARE": "not base64!"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("APP_DEVICE_SHARE"))
        #expect(!bad.stderr.contains("not base64!"))
    }
}
