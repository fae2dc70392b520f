import Foundation
import Cipher

/// Where a program finds its run-time share.
public enum RuntimeShareSource: Sendable, Equatable {
    /// An environment variable of this name; its value's bytes are the share.
    case environment(String)
    /// A systemd credential: the file of this name in `$CREDENTIALS_DIRECTORY` (one trailing
    /// newline dropped), as `LoadCredential=` or `SetCredentialEncrypted=` provide.
    case credential(String)
    /// Given by the program itself before the first read, with
    /// ``RuntimeShare/provide(_:for:)`` (for example a sub-key of the vault's device key).
    case provided

    /// Reads the share, or nil when the source has none.
    /// - Parameters:
    ///   - namespace: The generated type's name, under which a ``provided`` share is kept.
    ///   - environment: The environment to read (nil: the process's own).
    /// - Returns: The share, or nil.
    /// - Throws: ``EmbeddedSecretsError/cipher(_:)`` when a credential file exists but cannot be read.
    public func read(namespace: String, environment: [String: String]? = nil) throws(EmbeddedSecretsError) -> SecretBytes? {
        switch self {
        case let .environment(name):
            if let environment {
                guard let value = environment[name] else { return nil }
                return SecretBytes(utf8: value)
            }
            // Straight from the process environment into locked memory: no Swift String copy.
            guard let pointer = getenv(name) else { return nil }
            let length = strlen(pointer)
            return SecretBytes(count: length) { buffer in
                if length > 0 { buffer.baseAddress!.copyMemory(from: pointer, byteCount: length) }
            }
        case let .credential(name):
            let directory = environment.map { $0["CREDENTIALS_DIRECTORY"] } ?? ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"]
            guard let directory, !directory.isEmpty, !name.contains("/") else { return nil }
            let path = directory + "/" + name
            guard access(path, F_OK) == 0 else { return nil }
            do throws(CipherError) { return try SecretBytes(contentsOfFile: path) } catch { throw .cipher(error) }
        case .provided:
            return RuntimeShare.current(for: namespace)
        }
    }

    /// Where the share is looked for, for error messages.
    public var summary: String {
        switch self {
        case let .environment(name): return "environment variable \(name)"
        case let .credential(name): return "systemd credential \(name) in $CREDENTIALS_DIRECTORY"
        case .provided: return "RuntimeShare.provide(_:for:) (not called yet)"
        }
    }
}

/// Run-time shares a program supplies itself, by generated type name.
public enum RuntimeShare {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var shares: [String: SecretBytes] = [:]

    /// Supplies the share for the generated type named `namespace` (the manifest's `typeName`,
    /// `Secrets` by default). The library keeps a copy in locked memory until ``clear(for:)``.
    /// - Parameters:
    ///   - share: The run-time share (copied; the caller keeps and wipes its own).
    ///   - namespace: The generated type's name.
    public static func provide(_ share: SecretBytes, for namespace: String) {
        let copy = share.slice(0..<share.count)
        lock.withLock {
            shares[namespace]?.wipe()
            shares[namespace] = copy
        }
    }

    /// Wipes and forgets the share of `namespace`.
    /// - Parameter namespace: The generated type's name.
    public static func clear(for namespace: String) {
        lock.withLock {
            shares[namespace]?.wipe()
            shares[namespace] = nil
        }
    }

    static func current(for namespace: String) -> SecretBytes? {
        lock.withLock {
            guard let share = shares[namespace] else { return nil }
            return share.slice(0..<share.count)
        }
    }
}

/// Reads secrets from a sealed blob: what generated code calls. Each read combines the key
/// shares, checks the blob, opens one secret and wipes every key; nothing is cached.
public struct EmbeddedSecretsReader: Sendable {
    private let blob: [UInt8]
    private let shares: [@Sendable () -> [UInt64]]
    private let runtimeShare: RuntimeShareSource?
    private let namespace: String
    private let environment: [String: String]?

    /// - Parameters:
    ///   - blob: The sealed secrets, base64 as the generator writes them.
    ///   - shares: Functions returning the shares of the per-build key, 4 big-endian words each.
    ///   - runtimeShare: Where the run-time share is, if the secrets were sealed with one.
    ///   - namespace: The generated type's name, for ``RuntimeShare``.
    ///   - environment: Looks variables up here instead of the process environment (tests).
    public init(blob: String, shares: [@Sendable () -> [UInt64]], runtimeShare: RuntimeShareSource?,
                namespace: String, environment: [String: String]? = nil) {
        self.blob = (try? Encoding.fromBase64(blob)) ?? []
        self.shares = shares
        self.runtimeShare = runtimeShare
        self.namespace = namespace
        self.environment = environment
    }

    /// The per-build key: the XOR of the shares.
    func buildKey() throws(EmbeddedSecretsError) -> SecretBytes {
        let words = shares.map { $0() }
        guard !words.isEmpty, words.allSatisfy({ $0.count == 4 }) else {
            throw EmbeddedSecretsError.tampered("the key shares are malformed")
        }
        return SecretBytes(count: SealedSecretsFormat.keyLength) { key in
            for share in words {
                for (index, word) in share.enumerated() {
                    for byte in 0..<8 {
                        key[index * 8 + byte] ^= UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * byte))
                    }
                }
            }
        }
    }

    /// The raw bytes of `name`, or nil if the optional secret had no value at build time.
    /// - Parameters:
    ///   - name: The secret's name in the manifest.
    ///   - type: The secret's declared type.
    /// - Returns: The value's bytes in locked memory, or nil.
    /// - Throws: ``EmbeddedSecretsError/tampered(_:)``, ``EmbeddedSecretsError/runtimeShareMissing(_:)``,
    ///   ``EmbeddedSecretsError/runtimeShareWrong(_:)``, as ``SealedSecretsFormat/open(_:name:type:buildKey:runtimeShare:)``;
    ///   ``EmbeddedSecretsError/cipher(_:)`` when a credential file cannot be read.
    public func bytes(_ name: String, type: EmbeddedSecretType) throws(EmbeddedSecretsError) -> SecretBytes? {
        let key = try buildKey()
        defer { key.wipe() }
        let parsed = try SealedSecretsFormat.verified(blob, buildKey: key)
        var share: SecretBytes?
        if parsed.needsRuntimeShare {
            guard let runtimeShare else {
                throw EmbeddedSecretsError.runtimeShareMissing("the generated code names no run-time share source")
            }
            guard let found = try runtimeShare.read(namespace: namespace, environment: environment) else {
                throw EmbeddedSecretsError.runtimeShareMissing("nothing in the \(runtimeShare.summary)")
            }
            share = found
        }
        return try SealedSecretsFormat.open(parsed, name: name, type: type, buildKey: key, runtimeShare: share)
    }

    private func required(_ name: String, _ type: EmbeddedSecretType) throws(EmbeddedSecretsError) -> SecretBytes {
        guard let value = try bytes(name, type: type) else { throw EmbeddedSecretsError.notFound(name) }
        return value
    }

    /// A `Data` secret (or a String one as bytes) in locked memory; wipe it when done.
    /// - Parameters:
    ///   - name: The secret's name in the manifest.
    ///   - type: The secret's declared type.
    /// - Returns: The value's bytes.
    /// - Throws: ``EmbeddedSecretsError/notFound(_:)`` when it had no value at build time, or as
    ///   ``bytes(_:type:)``.
    public func secretBytes(_ name: String, type: EmbeddedSecretType = .data) throws(EmbeddedSecretsError) -> SecretBytes {
        try required(name, type)
    }

    /// Calls `body` with the secret's bytes and wipes them afterwards. Untyped: it throws
    /// ``EmbeddedSecretsError`` and, unchanged, what `body` throws.
    /// - Parameters:
    ///   - name: The secret's name in the manifest.
    ///   - type: The secret's declared type.
    ///   - body: Uses the bytes; they must not escape it.
    /// - Returns: What `body` returns.
    /// - Throws: As ``secretBytes(_:type:)``, and what `body` throws.
    public func withSecret<Result>(_ name: String, type: EmbeddedSecretType,
                                   _ body: (SecretBytes) throws -> Result) throws -> Result {
        let value = try required(name, type)
        defer { value.wipe() }
        return try body(value)
    }

    /// A `String` secret. Swift strings cannot be wiped: prefer ``withSecret(_:type:_:)``.
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for bytes that are not UTF-8, or as
    ///   ``secretBytes(_:type:)``.
    public func string(_ name: String) throws(EmbeddedSecretsError) -> String {
        try Self.decodeString(required(name, .string), name: name)
    }

    /// An `Int` secret (sealed as 8 bytes, big-endian).
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for bytes that are not 8, or as
    ///   ``secretBytes(_:type:)``.
    public func int(_ name: String) throws(EmbeddedSecretsError) -> Int {
        try Self.decodeInt(required(name, .int), name: name)
    }

    /// A `Bool` secret (sealed as one byte, 0 or 1).
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for anything but one byte 0 or 1, or
    ///   as ``secretBytes(_:type:)``.
    public func bool(_ name: String) throws(EmbeddedSecretsError) -> Bool {
        try Self.decodeBool(required(name, .bool), name: name)
    }

    /// A `String` secret that may have had no value at build time (an optional entry of the
    /// manifest).
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value, or nil when it had none.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for bytes that are not UTF-8, or as
    ///   ``bytes(_:type:)``.
    public func optionalString(_ name: String) throws(EmbeddedSecretsError) -> String? {
        guard let value = try bytes(name, type: .string) else { return nil }
        return try Self.decodeString(value, name: name)
    }

    /// An `Int` secret that may have had no value at build time.
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value, or nil when it had none.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for bytes that are not 8, or as
    ///   ``bytes(_:type:)``.
    public func optionalInt(_ name: String) throws(EmbeddedSecretsError) -> Int? {
        guard let value = try bytes(name, type: .int) else { return nil }
        return try Self.decodeInt(value, name: name)
    }

    /// A `Bool` secret that may have had no value at build time.
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value, or nil when it had none.
    /// - Throws: ``EmbeddedSecretsError/invalidValue(_:)`` for anything but one byte 0 or 1, or
    ///   as ``bytes(_:type:)``.
    public func optionalBool(_ name: String) throws(EmbeddedSecretsError) -> Bool? {
        guard let value = try bytes(name, type: .bool) else { return nil }
        return try Self.decodeBool(value, name: name)
    }

    /// A `Data` secret that may have had no value at build time, as bytes the caller wipes.
    /// - Parameter name: The secret's name in the manifest.
    /// - Returns: The value's bytes, or nil when it had none.
    /// - Throws: As ``bytes(_:type:)``.
    public func optionalSecretBytes(_ name: String) throws(EmbeddedSecretsError) -> SecretBytes? {
        try bytes(name, type: .data)
    }

    static func decodeString(_ value: SecretBytes, name: String) throws(EmbeddedSecretsError) -> String {
        defer { value.wipe() }
        return try value.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(EmbeddedSecretsError) -> String in
            guard let text = String(validating: bytes, as: UTF8.self) else { throw EmbeddedSecretsError.invalidValue(name) }
            return text
        }
    }

    static func decodeInt(_ value: SecretBytes, name: String) throws(EmbeddedSecretsError) -> Int {
        defer { value.wipe() }
        return try value.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(EmbeddedSecretsError) -> Int in
            guard bytes.count == 8 else { throw EmbeddedSecretsError.invalidValue(name) }
            var result: UInt64 = 0
            for byte in bytes { result = result << 8 | UInt64(byte) }
            return Int(Int64(bitPattern: result))
        }
    }

    static func decodeBool(_ value: SecretBytes, name: String) throws(EmbeddedSecretsError) -> Bool {
        defer { value.wipe() }
        return try value.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(EmbeddedSecretsError) -> Bool in
            guard bytes.count == 1, bytes[0] <= 1 else { throw EmbeddedSecretsError.invalidValue(name) }
            return bytes[0] == 1
        }
    }

    /// The bytes an Int is sealed as: 8 bytes, big-endian two's complement.
    /// - Parameter value: The value.
    /// - Returns: Its 8 bytes.
    package static func encodeInt(_ value: Int) -> [UInt8] {
        let bits = UInt64(bitPattern: Int64(value))
        return (0..<8).map { UInt8(truncatingIfNeeded: bits >> UInt64(56 - 8 * $0)) }
    }
}
