import Foundation
import Testing
import Cipher
import Age
import Vault
@testable import ProtectedFiles

@Suite("Protected files: key-pair rotation")
struct KeyRotationTests {
    /// The attack: a copy of the data directory taken before the rotation, with the passcode of
    /// that time (and even the device key), opens every protected file before the rotation and
    /// none of the re-wrapped files after rotation, re-wrap and destruction of the retired pairs.
    @Test func oldDataDirectoryOpensNoRewrappedFile() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let data = fixture.path("data")
        try FileManager.default.createDirectory(atPath: data + "/deep", withIntermediateDirectories: true)
        var paths: [FileProtectionClass: String] = [:]
        for cls in FileProtectionClass.allValues {
            let path = data + "/deep/" + cls.name
            try files.write(Array(cls.name.utf8), to: path, protection: cls)
            paths[cls] = path
        }
        try writeBytes(Array("not protected".utf8), data + "/plain.txt")
        let outside = fixture.path("outside")
        try files.write(Array("outside".utf8), to: outside, protection: .complete)

        // The attacker's copy of the data directory, taken now.
        let stolen = fixture.root + "/stolen"
        let (status, _, error) = try run("/bin/cp", ["-a", fixture.home, stolen])
        #expect(status == 0, "\(error)")
        let attacker = try fixture.manager(home: stolen)
        try attacker.unlock(passcode: fixture.passcode)
        let attackerFiles = ProtectedFiles(manager: attacker)
        for (cls, path) in paths { #expect(try attackerFiles.read(at: path) == Array(cls.name.utf8), "the copy opens \(cls.name) before the rotation") }

        let report = try files.rotateKeyPairs(rewrapping: [data])
        #expect(report.rotated == 8)
        #expect(Set(report.rewrap.rewrapped) == Set(paths.values))
        #expect(report.rewrap.current == 0 && report.rewrap.skipped == 1)
        #expect(report.rewrap.damaged.isEmpty && report.rewrap.failed.isEmpty)
        #expect(report.retiredDestroyed == 8 && report.retiredKept == 0)
        #expect(try files.retiredKeyPairCount == 0)

        // The attacker's copy opens none of the re-wrapped files.
        for (cls, path) in paths {
            #expect(try files.read(at: path) == Array(cls.name.utf8))
            do {
                _ = try attackerFiles.read(at: path)
                Issue.record("the old data directory opened \(cls.name) after the rotation")
            } catch {
                guard case .tampered(path: path, reason: _) = error else { Issue.record("\(cls.name): \(error)"); continue }
            }
            // Nor do its exported identities, through age itself.
            let old = try attackerFiles.exportIdentity(for: cls)
            defer { old.wipe() }
            let identity = try X25519Identity(encoded: old)
            #expect(throws: AgeError.self) { try AgeRandomAccessReader(path: path, identities: [identity]) }
        }
        // A file outside the re-wrapped trees was not re-wrapped: its pair is destroyed, so it
        // no longer opens here (only the old copy still opens it).
        expectTampered(outside) { _ = try files.read(at: outside) }
        #expect(try attackerFiles.read(at: outside) == Array("outside".utf8))
        // Running it again is a no-op for the files (all current).
        let again = try files.rewrapItems(inDirectories: [data])
        #expect(again.rewrapped.isEmpty && again.current == 8 && again.skipped == 1)
    }

    /// Files that cannot be re-wrapped are reported and keep the retired pairs alive, so they
    /// stay readable; `resume` finishes the run without another rotation.
    @Test func failedRewrapKeepsRetiredPairsUntilResumed() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let data = fixture.path("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        for index in 0..<4 { try files.write(Array("file \(index)".utf8), to: data + "/f\(index)", protection: .completeUnlessOpen) }
        try writeBytes(Array("age-encryption.org/v1\n-> X25519 broken".utf8), data + "/damaged")
        let victim = data + "/f2"
        files.testHooks.beforeReplace = { path in
            // Another writer touches the file during the re-wrap.
            if path == victim { _ = utimensat(AT_FDCWD, path, nil, 0) }
        }
        let report = try files.rotateKeyPairs(rewrapping: [data])
        files.testHooks.beforeReplace = nil
        #expect(report.rotated == 8)
        #expect(report.rewrap.rewrapped.count == 3)
        #expect(report.rewrap.failed == [.init(path: victim, error: .modifiedDuringChange(path: victim))])
        #expect(report.rewrap.damaged.map(\.path) == [data + "/damaged"])
        #expect(report.retiredDestroyed == 0 && report.retiredKept == 8)
        #expect(try files.read(at: victim) == Array("file 2".utf8), "a retired pair still opens the file not re-wrapped")

        let resumed = try files.rotateKeyPairs(rewrapping: [data], resume: true)
        #expect(resumed.rotated == 0)
        #expect(resumed.rewrap.rewrapped == [victim] && resumed.rewrap.current == 3)
        #expect(resumed.retiredDestroyed == 8 && resumed.retiredKept == 0)
        for index in 0..<4 { #expect(try files.read(at: data + "/f\(index)") == Array("file \(index)".utf8)) }
    }

    /// The key table: format 1 is read and written back as format 2; the retired pairs are
    /// sealed with their own context, so one moved back into the current entries does not open;
    /// the table that held destroyed pairs does not stay in the data directory.
    @Test func keyTableFormatsAndRetiredContext() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        try files.prepareClasses()
        let tablePath = fixture.home + "/protected-files.keys"
        // A format 1 table (as earlier versions wrote it) is read and upgraded.
        var table = try JSONDecoder().decode(ClassKeyTableFile.self, from: Data(try bytes(tablePath)))
        let v1 = try JSONSerialization.data(withJSONObject: [
            "format": 1,
            "entries": table.entries.map { ["name": $0.name, "recipient": $0.recipient, "sealedIdentity": $0.sealedIdentity, "mac": $0.mac] },
        ])
        try writeBytes(Array(v1), tablePath)
        chmod(tablePath, 0o600)
        try files.write(Array("v1".utf8), to: fixture.path("v1"), protection: .complete)
        #expect(try files.read(at: fixture.path("v1")) == Array("v1".utf8))
        #expect(try files.rotateKeyPairs() == 8)
        table = try JSONDecoder().decode(ClassKeyTableFile.self, from: Data(try bytes(tablePath)))
        #expect(table.format == 3 && table.retired.count == 8)
        #expect(try files.read(at: fixture.path("v1")) == Array("v1".utf8), "a retired pair opens a file not yet re-wrapped")
        #expect(String(decoding: try bytes(tablePath), as: UTF8.self).contains("\"retired\""))

        // A retired pair put back as the current one does not open (retired context).
        var swapped = table
        let index = swapped.entries.firstIndex { $0.name == "complete" }!
        swapped.entries[index] = swapped.retired.first { $0.name == "complete" }!
        swapped.retired.removeAll { $0.name == "complete" }
        try writeBytes(Array(try JSONEncoder().encode(swapped)), tablePath)
        do {
            _ = try files.exportIdentity(for: .complete)
            Issue.record("a retired pair was accepted as the current one")
        } catch {
            guard case .keyTable = error else { Issue.record("got \(error)"); return }
        }
        try writeBytes(Array(try JSONEncoder().encode(table)), tablePath)

        // Format 1 with retired pairs, and a format from the future, are refused.
        var future = try JSONSerialization.jsonObject(with: Data(try bytes(tablePath))) as! [String: Any]
        future["format"] = 1
        try writeBytes(Array(try JSONSerialization.data(withJSONObject: future)), tablePath)
        #expect(throws: ProtectedFileError.keyTable("\(tablePath) has format 1 with retired key pairs, which format 1 does not have: the file was altered")) {
            try files.read(at: fixture.path("v1"))
        }
        future["format"] = 4
        try writeBytes(Array(try JSONSerialization.data(withJSONObject: future)), tablePath)
        #expect(throws: ProtectedFileError.keyTable("\(tablePath) has format 4; this library reads formats 1 to 3: use a newer version of the library")) {
            try files.read(at: fixture.path("v1"))
        }
        try writeBytes(Array(try JSONEncoder().encode(table)), tablePath)
        #expect(try files.destroyRetiredKeyPairs() == 8)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.home).filter { $0.hasPrefix(".superseded-") || $0 == ".erasing" || $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
        #expect(!String(decoding: try bytes(tablePath), as: UTF8.self).contains(table.retired[0].sealedIdentity))
    }

    /// A locked vault cannot rotate: nothing changes.
    @Test func rotationNeedsTheClassKeys() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        try files.prepareClasses()
        let before = try bytes(fixture.home + "/protected-files.keys")
        manager.lock()
        #expect(throws: ProtectedFileError.locked(.complete, .locked)) { try files.rotateKeyPairs() }
        #expect(try bytes(fixture.home + "/protected-files.keys") == before)
    }
}
