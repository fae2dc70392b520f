import Foundation

/// The threads that verify peer chains, apart from Swift's cooperative pool.
///
/// A chain that is not in the verified-chain cache is validated by swift-certificates, whose
/// API is asynchronous. Run on the cooperative pool, that work waits behind whatever else the
/// program runs there; a program that blocks those threads (one per core) would stall every
/// handshake until the peer's handshake timeout. These two threads run only verification, so
/// a handshake's time depends on the handshake.
final class VerificationExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = VerificationExecutor(threads: 2)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init(threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "PinnedTLS verification \(index)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
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
