import Foundation
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

@Suite struct ProcessTests {
    private func runWorkers(dir: String, source: TestKeySource, prefixes: [String], count: Int, flushEvery: Int) throws -> [Process] {
        guard let worker = workerPath() else { throw KeychainError.invalidArgument("KeychainWorker not built") }
        return try prefixes.map { prefix in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            process.arguments = ["write", dir, source.masterHex, prefix, String(count), String(flushEvery)]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
    }

    @Test func fourProcessesWriteOneKeychain() throws {
        guard workerPath() != nil else {
            print("skipped: the KeychainWorker helper is not built (run swift build --build-tests)")
            return
        }
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
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        // The parent's connection sees the children's flushed writes.
        for prefix in prefixes {
            #expect(try parent.accounts(forService: prefix).count == 400)
            #expect(try parent.password(forService: prefix, account: "\(prefix)-399") == "\(prefix)-value-399")
        }
        #expect(try parent.accounts().count == 1800)
    }

    @Test func killDuringWritesLosesNothingFlushed() throws {
        guard let worker = workerPath() else {
            print("skipped: the KeychainWorker helper is not built (run swift build --build-tests)")
            return
        }
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let path = dir.sub("kc")
        for round in 0..<3 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            let prefix = "round\(round)"
            process.arguments = ["write", path, source.masterHex, prefix, "1000000", "7"]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            // Read acknowledgements until a few arrived, then kill -9 mid-stream.
            var acknowledged = 0
            var buffer = Data()
            let target = 20 + round * 15
            while acknowledged < target * 7 {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer += chunk
                for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") where line.hasPrefix("ack ") {
                    acknowledged = max(acknowledged, Int(line.dropFirst(4)) ?? 0)
                }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // Acknowledgements written before the kill, still in the pipe.
            let rest = pipe.fileHandleForReading.readDataToEndOfFile()
            for line in String(decoding: buffer + rest, as: UTF8.self).split(separator: "\n") where line.hasPrefix("ack ") {
                acknowledged = max(acknowledged, Int(line.dropFirst(4)) ?? 0)
            }
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
