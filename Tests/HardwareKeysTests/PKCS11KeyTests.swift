import Crypto
import CryptoExtras
import Foundation
import HardwareKeys
import TestSupport
import Testing
import X509

/// The tokens the in-process tests use. PKCS #11 is initialized once per process, and SoftHSM2
/// reads SOFTHSM2_CONF then: the in-process tests share one configuration (made before the
/// module is first loaded), each test with a token of its own. Tests that run the command line
/// get a token directory each (TokenTLSTests).
enum InProcessTokens {
    struct Fixture: @unchecked Sendable {
        let hsm: SoftHSM
        /// Each token's directory under the token directory, by label.
        let directories: [String: String]
        /// The software key imported into the `imported` token.
        let importedKey: P256.Signing.PrivateKey
        let pinFile: String
    }

    static let labels = ["ec", "rsa", "imported", "wrongpin", "gone", "listing", "ca256", "ca384", "carsa", "castore", "cagone"]

    static let shared: Result<Fixture, any Error>? = {
        guard SoftHSM.available() else { return nil }
        return Result {
            let hsm = try SoftHSM()
            var directories: [String: String] = [:]
            for label in labels {
                let before = Set(try FileManager.default.contentsOfDirectory(atPath: hsm.tokens))
                try hsm.makeToken(label)
                let after = Set(try FileManager.default.contentsOfDirectory(atPath: hsm.tokens))
                directories[label] = hsm.tokens + "/" + (try #require(after.subtracting(before).first))
            }
            try hsm.generate("ec", label: "tls", id: "01")
            try hsm.generate("rsa", keyType: "rsa:2048", label: "tls", id: "01")
            try hsm.generate("wrongpin", label: "tls", id: "01")
            try hsm.generate("gone", label: "tls", id: "01")
            try hsm.generate("listing", label: "one", id: "01")
            try hsm.generate("listing", label: "two", id: "02")
            // Certificate authorities (TokenAuthorityTests).
            try hsm.generate("ca256", label: "root", id: "01")
            try hsm.generate("ca384", keyType: "EC:secp384r1", label: "root", id: "01")
            try hsm.generate("carsa", keyType: "rsa:2048", label: "root", id: "01")
            try hsm.generate("castore", label: "root", id: "01")
            try hsm.generate("castore", label: "other", id: "02")
            try hsm.generate("cagone", label: "root", id: "01")
            let key = P256.Signing.PrivateKey()
            try hsm.importKey("imported", privatePEM: key.pemRepresentation, publicDER: Array(key.publicKey.derRepresentation),
                              label: "tls", id: "01")
            setenv("SOFTHSM2_CONF", hsm.configuration, 1)
            let pinFile = try hsm.directory.file("pin", SoftHSM.pin + "\n")
            return Fixture(hsm: hsm, directories: directories, importedKey: key, pinFile: pinFile)
        }
    }()

    static func fixture() throws -> Fixture? {
        guard let shared else { return nil }
        return try shared.get()
    }

    static func open(_ uri: String, pin: PKCS11PINSource? = nil) throws -> PKCS11PrivateKey {
        let fixture = try #require(try fixture())
        return try PKCS11PrivateKey(uri: PKCS11URI(uri), modulePath: SoftHSM.module, pin: pin ?? .file(fixture.pinFile))
    }
}

@Suite("PKCS #11 keys in SoftHSM2")
struct PKCS11KeyTests {
    @Test("an EC P-256 key signs in the token; the DER signature verifies with its public key")
    func ecdsa() throws {
        guard try InProcessTokens.fixture() != nil else { return }
        let key = try InProcessTokens.open("pkcs11:token=ec;object=tls;id=%01")
        #expect(key.algorithm == .p256)
        #expect(key.signatureSchemes == [.ecdsaSHA256])
        #expect(key.label == "tls" && key.id == [1])
        let publicKey = try #require(P256.Signing.PublicKey(key.publicKey))
        // Several threads at once: each signature uses a session of its own.
        let messages = (0..<16).map { Array("message \($0)".utf8) }
        let signatures = LockedResults()
        DispatchQueue.concurrentPerform(iterations: messages.count) { index in
            signatures.set(index, Result { try key.signature(for: messages[index], scheme: .ecdsaSHA256) })
        }
        for (index, message) in messages.enumerated() {
            let der = try signatures.get(index)
            let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
            #expect(publicKey.isValidSignature(signature, for: SHA256.hash(data: message)))
            #expect(!publicKey.isValidSignature(signature, for: SHA256.hash(data: message + [0])))
        }
        #expect(throws: HardwareKeyError.unsupportedKey("rsaPSSSHA256 with a p256 key")) {
            try key.signature(for: [1], scheme: .rsaPSSSHA256)
        }
    }

    @Test("an imported key is the same key: its public key matches the software original")
    func imported() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let key = try InProcessTokens.open("pkcs11:token=imported;object=tls")
        #expect(key.publicKey == Certificate.PublicKey(fixture.importedKey.publicKey))
        let signature = try P256.Signing.ECDSASignature(derRepresentation: key.signature(for: [1, 2, 3], scheme: .ecdsaSHA256))
        #expect(fixture.importedKey.publicKey.isValidSignature(signature, for: SHA256.hash(data: [1, 2, 3])))
    }

    @Test("an RSA key signs with PSS and PKCS #1 v1.5 in the token; both verify")
    func rsa() throws {
        guard try InProcessTokens.fixture() != nil else { return }
        let key = try InProcessTokens.open("pkcs11:token=rsa;object=tls")
        #expect(key.algorithm == .rsa(bits: 2048))
        let publicKey = try #require(_RSA.Signing.PublicKey(key.publicKey))
        let message = Array("to be signed".utf8)
        let pss = try key.signature(for: message, scheme: .rsaPSSSHA256)
        #expect(publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: pss), for: SHA256.hash(data: message), padding: .PSS))
        let pkcs1 = try key.signature(for: message, scheme: .rsaPKCS1SHA256)
        #expect(publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: pkcs1), for: SHA256.hash(data: message),
                                           padding: .insecurePKCS1v1_5))
        let pss384 = try key.signature(for: message, scheme: .rsaPSSSHA384)
        #expect(publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: pss384), for: SHA384.hash(data: message), padding: .PSS))
    }

    @Test("a wrong PIN fails with CKR_PIN_INCORRECT; a missing one says where a PIN comes from")
    func wrongPIN() throws {
        guard try InProcessTokens.fixture() != nil else { return }
        do {
            _ = try InProcessTokens.open("pkcs11:token=wrongpin;object=tls", pin: .secret(.init(utf8: "9999")))
            Issue.record("a wrong PIN was accepted")
        } catch let error as HardwareKeyError {
            #expect(error == .pkcs11(function: "C_Login", returnValue: 0xA0))
            #expect(error.returnValueName == "CKR_PIN_INCORRECT")
            #expect("\(error)".contains("CKR_PIN_INCORRECT: the PIN is wrong"))
        }
        #expect(throws: HardwareKeyError.pinUnavailable("the environment variable SF_TEST_NO_SUCH_PIN is not set")) {
            try InProcessTokens.open("pkcs11:token=wrongpin;object=tls", pin: .environment("SF_TEST_NO_SUCH_PIN"))
        }
        setenv("SF_TEST_TOKEN_PIN", SoftHSM.pin, 1)
        _ = try InProcessTokens.open("pkcs11:token=wrongpin;object=tls", pin: .environment("SF_TEST_TOKEN_PIN"))
    }

    @Test("no such token, no such key, several keys: typed errors")
    func notFound() throws {
        guard try InProcessTokens.fixture() != nil else { return }
        #expect(throws: HardwareKeyError.tokenNotFound("token=nope")) { try InProcessTokens.open("pkcs11:token=nope;object=tls") }
        #expect(throws: HardwareKeyError.keyNotFound("object=other on token ec")) { try InProcessTokens.open("pkcs11:token=ec;object=other") }
        #expect(throws: HardwareKeyError.ambiguousKey("any key")) { try InProcessTokens.open("pkcs11:token=listing") }
        #expect(throws: HardwareKeyError.invalidURI("type=cert does not name a private key")) {
            try InProcessTokens.open("pkcs11:token=ec;type=cert")
        }
    }

    @Test("the token's keys are listed with their flags: sensitive, not extractable")
    func listing() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let module = try PKCS11Module.load(path: SoftHSM.module)
        let keys = try module.keys(matching: PKCS11URI("pkcs11:token=listing"), pin: .file(fixture.pinFile))
        #expect(keys.map(\.label).sorted() == ["one", "two"])
        for key in keys {
            #expect(key.kind == "private" && key.keyType == "EC" && key.sensitive == true && key.extractable == false)
        }
        #expect(keys.first { $0.label == "one" }?.uri == "pkcs11:token=listing;object=one;id=%01;type=private")
        // The listed URI opens the key.
        let uri = try #require(keys.first { $0.label == "two" }?.uri)
        #expect(try InProcessTokens.open(uri).id == [2])
    }

    @Test("deleting the token's storage makes signing fail with a typed error; nothing signs instead")
    func tokenGone() throws {
        guard let fixture = try InProcessTokens.fixture() else { return }
        let key = try InProcessTokens.open("pkcs11:token=gone;object=tls")
        _ = try key.signature(for: [1], scheme: .ecdsaSHA256)
        try FileManager.default.removeItem(atPath: try #require(fixture.directories["gone"]))
        var failed: HardwareKeyError?
        // SoftHSM2 notices the missing directory at its next look at the token.
        for _ in 0..<3 {
            do {
                _ = try key.signature(for: [2], scheme: .ecdsaSHA256)
            } catch {
                failed = error
                break
            }
        }
        let error = try #require(failed, "a key whose token is gone still signed")
        guard case .pkcs11(let function, _) = error else { Issue.record("\(error)"); return }
        #expect(["C_Sign", "C_OpenSession", "C_FindObjects", "C_Login"].contains(function), "\(error)")
        #expect(key.lastFailure == error)
        #expect(throws: HardwareKeyError.tokenNotFound("token=gone")) { try InProcessTokens.open("pkcs11:token=gone;object=tls") }
    }
}

@Suite("PKCS #11 module loading rules")
struct PKCS11ModuleRuleTests {
    @Test("a module inside the data directory is refused, also through a symbolic link; so are relative and writable ones")
    func refused() throws {
        guard SoftHSM.available() else { return }
        let home = try TemporaryDirectory(prefix: "sf-home")
        let copy = home.path("libsofthsm2.so")
        try FileManager.default.copyItem(atPath: SoftHSM.resolvedModule, toPath: copy)
        chmod(copy, 0o755)
        func reason(_ path: String, refusing: [String]) -> String? {
            do {
                _ = try PKCS11Module.load(path: path, refusing: refusing)
                return nil
            } catch {
                guard case .moduleRefused(_, let reason) = error else { return "\(error)" }
                return reason
            }
        }
        #expect(reason(copy, refusing: [home.path])?.contains("inside the data directory") == true)
        // A link in the data directory to a system module: the path is still chosen by the directory's writer.
        try FileManager.default.createSymbolicLink(atPath: home.path("link.so"), withDestinationPath: SoftHSM.module)
        #expect(reason(home.path("link.so"), refusing: [home.path])?.contains("inside the data directory") == true)
        // A link outside pointing into the data directory.
        let elsewhere = try TemporaryDirectory(prefix: "sf-elsewhere")
        try FileManager.default.createSymbolicLink(atPath: elsewhere.path("module.so"), withDestinationPath: copy)
        #expect(reason(elsewhere.path("module.so"), refusing: [home.path])?.contains("inside the data directory") == true)
        #expect(reason("lib/libsofthsm2.so", refusing: []) == "the path is not absolute")
        chmod(copy, 0o775)
        #expect(reason(copy, refusing: [])?.contains("writable by group or others") == true)
        #expect(reason(home.path, refusing: []) == "it is not a regular file")
    }

    /// A 0755 directory of another user passed the old directory test (it only looked at the
    /// mode), yet that user can rename any file in it: a library of uid 65534 ran in a root
    /// process. Every directory up the path must be root's or this user's.
    @Test("a module in a directory another user owns is refused, at any depth")
    func directoryOfAnotherUser() throws {
        guard SoftHSM.available() else { return }
        guard geteuid() == 0 else {
            Issue.record("needs root to make a directory of another user (CI runs as root)")
            return
        }
        let base = try TemporaryDirectory(prefix: "sf-module")
        for nested in [false, true] {
            let theirs = base.path(nested ? "theirs-nested" : "theirs")
            let moduleDirectory = nested ? theirs + "/lib" : theirs
            try FileManager.default.createDirectory(atPath: moduleDirectory, withIntermediateDirectories: true)
            let module = moduleDirectory + "/libsofthsm2.so"
            try FileManager.default.copyItem(atPath: SoftHSM.resolvedModule, toPath: module)
            chmod(module, 0o755)
            chmod(theirs, 0o755)
            chmod(moduleDirectory, 0o755)
            #expect(chown(theirs, 65534, 65534) == 0)
            do {
                _ = try PKCS11Module.load(path: module)
                Issue.record("a module under a directory of uid 65534 was loaded (nested: \(nested))")
            } catch {
                guard case .moduleRefused(_, let reason) = error else { Issue.record("\(error)"); continue }
                #expect(reason.contains("is owned by uid 65534"), "\(reason)")
            }
        }
        // The same file in a directory of this user loads, through its descriptor.
        let ours = base.path("ours")
        try FileManager.default.createDirectory(atPath: ours, withIntermediateDirectories: true)
        chmod(ours, 0o755)
        try FileManager.default.copyItem(atPath: SoftHSM.resolvedModule, toPath: ours + "/libsofthsm2.so")
        chmod(ours + "/libsofthsm2.so", 0o755)
        let loaded = try PKCS11Module.load(path: ours + "/libsofthsm2.so")
        #expect(loaded.path == ours + "/libsofthsm2.so")
    }

    @Test("a library that is not a PKCS #11 module, or no file, cannot be loaded")
    func notAModule() throws {
        let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"]
            .first { FileManager.default.fileExists(atPath: $0) }
        if let libc {
            guard case .moduleUnavailable(_, let reason)? = (#expect(throws: HardwareKeyError.self) { try PKCS11Module.load(path: libc) }) else {
                Issue.record("libc was loaded as a module"); return
            }
            #expect(reason.contains("no C_GetFunctionList"))
        }
        guard case .moduleUnavailable? = (#expect(throws: HardwareKeyError.self) { try PKCS11Module.load(path: "/nonexistent/module.so") }) else {
            Issue.record("a missing module did not fail as unavailable"); return
        }
    }
}

/// Results written from several threads.
final class LockedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Int: Result<[UInt8], any Error>] = [:]
    func set(_ index: Int, _ result: Result<[UInt8], any Error>) { lock.withLock { results[index] = result } }
    func get(_ index: Int) throws -> [UInt8] { try lock.withLock { results[index] }!.get() }
}
