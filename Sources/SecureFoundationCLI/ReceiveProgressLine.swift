import AgeCommandLine
import Foundation

/// Progress of files received by `share serve` (docs/CLI.md, "Progress"): one line per file,
/// `share serve: NAME from DEVICE… 42% 1.5/3.0 MiB`, redrawn at most 5 times a second as the
/// bytes arrive and cleared before each line the server prints. Only where ``ProgressLine``
/// draws (standard error a terminal, not turned off).
final class ReceiveProgressLine: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var lastDraw = Date.distantPast
    private var drawn = false

    /// Draws the line for `name` (throttled; the last piece of a file is always drawn).
    func report(name: String, device: String, received: UInt64, size: UInt64) {
        lock.withLock {
            let now = Date()
            guard received >= size || now.timeIntervalSince(lastDraw) >= 0.2 else { return }
            lastDraw = now
            let percent = size == 0 ? 100 : Int(min(100, Double(received) * 100 / Double(size)))
            ProgressLine.emit("\r\u{1B}[2Kshare serve: \(name) from \(device)… \(percent)% "
                              + "\(ProgressLine.mebibytes(Int64(clamping: received)))/\(ProgressLine.mebibytes(Int64(clamping: size))) MiB")
            drawn = true
        }
    }

    /// Clears the line (before a message, or when the file is done).
    func clear() {
        lock.withLock {
            guard drawn else { return }
            ProgressLine.emit("\r\u{1B}[2K")
            drawn = false
            lastDraw = .distantPast
        }
    }
}
