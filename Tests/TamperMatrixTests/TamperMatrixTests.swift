import Foundation
import Synchronization
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
        let environment = ProcessInfo.processInfo.environment
        let workers = max(1, min(8, Int(environment["TAMPER_MATRIX_WORKERS"] ?? "") ?? 3))
        let matrices = try (0..<workers).map { try Matrix(scenario: scenario, worker: $0) }
        let verbose = environment["TAMPER_MATRIX_PRINT"] != nil

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

        // Untampered: every command gives its baseline.
        let first = matrices[0]
        try first.restore("final")
        var baselineChecks: [String] = []
        for command in Command.allCases where command != .resume {
            guard let outcome = try first.run(command, checks: &baselineChecks) else { continue }
            #expect(outcome.status == Expectations.baseline[command], "untampered \(command): \(outcome.status) \(outcome.stderr)")
        }
        #expect(baselineChecks.isEmpty, "\(baselineChecks)")
        // The control of the age check: the victim's own identity opens what was written while locked.
        if let age = ChildProcess.which("age") {
            let identity = first.victim.root + "/secrets/completeUnlessOpen"
            try first.victim.must(["protect", "export-identity", "--class", "completeUnlessOpen", "-o", identity, "--passcode-file", first.passcode2File])
            let opened = try ChildProcess.run(age, ["-d", "-i", identity, first.output + "/written"], timeout: .seconds(60))
            #expect(opened.status == 0 && opened.text == Matrix.writtenSecret, "age -d with the victim's identity: \(opened.errorText)")
            Lab.remove(identity)
        } else {
            Issue.record("age is not installed (apt-get install age): what is written while locked is not checked against the attacker's identities")
        }

        // Every (target, mutation), spread over the workers.
        let targets = [""] + Lab.entries(under: finalHome)
        let jobs = targets.enumerated().flatMap { index, target in Mutation.allCases.enumerated().map { (index, target, $0.offset, $0.element) } }
        let next = Mutex(0)
        let collected = Mutex([Int: CaseResult]())
        let started = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let matrix = matrices[worker]
            let outsideBefore = Self.outside(matrix)
            while true {
                let job = next.withLock { value in defer { value += 1 }; return value }
                guard job < jobs.count else { return }
                let (index, target, mutationIndex, mutation) = jobs[job]
                var result = CaseResult(target: target, mutation: mutation)
                do {
                    try Self.runCase(&result, matrix: matrix, index: index, mutationIndex: mutationIndex, outsideBefore: outsideBefore)
                } catch {
                    result.checks.append("the case failed to run: \(error)")
                }
                if verbose {
                    print("CASE \(Expectations.key(target, mutation)): "
                          + result.statuses.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " ")
                          + " | \(result.notes.joined(separator: "; ")) | \(result.checks.joined(separator: "; "))"
                          + result.messages.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\n    \($0.key.rawValue): \($0.value)" }.joined())
                }
                collected.withLock { $0[job] = result }
            }
        }
        let seconds = Double((ContinuousClock.now - started).components.seconds)
        let results = collected.withLock { $0 }.sorted { $0.key < $1.key }.map(\.value)
        #expect(results.count == jobs.count)
        for result in results {
            #expect(result.checks.isEmpty, "\(Matrix.label(result.target)) \(result.mutation.rawValue) (\(result.notes.joined(separator: "; "))): \(result.checks.joined(separator: "; "))")
        }

        // The expectations name only cases that exist.
        let keys = Set(results.map { Expectations.key($0.target, $0.mutation) })
        for key in Expectations.mentioned where !keys.contains(key) {
            Issue.record("Expectations mention \(key), which the matrix did not run")
        }
        if verbose { printObserved(results) }
        var heavyRun: [Command: Int] = [:]
        for result in results { for command in result.statuses.keys where Command.heavy.contains(command) { heavyRun[command, default: 0] += 1 } }
        let residuals = results.filter { Expectations.accepted[Expectations.key($0.target, $0.mutation)] != nil }.count
        let defects = results.filter { Expectations.defects[Expectations.key($0.target, $0.mutation)] != nil }.count
        print("tamper matrix: \(targets.count) files × \(Mutation.allCases.count) mutations × \(Command.allCases.count) commands "
              + "(\(Command.light.count) after every case, \(Command.heavy.count) sampled: "
              + Command.heavy.map { "\($0.rawValue) \(heavyRun[$0, default: 0])" }.joined(separator: ", ")
              + "): \(results.count) cases, \(results.reduce(0) { $0 + $1.commands }) commands, \(residuals) accepted as known residuals, "
              + "\(defects) defects; \(workers) workers; scenario built in \(Int(scenario.buildSeconds)) s, cases run in \(Int(seconds)) s")
        for command in Command.heavy { #expect(heavyRun[command, default: 0] > 0, "\(command) never ran") }
    }

    /// One case: the final home restored, tampered with, the light commands and the sampled
    /// heavy ones run, the invariants checked; resume in the interrupted state tampered the same way.
    private static func runCase(_ result: inout CaseResult, matrix: Matrix, index: Int, mutationIndex: Int,
                                outsideBefore: [String: String]) throws {
        let key = Expectations.key(result.target, result.mutation)
        var heavy: [Command] = []
        if (index + mutationIndex) % Mutation.allCases.count == 0 { heavy.append(Command.heavy[index % Command.heavy.count]) }
        for command in Expectations.alwaysRunHeavy[key] ?? [] where !heavy.contains(command) { heavy.append(command) }

        try matrix.restore("final")
        let config = Lab.fingerprint(matrix.victim.config)
        if let note = try matrix.mutate(result.target, result.mutation, older: "m1") { result.notes.append(note) }
        for command in Command.light + heavy.filter({ $0 != .resume }) {
            guard let outcome = try matrix.run(command, target: result.target, checks: &result.checks) else { continue }
            result.commands += 1
            result.statuses[command] = outcome.status
            if outcome.status != Expectations.baseline(command, target: result.target) { result.messages[command] = String(outcome.stderr.prefix { $0 != "\n" }) }
            check(outcome, command: command, key: key, checks: &result.checks)
        }
        for probe in Expectations.probes[key] ?? [] {
            let outcome = try matrix.victim.run(probe.arguments(matrix))
            result.commands += 1
            if outcome.status != probe.status {
                result.checks.append("probe \(probe.name): status \(outcome.status), expected \(probe.status): \(outcome.stderr)")
            }
        }
        let written = Lab.entries(under: matrix.output)
        if !Set(written).isSubset(of: ["written"]) { result.checks.append("unexpected outputs: \(written)") }
        // CONFIG is the anchor of trust: nothing in it changes but the rollback anchors, which
        // only move forward (a generation, the attempt count; a planted vault.state of another
        // vault gets an anchor of its own id, never the victim's).
        let isAnchor: (String) -> Bool = { $0.hasSuffix(".anchor") || $0.hasSuffix(".anchor.lock") }
        if Lab.fingerprint(matrix.victim.config).filter({ !isAnchor($0.key) }) != config.filter({ !isAnchor($0.key) }) {
            result.checks.append("CONFIG changed")
        }
        let after = outside(matrix)
        if after != outsideBefore { result.checks.append("something outside the home changed: \(difference(outsideBefore, after))") }

        if heavy.contains(.resume) {
            try matrix.restore("mid")
            if let note = try matrix.mutate(result.target, result.mutation, older: "m0") { result.notes.append("mid: " + note) }
            if let outcome = try matrix.run(.resume, checks: &result.checks) {
                result.commands += 1
                result.statuses[.resume] = outcome.status
                if outcome.status != 0 { result.messages[.resume] = String(outcome.stderr.prefix { $0 != "\n" }) }
                check(outcome, command: .resume, key: key, checks: &result.checks)
            }
            if outside(matrix) != outsideBefore { result.checks.append("resume: something outside the home changed") }
        }

        for (command, status) in result.statuses.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let expected = Expectations.expected(key, command, target: result.target)
            let either = Expectations.baselineOrOverride.contains(key) && status == Expectations.baseline(command, target: result.target)
            if status != expected && !either { result.checks.append("\(command): status \(status), expected \(expected)") }
        }
    }

    /// The invariants of every command: no secret in what it prints (none at all when it
    /// refuses; none of a class that needs the passcode when it was given none).
    private static func check(_ outcome: Outcome, command: Command, key: String, checks: inout [String]) {
        let locked = Command.light.contains(command)
        let all = outcome.all
        for secret in locked ? Scenario.lockedSecrets : [] where all.contains(secret) {
            checks.append("\(command) (locked) disclosed \(secret)")
        }
        // 100 and 101 are exits 0 graded by the test (`Matrix.notRevoked`, `Matrix.otherValue`).
        if ![0, Matrix.otherValue, Matrix.notRevoked].contains(outcome.status) {
            for secret in Scenario.allSecrets where all.contains(secret) { checks.append("\(command) refused and disclosed \(secret)") }
        }
        if outcome.status != 0, let words = Expectations.keywords[key]?[command], !outcome.stderr.contains(words) {
            checks.append("\(command): the error does not say \"\(words)\": \(outcome.stderr)")
        }
    }

    /// Everything the victim's user has outside HOME, CONFIG and the outputs: a sentinel
    /// `~/.ssh/authorized_keys`, a directory, the passcode files; and RUNTIME.
    private static func outside(_ matrix: Matrix) -> [String: String] {
        var result = Lab.fingerprint(matrix.victim.root, skipping: ["home/", "home", "config/", "config", "out/", "out"])
        for (path, value) in Lab.fingerprint(matrix.scenario.runtime) { result["RUNTIME/" + path] = value }
        return result
    }

    private static func difference(_ before: [String: String], _ after: [String: String]) -> String {
        Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted().joined(separator: ", ")
    }

    /// The observed statuses that differ from the baseline, as lines for `Expectations`.
    private func printObserved(_ results: [CaseResult]) {
        for result in results {
            let changed = result.statuses.filter { $0.value != Expectations.baseline($0.key, target: result.target) }
                .sorted { $0.key.rawValue < $1.key.rawValue }
                .map { ".\($0.key.rawValue): \($0.value)" }
            print("OBSERVED \"\(Expectations.key(result.target, result.mutation))\": [\(changed.joined(separator: ", "))],"
                  + " // \(result.notes.joined(separator: "; ")) ran: \(result.statuses.keys.map(\.rawValue).sorted().joined(separator: ","))")
        }
    }
}
