import Foundation
import Testing
@testable import EmbeddedSecretsGenerator
import EmbeddedSecrets

/// Every error the manifest's decoding gives, with its exact message.
@Suite struct ManifestDecodingTests {
    func parse(_ json: String) throws -> SecretsManifest {
        try SecretsManifest.parse(Array(json.utf8))
    }

    static let field: [(json: String, message: String)] = [
        (#"[1, 2]"#, "the top level must be an object"),
        (#""text""#, "the top level must be an object"),
        (#"{ "secrets": [], "extra": 1, "another": 2 }"#, #"unknown key "another" (known: version, typeName, runtimeShare, secrets)"#),
        (#"{ "version": -1, "secrets": [] }"#, "\"version\" must be a whole number 0...4294967295"),
        (#"{ "version": 4294967296, "secrets": [] }"#, "\"version\" must be a whole number 0...4294967295"),
        (#"{ "version": "1", "secrets": [] }"#, "\"version\" must be a whole number 0...4294967295"),
        (#"{ "version": 1.5, "secrets": [] }"#, "\"version\" must be a whole number 0...4294967295"),
        (#"{ "version": null, "secrets": [] }"#, "\"version\" must be a whole number 0...4294967295"),
        (#"{ "typeName": "secrets", "secrets": [] }"#, "\"typeName\" must be a Swift type name such as Secrets"),
        (#"{ "typeName": 3, "secrets": [] }"#, "\"typeName\" must be a Swift type name such as Secrets"),
        (#"{ "typeName": "My-Type", "secrets": [] }"#, "\"typeName\" must be a Swift type name such as Secrets"),
        (#"{ "runtimeShare": "APP", "secrets": [] }"#,
         #""runtimeShare" must be {"source": "environment" | "credential" | "provided", "name": NAME}"#),
        (#"{ "runtimeShare": { "source": "environment", "name": "" }, "secrets": [] }"#,
         #""runtimeShare" must be {"source": "environment" | "credential" | "provided", "name": NAME}"#),
        (#"{ "runtimeShare": { "source": "environment", "name": "a/b" }, "secrets": [] }"#,
         #""runtimeShare" must be {"source": "environment" | "credential" | "provided", "name": NAME}"#),
        (#"{ "runtimeShare": { "source": "environment" }, "secrets": [] }"#,
         #""runtimeShare" must be {"source": "environment" | "credential" | "provided", "name": NAME}"#),
        (#"{ "runtimeShare": { "source": "keyring", "name": "APP" }, "secrets": [] }"#,
         #"unknown run-time share source "keyring"; use environment, credential or provided"#),
        (#"{ "version": 1 }"#, "\"secrets\" must be a list"),
        (#"{ "secrets": {} }"#, "\"secrets\" must be a list"),
        (#"{ "secrets": null }"#, "\"secrets\" must be a list"),
        (#"{ "secrets": [ 1 ] }"#, "secret #1 is not an object"),
        (#"{ "secrets": [ { "name": "a", "type": "String" }, "b" ] }"#, "secret #2 is not an object"),
        (#"{ "secrets": [ { "type": "String" } ] }"#, "secret #1 has no \"name\""),
        (#"{ "secrets": [ { "name": 7, "type": "String" } ] }"#, "secret #1 has no \"name\""),
        (#"{ "secrets": [ { "name": "x", "type": "String", "value": "oops" } ] }"#, #"the secret "x" has the unknown key "value""#),
        (#"{ "secrets": [ { "name": "x", "type": "String", "required": "yes" } ] }"#, #""required" of the secret "x" must be true or false"#),
        (#"{ "secrets": [ { "name": "x", "type": "String", "variable": "NOT-A-NAME" } ] }"#,
         #""variable" of the secret "x" must be an environment variable name"#),
        (#"{ "secrets": [ { "name": "x", "type": "String", "variable": 5 } ] }"#,
         #""variable" of the secret "x" must be an environment variable name"#),
        (#"{ "secrets": [ { "name": "x", "type": "String", "environments": [ "A" ] } ] }"#,
         #""environments" of the secret "x" must map environment names to variable names"#),
        (#"{ "secrets": [ { "name": "x", "type": "String", "environments": { "staging": "S_X", "prod": "bad name" } } ] }"#,
         #""environments.prod" of the secret "x" must be an environment variable name"#),
    ]

    @Test("each invalid field gives its message", arguments: 0..<field.count)
    func invalidField(_ index: Int) throws {
        let (json, message) = Self.field[index]
        #expect(throws: SecretsManifestError.invalidField(message)) { _ = try parse(json) }
        #expect(SecretsManifestError.invalidField(message).description == "the secrets manifest is invalid: \(message)")
    }

    @Test("too many secrets are refused before any is read")
    func tooMany() throws {
        let entries = (0...SealedSecretsFormat.maximumCount).map { "{ \"name\": \"s\($0)\", \"type\": \"String\" }" }
        let json = "{ \"secrets\": [ \(entries.joined(separator: ", ")) ] }"
        #expect(throws: SecretsManifestError.invalidField("\(entries.count) secrets; at most \(SealedSecretsFormat.maximumCount)")) {
            _ = try parse(json)
        }
    }

    @Test("a type that is not a string is named in the error")
    func typeNotAString() throws {
        #expect(throws: SecretsManifestError.unknownType(secret: "x", type: "(none)")) { _ = try parse(#"{ "secrets": [ { "name": "x" } ] }"#) }
        #expect(throws: SecretsManifestError.unknownType(secret: "x", type: "5")) { _ = try parse(#"{ "secrets": [ { "name": "x", "type": 5 } ] }"#) }
        #expect(throws: SecretsManifestError.unknownType(secret: "x", type: "true")) { _ = try parse(#"{ "secrets": [ { "name": "x", "type": true } ] }"#) }
        #expect(throws: SecretsManifestError.unknownType(secret: "x", type: "null")) { _ = try parse(#"{ "secrets": [ { "name": "x", "type": null } ] }"#) }
        #expect(throws: SecretsManifestError.unknownType(secret: "x", type: "(not a string)")) {
            _ = try parse(#"{ "secrets": [ { "name": "x", "type": ["String"] } ] }"#)
        }
    }

    @Test("names: the rules, the generated type's name, and a repeat before the repeat's type is read")
    func names() throws {
        #expect(throws: SecretsManifestError.invalidName("_sfesKey")) { _ = try parse(#"{ "secrets": [ { "name": "_sfesKey", "type": "String" } ] }"#) }
        #expect(throws: SecretsManifestError.invalidName("Secrets")) { _ = try parse(#"{ "secrets": [ { "name": "Secrets", "type": "String" } ] }"#) }
        #expect(throws: SecretsManifestError.invalidName(String(repeating: "a", count: 65))) {
            _ = try parse("{ \"secrets\": [ { \"name\": \"\(String(repeating: "a", count: 65))\", \"type\": \"String\" } ] }")
        }
        #expect(throws: SecretsManifestError.duplicateName("a")) {
            _ = try parse(#"{ "secrets": [ { "name": "a", "type": "String" }, { "name": "a", "type": "Float" } ] }"#)
        }
    }

    @Test("text that is not JSON is invalidJSON")
    func notJSON() throws {
        for text in ["not json", "{", "", "{ \"secrets\": [ } "] {
            do {
                _ = try parse(text)
                Issue.record("\(text) parsed")
            } catch let error as SecretsManifestError {
                guard case .invalidJSON = error else { Issue.record("\(text): \(error)"); continue }
                #expect(error.description.hasPrefix("the secrets manifest is not valid JSON: "))
            }
        }
    }

    @Test("a full manifest decodes to its values and defaults")
    func fullManifest() throws {
        let parsed = try parse("""
        { "$schema": "x", "comment": "c", "version": 7, "typeName": "AppSecrets",
          "runtimeShare": { "source": "credential", "name": "app-share" },
          "secrets": [
            { "name": "apiToken", "type": "String", "comment": "c" },
            { "name": "retryLimit", "type": "Int", "required": false, "variable": "RETRIES",
              "environments": { "staging": "STAGING_RETRIES" } }
          ] }
        """)
        #expect(parsed.version == 7)
        #expect(parsed.typeName == "AppSecrets")
        #expect(parsed.runtimeShare == RuntimeShareSpec(source: .credential("app-share"), name: "app-share"))
        #expect(parsed.secrets == [
            SecretSpec(name: "apiToken", type: .string, required: true, variable: "API_TOKEN", environments: [:]),
            SecretSpec(name: "retryLimit", type: .int, required: false, variable: "RETRIES", environments: ["staging": "STAGING_RETRIES"]),
        ])
        let defaults = try parse(#"{ "secrets": [] }"#)
        #expect(defaults.version == 1 && defaults.typeName == "Secrets" && defaults.runtimeShare == nil && defaults.secrets.isEmpty)
    }
}
