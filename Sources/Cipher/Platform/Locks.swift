import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutual-exclusion lock over a `pthread_mutex_t` of its own allocation: what `NSLock` gives,
/// without Foundation's `NSLock`, which is not in FoundationEssentials. The age modules (Cipher,
/// Shredder, Age) link FoundationEssentials only, so the front program carries no ICU data
/// (docs/ARCHITECTURE.md, "Foundation and ICU").
///
/// Unlock from the thread that locked, as with `NSLock`. Not recursive.
package final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // A default mutex: initialisation cannot fail for want of memory on Linux or Darwin.
        _ = pthread_mutex_init(mutex, nil)
    }

    deinit {
        _ = pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Waits for the lock and takes it.
    package func lock() { _ = pthread_mutex_lock(mutex) }

    /// Takes the lock when it is free.
    /// - Returns: Whether it was taken.
    package func `try`() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    /// Gives the lock back.
    package func unlock() { _ = pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock.
    /// - Parameter body: What to run.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A condition variable with its own mutex: what `NSCondition` gives, without Foundation's
/// internationalization part (see ``Lock``). Waits on a timeout measure it on the monotonic
/// clock (on Linux), so a change of the wall clock neither shortens nor stretches them.
package final class Condition: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        _ = pthread_mutex_init(mutex, nil)
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        #if os(Linux)
        var attributes = pthread_condattr_t()
        _ = pthread_condattr_init(&attributes)
        _ = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        _ = pthread_cond_init(cond, &attributes)
        _ = pthread_condattr_destroy(&attributes)
        #else
        _ = pthread_cond_init(cond, nil)
        #endif
    }

    deinit {
        _ = pthread_cond_destroy(cond)
        cond.deinitialize(count: 1)
        cond.deallocate()
        _ = pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Waits for the mutex and takes it.
    package func lock() { _ = pthread_mutex_lock(mutex) }

    /// Gives the mutex back.
    package func unlock() { _ = pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the mutex.
    /// - Parameter body: What to run.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// With the mutex held: gives it up until signalled (or woken spuriously), then takes it again.
    package func wait() { _ = pthread_cond_wait(cond, mutex) }

    /// With the mutex held: as ``wait()``, for at most `seconds`.
    /// - Parameter seconds: The longest wait (0 or less: none).
    /// - Returns: False when the time ran out.
    @discardableResult
    package func wait(seconds: Double) -> Bool {
        guard seconds > 0 else { return false }
        let whole = min(seconds, 86_400 * 365)
        var deadline = timespec()
        #if os(Linux)
        _ = clock_gettime(CLOCK_MONOTONIC, &deadline)
        #else
        _ = clock_gettime(CLOCK_REALTIME, &deadline)
        #endif
        let nanoseconds = Int(deadline.tv_nsec) + Int((whole - whole.rounded(.down)) * 1e9)
        deadline.tv_sec += Int(whole.rounded(.down)) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        return pthread_cond_timedwait(cond, mutex, &deadline) == 0
    }

    /// Wakes one waiter.
    package func signal() { _ = pthread_cond_signal(cond) }

    /// Wakes every waiter.
    package func broadcast() { _ = pthread_cond_broadcast(cond) }
}

/// Threads of the program's own, started detached: what Foundation's `Thread` gives here (see ``Lock``).
package enum Threads {
    private final class Start {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts `body` on a new detached thread.
    /// - Parameters:
    ///   - name: The thread's name as tools show it (at most 15 bytes are kept on Linux).
    ///   - body: What the thread runs; the thread ends when it returns.
    /// - Returns: False when the system would not start a thread (`body` was not run).
    @discardableResult
    package static func detach(name: String? = nil, _ body: @escaping @Sendable () -> Void) -> Bool {
        let start = Unmanaged.passRetained(Start {
            if let name { sf_set_thread_name(name) }
            body()
        })
        var attributes = pthread_attr_t()
        _ = pthread_attr_init(&attributes)
        defer { _ = pthread_attr_destroy(&attributes) }
        _ = pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        #if os(Linux)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let result = pthread_create(&thread, &attributes, { context in
            let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
            start.body()
            return nil
        }, start.toOpaque())
        if result != 0 {
            start.release()
            return false
        }
        return true
    }
}
