import Foundation
import TestSupport
import Testing
import Crypto
import Cipher
@testable import Age

/// The C2SP CCTV age test kit, read from `../shared/testdata/age` beside the package or `$AGE_TESTKIT_DIR`.
enum TestKit {
    static let directory: String = {
        if let dir = ProcessInfo.processInfo.environment["AGE_TESTKIT_DIR"], !dir.isEmpty { return dir }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.deletingLastPathComponent().appendingPathComponent("shared/testdata/age").path
    }()

    static let names: [String] = {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return entries.filter { !$0.contains(".") }.sorted()
    }()

    static var available: Bool { !names.isEmpty }

    struct Vector {
        var expect = ""
        var payloadHash = ""
        var identities: [String] = []
        var passphrases: [String] = []
        var armored = false
        var compressed = false
        var body: [UInt8] = []
    }

    static func load(_ name: String) throws -> Vector {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
        var vector = Vector()
        var index = 0
        while true {
            guard let end = data[index...].firstIndex(of: 0x0A) else { throw InflateError(description: "no blank line in \(name)") }
            let line = String(decoding: data[index..<end], as: UTF8.self)
            index = end + 1
            if line.isEmpty { break }
            guard let colon = line.range(of: ": ") else { continue }
            let key = String(line[..<colon.lowerBound]), value = String(line[colon.upperBound...])
            switch key {
            case "expect": vector.expect = value
            case "payload": vector.payloadHash = value
            case "identity": vector.identities.append(value)
            case "passphrase": vector.passphrases.append(value)
            case "armored": vector.armored = value == "yes"
            case "compressed": vector.compressed = value == "zlib"
            default: break
            }
        }
        vector.body = Array(data[index...])
        if vector.compressed { vector.body = try Inflate.zlib(vector.body) }
        return vector
    }

    static func identities(of vector: Vector) throws -> [any AgeIdentity] {
        var identities = [any AgeIdentity]()
        for text in vector.identities {
            if text.hasPrefix("AGE-SECRET-KEY-PQ-") { identities.append(try MLKEM768X25519Identity(text)) }
            else { identities.append(try X25519Identity(text)) }
        }
        for passphrase in vector.passphrases { identities.append(ScryptIdentity(passphrase: SecretBytes(utf8: passphrase))) }
        return identities
    }

    /// The test kit's name for an error's failure category.
    static func category(of error: AgeError) -> String {
        switch error {
        case .headerFailure: return "header failure"
        case .headerMACFailure: return "HMAC failure"
        case .noMatchingIdentity: return "no match"
        case .payloadFailure: return "payload failure"
        case .armorFailure: return "armor failure"
        default: return "other: \(error)"
        }
    }

    /// Decrypts a vector; returns the outcome category (as the test kit names it) and the released plaintext.
    static func run(_ vector: Vector, parallel: Bool = true) throws -> (String, [UInt8]) {
        let identities = try identities(of: vector)
        var released = [UInt8]()
        let decryptor = AgeDecryptor(identities: identities, armor: vector.armored ? .required : .auto, parallel: parallel) { released += $0 }
        let outcome: String
        do {
            // Feed in uneven pieces to exercise the incremental parsers.
            var offset = 0, step = 1
            while offset < vector.body.count {
                let end = min(vector.body.count, offset + step)
                try decryptor.update(vector.body[offset..<end])
                offset = end
                step = step * 3 + 7
            }
            try decryptor.finish()
            outcome = "success"
        } catch let error as AgeError {
            outcome = category(of: error)
        }
        return (outcome, released)
    }

    /// Decrypts a vector through the descriptor path (file in, file out: the chunk pipeline for
    /// a binary payload); the outcome category and the plaintext written.
    static func runThroughDescriptors(_ vector: Vector) throws -> (String, [UInt8]) {
        let identities = try identities(of: vector)
        let temporary = try TemporaryDirectory(prefix: "sf-cctv")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try Data(vector.body).write(to: URL(fileURLWithPath: dir + "/in"))
        let input = open(dir + "/in", O_RDONLY)
        let output = open(dir + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(input); close(output) }
        let outcome: String
        do throws(AgeError) {
            try Age.decrypt(from: input, to: output, identities: identities, armor: vector.armored ? .required : .auto)
            outcome = "success"
        } catch {
            outcome = category(of: error)
        }
        return (outcome, Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/out"))))
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}

@Suite("age test kit (C2SP CCTV)")
struct TestKitTests {
    @Test("test kit present", .enabled(if: TestKit.available, "age test kit not found at \(TestKit.directory): the kit is the age directory of the C2SP CCTV repository (143 vectors); put it there or point AGE_TESTKIT_DIR at it to run them"))
    func present() {
        #expect(TestKit.names.count == 143, "found \(TestKit.names.count) vectors in \(TestKit.directory)")
    }

    @Test("vector", arguments: TestKit.names)
    func vector(_ name: String) throws {
        let vector = try TestKit.load(name)
        let (outcome, released) = try TestKit.run(vector)
        #expect(outcome == vector.expect, "\(name): expected \(vector.expect), got \(outcome)")
        if vector.expect == "success" || vector.expect == "payload failure" {
            #expect(TestKit.hex(SHA256.hash(data: released)) == vector.payloadHash, "\(name): released plaintext hash differs")
        }
    }

    @Test("every vector gives the same outcome and plaintext through the descriptor pipeline", .enabled(if: TestKit.available))
    func descriptorPipeline() throws {
        for name in TestKit.names {
            let vector = try TestKit.load(name)
            let (outcome, written) = try TestKit.runThroughDescriptors(vector)
            #expect(outcome == vector.expect, "\(name): expected \(vector.expect), got \(outcome)")
            if vector.expect == "success" || vector.expect == "payload failure" {
                #expect(TestKit.hex(SHA256.hash(data: written)) == vector.payloadHash, "\(name): written plaintext hash differs")
            }
        }
    }

    @Test("every success vector decrypts the same sequentially and in parallel", .enabled(if: TestKit.available))
    func sequentialEqualsParallel() throws {
        for name in TestKit.names where name.hasPrefix("stream_") {
            let vector = try TestKit.load(name)
            let parallel = try TestKit.run(vector, parallel: true)
            let sequential = try TestKit.run(vector, parallel: false)
            #expect(parallel.0 == sequential.0 && parallel.1 == sequential.1, "\(name)")
        }
    }
}
