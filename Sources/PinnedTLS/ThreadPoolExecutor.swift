import Foundation

/// A task executor of its own threads, apart from Swift's cooperative pool.
///
/// A chain that is not in the verified-chain cache is validated by swift-certificates, whose
/// API is asynchronous. Run on the cooperative pool, that work waits behind whatever else the
/// program runs there; a program that blocks those threads (one per core) would stall every
/// handshake until the peer's handshake timeout. When the evaluation can only compute (anchors
/// held in memory, no report handler), it runs on the connection's event loop
/// (`EventLoopTaskExecutor`); when it may wait (keychain anchors, the system store, a report
/// handler), ``verification`` runs it, so a handshake's time depends on the handshake. (The
/// package's network tests use one too.)
package final class ThreadPoolExecutor: TaskExecutor, @unchecked Sendable {
    /// The two threads that verify peer chains.
    static let verification = ThreadPoolExecutor(threads: 2, name: "PinnedTLS verification")

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    package init(threads: Int, name: String) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "\(name) \(index)"
            thread.start()
        }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
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
