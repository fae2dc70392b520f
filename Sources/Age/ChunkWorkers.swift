#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher
import CPlatform

/// How many threads seal or open the chunks of a batch.
enum ChunkWorkers {
    /// The cores this process may run on (its CPU affinity, as `taskset` sets it).
    static let cores: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// The environment variable that asks for a number of chunk workers (1 to 256), for
    /// measurements; one per core without it.
    static let variable = "SECUREFOUNDATION_AGE_WORKERS"

    /// The chunk workers: one per core, or the number ``variable`` asks for, never more than
    /// the cores (a worker without a core only takes turns with one that has, and each switch
    /// costs the reader or the writer time).
    static let all: Int = {
        if let text = getenv(variable), let count = Int(String(cString: text)), (1...256).contains(count) { return min(count, cores) }
        return cores
    }()

    /// The cores left once the background writer has one of its own. Copying a batch into a
    /// file or a pipe costs the kernel about as much CPU as sealing it, so on two cores the
    /// fastest pipeline is one thread sealing and one writing: sealing on every core as well
    /// left three busy threads on two cores, the writer (the critical path) waiting for a core
    /// and the batches bouncing between the cores' caches.
    static var besideWriter: Int { max(1, all - 1) }

    /// Whether writes to `fd` cost real CPU: anything but a character device (`/dev/null`,
    /// a terminal), i.e. regular files, pipes and sockets.
    static func writesCostCPU(_ fd: Int32) -> Bool {
        guard let info = try? FileCalls.status(fd) else { return true }
        return info.kind != .characterDevice
    }
}

/// Runs `body(i)` for i in 0..<count on up to `workers` threads (the calling one included).
@inline(__always)
func forEachChunk(_ count: Int, workers: Int, _ body: @Sendable (Int) -> Void) {
    if workers <= 1 || count <= 1 {
        for i in 0..<count { body(i) }
    } else if workers >= ChunkWorkers.cores {
        DispatchQueue.concurrentPerform(iterations: count, execute: body)
    } else {
        let threads = min(workers, count)
        DispatchQueue.concurrentPerform(iterations: threads) { (thread: Int) -> Void in
            for i in stride(from: thread, to: count, by: threads) { body(i) }
        }
    }
}
