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
import Crypto

/// The SHA-2 digests offered for general use.
public enum HashAlgorithm: String, Sendable, CaseIterable, Codable {
    case sha256, sha384, sha512

    /// Digest length in bytes.
    public var byteCount: Int {
        switch self {
        case .sha256: return 32
        case .sha384: return 48
        case .sha512: return 64
        }
    }
}

/// A running digest over any algorithm, fed incrementally.
public struct IncrementalDigest: Sendable {
    private enum State: Sendable {
        case sha256(SHA256), sha384(SHA384), sha512(SHA512)
        case md5(Insecure.MD5), sha1(Insecure.SHA1)
    }
    private var state: State

    /// - Parameter algorithm: The digest to compute.
    public init(_ algorithm: HashAlgorithm) {
        switch algorithm {
        case .sha256: state = .sha256(SHA256())
        case .sha384: state = .sha384(SHA384())
        case .sha512: state = .sha512(SHA512())
        }
    }

    init(insecure: Hashing.Insecure.Algorithm) {
        switch insecure {
        case .md5: state = .md5(Insecure.MD5())
        case .sha1: state = .sha1(Insecure.SHA1())
        }
    }

    /// Adds bytes.
    /// - Parameter bytes: The next bytes of the input.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        switch state {
        case .sha256(var h): h.update(bufferPointer: bytes); state = .sha256(h)
        case .sha384(var h): h.update(bufferPointer: bytes); state = .sha384(h)
        case .sha512(var h): h.update(bufferPointer: bytes); state = .sha512(h)
        case .md5(var h): h.update(bufferPointer: bytes); state = .md5(h)
        case .sha1(var h): h.update(bufferPointer: bytes); state = .sha1(h)
        }
    }

    /// Adds bytes.
    /// - Parameter bytes: The next bytes of the input.
    public mutating func update<Bytes: DataProtocol>(_ bytes: Bytes) {
        for region in bytes.regions { region.withUnsafeBytes { update($0) } }
    }

    /// The digest of everything added.
    /// - Returns: The digest of everything added (`byteCount` bytes of the algorithm).
    public func finalize() -> [UInt8] {
        switch state {
        case .sha256(let h): return Array(h.finalize())
        case .sha384(let h): return Array(h.finalize())
        case .sha512(let h): return Array(h.finalize())
        case .md5(let h): return Array(h.finalize())
        case .sha1(let h): return Array(h.finalize())
        }
    }
}

/// SHA-2 digests of bytes, streams, files and Codable values.
public enum Hashing {
    /// The buffer size for streamed hashing; memory stays constant whatever the input size.
    package static let chunkSize = 256 * 1024

    /// The digest of `bytes`.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - bytes: The input.
    /// - Returns: The digest.
    public static func digest<Bytes: DataProtocol>(_ algorithm: HashAlgorithm, of bytes: Bytes) -> [UInt8] {
        var hasher = IncrementalDigest(algorithm)
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// SHA-256 of `bytes`.
    /// - Parameter bytes: The input.
    /// - Returns: The 32-byte digest.
    public static func sha256<Bytes: DataProtocol>(_ bytes: Bytes) -> [UInt8] { digest(.sha256, of: bytes) }
    /// SHA-384 of `bytes`.
    /// - Parameter bytes: The input.
    /// - Returns: The 48-byte digest.
    public static func sha384<Bytes: DataProtocol>(_ bytes: Bytes) -> [UInt8] { digest(.sha384, of: bytes) }
    /// SHA-512 of `bytes`.
    /// - Parameter bytes: The input.
    /// - Returns: The 64-byte digest.
    public static func sha512<Bytes: DataProtocol>(_ bytes: Bytes) -> [UInt8] { digest(.sha512, of: bytes) }

    /// The digest of everything readable from `fd` until end of file, in constant memory.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - fd: An open descriptor, read from its current offset; not closed.
    ///   - progress: Called with the number of bytes read so far, after each read (nil: none).
    /// - Returns: The digest.
    /// - Throws: ``CipherError/io(_:)``.
    public static func digest(_ algorithm: HashAlgorithm, ofFileDescriptor fd: Int32,
                              progress: ((Int64) -> Void)? = nil) throws(CipherError) -> [UInt8] {
        try digest(algorithm, ofFileDescriptor: fd, named: "descriptor \(fd)", progress: progress)
    }

    /// As ``digest(_:ofFileDescriptor:progress:)``, with the name errors give the input.
    package static func digest(_ algorithm: HashAlgorithm, ofFileDescriptor fd: Int32, named name: String,
                               progress: ((Int64) -> Void)?) throws(CipherError) -> [UInt8] {
        var hasher = IncrementalDigest(algorithm)
        try feed(&hasher, from: fd, name: name, progress: progress)
        return hasher.finalize()
    }

    /// The digest of the file at `path`, streamed in constant memory.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - path: The file.
    /// - Returns: The digest.
    /// - Throws: ``CipherError/io(_:)`` when it cannot be opened or read.
    public static func digest(_ algorithm: HashAlgorithm, ofFile path: String) throws(CipherError) -> [UInt8] {
        var hasher = IncrementalDigest(algorithm)
        try feed(&hasher, fromFile: path)
        return hasher.finalize()
    }

    /// The digest of an async sequence of byte chunks.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - chunks: The input, chunk by chunk.
    /// - Returns: The digest.
    /// - Throws: What iterating `chunks` throws (`S.Failure`).
    public static func digest<S: AsyncSequence>(_ algorithm: HashAlgorithm, of chunks: S) async throws(S.Failure) -> [UInt8] where S.Element == [UInt8] {
        var hasher = IncrementalDigest(algorithm)
        for try await chunk in chunks { hasher.update(chunk) }
        return hasher.finalize()
    }

    /// The digest of a Codable value's canonical encoding (see ``CanonicalEncoding``): the same
    /// value gives the same digest on every run and platform.
    /// - Parameters:
    ///   - algorithm: The digest.
    ///   - value: The value.
    /// - Returns: The digest of its canonical encoding.
    /// - Throws: ``CipherError/coding(_:)`` when the value cannot be encoded.
    public static func digest<Value: Encodable>(_ algorithm: HashAlgorithm, ofValue value: Value) throws(CipherError) -> [UInt8] {
        digest(algorithm, of: try CanonicalEncoding.encode(value))
    }

    static func feed(_ hasher: inout IncrementalDigest, fromFile path: String) throws(CipherError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CipherError.io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try feed(&hasher, from: fd, name: path)
    }

    static func feed(_ hasher: inout IncrementalDigest, from fd: Int32, name: String,
                     progress: ((Int64) -> Void)? = nil) throws(CipherError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var total: Int64 = 0
        while true {
            let n = read(fd, buffer.baseAddress!, chunkSize)
            if n < 0 {
                if errno == EINTR { continue }
                throw CipherError.io("cannot read \(name): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            total += Int64(n)
            progress?(total)
        }
    }

    /// Broken digests, for checking legacy data only. Never use them for security.
    public enum Insecure {
        public enum Algorithm: String, Sendable, CaseIterable {
            case md5, sha1
        }

        /// MD5 of `bytes`.
        /// - Parameter bytes: The input.
        /// - Returns: The 16-byte MD5 digest.
        public static func md5<Bytes: DataProtocol>(_ bytes: Bytes) -> [UInt8] { digest(.md5, of: bytes) }
        /// SHA-1 of `bytes`.
        /// - Parameter bytes: The input.
        /// - Returns: The 20-byte SHA-1 digest.
        public static func sha1<Bytes: DataProtocol>(_ bytes: Bytes) -> [UInt8] { digest(.sha1, of: bytes) }

        /// - Parameters:
        ///   - algorithm: The legacy digest.
        ///   - bytes: The input.
        /// - Returns: The digest.
        public static func digest<Bytes: DataProtocol>(_ algorithm: Algorithm, of bytes: Bytes) -> [UInt8] {
            var hasher = IncrementalDigest(insecure: algorithm)
            hasher.update(bytes)
            return hasher.finalize()
        }

        /// A legacy digest of the file at `path`, streamed.
        /// - Parameters:
        ///   - algorithm: The legacy digest.
        ///   - path: The file.
        /// - Returns: The digest.
        /// - Throws: ``CipherError/io(_:)`` when it cannot be opened or read.
        public static func digest(_ algorithm: Algorithm, ofFile path: String) throws(CipherError) -> [UInt8] {
            var hasher = IncrementalDigest(insecure: algorithm)
            try Hashing.feed(&hasher, fromFile: path)
            return hasher.finalize()
        }

        /// A legacy digest of a descriptor's contents, streamed.
        /// - Parameters:
        ///   - algorithm: The legacy digest.
        ///   - fd: An open descriptor, read from its current offset; not closed.
        ///   - progress: Called with the number of bytes read so far, after each read (nil: none).
        /// - Returns: The digest.
        /// - Throws: ``CipherError/io(_:)`` on a read error.
        public static func digest(_ algorithm: Algorithm, ofFileDescriptor fd: Int32,
                                  progress: ((Int64) -> Void)? = nil) throws(CipherError) -> [UInt8] {
            try digest(algorithm, ofFileDescriptor: fd, named: "descriptor \(fd)", progress: progress)
        }

        /// As ``digest(_:ofFileDescriptor:progress:)``, with the name errors give the input.
        package static func digest(_ algorithm: Algorithm, ofFileDescriptor fd: Int32, named name: String,
                                   progress: ((Int64) -> Void)?) throws(CipherError) -> [UInt8] {
            var hasher = IncrementalDigest(insecure: algorithm)
            try Hashing.feed(&hasher, from: fd, name: name, progress: progress)
            return hasher.finalize()
        }
    }
}
