import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct WriteCoalescingTests {
    @Test func readsSeePendingWritesAndFlushMakesThemVisibleToOthers() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let first = try open(dir, source, interval: .seconds(3600))
        let second = try open(dir, source, interval: .seconds(3600))
        try first.setPassword("one", forService: "s", account: "a")
        #expect(first.pendingWriteCount == 1)
        #expect(try first.password(forService: "s", account: "a") == "one")
        #expect(keychainError { _ = try second.password(forService: "s", account: "a") }?.isNotFound == true)
        try first.flush()
        #expect(first.pendingWriteCount == 0)
        #expect(try second.password(forService: "s", account: "a") == "one")
        // An update through one connection invalidates the other's read cache.
        try first.setPassword("two", forService: "s", account: "a")
        try first.flush()
        #expect(try second.password(forService: "s", account: "a") == "two")
        try first.deletePassword(forService: "s", account: "a")
        #expect(keychainError { _ = try first.password(forService: "s", account: "a") }?.isNotFound == true)
        #expect(try second.password(forService: "s", account: "a") == "two")
        try first.flush()
        #expect(keychainError { _ = try second.password(forService: "s", account: "a") }?.isNotFound == true)
    }

    @Test func backgroundWriterCommitsWithoutFlush() async throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .milliseconds(20))
        try keychain.setPassword("v", forService: "s", account: "a")
        for _ in 0..<200 where keychain.pendingWriteCount > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(keychain.pendingWriteCount == 0)
        let other = try open(dir, source)
        #expect(try other.password(forService: "s", account: "a") == "v")
    }

    @Test func droppedWithoutCloseStillCommitsAndCloses() async throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        for index in 0..<20 {
            // Released at once, with its write still pending: the scheduled commit keeps it alive.
            try open(dir, source, interval: .milliseconds(10)).setPassword("v\(index)", forService: "s", account: "a\(index)")
        }
        let keychain = try open(dir, source)
        // Each dropped keychain commits on its own writer, in no particular order: wait for all.
        func committed() -> Bool { (0..<20).allSatisfy { (try? keychain.password(forService: "s", account: "a\($0)")) != nil } }
        for _ in 0..<300 where !committed() { try await Task.sleep(for: .milliseconds(10)) }
        for index in 0..<20 { #expect(try keychain.password(forService: "s", account: "a\(index)") == "v\(index)") }
    }

    @Test func flushIsDurableAcrossReopen() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        do {
            let keychain = try open(dir, source, interval: .seconds(3600))
            for index in 0..<100 { try keychain.setPassword("p\(index)", forService: "svc", account: "a\(index)") }
            try keychain.flush()
        }
        let reopened = try open(dir, source)
        for index in 0..<100 { #expect(try reopened.password(forService: "svc", account: "a\(index)") == "p\(index)") }
    }

    @Test func threadsWritingAndReading() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .milliseconds(5))
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<300 {
                do {
                    try keychain.setPassword("t\(thread)-\(index)", forService: "thread\(thread)", account: "a\(index)")
                    if try keychain.password(forService: "thread\(thread)", account: "a\(index)") != "t\(thread)-\(index)" { failures.add() }
                    if index % 50 == 0 { try keychain.flush() }
                } catch {
                    failures.add()
                }
            }
        }
        try keychain.flush()
        #expect(failures.value == 0)
        let reopened = try open(dir, source)
        for thread in 0..<8 {
            #expect(try reopened.accounts(forService: "thread\(thread)").count == 300)
            #expect(try reopened.password(forService: "thread\(thread)", account: "a299") == "t\(thread)-299")
        }
    }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
