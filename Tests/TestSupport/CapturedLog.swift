import Foundation
import Logging

/// A swift-log handler that keeps every line (level, message, metadata) for a test to read.
public final class CapturedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [String] = []

    public init() {}

    /// A logger whose lines this keeps (every level).
    public func logger(_ label: String = "test") -> Logger {
        Logger(label: label) { _ in Handler(log: self) }
    }

    /// Every line so far: "LEVEL message key=value...".
    public var lines: [String] { lock.withLock { records } }

    fileprivate func append(_ line: String) { lock.withLock { records.append(line) } }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = all.keys.sorted().map { "\($0)=\(all[$0]!)" }.joined(separator: " ")
            log.append("\(event.level) \(event.message)\(fields.isEmpty ? "" : " " + fields)")
        }
    }
}
