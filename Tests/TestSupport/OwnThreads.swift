import Testing
import PinnedTLS

/// The executor network tests run on: threads of their own, outside Swift's cooperative pool.
///
/// The cooperative pool has one thread per core. Synchronous tests that wait for a child
/// process hold one of those threads for seconds; on a two-core machine two such tests
/// stop every asynchronous test at once, and a TLS handshake or a server's handler then
/// misses its deadline although nothing is wrong. Tests that talk over the network run
/// on these threads instead (see `.onOwnThreads`), so their deadlines measure the code.
public enum TestExecutor {
    public static let shared: any TaskExecutor = ThreadPoolExecutor(threads: 4, name: "test-executor")
}

/// Runs each test of a suite with `TestExecutor.shared` as its task executor, so that the
/// test and the child tasks it starts are not starved by blocking tests elsewhere.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil || !test.isSuite else { return try await function() }
        try await withTaskExecutorPreference(TestExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// Runs the tests on threads of their own, outside Swift's cooperative pool.
    public static var onOwnThreads: Self { OwnThreadsTrait() }
}
