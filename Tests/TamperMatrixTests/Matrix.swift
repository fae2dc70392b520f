import Foundation
import Testing
import TestSupport

/// The actions of the trust table (docs/SECURITY.md): what a writer of HOME who knows no secret
/// can do to one file or directory.
enum Mutation: String, CaseIterable {
    /// Delete (a directory with everything in it).
    case D
    /// Truncate to half its length (a directory: emptied).
    case T
    /// Replace bytes: the middle byte flipped (an empty file: 16 bytes written; a directory: a
    /// regular file in its place).
    case R
    /// Roll back to the older copy of the same home (absent there: deleted).
    case RB
    /// Copy in the attacker's home's file of the same name (or of the same kind).
    case C
    /// A symbolic link to a file outside the home (a directory: to a directory outside).
    case S
    /// Crafted from public information (see `Matrix.craft`).
    case F
}

/// What a user runs next. The light ones run after every mutation; the heavy ones (a KDF each,
/// a server, a rotation) on a deterministic sample, every one at least once.
enum Command: String, CaseIterable {
    /// `keychain find-generic-password -a always -w`, locked.
    case alwaysItem
    /// `protect read documents/none`, locked.
    case noneFile
    /// `protect read documents/complete`, locked: must stay unreadable.
    case lockedFile
    /// `protect write --class completeUnlessOpen` while locked; what it wrote must open with no
    /// identity the attacker holds.
    case writeWhileLocked
    /// `share list --devices`, locked: bravo a member, charlie revoked.
    case devices
    /// `protect read TARGET`, locked, when the target is a protected file (documents, the
    /// received file): its `none` classes read, the others stay locked.
    case readTarget
    /// `vault unlock --passcode-file` (the current passcode).
    case unlock
    /// `keychain find-generic-password -a whenUnlockedThisDeviceOnly -w --passcode-file`.
    case readItem
    /// `protect read documents/completeThisDeviceOnly --passcode-file`.
    case readFile
    /// `share serve` here, `share send` from bravo.
    case share
    /// `vault rotate-device-key --resume` in the home as it was when the rotation was killed.
    case resume

    static let light: [Command] = [.alwaysItem, .noneFile, .lockedFile, .writeWhileLocked, .devices, .readTarget]
    static let heavy: [Command] = [.unlock, .readItem, .readFile, .share, .resume]
}

/// One (target, mutation): what each command did.
struct CaseResult: Sendable {
    let target: String
    let mutation: Mutation
    var statuses: [Command: Int32] = [:]
    var notes: [String] = []
    /// What went wrong: a broken invariant, a status other than the expected one.
    var checks: [String] = []
    var commands = 0
    /// The first line of standard error of the commands that did not give their baseline.
    var messages: [Command: String] = [:]
}

/// Applies the mutations and runs the commands in a copy of the victim's home: one per worker,
/// each at its own paths (`ROOT/wN/home`, `ROOT/wN/config`), so cases run side by side.
struct Matrix: Sendable {
    let scenario: Scenario
    let victim: Machine
    var passcode1File: String { victim.pin }
    var passcode2File: String { victim.root + "/secrets/pin2" }

    /// Worker `number`: its passcode files, a sentinel `~/.ssh/authorized_keys` and a directory
    /// outside its home.
    init(scenario: Scenario, worker number: Int) throws {
        self.scenario = scenario
        victim = try Machine(root: scenario.root + "/w\(number)", name: "alpha", passcode: Scenario.passcode1, runtime: scenario.runtime)
        try Lab.write(passcode2File, Array(Scenario.passcode2.utf8))
        try FileManager.default.createDirectory(atPath: victim.root + "/.ssh", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Lab.write(sentinelFile, Array("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIsentinel user@host\n".utf8))
        try FileManager.default.createDirectory(atPath: sentinelDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Lab.write(sentinelDirectory + "/keep.txt", Array("outside the home".utf8))
    }
    var sentinelFile: String { victim.root + "/.ssh/authorized_keys" }
    var sentinelDirectory: String { victim.root + "/outside" }
    var output: String { victim.root + "/out" }
    static let writtenSecret = "written-while-locked-7d21"

    /// "HOME/…" for a target ("" is HOME itself).
    static func label(_ target: String) -> String { "HOME/" + target }

    func path(_ target: String) -> String { target.isEmpty ? victim.home : victim.home + "/" + target.trimmingSuffix("/") }

    /// Puts back a snapshot (home and CONFIG) at the victim's paths, and an empty output directory.
    func restore(_ snapshot: String) throws {
        Lab.remove(victim.home)
        Lab.remove(victim.config)
        try Lab.copy(scenario.snapshot(snapshot) + "/home", to: victim.home)
        try Lab.copy(scenario.snapshot(snapshot) + "/config", to: victim.config)
        // The provider record and the journal name the key file by its path: this worker's.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: victim.config + "/vaults")) ?? [] {
            let file = victim.config + "/vaults/" + name
            var text = String(decoding: Lab.read(file) ?? [], as: UTF8.self)
            let original = scenario.victim.config + "/", escaped = original.replacingOccurrences(of: "/", with: "\\/")
            text = text.replacingOccurrences(of: original, with: victim.config + "/")
                .replacingOccurrences(of: escaped, with: (victim.config + "/").replacingOccurrences(of: "/", with: "\\/"))
            try Lab.write(file, Array(text.utf8))
        }
        Lab.remove(output)
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Applies `mutation` to `target`; `older` is the snapshot of the older copy. Returns a note
    /// when the mutation had to fall back to another form.
    func mutate(_ target: String, _ mutation: Mutation, older: String) throws -> String? {
        let path = path(target)
        let isDirectory = Lab.kind(path) == .directory
        let trimmed = target.trimmingSuffix("/")
        switch mutation {
        case .D:
            Lab.remove(path)
        case .T:
            if isDirectory {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { Lab.remove(path + "/" + entry) }
            } else {
                let bytes = Lab.read(path) ?? []
                guard truncate(path, off_t(bytes.count / 2)) == 0 else { throw Lab.Failure(description: "truncate \(path)") }
                if bytes.isEmpty { return "empty: nothing to truncate" }
            }
        case .R:
            if isDirectory {
                Lab.remove(path)
                try Lab.write(path, Array("not a directory".utf8))
            } else {
                var bytes = Lab.read(path) ?? []
                if bytes.isEmpty {
                    bytes = Array("garbage-garbage!".utf8)
                } else {
                    bytes[bytes.count / 2] ^= 0x5A
                }
                try Lab.write(path, bytes)
            }
        case .RB:
            let source = scenario.snapshot(older) + "/home" + (trimmed.isEmpty ? "" : "/" + trimmed)
            if Lab.kind(source) == nil {
                Lab.remove(path)
                return "absent in the older copy: deleted"
            }
            try Lab.copy(source, to: path)
        case .C:
            var source = scenario.attacker.home + (trimmed.isEmpty ? "" : "/" + trimmed)
            var note: String?
            if Lab.kind(source) == nil {
                // The attacker's home has no such name: a file of the same kind from it.
                source = isDirectory ? scenario.attacker.home + "/documents" : scenario.attacker.home + "/documents/completeUnlessOpen"
                note = "not in the attacker's home: its \(isDirectory ? "documents/" : "documents/completeUnlessOpen")"
            }
            try Lab.copy(source, to: path)
            return note
        case .S:
            Lab.remove(path)
            guard symlink(isDirectory ? sentinelDirectory : sentinelFile, path) == 0 else { throw Lab.Failure(description: "symlink \(path)") }
        case .F:
            return try craft(target, path: path, isDirectory: isDirectory)
        }
        return nil
    }

    /// A file made from public information: the formats of docs/FORMATS.md, the recipients in
    /// the key table, names and sizes.
    func craft(_ target: String, path: String, isDirectory: Bool) throws -> String? {
        let name = (target.trimmingSuffix("/") as NSString).lastPathComponent
        if isDirectory {
            if target.isEmpty {
                Lab.remove(path)
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                return "an empty home"
            }
            try Lab.write(path + "/planted.txt", Array("planted by the attacker".utf8))
            return "a file planted in it"
        }
        switch name {
        case "vault.state":
            // A public field changed: the first question's text.
            let text = String(decoding: Lab.read(path) ?? [], as: UTF8.self)
            try Lab.write(path, Array(text.replacingOccurrences(of: "Favourite colour?", with: "Favorite color?").utf8))
            return "a question's text changed"
        case "attempts":
            var record = Array(#"{"failures":0,"lastFailure":0}"#.utf8)
            record += Array(repeating: UInt8(ascii: " "), count: 127 - record.count) + [UInt8(ascii: "\n")]
            try Lab.write(path, record)
            return "a record of no failure"
        case "always.key":
            try Lab.write(path, Array(repeating: 0x41, count: 32))
            return "32 bytes the attacker chose"
        case "protected-files.keys":
            // Every recipient replaced by the attacker's recipient of the same class.
            let ours = try JSONSerialization.jsonObject(with: Data(Lab.read(path) ?? [])) as? [String: Any] ?? [:]
            let theirs = try JSONSerialization.jsonObject(with: Data(Lab.read(scenario.attacker.home + "/protected-files.keys") ?? [])) as? [String: Any] ?? [:]
            var recipients: [String: String] = [:]
            for entry in theirs["entries"] as? [[String: Any]] ?? [] {
                if let name = entry["name"] as? String, let recipient = entry["recipient"] as? String { recipients[name] = recipient }
            }
            var table = ours
            table["entries"] = (ours["entries"] as? [[String: Any]] ?? []).map { entry in
                var entry = entry
                if let name = entry["name"] as? String, let recipient = recipients[name] { entry["recipient"] = recipient }
                return entry
            }
            try Lab.write(path, Array(try JSONSerialization.data(withJSONObject: table, options: [.sortedKeys])))
            return "the attacker's recipients"
        case "keychain.sqlite":
            guard let sqlite = ChildProcess.which("sqlite3") else {
                try Lab.write(path, [])
                return "sqlite3 missing: emptied"
            }
            let changed = try ChildProcess.run(sqlite, [path, "UPDATE keychain_items SET accessibility = (accessibility + 1) % 6;"], timeout: .seconds(60))
            if changed.status != 0 { return "sqlite3 failed: \(changed.errorText)" }
            return "every row's accessibility changed"
        default:
            if target.hasPrefix("documents/") || target.hasPrefix("share-inbox/") {
                // A `none` file: anyone holding the none recipient writes one (for `none` itself,
                // the other none class's file).
                let source = target == "documents/none" ? "/documents/noneThisDeviceOnly" : "/documents/none"
                try Lab.copy(victim.home + source, to: path)
                return "the file \(source.dropFirst()) put in its place"
            }
            try Lab.write(path, Array("crafted".utf8))
            return "7 bytes of the attacker's choice"
        }
    }

    // MARK: - Commands

    /// A status the test gives a command that exited 0 but printed something else than the
    /// untampered home's value (another item, another file's contents).
    static let otherValue: Int32 = 101
    /// `share list --devices` exited 0 but charlie is not listed as revoked.
    static let notRevoked: Int32 = 100

    /// Runs `command` in the (mutated) home and grades what it printed; nil when it does not apply.
    func run(_ command: Command, target: String = "", checks: inout [String]) throws -> Outcome? {
        guard let outcome = try execute(command, target: target, checks: &checks) else { return nil }
        guard outcome.status == 0 else { return outcome }
        let expected: String? = switch command {
        case .alwaysItem: Scenario.itemSecret("always") + "\n"
        case .noneFile: Scenario.fileSecret("none")
        case .readItem: Scenario.itemSecret("whenUnlockedThisDeviceOnly") + "\n"
        case .readFile: Scenario.fileSecret("completeThisDeviceOnly")
        case .readTarget: Scenario.fileSecret((target as NSString).lastPathComponent)
        default: nil
        }
        if let expected, outcome.text != expected {
            return Outcome(status: Self.otherValue, stdout: outcome.stdout, stderr: outcome.stderr)
        }
        if command == .devices, !outcome.text.split(separator: "\n").contains(where: { $0.hasPrefix("charlie\t") && $0.hasSuffix("\trevoked") }) {
            return Outcome(status: Self.notRevoked, stdout: outcome.stdout, stderr: outcome.stderr)
        }
        return outcome
    }

    /// Whether `target` is one of the protected files of the scenario.
    static func isProtectedFile(_ target: String) -> Bool {
        (target.hasPrefix("documents/") || target.hasPrefix("share-inbox/")) && !target.hasSuffix("/")
    }

    private func execute(_ command: Command, target: String, checks: inout [String]) throws -> Outcome? {
        let documents = victim.home + "/documents/"
        switch command {
        case .alwaysItem:
            return try victim.run(["keychain", "find-generic-password", "-s", "svc", "-a", "always", "-w"])
        case .noneFile:
            return try victim.run(["protect", "read", documents + "none"])
        case .lockedFile:
            return try victim.run(["protect", "read", documents + "complete"])
        case .writeWhileLocked:
            let written = output + "/written"
            let outcome = try victim.run(["protect", "write", "--class", "completeUnlessOpen", "-o", written], stdin: Array(Self.writtenSecret.utf8))
            if Lab.kind(written) != nil, let age = ChildProcess.which("age") {
                // age tries every identity given.
                let opened = try ChildProcess.run(age, ["-d"] + scenario.identities.flatMap { ["-i", $0] } + [written], timeout: .seconds(60))
                if opened.status == 0 || opened.text.contains(Self.writtenSecret) {
                    checks.append("written while locked, it opens with an identity the attacker holds")
                }
            }
            return outcome
        case .devices:
            return try victim.run(["share", "list", "--devices"])
        case .readTarget:
            guard Self.isProtectedFile(target) else { return nil }
            return try victim.run(["protect", "read", path(target)])
        case .unlock:
            return try victim.run(["vault", "unlock", "--passcode-file", passcode2File])
        case .readItem:
            return try victim.run(["keychain", "find-generic-password", "-s", "svc", "-a", "whenUnlockedThisDeviceOnly", "-w",
                                   "--passcode-file", passcode2File])
        case .readFile:
            return try victim.run(["protect", "read", documents + "completeThisDeviceOnly", "--passcode-file", passcode2File])
        case .share:
            let received = try scenario.receive(at: victim, passcodeFile: passcode2File)
            return Outcome(status: received.serve == nil ? 255 : (received.send == 0 ? received.serve! : received.send),
                           stdout: [], stderr: received.output)
        case .resume:
            return try victim.run(["vault", "rotate-device-key", "--resume", "--passcode-file", passcode1File])
        }
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
