import Foundation
import TestSupport
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

@Suite struct ProcessTests {
    private func runWorkers(dir: String, source: TestKeySource, prefixes: [String], count: Int, flushEvery: Int) throws -> [ChildProcess.Running] {
        guard let worker = workerPath() else { throw KeychainError.invalidArgument("KeychainWorker not built") }
        return try prefixes.map { prefix in
            try ChildProcess.start(worker, ["write", dir, source.masterHex, prefix, String(count), String(flushEvery)])
        }
    }

    @Test func fourProcessesWriteOneKeychain() throws {
        guard workerOrSkip() != nil else { return }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        let prefixes = ["p0", "p1", "p2", "p3"]
        // The parent writes too, while the children run.
        let parent = try Keychain(directory: path, keySource: source)
        let processes = try runWorkers(dir: path, source: source, prefixes: prefixes, count: 400, flushEvery: 25)
        for index in 0..<200 { try parent.setPassword("parent-\(index)", forService: "parent", account: "a\(index)") }
        try parent.flush()
        for process in processes {
            let result = try process.wait(timeout: .seconds(120))
            #expect(result.status == 0, "\(result.errorText)")
        }
        // The parent's connection sees the children's flushed writes.
        for prefix in prefixes {
            #expect(try parent.accounts(forService: prefix).count == 400)
            #expect(try parent.password(forService: prefix, account: "\(prefix)-399") == "\(prefix)-value-399")
        }
        #expect(try parent.accounts().count == 1800)
    }

    @Test func killDuringWritesLosesNothingFlushed() throws {
        guard let worker = workerOrSkip() else { return }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        for round in 0..<3 {
            let prefix = "round\(round)"
            let process = try ChildProcess.start(worker, ["write", path, source.masterHex, prefix, "1000000", "7"])
            func acknowledgements(_ output: [UInt8]) -> Int {
                String(decoding: output, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("ack ") }
                    .map { Int($0.dropFirst(4)) ?? 0 }.max() ?? 0
            }
            // Read acknowledgements until a few arrived (at most 60 s), then kill -9 mid-stream.
            let target = 20 + round * 15
            _ = process.waitForOutput { acknowledgements($0) >= target * 7 }
            process.kill()
            // Acknowledgements written before the kill included.
            let acknowledged = acknowledgements(try process.wait(timeout: .seconds(30)).stdout)
            #expect(acknowledged > 0)
            let keychain = try Keychain(directory: path, keySource: source)
            for index in 0..<acknowledged {
                #expect(try keychain.password(forService: prefix, account: "\(prefix)-\(index)") == "\(prefix)-value-\(index)")
            }
            // Nothing beyond what was written, and the file is sound.
            #expect(try keychain.accounts(forService: prefix).count >= acknowledged)
            let check = try DatabaseQueue(path: keychain.path).read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
            #expect(check == "ok")
        }
    }
}
