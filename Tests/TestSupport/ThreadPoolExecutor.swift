import Foundation
import Testing

/// A task executor of its own threads, outside Swift's cooperative pool.
///
/// The cooperative pool has one thread per core. Synchronous tests that wait for a child
/// process hold one of those threads for seconds; on a two-core machine two such tests
/// stop every asynchronous test at once, and a TLS handshake or a server's handler then
/// misses its deadline although nothing is wrong. Tests that talk over the network run
/// on these threads instead (see `.onOwnThreads`), so their deadlines measure the code.
public final class ThreadPoolExecutor: TaskExecutor, @unchecked Sendable {
    public static let shared = ThreadPoolExecutor(threads: 4, name: "test-executor")

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    public init(threads: Int, name: String) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs each test of a suite with `ThreadPoolExecutor.shared` as its task executor, so
/// that the test and the child tasks it starts are not starved by blocking tests elsewhere.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil || !test.isSuite else { return try await function() }
        try await withTaskExecutorPreference(ThreadPoolExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// Runs the tests on threads of their own, outside Swift's cooperative pool.
    public static var onOwnThreads: Self { OwnThreadsTrait() }
}
