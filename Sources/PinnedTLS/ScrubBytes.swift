import Foundation
import CPlatform

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
