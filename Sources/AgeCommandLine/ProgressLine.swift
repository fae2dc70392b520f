import Cipher
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Progress on standard error for work that can take more than a second (docs/CLI.md,
/// "Progress"): one line, `LABEL… 42% 120 MiB/s 3 s` when the amount is known, `LABEL… 3 s`
/// otherwise, redrawn at most 5 times a second by a thread of its own and cleared when the work
/// ends. Only when standard error is a terminal, and unless `SECUREFOUNDATION_PROGRESS=off`:
/// a pipe or a file never gets it. It appears once the work has run for a second
/// (`SECUREFOUNDATION_PROGRESS_DELAY`, seconds, changes that; 0 draws it at once).
package final class ProgressLine: @unchecked Sendable {
    private let condition = Condition()
    private let label: String
    private let total: Int64?
    private let start = Date()
    // Guarded by `condition`.
    private var done: Int64 = 0
    private var finished = false
    private var exited = false
    private var drawn = false

    /// The line being drawn, so that a message on standard error clears it first.
    nonisolated(unsafe) private static var current: ProgressLine?
    private static let currentLock = Lock()

    private init(label: String, total: Int64?) {
        self.label = label
        self.total = total
    }

    /// Whether progress is drawn at all: standard error is a terminal and it is not turned off.
    package static var enabled: Bool {
        isatty(2) == 1 && ProcessInfo.processInfo.environment["SECUREFOUNDATION_PROGRESS"] != "off"
    }

    package static var delay: TimeInterval {
        ProcessInfo.processInfo.environment["SECUREFOUNDATION_PROGRESS_DELAY"].flatMap(TimeInterval.init)
            .map { min(max($0, 0), 60) } ?? 1
    }

    /// Runs `body` with a progress line. `body` gets a callback for the amount done so far (of
    /// `total` bytes, when known); without a terminal the callback does nothing.
    package static func run<T>(_ label: String, total: Int64? = nil, _ body: (_ report: @escaping (Int64) -> Void) throws -> T) rethrows -> T {
        guard let line = begin(label, total: total) else { return try body { _ in } }
        defer { line.end() }
        return try body { value in line.condition.withLock { line.done = value } }
    }

    /// As ``run(_:total:_:)``, for asynchronous work (a transfer): the callback may be called
    /// from any task.
    package static func run<T>(_ label: String, total: Int64? = nil,
                               _ body: (_ report: @escaping @Sendable (Int64) -> Void) async throws -> T) async rethrows -> T {
        guard let line = begin(label, total: total) else { return try await body { _ in } }
        defer { line.end() }
        return try await body { value in line.condition.withLock { line.done = value } }
    }

    /// A line drawn by a thread of its own from now on, or nil when progress is not drawn.
    private static func begin(_ label: String, total: Int64?) -> ProgressLine? {
        guard enabled else { return nil }
        let line = ProgressLine(label: label, total: total.flatMap { $0 > 0 ? $0 : nil })
        let delay = delay
        currentLock.withLock { current = line }
        if delay == 0 { line.condition.withLock { line.draw() } }
        guard Threads.detach(name: "progress", { line.loop(delay: delay) }) else {
            // No thread for it: no progress line, and nothing for `end` to wait for.
            currentLock.withLock { if current === line { current = nil } }
            line.condition.withLock { line.clear() }
            return nil
        }
        return line
    }

    private func end() {
        finish()
        Self.currentLock.withLock { if Self.current === self { Self.current = nil } }
    }

    /// Clears the line before a message is written to standard error (it is drawn again later).
    package static func clearForMessage() {
        guard let line = currentLock.withLock({ current }) else { return }
        line.condition.withLock { line.clear() }
    }

    private func loop(delay: TimeInterval) {
        condition.lock()
        let first = Date(timeIntervalSinceNow: delay)
        while !finished && Date() < first { condition.wait(seconds: first.timeIntervalSinceNow) }
        // Redrawn every 0.2 s until the work ends (bounded by the work itself).
        while !finished {
            draw()
            condition.wait(seconds: 0.2)
        }
        clear()
        exited = true
        condition.broadcast()
        condition.unlock()
    }

    private func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        // The drawing thread clears the line and exits within one wake-up.
        while !exited { condition.wait() }
        condition.unlock()
    }

    /// Call with `condition` held.
    private func draw() {
        let elapsed = Date().timeIntervalSince(start)
        var text = "\r\u{1B}[2K" + label + "… "
        if let total {
            let percent = Int(min(100, Double(done) * 100 / Double(total)))
            let rate = Double(done) / max(elapsed, 0.001) / 1_048_576
            text += "\(percent)% \(Self.mebibytes(done))/\(Self.mebibytes(total)) MiB \(Int(rate.rounded())) MiB/s "
        }
        text += "\(Int(elapsed)) s"
        Self.emit(text)
        drawn = true
    }

    /// Call with `condition` held.
    private func clear() {
        guard drawn else { return }
        Self.emit("\r\u{1B}[2K")
        drawn = false
    }

    package static func mebibytes(_ bytes: Int64) -> String {
        let value = Double(bytes) / 1_048_576
        // Halves to even, as printf's %.1f and %.0f round them.
        guard value < 10 else { return "\(Int(value.rounded(.toNearestOrEven)))" }
        let tenths = Int((value * 10).rounded(.toNearestOrEven))
        return "\(tenths / 10).\(tenths % 10)"
    }

    package static func emit(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
