import Foundation
import Testing
import Cipher
import Vault
import Age
import ProtectedFiles
@testable import UnlockAgent
import AgentWire

/// The agent unwraps protected files' keys for `age-plugin-securefoundation` under the class
/// rules, with the class identity never leaving it; what a hostile header or request makes it do.
@Suite("Unlock agent: file keys for the age plugin", .serialized)
struct AgentUnwrapTests {
    /// An identity that hands out a known file key (to check a key the agent returned).
    struct KnownKey: AgeIdentity {
        let key: SecretBytes
        func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? { SecretBytes(copying: key.withUnsafeBytes { Array($0) }) }
    }

    /// One protected file per class, written by a manager unlocked in the test process.
    static func writeFiles(_ fixture: AgentFixture) throws -> [FileProtectionClass: (path: String, stanzas: [AgeStanza])] {
        let manager = try fixture.manager()
        try manager.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        defer { manager.lock() }
        let files = ProtectedFiles(manager: manager)
        var result = [FileProtectionClass: (path: String, stanzas: [AgeStanza])]()
        for cls in FileProtectionClass.allValues {
            let path = fixture.root + "/\(cls.name).age"
            try files.write(Data("the \(cls.name) file".utf8), to: path, protection: cls)
            result[cls] = (path, try stanzas(path))
        }
        return result
    }

    static func stanzas(_ path: String) throws -> [AgeStanza] {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        return try AgeFileHeader.read(fileDescriptor: fd).stanzas
    }

    /// Whether `body` throws the agent's refusal carrying a protected file's error.
    static func isProtectedFileError(_ body: () throws -> SecretBytes) -> Bool {
        do {
            _ = try body()
            return false
        } catch {
            if case .protectedFile? = error as? AgentError { return true }
            return false
        }
    }

    static func plaintext(_ path: String, key: SecretBytes) throws -> String {
        let bytes = try Age.decrypt(Data(contentsOf: URL(fileURLWithPath: path)), identities: [KnownKey(key: key)])
        return String(decoding: bytes, as: UTF8.self)
    }

    static let complete = FileProtectionClass(name: "complete")!
    static let unlessOpen = FileProtectionClass(name: "completeUnlessOpen")!
    static let untilFirst = FileProtectionClass(name: "completeUntilFirstUserAuthentication")!
    static let none = FileProtectionClass(name: "none")!

    /// Never unlocked → only `none`; unlocked → every class (the key decrypts the file);
    /// locked again → the afterFirstUnlock classes and `none`, not complete/completeUnlessOpen.
    @Test func classRulesAcrossLockStates() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let files = try Self.writeFiles(fixture)
        let client = try fixture.start()
        for (cls, file) in files {
            switch cls.accessibility.protectionClass {
            case .whenUnlocked:
                #expect(throws: AgentError.protectedFile(.locked(cls, .locked))) { try client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil) }
            case .afterFirstUnlock:
                #expect(throws: AgentError.protectedFile(.locked(cls, .noFirstUnlockYet))) { try client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil) }
            case .always:
                let key = try client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil)
                #expect(try Self.plaintext(file.path, key: key) == "the \(cls.name) file")
            }
        }
        _ = try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        for (cls, file) in files {
            let key = try client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil)
            #expect(key.count == 16)
            #expect(try Self.plaintext(file.path, key: key) == "the \(cls.name) file")
            // The identity's own class is served too.
            #expect(try Self.plaintext(file.path, key: client.unwrapFileKey(stanzas: file.stanzas, onlyClass: cls)) == "the \(cls.name) file")
        }
        try client.lock()
        for (cls, file) in files {
            if cls.accessibility.protectionClass == .whenUnlocked {
                #expect(throws: AgentError.protectedFile(.locked(cls, .locked))) { try client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil) }
            } else {
                #expect(try Self.plaintext(file.path, key: client.unwrapFileKey(stanzas: file.stanzas, onlyClass: nil)) == "the \(cls.name) file")
            }
        }
    }

    /// A class stanza changed to a weaker class unwraps nothing (the file key is wrapped to the
    /// complete key); two class stanzas or a malformed one are tampering; an identity of one
    /// class does not serve another class's file; a file without class stanza (`age -r`) is
    /// tried with every class and, while locked, says the class that may be its.
    @Test func hostileHeaders() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let files = try Self.writeFiles(fixture)
        let client = try fixture.start()
        let complete = try #require(files[Self.complete]).stanzas
        let x25519 = complete.filter { $0.type == "X25519" }
        let classStanza = { (name: String) in AgeStanza(type: "sf-protection", arguments: ["1", name], body: []) }

        // Locked: relabelled as `none`, the none identity does not unwrap the complete key.
        #expect(throws: AgentError.protectedFile(.notProtectedFile(path: ProtectedFiles.stanzaSource, reason: "its file key is not wrapped to this vault's none key (written under another vault, or its class stanza was altered)"))) {
            try client.unwrapFileKey(stanzas: x25519 + [classStanza("none")], onlyClass: nil)
        }
        #expect(throws: AgentError.protectedFile(.tampered(path: ProtectedFiles.stanzaSource, reason: "the header has more than one class stanza"))) {
            try client.unwrapFileKey(stanzas: x25519 + [classStanza("none"), classStanza("complete")], onlyClass: nil)
        }
        for bad in [AgeStanza(type: "sf-protection", arguments: ["2", "none"], body: []),
                    AgeStanza(type: "sf-protection", arguments: ["1", "nonsense"], body: []),
                    AgeStanza(type: "sf-protection", arguments: ["1", "none"], body: [1])] {
            #expect(throws: AgentError.protectedFile(.tampered(path: ProtectedFiles.stanzaSource, reason: "the class stanza is malformed or of an unknown version"))) {
                try client.unwrapFileKey(stanzas: x25519 + [bad], onlyClass: nil)
            }
        }
        // A malformed X25519 stanza (a share of the wrong size) is tampering, never a crash.
        let badShare = AgeStanza(type: "X25519", arguments: ["AAAA"], body: x25519[0].body)
        #expect(Self.isProtectedFileError { try client.unwrapFileKey(stanzas: [badShare, classStanza("none")], onlyClass: nil) })
        // No X25519 stanza at all: not a protected file.
        #expect(Self.isProtectedFileError { try client.unwrapFileKey(stanzas: [classStanza("none")], onlyClass: nil) })

        // Without a class stanza, while locked: the complete key is the only one that could
        // open it, and it is locked, which is what is said.
        #expect(throws: AgentError.protectedFile(.locked(Self.complete, .locked))) { try client.unwrapFileKey(stanzas: x25519, onlyClass: nil) }
        _ = try client.unlock(passcode: SecretBytes(utf8: fixture.passcode))
        let path = try #require(files[Self.complete]).path
        #expect(try Self.plaintext(path, key: client.unwrapFileKey(stanzas: x25519, onlyClass: nil)) == "the complete file")
        // An identity of another class: refused with a message naming both.
        #expect(throws: AgentError.protectedFile(.invalidArgument("the file is of class complete, and this identity opens none files only; use an identity of class complete, or one without a class (`age -j securefoundation`)"))) {
            try client.unwrapFileKey(stanzas: complete, onlyClass: Self.none)
        }
        // Stanzas of a file from another vault (a fresh X25519 key): no match, not an error of this vault.
        let foreign = try X25519Identity.generate().recipient.wrap(fileKey: SecretBytes.random(count: 16))
        #expect(throws: AgentError.protectedFile(.notProtectedFile(path: ProtectedFiles.stanzaSource, reason: "its file key is not wrapped to this vault's complete key (written under another vault, or its class stanza was altered)"))) {
            try client.unwrapFileKey(stanzas: foreign + [classStanza("complete")], onlyClass: nil)
        }
    }

    /// Malformed requests are refused as protocol errors and the agent keeps serving; none
    /// crashes it (a bounded run of random and truncated requests).
    @Test func malformedRequestsAreRefused() throws {
        let fixture = try AgentFixture()
        defer { fixture.cleanup() }
        let files = try Self.writeFiles(fixture)
        let client = try fixture.start()
        let valid = try AgentProtocol.unwrapRequest(onlyClass: "none", stanzas: try #require(files[Self.none]).stanzas)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<300 {
            var request = valid
            switch round % 3 {
            case 0: request = Array(request.prefix(2 + Int.random(in: 0..<(request.count - 2), using: &generator)))
            case 1: request[2 + Int.random(in: 0..<(request.count - 2), using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
            default: request = Array(request.prefix(2)) + (0..<Int.random(in: 0..<200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
            let answer = try fixture.rawRequest(request)
            #expect(answer.first == 0 || answer.first == 1, "an answer, not a dropped connection, for round \(round)")
        }
        // Still serving.
        #expect(try Self.plaintext(try #require(files[Self.none]).path, key: client.unwrapFileKey(stanzas: try #require(files[Self.none]).stanzas, onlyClass: nil)) == "the none file")
        // The bounds of the wire form.
        let many = [AgeStanza](repeating: AgeStanza(type: "X25519", arguments: ["a"], body: []), count: AgentProtocol.maximumUnwrapStanzas + 1)
        #expect(throws: AgentError.self) { try AgentProtocol.unwrapRequest(onlyClass: nil, stanzas: many) }
        #expect(throws: AgentError.self) { try AgentProtocol.parseUnwrapRequest(valid + [0]) }
        let parsed = try AgentProtocol.parseUnwrapRequest(valid)
        #expect(parsed.onlyClass == "none" && parsed.stanzas == files[Self.none]?.stanzas)
    }

    /// The plugin identity: what it names, round trip, and what is refused.
    @Test func pluginIdentityEncoding() throws {
        #expect(try AgentAgePlugin.Identity(home: nil, protection: nil).encoded() == "AGE-PLUGIN-SECUREFOUNDATION-1VWKJ0H")
        let identity = AgentAgePlugin.Identity(home: "/srv/app data/é", protection: Self.untilFirst)
        let encoded = try identity.encoded()
        #expect(encoded.hasPrefix("AGE-PLUGIN-SECUREFOUNDATION-1"))
        #expect(try AgentAgePlugin.Identity(parsing: encoded) == identity)
        #expect(try AgentAgePlugin.Identity(parsing: encoded.lowercased()) == identity)
        #expect(try AgentAgePlugin.Identity(parsing: AgentAgePlugin.Identity(home: "/h", protection: nil).encoded()) == AgentAgePlugin.Identity(home: "/h", protection: nil))
        for bad: [UInt8] in [[2], [1], [1, 5, 0x61], [1, 3] + Array("bad".utf8), [1, 0] + Array("relative/path".utf8), [1, 0, 0x2f, 0]] {
            let text = try AgePlugin.identity(name: "securefoundation", data: bad)
            #expect(throws: ProtectedFileError.self) { try AgentAgePlugin.Identity(parsing: text) }
        }
        #expect(throws: ProtectedFileError.self) { try AgentAgePlugin.Identity(parsing: "AGE-PLUGIN-YUBIKEY-1QQQQQQ") }
        #expect(throws: ProtectedFileError.self) { try AgentAgePlugin.Identity(parsing: "AGE-SECRET-KEY-1QQQQ") }
    }

    /// The plugin in AgentWire (which the front program runs) names the classes as ProtectedFiles does.
    @Test func pluginClassNamesAreTheProtectedFilesClasses() {
        #expect(AgentPlugin.protectionClassNames.sorted() == FileProtectionClass.allValues.map(\.name).sorted())
        for cls in FileProtectionClass.allValues {
            let identity = AgentAgePlugin.Identity(home: "/h", protection: cls)
            #expect((try? AgentAgePlugin.Identity(parsing: identity.encoded())) == identity)
        }
    }

    /// An error answer reaches the plugin's client with its kind, and the agent's client with its type.
    @Test func wireErrorsKeepTheirTypeThroughAgentWire() {
        let wire = WireError(ProtectedFileError.locked(Self.untilFirst, .noFirstUnlockYet))
        #expect(wire.kind == "fileClassUnavailable" && wire.reason == "noFirstUnlockYet" && wire.accessibility == Self.untilFirst.name)
        #expect(AgentError(AgentWireError.answered(wire)) == .protectedFile(.locked(Self.untilFirst, .noFirstUnlockYet)))
        #expect(AgentError(AgentWireError.notRunning(socket: "/s")).description == AgentWireError.notRunning(socket: "/s").description)
        #expect(WireError(AgentWireError.timedOut("x")).kind == "other")
    }
}
