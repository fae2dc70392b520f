import Foundation
import CPlatform

/// A value behind a lock, shared between the event loop and tasks.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLockedValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Overwrites bytes that held key material before their memory is released (explicit_bzero,
/// which the compiler may not elide).
func scrubBytes(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { raw in
        if let base = raw.baseAddress { sf_secure_zero(base, raw.count) }
    }
}

/// ``scrubBytes(_:)`` for `Data`.
func scrubBytes(_ data: inout Data) {
    data.withUnsafeMutableBytes { raw in
        if let base = raw.baseAddress { sf_secure_zero(base, raw.count) }
    }
}
