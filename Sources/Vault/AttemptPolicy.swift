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

    /// The largest erase-after count a vault stores.
    static let maximumEraseAfter = 1_000_000

    /// - Parameters:
    ///   - delays: The wait after the 1st, 2nd, … consecutive failure.
    ///   - eraseAfter: Erase after this many consecutive failures (at least 1), or nil.
    public init(delays: [Duration], eraseAfter: Int? = nil) {
        self.delays = delays
        self.eraseAfter = eraseAfter.map { min(max(1, $0), AttemptPolicy.maximumEraseAfter) }
    }

    /// iOS's schedule: failures 1–4 no wait, the 5th 1 min, the 6th 5 min, the 7th and 8th
    /// 15 min, the 9th and later 1 h. No erasure.
    public static let iOS = AttemptPolicy(delays: [
        .zero, .zero, .zero, .zero, .seconds(60), .seconds(300), .seconds(900), .seconds(900), .seconds(3600),
    ])

    /// No waits and no erasure (for tests of other behaviour; not for production).
    public static let unlimited = AttemptPolicy(delays: [.zero])

    /// The same schedule, erasing after `failures` consecutive failures.
    /// - Parameter failures: The number of consecutive failures that erases the vault.
    /// - Returns: The new policy.
    public func erasing(after failures: Int) -> AttemptPolicy {
        AttemptPolicy(delays: delays, eraseAfter: failures)
    }

    /// The wait imposed after `failures` consecutive failures.
    /// - Parameter failures: The number of consecutive failures so far.
    /// - Returns: The wait before the next attempt (zero: none).
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
    /// How many of `failures` were imputed for a damaged record: they set the delay but never
    /// count towards erasure (absent in records written before this field existed: zero).
    var uncounted: Int?
    /// 2 when `uncounted` is stored; absent (version 1) otherwise.
    var version: Int?
    /// Set by `load` (never stored) when the file did not parse.
    var damaged: Bool?

    /// The failures that count towards erase-after-N.
    var countedFailures: Int { max(0, failures - min(max(uncounted ?? 0, 0), failures)) }

    /// The worst case a damaged record is read as: this many failures (at least nine, iOS's
    /// longest delay), none of them counted towards erasure, the delay starting now.
    static func damagedRecord(policy: AttemptPolicy, now: Date) -> AttemptRecord {
        let level = max(9, policy.delays.count)
        return AttemptRecord(failures: level, lastFailure: now.timeIntervalSince1970, uncounted: level)
    }

    static let fileName = "attempts"

    static func load(directory: String) throws -> AttemptRecord {
        let path = directory + "/" + fileName
        guard access(path, F_OK) == 0 else { return AttemptRecord() }
        try SecureFile.checkPrivate(path, isDirectory: false)
        let bytes = try SecureFile.read(path, maxLength: 4096)
        // Created but never written (a crash between open and the first write): no record.
        if bytes.isEmpty { return AttemptRecord() }
        do {
            var record = try CanonicalEncoding.decode(AttemptRecord.self, from: bytes)
            // Keep hostile values in range (no overflow when counting on).
            record.failures = min(max(record.failures, 0), 1_000_000)
            record.uncounted = record.uncounted.map { min(max($0, 0), record.failures) }
            record.damaged = nil
            guard record.version == nil || record.version == 2 else { throw VaultError.corrupted("unknown attempt record version") }
            if !record.lastFailure.isFinite { record.lastFailure = .greatestFiniteMagnitude }
            return record
        } catch {
            // A damaged counter must not reset to zero: treat it as nine failures with the
            // longest wait still running. It never erases: the vault does not know how many of
            // these failures really happened (`attempt` stores it with `uncounted`).
            return AttemptRecord(failures: 9, lastFailure: .greatestFiniteMagnitude, uncounted: 9, damaged: true)
        }
    }

    /// The record's fixed size on disk: canonical JSON padded with spaces, so it is rewritten in
    /// place with one `pwrite`.
    static let recordSize = 128

    /// Writes the record in place (under the vault's flock). With `durable` the write is followed
    /// by `fdatasync`, so a failure recorded before a check survives a power loss; a reset after
    /// success is not synced (losing it leaves one failure too many, never one too few).
    ///
    /// The file is rewritten in place rather than replaced by rename: it is one short record that
    /// only flock holders read, and the single `fdatasync` keeps unlock within a few milliseconds
    /// of the KDF. A record torn by a power loss does not parse and is read as the worst case.
    func store(directory: String, durable: Bool = true) throws {
        let path = directory + "/" + AttemptRecord.fileName
        var stored = self
        stored.damaged = nil
        if stored.uncounted == 0 { stored.uncounted = nil }
        stored.version = stored.uncounted == nil ? nil : 2
        var bytes = Array(try CanonicalEncoding.encode(stored))
        guard bytes.count <= AttemptRecord.recordSize else { throw VaultError.corrupted("attempt record too long") }
        bytes += [UInt8](repeating: 0x20, count: AttemptRecord.recordSize - bytes.count - 1) + [0x0A]
        try VaultFiles.overwriteInPlace(bytes, path: path, durable: durable)
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

extension CryptoManager {
    /// The rollback anchor that also keeps the failed-attempt count (nil: none, or no vault).
    func attemptAnchor(_ state: VaultState?) -> RollbackAnchor? {
        guard let state = state ?? ((try? VaultState.load(directory: directory)) ?? nil) else { return nil }
        return anchor(for: state)
    }

    /// The failed-attempt record: `attempts` in the data directory, raised to the count kept in
    /// the rollback anchor beside the device key (whoever can write the data directory can delete
    /// or zero `attempts`, not the anchor). A damaged `attempts` is returned as it is (read as the
    /// longest delay, never as a reason to erase). Call with the file lock held.
    func loadAttempts(_ anchor: RollbackAnchor?) throws -> AttemptRecord {
        var record = try AttemptRecord.load(directory: directory)
        guard record.damaged != true, let anchor, let kept = try anchor.attempts() else { return record }
        if kept.failures > record.failures {
            record.failures = kept.failures
            record.uncounted = kept.uncounted
        }
        record.lastFailure = max(record.lastFailure, kept.lastFailure)
        return record
    }

    /// Stores the record in the data directory, then in the anchor. Call with the file lock held.
    func storeAttempts(_ record: AttemptRecord, anchor: RollbackAnchor?, durable: Bool = true) throws {
        try record.store(directory: directory, durable: durable)
        try anchor?.storeAttempts(record)
    }
}
