import Foundation
import Cipher

// Cipher links FoundationEssentials only (so the front program carries no ICU data), which has
// no `InputStream`; the stream overload lives here, in a module that links all of Foundation,
// and reaches clients of the umbrella as before.
extension Hashing {
    /// The digest of a stream, read in constant memory.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - stream: The stream (opened here if it is not open yet).
    /// - Returns: The digest.
    /// - Throws: `CipherError.io` when the stream reports an error.
    public static func digest(_ algorithm: HashAlgorithm, of stream: InputStream) throws(CipherError) -> [UInt8] {
        var hasher = IncrementalDigest(algorithm)
        stream.open()
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let n = stream.read(&buffer, maxLength: buffer.count)
            if n < 0 { throw CipherError.io("cannot read the stream: \(stream.streamError.map { "\($0)" } ?? "unknown error")") }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return hasher.finalize()
    }

}
