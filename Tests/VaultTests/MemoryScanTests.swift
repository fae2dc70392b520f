import Foundation
import TestSupport
import Testing
import Cipher
import Age
@testable import Vault
#if canImport(Glibc)
import Glibc
#endif

/// Memory hygiene, checked from outside: a child process sets up and unlocks a vault; this test
/// reads the child's writable memory through /proc/PID/mem and looks for every 16-byte window of
/// the application key, the passcode and the answers.
///
/// What it checks: after finalize and after unlock, no window of the passcode or of an answer is
/// anywhere in the child's writable memory (heap, stacks, anonymous mappings, data segments);
/// while unlocked the key is found (so the scan is known to work); after purge no window of the
/// key is left, nor of the data and state sub-keys or the passcode KEK. What it does not check:
/// answers that are not ASCII (normalized through String, see AnswerNormalization), and
/// programs that use the vault from several threads (the heap scrub reaches only the calling
/// thread's freed chunks; docs/VAULT.md, "Memory"). Read-only file mappings are skipped: a
/// secret cannot be written there.
@Suite("Vault memory hygiene")
struct MemoryScanTests {
    static var childPath: String? { BuiltProducts.path(of: "securefoundation-memcheck-child") }

    /// The child's path when the scan can run here (else records or prints why not).
    static func scannableChild() -> String? {
        guard let childPath else {
            Issue.record("securefoundation-memcheck-child was not built; run `swift build --build-tests`")
            return nil
        }
        guard access("/proc/self/mem", R_OK) == 0 else {
            print("skipping the memory scan: /proc is not available")
            return nil
        }
        return childPath
    }

    /// The child's arguments for a fixture with `passcode` and `answers` files in its root.
    static func childArguments(_ fixture: VaultFixture, _ extra: [String] = []) -> [String] {
        ["--home", fixture.home, "--device-key", fixture.root + "/device.key",
         "--passcode-file", fixture.root + "/passcode", "--answers-file", fixture.root + "/answers"] + extra
    }

    /// Writes `passcode`, three answers and `item` into the fixture's root, starts the child on
    /// them (with `extra` arguments) and has it set the vault up; the child said hello first.
    static func setUpChild(_ path: String, _ fixture: VaultFixture, passcode: String, item: String, _ extra: [String]) throws -> Child {
        try SecureFile.writeAtomically(Array(passcode.utf8), to: fixture.root + "/passcode")
        try SecureFile.writeAtomically(Array("a\nb\nc".utf8), to: fixture.root + "/answers")
        try SecureFile.writeAtomically(Array(item.utf8), to: fixture.root + "/item")
        let child = try Child(path: path, arguments: childArguments(fixture, ["--item-file", fixture.root + "/item"] + extra))
        #expect(child.readLine() == "pid \(child.process.processIdentifier)")
        try #require(child.send("setup").hasPrefix("key "))
        return child
    }

    /// A child process driven line by line.
    final class Child {
        let process: ChildProcess.Running
        private var consumed = 0

        init(path: String, arguments: [String]) throws {
            process = try ChildProcess.start(path, arguments, stdin: .pipe)
        }

        /// The next line the child wrote (waiting at most 60 s), or "eof".
        func readLine() -> String {
            var line: String?
            _ = process.waitForOutput { output in
                guard let newline = output[consumed...].firstIndex(of: 0x0A) else { return false }
                line = String(decoding: output[consumed..<newline], as: UTF8.self)
                consumed = newline + 1
                return true
            }
            return line ?? "eof"
        }

        func send(_ command: String) -> String {
            process.write(Array((command + "\n").utf8))
            return readLine()
        }

        /// Ends the child (SIGTERM) if it still runs and reaps it.
        func stop() {
            process.kill(SIGTERM)
            _ = try? process.wait(timeout: .seconds(30))
        }
    }

    /// The readable, writable regions of `pid` (where secrets can be), read through /proc/PID/mem.
    static func scan(pid: Int32, for secrets: [(name: String, bytes: [UInt8])]) throws -> [String] {
        // Read to the end: /proc files report size 0, and String(contentsOfFile:) returns only
        // the first read's worth (about 4 KiB, a third of a typical map), which hid most regions.
        let mapsHandle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps"))
        defer { try? mapsHandle.close() }
        let maps = String(decoding: try mapsHandle.readToEnd() ?? Data(), as: UTF8.self)
        var regions = 0
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else { throw CipherError.io("cannot open /proc/\(pid)/mem: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var windows: [(name: String, offset: Int, bytes: [UInt8])] = []
        for secret in secrets {
            precondition(secret.bytes.count >= 16)
            for offset in 0...(secret.bytes.count - 16) {
                windows.append((secret.name, offset, Array(secret.bytes[offset..<offset + 16])))
            }
        }
        var hits: [String] = []
        var scanned = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5 else { continue }
            let perms = Array(fields[1])
            guard perms.count >= 2, perms[0] == "r", perms[1] == "w" else { continue }
            let name = fields.count >= 6 ? String(fields[5]) : "[anonymous]"
            if name == "[vvar]" || name == "[vsyscall]" { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else { continue }
            let length = Int(end - start)
            var region = [UInt8](repeating: 0, count: length)
            let got = region.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, length, off_t(Int64(bitPattern: start))) }
            guard got > 0 else { continue }
            scanned += got
            regions += 1
            region.withUnsafeBytes { memory in
                for window in windows {
                    let found = window.bytes.withUnsafeBytes { needle in
                        Self.find(needle, in: UnsafeRawBufferPointer(rebasing: memory[0..<got]))
                    }
                    if let found {
                        let address = start + UInt64(UnsafeRawPointer(found) - memory.baseAddress!)
                        hits.append("\(window.name)[\(window.offset)..<\(window.offset + 16)] at 0x\(String(address, radix: 16)) in \(name)")
                    }
                }
            }
        }
        #expect(scanned > 1 << 20, "the scan read \(scanned) bytes of the child's memory")
        #expect(maps.hasSuffix("\n") && regions > 20, "the map of the child was read whole (\(regions) writable regions)")
        return hits
    }

    /// The first occurrence of `needle` in `haystack` (memchr for the first byte, then memcmp).
    static func find(_ needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        guard let base = haystack.baseAddress, let needleBase = needle.baseAddress, haystack.count >= needle.count else { return nil }
        let first = Int32(needle[0])
        var position = 0
        let last = haystack.count - needle.count
        while position <= last {
            guard let hit = memchr(base + position, first, last - position + 1) else { return nil }
            let candidate = UnsafeRawPointer(hit)
            if memcmp(candidate, needleBase, needle.count) == 0 { return candidate }
            position = candidate - base + 1
        }
        return nil
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            bytes.append(UInt8(String(bytes: [high, low], encoding: .ascii)!, radix: 16)!)
        }
        return bytes
    }

    @Test func keyPasscodeAndAnswersLeaveNoTraceAfterPurge() throws {
        guard let childPath = Self.scannableChild() else { return }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        // Distinctive secrets, lowercase ASCII so the normalized answers equal the given bytes.
        let passcode = "pass-" + (try SecureRandom.string(length: 27, alphabet: SecureRandom.alphanumeric))
        let answers = (1...3).map { _ in "answer-" + ((try? SecureRandom.string(length: 20, alphabet: Array("abcdefghijklmnopqrstuvwxyz"))) ?? "") }
        try SecureFile.writeAtomically(Array(passcode.utf8), to: fixture.root + "/passcode")
        try SecureFile.writeAtomically(Array(answers.joined(separator: "\n").utf8), to: fixture.root + "/answers")
        let secrets: [(String, [UInt8])] = [("passcode", Array(passcode.utf8))] + answers.enumerated().map { ("answer\($0.offset + 1)", Array($0.element.utf8)) }

        let child = try Child(path: childPath, arguments: Self.childArguments(fixture))
        defer { child.stop() }
        let hello = child.readLine()
        #expect(hello == "pid \(child.process.processIdentifier)")
        let pid = child.process.processIdentifier

        // Setup (temporaries, finalize): unlocked afterwards.
        let setupReply = child.send("setup")
        try #require(setupReply.hasPrefix("key "), "\(setupReply)")
        let key = Self.hex(String(setupReply.dropFirst(4)))
        try #require(key.count == 32)
        var hits = try Self.scan(pid: pid, for: [("key", key)])
        #expect(!hits.isEmpty, "the scanner finds the key while unlocked")
        hits = try Self.scan(pid: pid, for: secrets)
        #expect(hits.isEmpty, "after finalize: \(hits)")

        #expect(child.send("purge") == "locked")
        hits = try Self.scan(pid: pid, for: [("key", key)])
        #expect(hits.isEmpty, "after purge following setup: \(hits)")

        // Unlock with the passcode.
        #expect(child.send("unlock-passcode") == setupReply)
        #expect(!(try Self.scan(pid: pid, for: [("key", key)])).isEmpty)
        hits = try Self.scan(pid: pid, for: secrets)
        #expect(hits.isEmpty, "after unlock with the passcode: \(hits)")
        #expect(child.send("purge") == "locked")
        hits = try Self.scan(pid: pid, for: [("key", key)] + secrets)
        #expect(hits.isEmpty, "after purge following the passcode unlock: \(hits)")

        // Unlock with the answers.
        #expect(child.send("unlock-answers") == setupReply)
        hits = try Self.scan(pid: pid, for: secrets)
        #expect(hits.isEmpty, "after unlock with the answers: \(hits)")
        #expect(child.send("purge") == "locked")
        hits = try Self.scan(pid: pid, for: [("key", key)] + secrets)
        #expect(hits.isEmpty, "after purge following the answers unlock: \(hits)")
        // Keys derived from the application key and the passcode, used as AES keys: swift-crypto
        // frees their key schedules without zeroing; the vault zeroes this thread's recently
        // freed heap chunks after each use (HeapScrub), which this checks in a single-threaded child.
        #expect(child.send("unlock-passcode") == setupReply)
        #expect(child.send("encrypt") == "sealed")
        #expect(child.send("purge") == "locked")
        let appKey = SecretBytes(copying: key)
        let dataKey = KeyDerivation.hkdf(appKey, info: "securefoundation vault v1 data")
        let stateKey = KeyDerivation.hkdf(appKey, info: "securefoundation vault v1 state")
        let state = try #require(try VaultState.load(directory: fixture.home))
        let wrap = try #require(state.passcode)
        let passcodeKEK = try KeyDerivation.derive(password: SecretBytes(utf8: passcode), salt: Array(wrap.salt), parameters: wrap.kdf)
        let derived = [("data sub-key", dataKey), ("state sub-key", stateKey), ("passcode KEK", passcodeKEK)]
        hits = try Self.scan(pid: pid, for: derived.map { ($0.0, $0.1.withUnsafeBytes { Array($0) }) })
        #expect(hits.isEmpty, "derived keys after purge: \(hits)")
        _ = child.send("exit")
    }

    /// A keychain read and a sealed-data open leave no copy of the secret in the child's memory
    /// once the caller has wiped what it was given (swift-crypto's plaintext buffer used to be
    /// freed as it was, with the item's names and secret side by side).
    @Test func keychainReadsAndSealedOpenLeaveNoPlaintext() throws {
        guard let childPath = Self.scannableChild() else { return }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let passcode = "pass-" + (try SecureRandom.string(length: 27, alphabet: SecureRandom.alphanumeric))
        let item = "item-" + (try SecureRandom.string(length: 40, alphabet: SecureRandom.alphanumeric))
        let account = "account-" + (try SecureRandom.string(length: 24, alphabet: SecureRandom.alphanumeric))
        let child = try Self.setUpChild(childPath, fixture, passcode: passcode, item: item, ["--account", account])
        defer { child.stop() }
        let pid = child.process.processIdentifier
        let secret: [(String, [UInt8])] = [("item secret", Array(item.utf8))]
        // The names record as sealed: the account field followed, after the record, by the secret.
        let record: [(String, [UInt8])] = [("account and secret", Array(account.utf8.suffix(12)) + Array(item.utf8.prefix(4)))]

        #expect(child.send("keychain") == "read \(item.utf8.count)")
        var hits = try Self.scan(pid: pid, for: secret)
        #expect(hits.isEmpty, "after a keychain write and read: \(hits)")
        hits = try Self.scan(pid: pid, for: record)
        #expect(hits.isEmpty, "the item record after a keychain read: \(hits)")

        #expect(child.send("sealed-open") == "opened \(item.utf8.count)")
        hits = try Self.scan(pid: pid, for: secret)
        #expect(hits.isEmpty, "after a sealed-data open: \(hits)")
        _ = child.send("exit")
    }

    /// A protected file written, read whole and through a streaming reader, then closed, leaves
    /// no copy of its plaintext, its file key or its payload key in the child's memory.
    @Test func protectedFileLeavesNoKeyOrPlaintextAfterClose() throws {
        guard let childPath = Self.scannableChild() else { return }
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        let passcode = "pass-" + (try SecureRandom.string(length: 27, alphabet: SecureRandom.alphanumeric))
        let item = "file-" + (try SecureRandom.string(length: 40, alphabet: SecureRandom.alphanumeric))
        let file = fixture.root + "/protected"
        let child = try Self.setUpChild(childPath, fixture, passcode: passcode, item: item, ["--file", file])
        defer { child.stop() }
        let pid = child.process.processIdentifier
        #expect(child.send("protected-file") == "protected \(item.utf8.count)")

        // The file key and payload key, recovered here with the class identity.
        let manager = try CryptoManager(directory: fixture.home, deviceKeyProvider: FileDeviceKeyProvider(path: fixture.root + "/device.key"),
                                        policy: .minimum, attemptPolicy: .unlimited)
        try manager.unlock(passcode: SecretBytes(utf8: passcode))
        let table = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: fixture.home + "/protected-files.keys"))) as? [String: Any]
        let entry = try #require((table?["entries"] as? [[String: Any]])?.first { $0["name"] as? String == "complete" })
        let sealedText = try #require(entry["sealedIdentity"] as? String)
        let sealedIdentity = try #require(Data(base64Encoded: sealedText))
        let recipient = try #require(entry["recipient"] as? String)
        let classKey = try manager.classKey(for: .whenUnlocked)
        let raw = try Sealed.open(Array(sealedIdentity), with: SealingKey(key: classKey),
                                  context: Array("SecureFoundation protected-file identity v1\ncomplete\n\(recipient)".utf8))
        let identity = X25519Identity(privateKey: try .init(rawRepresentation: raw))
        let fd = open(file, O_RDONLY)
        defer { close(fd) }
        let header = try AgeFileHeader.read(fileDescriptor: fd)
        let fileKey = try #require(try identity.unwrap(stanzas: header.stanzas))
        var nonce = [UInt8](repeating: 0, count: 16)
        #expect(pread(fd, &nonce, 16, off_t(header.length)) == 16)
        let payloadKey = KeyDerivation.hkdf(fileKey, salt: nonce, info: "payload")
        // swift-crypto's ChaChaPoly.open returns each chunk's plaintext in a buffer it frees
        // unzeroed (Age now clears it), and frees its AEAD context, which holds the payload key,
        // unzeroed (ProtectedFiles scrubs this thread's freed chunks and stack on release).
        let secrets: [(String, [UInt8])] = [("plaintext", Array(item.utf8)), ("file key", fileKey.withUnsafeBytes { Array($0) }),
                                             ("payload key", payloadKey.withUnsafeBytes { Array($0) })]
        let hits = try Self.scan(pid: pid, for: secrets)
        #expect(hits.isEmpty, "after a protected file was written, read and closed: \(hits)")
        _ = child.send("exit")
    }
}
