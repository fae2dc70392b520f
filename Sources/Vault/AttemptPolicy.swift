import Foundation
import Cipher

/// How failed unlock attempts are limited: escalating delays, and optionally erasure after a
/// number of consecutive failures.
public struct AttemptPolicy: Sendable, Hashable {
    /// `delays[i]` is the wait imposed after the (i+1)-th consecutive failure; failures beyond the
    /// end of the list use the last entry.
    public var delays: [Duration]
    /// Destroy the wrapped keys once this many consecutive attempts have failed (nil: never).
    public var eraseAfter: Int?

    /// - Parameters:
    ///   - delays: The wait after the 1st, 2nd, … consecutive failure.
    ///   - eraseAfter: Erase after this many consecutive failures (at least 1), or nil.
    public init(delays: [Duration], eraseAfter: Int? = nil) {
        self.delays = delays
        self.eraseAfter = eraseAfter.map { max(1, $0) }
    }

    /// iOS's schedule: failures 1–4 no wait, the 5th 1 min, the 6th 5 min, the 7th and 8th
    /// 15 min, the 9th and later 1 h. No erasure.
    public static let iOS = AttemptPolicy(delays: [
        .zero, .zero, .zero, .zero, .seconds(60), .seconds(300), .seconds(900), .seconds(900), .seconds(3600),
    ])

    /// No waits and no erasure (for tests of other behaviour; not for production).
    public static let unlimited = AttemptPolicy(delays: [.zero])

    /// The same schedule, erasing after `failures` consecutive failures.
    public func erasing(after failures: Int) -> AttemptPolicy {
        AttemptPolicy(delays: delays, eraseAfter: failures)
    }

    /// The wait imposed after `failures` consecutive failures.
    public func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0, !delays.isEmpty else { return .zero }
        return delays[min(failures, delays.count) - 1]
    }
}

/// The persistent failed-attempt record: `attempts` in the data directory, read and written
/// under the vault's flock so concurrent processes see one counter.
struct AttemptRecord: Codable, Equatable {
    /// Consecutive failed attempts (an attempt counts as failed from the moment it starts until it succeeds).
    var failures: Int = 0
    /// When the last attempt started, in seconds since 1970 (the delay runs from here).
    var lastFailure: Double = 0

    static let fileName = "attempts"

    static func load(directory: String) throws -> AttemptRecord {
        let path = directory + "/" + fileName
        guard access(path, F_OK) == 0 else { return AttemptRecord() }
        try SecureFile.checkPrivate(path, isDirectory: false)
        let bytes = try SecureFile.read(path, maxLength: 4096)
        do {
            return try CanonicalEncoding.decode(AttemptRecord.self, from: bytes)
        } catch {
            // A damaged counter must not reset to zero: treat it as nine failures with the
            // longest wait still running.
            return AttemptRecord(failures: 9, lastFailure: .greatestFiniteMagnitude)
        }
    }

    func store(directory: String) throws {
        let data = try CanonicalEncoding.encode(self)
        try SecureFile.writeAtomically(data, to: directory + "/" + AttemptRecord.fileName)
    }

    /// How long to wait before an attempt is accepted at `now` (zero: accepted now).
    /// A clock that went backwards never makes the wait longer than the policy's delay.
    func wait(at now: Date, policy: AttemptPolicy) -> Duration {
        let delay = policy.delay(afterFailures: failures)
        guard delay > .zero else { return .zero }
        let delaySeconds = Double(delay.components.seconds)
        let elapsed = now.timeIntervalSince1970 - lastFailure
        let remaining = min(delaySeconds, delaySeconds - elapsed)
        guard remaining > 0 else { return .zero }
        return .milliseconds(Int64((remaining * 1000).rounded(.up)))
    }
}
