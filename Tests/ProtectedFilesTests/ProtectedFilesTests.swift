import Foundation
import Testing
import Cipher
import Age
import Vault
@testable import ProtectedFiles

@Suite("Protected files")
struct ProtectedFilesTests {
    /// Every class × {unlocked, locked after an unlock} × {read, write}: the exact outcome.
    @Test func classMatrixUnlockedAndLocked() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let plaintext = Array("matrix plaintext".utf8)
        for cls in FileProtectionClass.allValues {
            let path = fixture.path("unlocked-\(cls.name)")
            try files.write(plaintext, to: path, protection: cls)
            #expect(try files.read(at: path) == plaintext, "\(cls.name) unlocked read")
            #expect(try files.protection(ofItemAt: path) == cls)
        }
        manager.lock()
        for cls in FileProtectionClass.allValues {
            let existing = fixture.path("unlocked-\(cls.name)")
            let path = fixture.path("locked-\(cls.name)")
            switch cls.protection {
            case .complete:
                #expect(throws: ProtectedFileError.locked(cls, .locked)) { try files.write(plaintext, to: path, protection: cls) }
                #expect(throws: ProtectedFileError.locked(cls, .locked)) { try files.read(at: existing) }
                #expect(!FileManager.default.fileExists(atPath: path))
            case .completeUnlessOpen:
                try files.write(plaintext, to: path, protection: cls)
                #expect(throws: ProtectedFileError.locked(cls, .locked)) { try files.read(at: existing) }
                #expect(throws: ProtectedFileError.locked(cls, .locked)) { try files.read(at: path) }
                #expect(try files.protection(ofItemAt: path) == cls)
            case .completeUntilFirstUserAuthentication, .none:
                try files.write(plaintext, to: path, protection: cls)
                #expect(try files.read(at: existing) == plaintext, "\(cls.name) locked read")
                #expect(try files.read(at: path) == plaintext, "\(cls.name) locked read of a locked write")
            }
        }
        try manager.unlock(passcode: fixture.passcode)
        for cls in FileProtectionClass.allValues where cls.protection == .completeUnlessOpen {
            #expect(try files.read(at: fixture.path("locked-\(cls.name)")) == plaintext)
        }
    }

    /// A vault whose key pairs were never made (set up, locked, no class used): a locked
    /// completeUnlessOpen write says that the pair is missing and how to make it, not that the
    /// vault is locked; after `prepareClasses()` while unlocked the same write works locked.
    @Test func lockedWriteBeforeAnyKeyPairSaysWhatToDo() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        manager.lock()
        let path = fixture.path("early")
        for cls in FileProtectionClass.allValues where cls.protection == .completeUnlessOpen {
            let error = #expect(throws: ProtectedFileError.noKeyPairYet(cls)) { try files.write(Array("x".utf8), to: path, protection: cls) }
            #expect(error.map { "\($0)" }?.contains("prepareClasses()") == true)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ProtectedFileError.locked(.complete, .locked)) { try files.write(Array("x".utf8), to: path, protection: .complete) }
        try manager.unlock(passcode: fixture.passcode)
        #expect(try files.prepareClasses().count == 8)
        manager.lock()
        try files.write(Array("x".utf8), to: path, protection: .completeUnlessOpen)
    }

    /// Written while locked as completeUnlessOpen, upgraded to complete after the unlock, then
    /// unreadable after the next lock.
    @Test func writtenLockedUpgradedThenUnreadableLocked() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        #expect(try files.prepareClasses().count == 8)
        manager.lock()
        try FileManager.default.createDirectory(atPath: fixture.path("images/deep"), withIntermediateDirectories: true)
        let photo = fixture.path("images/deep/photo.jpg")
        let other = fixture.path("images/other")
        let plain = fixture.path("images/plain.txt")
        try files.write(Array("photo".utf8), to: photo, protection: .completeUnlessOpen)
        try files.write(Array("other".utf8), to: other, protection: .none)
        try writeBytes(Array("not protected".utf8), plain)
        // A file whose class stanza names no class: a failure, not silently skipped.
        let broken = fixture.path("images/broken")
        try files.write(Array("broken".utf8), to: broken, protection: .completeUnlessOpen)
        let text = String(decoding: try bytes(broken), as: UTF8.self)
        #expect(text.contains("-> sf-protection 1 completeUnlessOpen\n"))
        var damaged = try bytes(broken)
        let at = try #require(find(Array("completeUnlessOpen\n".utf8), in: damaged))
        damaged[at] = UInt8(ascii: "x")
        try writeBytes(damaged, broken)
        #expect(throws: ProtectedFileError.locked(.completeUnlessOpen, .locked)) { try files.read(at: photo) }
        try manager.unlock(passcode: fixture.passcode)
        let report = try files.upgradeItems(inDirectory: fixture.path("images"), from: .completeUnlessOpen, to: .complete)
        #expect(report.changed == [photo])
        #expect(report.skipped == 2)
        #expect(report.failures.map(\.path) == [broken])
        #expect(report.failures.first?.error == .tampered(path: broken, reason: "the class stanza is malformed or of an unknown version"))
        #expect(try files.protection(ofItemAt: photo) == .complete)
        #expect(try files.protection(ofItemAt: other) == .none)
        #expect(try files.read(at: photo) == Array("photo".utf8))
        manager.lock()
        #expect(throws: ProtectedFileError.locked(.complete, .locked)) { try files.read(at: photo) }
        #expect(try files.read(at: other) == Array("other".utf8))
    }

    /// A class change rewrites only the header: the nonce and payload bytes are the same.
    @Test func setProtectionRewritesOnlyTheHeader() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let path = fixture.path("data")
        let plaintext = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try files.write(plaintext, to: path, protection: .completeUntilFirstUserAuthentication)
        let before = try bytes(path)
        let fd = open(path, O_RDONLY)
        let oldLength = try AgeFileHeader.read(fileDescriptor: fd).length
        close(fd)
        try files.setProtection(.completeThisDeviceOnly, ofItemAt: path)
        let after = try bytes(path)
        let fd2 = open(path, O_RDONLY)
        let newLength = try AgeFileHeader.read(fileDescriptor: fd2).length
        close(fd2)
        #expect(Array(before[Int(oldLength)...]) == Array(after[Int(newLength)...]))
        #expect(try files.protection(ofItemAt: path) == .completeThisDeviceOnly)
        #expect(try files.read(at: path) == plaintext)
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.files).filter { $0.hasPrefix(".sf-") }
        #expect(leftovers.isEmpty)
    }

    /// The layout FORMATS.md gives: the X25519 stanza, then `-> sf-protection 1 NAME` with an
    /// empty body, then the MAC line; the key table is format 1 JSON, mode 0600.
    @Test func headerAndKeyTableLayout() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let path = fixture.path("layout")
        try files.write(Array("layout".utf8), to: path, protection: .completeUntilFirstUserAuthenticationThisDeviceOnly)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let header = try AgeFileHeader.read(fileDescriptor: fd)
        #expect(header.stanzas.map(\.type) == ["X25519", "sf-protection"])
        #expect(header.stanzas[0].arguments.count == 1 && header.stanzas[0].body.count == 32)
        #expect(header.stanzas[1].arguments == ["1", "completeUntilFirstUserAuthenticationThisDeviceOnly"])
        #expect(header.stanzas[1].body.isEmpty)
        let text = String(decoding: try bytes(path).prefix(Int(header.length)), as: UTF8.self)
        #expect(text.hasPrefix("age-encryption.org/v1\n-> X25519 "))
        #expect(text.contains("\n-> sf-protection 1 completeUntilFirstUserAuthenticationThisDeviceOnly\n\n--- "))
        let tablePath = fixture.home + "/protected-files.keys"
        var info = stat()
        #expect(lstat(tablePath, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let table = try JSONDecoder().decode(ClassKeyTableFile.self, from: Data(try bytes(tablePath)))
        #expect(table.format == 3 && table.generation != nil && table.retired.isEmpty)
        #expect(Set(table.entries.map(\.name)) == Set(FileProtectionClass.allValues.map(\.name)))
        #expect(table.entries.allSatisfy { $0.recipient.hasPrefix("age1") && !$0.mac.isEmpty })
    }

    /// A key table readable by others is refused with a permission error naming the fix.
    @Test func keyTableWithLoosePermissionsIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        try files.write(Array("x".utf8), to: fixture.path("x"), protection: .none)
        let tablePath = fixture.home + "/protected-files.keys"
        chmod(tablePath, 0o644)
        #expect(throws: ProtectedFileError.permission(path: tablePath, reason: "its mode 644 lets group or others in; fix it with: chmod 600 \(tablePath)")) {
            try files.read(at: fixture.path("x"))
        }
        chmod(tablePath, 0o600)
        #expect(try files.read(at: fixture.path("x")) == Array("x".utf8))
    }

    /// Managers racing to create the key pairs (each its own descriptor on the lock file) end
    /// with one key pair per class: every file written by any of them opens.
    @Test func concurrentKeyPairCreationAgrees() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let first = try fixture.setUp()
        let managers = [first] + (try (0..<3).map { _ in try fixture.manager() })
        for manager in managers.dropFirst() { try manager.unlock(passcode: fixture.passcode) }
        let recipients = Protected([String]())
        DispatchQueue.concurrentPerform(iterations: managers.count) { index in
            let files = ProtectedFiles(manager: managers[index])
            if let recipient = try? files.recipient(for: .complete).description {
                recipients.withLock { $0.append(recipient) }
            }
            try? files.write(Array("from \(index)".utf8), to: fixture.path("f\(index)"), protection: .completeUnlessOpen)
        }
        #expect(recipients.withLock { Set($0).count == 1 && $0.count == managers.count })
        let files = ProtectedFiles(manager: first)
        for index in managers.indices { #expect(try files.read(at: fixture.path("f\(index)")) == Array("from \(index)".utf8)) }
    }

    /// Changing the class stanza, the wrapped key or the payload is refused as tampering.
    @Test func tamperingIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let path = fixture.path("victim")
        try files.write(Array(repeating: 7, count: 100_000), to: path, protection: .none)
        try files.write(Array("x".utf8), to: fixture.path("make-complete"), protection: .complete)
        let original = try bytes(path)
        let text = String(decoding: original.prefix(400), as: UTF8.self)

        // The class stanza says complete while the key is wrapped to none's recipient.
        var relabelled = original
        let stanza = Array("-> sf-protection 1 none\n".utf8)
        let index = try #require(find(stanza, in: original))
        relabelled.replaceSubrange(index..<(index + stanza.count), with: Array("-> sf-protection 1 complete\n".utf8))
        try writeBytes(relabelled, path)
        #expect(try files.protection(ofItemAt: path) == .complete)
        #expect(throws: ProtectedFileError.self) { try files.read(at: path) }
        do { _ = try files.read(at: path) } catch {
            guard case .tampered(path: path, reason: _) = error else { Issue.record("expected tampered, got \(error)"); return }
        }

        // The class stanza is removed or duplicated: the MAC no longer matches, or two stanzas.
        var doubled = original
        doubled.insert(contentsOf: stanza + [0x0A], at: index)
        try writeBytes(doubled, path)
        expectTampered(path) { _ = try files.read(at: path) }
        var removed = original
        removed.removeSubrange(index..<(index + stanza.count + 1))
        try writeBytes(removed, path)
        // Without a class stanza the file is matched against the class identities: none's
        // opens the key, and the MAC, which covered the stanza, fails.
        expectTampered(path) { _ = try files.read(at: path) }

        // A stanza line made unparsable in a file that starts as an age file: tampered.
        var garbled = original
        garbled[index + 3] = 0x0A
        try writeBytes(garbled, path)
        expectTampered(path) { _ = try files.read(at: path) }

        // A byte of the wrapped file key (X25519 stanza body) changed.
        let bodyLine = text.split(separator: "\n")[2]
        var wrapped = original
        let bodyIndex = try #require(find(Array(bodyLine.utf8), in: original))
        wrapped[bodyIndex + 5] = wrapped[bodyIndex + 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try writeBytes(wrapped, path)
        expectTampered(path) { _ = try files.read(at: path) }

        // A payload byte changed.
        var payload = original
        payload[payload.count - 100] ^= 0x01
        try writeBytes(payload, path)
        expectTampered(path) { _ = try files.read(at: path) }

        // The header MAC changed.
        var mac = original
        let macIndex = try #require(find(Array("--- ".utf8), in: original)) + 6
        mac[macIndex] = mac[macIndex] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try writeBytes(mac, path)
        expectTampered(path) { _ = try files.read(at: path) }

        try writeBytes(original, path)
        #expect(try files.read(at: path) == Array(repeating: 7, count: 100_000))
    }

    /// A data directory copied to a home with another device key opens nothing thisDeviceOnly.
    @Test func thisDeviceOnlyFailsWithAnotherDeviceKey() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        try files.write(Array("bound".utf8), to: fixture.path("bound"), protection: .noneThisDeviceOnly)
        try files.write(Array("free".utf8), to: fixture.path("free"), protection: .none)
        let copy = fixture.root + "/copy"
        let (status, _, error) = try run("/bin/cp", ["-a", fixture.home, copy])
        #expect(status == 0, "\(error)")
        let elsewhere = ProtectedFiles(manager: try fixture.manager(deviceKey: try SecretBytes.random(count: 32), home: copy))
        #expect(throws: ProtectedFileError.wrongDevice(.noneThisDeviceOnly, path: fixture.path("bound"))) {
            try elsewhere.read(at: fixture.path("bound"))
        }
        #expect(try elsewhere.read(at: fixture.path("free")) == Array("free".utf8))
    }

    /// A recipient swapped in the key table is not used: its device MAC (present, format 3) does
    /// not match, which is refused as an altered entry, locked or unlocked.
    @Test func swappedRecipientInKeyTableIsRefused() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let tablePath = fixture.home + "/protected-files.keys"
        let genuine = try files.recipient(for: .completeUnlessOpen).description
        let attacker = X25519Identity.generate().recipient.description
        let table = String(decoding: try bytes(tablePath), as: UTF8.self).replacingOccurrences(of: genuine, with: attacker)
        try writeBytes(Array(table.utf8), tablePath)
        manager.lock()
        let error = #expect(throws: ProtectedFileError.self) {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        guard case .keyTable(let why)? = error, why.contains("does not verify") else {
            Issue.record("expected an altered-entry refusal, got \(String(describing: error))")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out")))
        try manager.unlock(passcode: fixture.passcode)
        #expect(throws: ProtectedFileError.self) {
            try files.write(Array("secret".utf8), to: fixture.path("out"), protection: .completeUnlessOpen)
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out")))
    }

    /// Streaming reader: a complete file's next read after lock fails; a completeUnlessOpen
    /// file open before the lock stays readable until closed.
    @Test func openReadersAcrossLock() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let plaintext = (0..<300_000).map { UInt8(truncatingIfNeeded: $0) }
        try files.write(plaintext, to: fixture.path("c"), protection: .complete)
        try files.write(plaintext, to: fixture.path("u"), protection: .completeUnlessOpen)
        let complete = try files.openForReading(at: fixture.path("c"))
        let unlessOpen = try files.openForReading(at: fixture.path("u"))
        #expect(complete.size == 300_000)
        #expect(try complete.read(upToCount: 1000) == Array(plaintext[0..<1000]))
        #expect(try unlessOpen.read(offset: 200_000, count: 10) == Array(plaintext[200_000..<200_010]))
        manager.lock()
        #expect(throws: ProtectedFileError.locked(.complete, .locked)) { try complete.read(upToCount: 10) }
        #expect(complete.isClosed)
        #expect(try unlessOpen.read(offset: 299_990, count: 100) == Array(plaintext[299_990...]))
        unlessOpen.close()
        #expect(throws: ProtectedFileError.invalidArgument("\(fixture.path("u")) is closed")) { try unlessOpen.read(upToCount: 1) }
        #expect(throws: ProtectedFileError.locked(.completeUnlessOpen, .locked)) { try files.openForReading(at: fixture.path("u")) }
    }

    /// Streams from a descriptor and to a file; Codable values; a file that is not protected.
    @Test func streamsValuesAndPlainFiles() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let source = fixture.path("source")
        let plaintext = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try writeBytes(plaintext, source)
        let input = open(source, O_RDONLY)
        try files.write(from: input, to: fixture.path("stream"), protection: .completeUntilFirstUserAuthentication)
        close(input)
        try files.read(at: fixture.path("stream"), toFile: fixture.path("back"))
        #expect(try bytes(fixture.path("back")) == plaintext)
        struct Note: Codable, Equatable { var title: String; var count: Int }
        try files.write(value: Note(title: "t", count: 3), to: fixture.path("note"), protection: .complete)
        #expect(try files.read(Note.self, at: fixture.path("note")) == Note(title: "t", count: 3))
        do { _ = try files.read(at: source); Issue.record("a plain file was read") } catch {
            guard case .notProtectedFile(path: source, reason: _) = error else { Issue.record("got \(error)"); return }
        }
        #expect(throws: ProtectedFileError.self) { try files.protection(ofItemAt: fixture.path("missing")) }
    }

    /// A class-key rotation re-seals the identities; every file still opens.
    @Test func rotationResealsIdentities() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        for cls in FileProtectionClass.allValues { try files.write(Array(cls.name.utf8), to: fixture.path(cls.name), protection: cls) }
        let before = try bytes(fixture.home + "/protected-files.keys")
        #expect(try files.rotateClassKeys() == 8)
        #expect(try files.resealUnderCurrentClassKeys() == 0)
        #expect(try bytes(fixture.home + "/protected-files.keys") != before)
        for cls in FileProtectionClass.allValues { #expect(try files.read(at: fixture.path(cls.name)) == Array(cls.name.utf8)) }
    }

    /// `age -d -i EXPORTED` opens a protected file; a file from `age -r CLASS_RECIPIENT` reads as that class.
    @Test func interopWithAge() throws {
        guard let age = executable("age") else {
            print("skipping: the age tool is not installed")
            return
        }
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let path = fixture.path("protected")
        try files.write(Array("to age".utf8), to: path, protection: .completeUnlessOpenThisDeviceOnly)
        let identity = try files.exportIdentity(for: .completeUnlessOpenThisDeviceOnly)
        let identityPath = fixture.path("identity.txt")
        try identity.withUnsafeBytes { try writeBytes(Array($0) + [0x0A], identityPath) }
        let (status, output, error) = try run(age, ["-d", "-i", identityPath, path])
        #expect(status == 0, "\(error)")
        #expect(output == Array("to age".utf8))

        let recipient = try files.recipient(for: .completeUntilFirstUserAuthentication).description
        let fromAge = fixture.path("from-age")
        let (status2, _, error2) = try run(age, ["-r", recipient, "-o", fromAge], stdin: Array("from age".utf8))
        #expect(status2 == 0, "\(error2)")
        #expect(try files.protection(ofItemAt: fromAge) == .completeUntilFirstUserAuthentication)
        #expect(try files.read(at: fromAge) == Array("from age".utf8))
        try files.setProtection(.complete, ofItemAt: fromAge)
        #expect(try files.protection(ofItemAt: fromAge) == .complete)
        #expect(try files.read(at: fromAge) == Array("from age".utf8))
    }
}

func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle { return i }
    return nil
}

func expectTampered(_ path: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected tampered, nothing thrown", sourceLocation: sourceLocation)
    } catch let error as ProtectedFileError {
        guard case .tampered(path: path, reason: _) = error else {
            Issue.record("expected tampered, got \(error)", sourceLocation: sourceLocation)
            return
        }
    } catch {
        Issue.record("expected tampered, got \(error)", sourceLocation: sourceLocation)
    }
}
