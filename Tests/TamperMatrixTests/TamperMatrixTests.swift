import Foundation
import Testing
import TestSupport

/// The tamper matrix of docs/SECURITY.md: a home with every feature in use, every file and
/// directory in it tampered with in each way of the trust table, then what a user runs next.
/// Every case asserts that no secret is disclosed, that nothing outside the home changed, that
/// nothing written while locked opens with a key the attacker holds, and the outcome
/// `Expectations` states (which follows the trust table; its accepted cases are listed in one
/// place there). Every file found must have a row in the trust table.
@Suite("tamper matrix", .serialized)
struct TamperMatrixTests {
    @Test("every file × every tampering × what runs next")
    func matrix() throws {
        let table = try TrustTable.load()
        let scenario = try Scenario()
        let matrix = Matrix(scenario: scenario)
        let victim = scenario.victim
        try FileManager.default.createDirectory(atPath: victim.root + "/.ssh", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Lab.write(matrix.sentinelFile, Array("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIsentinel user@host\n".utf8))
        try FileManager.default.createDirectory(atPath: matrix.sentinelDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Lab.write(matrix.sentinelDirectory + "/keep.txt", Array("outside the home".utf8))

        // Every file present must have a row.
        let finalHome = scenario.snapshot("final") + "/home"
        var listed: [String] = ["HOME/"] + Lab.entries(under: finalHome).map { "HOME/" + $0 }
        listed += Lab.entries(under: scenario.snapshot("m0") + "/home").map { "HOME/" + $0 }
        listed += Lab.entries(under: scenario.snapshot("mid") + "/home").map { "HOME/" + $0 }
        listed += ["CONFIG/"] + Lab.entries(under: scenario.snapshot("final") + "/config").map { "CONFIG/" + $0 }
        listed += Lab.entries(under: scenario.snapshot("mid") + "/config").map { "CONFIG/" + $0 }
        listed += ["RUNTIME/"] + scenario.runtimeEntries.map { "RUNTIME/" + $0 }
        let userNamed = Set(["HOME/documents/"] + Scenario.classes.map { "HOME/documents/" + $0 })
        var unmatched: [String] = []
        for path in Set(listed).sorted() where table.row(for: path, userNamed: userNamed) == nil { unmatched.append(path) }
        #expect(unmatched.isEmpty, "files with no row in the trust table of docs/SECURITY.md: \(unmatched.joined(separator: ", "))")
        #expect(scenario.runtimeEntries.contains { $0.hasSuffix(".sock") }, "the agent's socket was not seen: \(scenario.runtimeEntries)")
        #expect(Lab.entries(under: scenario.snapshot("mid") + "/config").contains { $0.hasSuffix(".device-key.rotation") },
                "no rotation journal in the interrupted state")

        let targets = [""] + Lab.entries(under: finalHome)
        let outsideBefore = outside(scenario)
        let configs = ["final": Lab.fingerprint(scenario.snapshot("final") + "/config")]

        // Untampered: every command gives its baseline.
        try matrix.restore("final")
        var baselineChecks: [String] = []
        for command in Command.allCases where command != .resume {
            guard let outcome = try matrix.run(command, checks: &baselineChecks) else { continue }
            #expect(outcome.status == Expectations.baseline[command], "untampered \(command): \(outcome.status) \(outcome.stderr)")
        }
        #expect(baselineChecks.isEmpty, "\(baselineChecks)")
        // The control of the age check: the victim's own identity opens what was written while locked.
        if let age = ChildProcess.which("age") {
            let identity = scenario.root + "/victim-completeUnlessOpen"
            try victim.must(["protect", "export-identity", "--class", "completeUnlessOpen", "-o", identity, "--passcode-file", scenario.passcode2File])
            let opened = try ChildProcess.run(age, ["-d", "-i", identity, matrix.output + "/written"], timeout: .seconds(60))
            #expect(opened.status == 0 && opened.text == Matrix.writtenSecret, "age -d with the victim's identity: \(opened.errorText)")
            Lab.remove(identity)
        } else {
            Issue.record("age is not installed (apt-get install age): what is written while locked is not checked against the attacker's identities")
        }

        let started = ContinuousClock.now
        var results: [CaseResult] = []
        var commandsRun = 0
        var heavyRun: [Command: Int] = [:]
        for (index, target) in targets.enumerated() {
            for (mutationIndex, mutation) in Mutation.allCases.enumerated() {
                var result = CaseResult(target: target, mutation: mutation)
                let key = Expectations.key(target, mutation)
                var heavy: [Command] = []
                if (index + mutationIndex) % Mutation.allCases.count == 0 { heavy.append(Command.heavy[index % Command.heavy.count]) }
                for command in Expectations.alwaysRunHeavy[key] ?? [] where !heavy.contains(command) { heavy.append(command) }

                // In the final home: the light commands, then the sampled heavy ones but resume.
                try matrix.restore("final")
                if let note = try matrix.mutate(target, mutation, older: "m1") { result.notes.append(note) }
                var checks: [String] = []
                for command in Command.light + heavy.filter({ $0 != .resume }) {
                    guard let outcome = try matrix.run(command, checks: &checks) else { continue }
                    commandsRun += 1
                    if Command.heavy.contains(command) { heavyRun[command, default: 0] += 1 }
                    result.statuses[command] = outcome.status
                    check(outcome, command: command, key: key, checks: &checks)
                }
                for probe in Expectations.probes[key] ?? [] {
                    let outcome = try victim.run(probe.arguments(scenario))
                    commandsRun += 1
                    if outcome.status != probe.status {
                        checks.append("probe \(probe.name): status \(outcome.status), expected \(probe.status): \(outcome.stderr)")
                    }
                }
                let written = Lab.entries(under: matrix.output)
                if !Set(written).isSubset(of: ["written"]) { checks.append("unexpected outputs: \(written)") }
                if Lab.fingerprint(victim.config) != configs["final"] { checks.append("CONFIG changed") }
                if outside(scenario) != outsideBefore { checks.append("something outside the home changed: \(difference(outsideBefore, outside(scenario)))") }

                // Resume the interrupted rotation in the interrupted state with the same tampering.
                if heavy.contains(.resume) {
                    try matrix.restore("mid")
                    if let note = try matrix.mutate(target, mutation, older: "m0") { result.notes.append("mid: " + note) }
                    guard let outcome = try matrix.run(.resume, checks: &checks) else { continue }
                    commandsRun += 1
                    heavyRun[.resume, default: 0] += 1
                    result.statuses[.resume] = outcome.status
                    check(outcome, command: .resume, key: key, checks: &checks)
                    if outside(scenario) != outsideBefore { checks.append("resume: something outside the home changed") }
                }

                for (command, status) in result.statuses.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                    let expected = Expectations.expected(key, command)
                    if status != expected {
                        checks.append("\(command): status \(status), expected \(expected)")
                    }
                }
                #expect(checks.isEmpty, "\(Matrix.label(target)) \(mutation.rawValue) (\(result.notes.joined(separator: "; "))): \(checks.joined(separator: "; "))")
                results.append(result)
            }
        }
        let seconds = Double((ContinuousClock.now - started).components.seconds)

        // The expectations name only cases that exist.
        let keys = Set(results.map { Expectations.key($0.target, $0.mutation) })
        for key in Expectations.mentioned where !keys.contains(key) {
            Issue.record("Expectations mention \(key), which the matrix did not run")
        }
        if ProcessInfo.processInfo.environment["TAMPER_MATRIX_PRINT"] != nil { printObserved(results) }
        let residuals = results.filter { Expectations.accepted[Expectations.key($0.target, $0.mutation)] != nil }.count
        let defects = results.filter { Expectations.defects[Expectations.key($0.target, $0.mutation)] != nil }.count
        print("tamper matrix: \(targets.count) files × \(Mutation.allCases.count) mutations × \(Command.allCases.count) commands "
              + "(\(Command.light.count) after every case, \(Command.heavy.count) sampled: "
              + Command.heavy.map { "\($0.rawValue) \(heavyRun[$0, default: 0])" }.joined(separator: ", ")
              + "): \(results.count) cases, \(commandsRun) commands, \(residuals) accepted as known residuals, \(defects) defects; "
              + "build \(Int(scenario.buildSeconds)) s, cases \(Int(seconds)) s")
        for command in Command.heavy { #expect(heavyRun[command, default: 0] > 0, "\(command) never ran") }
    }

    /// The invariants of every command: no secret in what it prints (none at all when it
    /// refuses; none of a class that needs the passcode when it was given none).
    private func check(_ outcome: Outcome, command: Command, key: String, checks: inout [String]) {
        let locked = Command.light.contains(command)
        let all = outcome.all
        for secret in locked ? Scenario.lockedSecrets : [] where all.contains(secret) {
            checks.append("\(command) (locked) disclosed \(secret)")
        }
        if outcome.status != 0 {
            for secret in Scenario.allSecrets where all.contains(secret) { checks.append("\(command) refused and disclosed \(secret)") }
        }
        if outcome.status != 0, let words = Expectations.keywords[key]?[command], !outcome.stderr.contains(words) {
            checks.append("\(command): the error does not say \"\(words)\": \(outcome.stderr)")
        }
    }

    /// Everything the victim's user has outside HOME, CONFIG and the outputs: a sentinel
    /// `~/.ssh/authorized_keys`, a directory, the passcode files; and RUNTIME.
    private func outside(_ scenario: Scenario) -> [String: String] {
        var result = Lab.fingerprint(scenario.victim.root, skipping: ["home/", "home", "config/", "config", "out/", "out"])
        for (path, value) in Lab.fingerprint(scenario.runtime) { result["RUNTIME/" + path] = value }
        return result
    }

    private func difference(_ before: [String: String], _ after: [String: String]) -> String {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted().joined(separator: ", ")
    }

    /// The observed statuses that differ from the baseline, as lines for `Expectations`.
    private func printObserved(_ results: [CaseResult]) {
        for result in results {
            let changed = result.statuses.filter { $0.value != Expectations.baseline[$0.key] }
                .sorted { $0.key.rawValue < $1.key.rawValue }
                .map { ".\($0.key.rawValue): \($0.value)" }
            print("OBSERVED \"\(Expectations.key(result.target, result.mutation))\": [\(changed.joined(separator: ", "))],"
                  + " // \(result.notes.joined(separator: "; ")) ran: \(result.statuses.keys.map(\.rawValue).sorted().joined(separator: ","))")
        }
    }
}
