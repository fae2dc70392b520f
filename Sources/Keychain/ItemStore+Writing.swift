import Foundation
import Crypto
import GRDB
import Cipher

// Writing: changes queued, coalesced and committed on the write queue; flush, close, checkpoints.
extension ItemStore {
    // MARK: Writing

    func enqueue(_ index: ItemID, _ change: PendingChange) throws {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        // One hash of the id in the common case (a new item): the change goes in first. A write
        // that keeps the stored creation date takes the date of the row it replaces where this
        // keychain holds that row (pending, being committed, or cached); after a delete it is a
        // new item, created now. Otherwise the commit resolves it.
        let replaced = pending.updateValue(change, forKey: index)
        if case .put(let written) = change, !written.created.isKnown {
            var created = written.created
            switch replaced ?? (inFlight.isEmpty ? nil : inFlight[index]) {
            case .put(let old)?: created = old.created
            case .delete?: created = .at(written.modified)
            case nil: if !cache.isEmpty, let old = cache[index] { created = old.created }
            }
            if created != written.created {
                var row = written
                row.created = created
                pending[index] = .put(row)
            }
        }
        scheduleLocked(after: configuration.coalescingInterval)
    }

    func scheduleLocked(after delay: Duration) {
        guard !commitScheduled else { return }
        commitScheduled = true
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        writeQueue.asyncAfter(deadline: .now() + seconds) { [self] in
            do { try commitOnWriteQueue(fromTimer: true) } catch {}
        }
    }

    /// Commits the pending writes in one transaction. Runs on `writeQueue` only.
    /// `fromTimer` is true for the scheduled run; a flush leaves the scheduled run in place (it
    /// will find nothing or the writes made since), so a set-and-flush loop arms one timer per
    /// interval rather than one per flush.
    func commitOnWriteQueue(fromTimer: Bool = false) throws {
        let batch: [ItemID: PendingChange] = lock.withLock {
            if fromTimer { commitScheduled = false }
            if closed { return [:] }
            inFlight = pending
            // Writes keep arriving at about the same rate: start the next batch at this size.
            pending = Dictionary(minimumCapacity: min(pending.count, 1 << 16))
            return inFlight
        }
        guard !batch.isEmpty else { return }
        let startGeneration: Int64
        do {
            startGeneration = try writer.inDatabase { db -> Int64 in
                var start: Int64 = 0
                try db.inTransaction(.immediate) {
                    let upsert = DirectStatement(try db.cachedStatement(sql: KeychainSchema.upsertSQL))
                    let delete = DirectStatement(try db.cachedStatement(sql: KeychainSchema.deleteSQL))
                    // In index order: neighbouring inserts touch neighbouring B-tree pages.
                    for (index, change) in batch.sorted(by: { $0.key < $1.key }) {
                        switch change {
                        case .put(let row):
                            try upsert.bind(1, id: row.id)
                            try upsert.bind(2, int: Int64(row.accessibility))
                            try upsert.bind(3, blob: row.sealed)
                            try upsert.bind(4, double: row.created.seconds)
                            try upsert.bind(5, double: row.modified)
                            try upsert.bind(6, blob: row.mac)
                            try upsert.bind(7, int: row.created.isKnown ? 1 : 0)
                            try upsert.run(db)
                        case .delete:
                            try delete.bind(1, id: index)
                            try delete.run(db)
                        }
                    }
                    guard let next = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.bumpGenerationSQL)) else {
                        throw KeychainError.corrupted("\(path) has no generation counter in keychain_meta")
                    }
                    start = next - 1
                    return .commit
                }
                return start
            }
        } catch {
            let mapped = KeychainSchema.map(error, path: path)
            lock.withLock {
                for (index, change) in inFlight where pending[index] == nil { pending[index] = change }
                inFlight = [:]
                lastWriteError = mapped
                scheduleLocked(after: .milliseconds(250))
            }
            throw mapped
        }
        defer { checkpointIfDue() }
        // The committed batch is released after the lock is let go (freeing a large batch takes a while).
        let committed: [ItemID: PendingChange] = lock.withLock {
            lastWriteError = nil
            if knownGeneration < startGeneration {
                cache.removeAll(keepingCapacity: true)
                dropIDSetsLocked()
            }
            if knownGeneration <= startGeneration + 1 {
                knownGeneration = startGeneration + 1
                // Cached rows are brought up to date; rows not cached stay uncached (the next read
                // fetches them), so a large batch does not grow the cache by its whole size under
                // the lock.
                if !idSets.isEmpty {
                    for (index, change) in inFlight {
                        let group = GroupID(index)
                        guard idSets[group] != nil else { continue }
                        switch change {
                        case .delete: if idSets[group]!.remove(index) != nil { idSetTotal -= 1 }
                        case .put: if idSets[group]!.insert(index).inserted { idSetTotal += 1 }
                        }
                    }
                }
                if !cache.isEmpty {
                    for (index, change) in inFlight {
                        guard let old = cache[index] else { continue }
                        switch change {
                        case .delete: cache[index] = nil
                        case .put(var row):
                            if !row.created.isKnown { row.created = old.created }
                            cache[index] = row
                        }
                    }
                }
            } else {
                for index in inFlight.keys { cache[index] = nil }
                dropIDSetsLocked()
            }
            defer { inFlight = [:] }
            return inFlight
        }
        _ = committed
    }

    /// Copies committed WAL frames into the database (a passive checkpoint) at most once a second,
    /// as a separate job on `writeQueue`, so that the WAL stays small without a commit (or a
    /// flush) paying for the copy. Runs on `writeQueue` only.
    func checkpointIfDue() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard !checkpointScheduled, now - lastCheckpoint >= 1_000_000_000 else { return }
        checkpointScheduled = true
        writeQueue.async { [self] in
            checkpointScheduled = false
            lastCheckpoint = DispatchTime.now().uptimeNanoseconds
            guard !lock.withLock({ closed }) else { return }
            _ = try? writer.inDatabase { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        }
    }

    /// Commits every pending write now and returns once it is durable (the commit ran with
    /// `synchronous=FULL`, so the WAL was synced to disk).
    /// - Throws: The database errors of the commit; the writes stay pending and are retried.
    /// - Throws: ``KeychainError/closed(path:)`` after ``close()``.
    func flush() throws {
        try checkOpen()
        try writeQueue.sync {
            try commitOnWriteQueue()
        }
    }

    /// Commits the pending writes durably, then closes the connections and drops the rows held
    /// in memory. Afterwards every operation throws ``KeychainError/closed(path:)``; closing
    /// again does nothing.
    /// - Throws: The error of the final commit; the connections are closed regardless.
    func close() throws {
        if lock.withLock({ closed }) { return }
        let result = Result { try flush() }
        try writeQueue.sync {
            lock.withLock {
                closed = true
                cache.removeAll()
            }
            do {
                try writer.close()
                try reader.close()
            } catch {
                throw KeychainSchema.map(error, path: path)
            }
        }
        try result.get()
    }

    func checkOpenLocked() throws {
        if closed { throw KeychainError.closed(path: path) }
    }

    /// Throws ``KeychainError/closed(path:)`` once ``close()`` has run.
    func checkOpen() throws {
        try lock.withLock { try checkOpenLocked() }
    }

    /// The number of writes not yet committed.
    var pendingWriteCount: Int { lock.withLock { pending.count + inFlight.count } }

    /// The error of the last background commit, if it failed (the writes stay pending).
    var lastBackgroundError: KeychainError? { lock.withLock { lastWriteError } }
}
