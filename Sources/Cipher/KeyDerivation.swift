#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import CryptoExtras

/// Parameters of a password-based key derivation. Always stored beside the salt, so data
/// stays readable when the defaults rise.
public enum KDFParameters: Sendable, Hashable, Codable {
    /// scrypt with N = 2^logN, block size r and parallelism p.
    case scrypt(logN: UInt8, r: UInt32, p: UInt32)
    /// PBKDF2-HMAC-SHA256 with the given number of rounds (the FIPS option).
    case pbkdf2SHA256(rounds: UInt32)

    /// The lowest scrypt logN accepted (2^15).
    public static let scryptMinimumLogN: UInt8 = 15
    /// The highest scrypt logN accepted at all (2^22, age's own limit); the memory and work
    /// ceilings of ``KDFCeiling`` bind first for r = 8.
    public static let scryptMaximumLogN: UInt8 = 22
    /// The lowest PBKDF2 round count accepted (OWASP 2023 for SHA-256 is 600,000; NIST's floor here is 210,000).
    public static let pbkdf2MinimumRounds: UInt32 = 210_000
    /// The highest PBKDF2 round count accepted by default (4 × ``KDFPolicy/fipsSensitive``).
    public static let pbkdf2MaximumRounds: UInt32 = KDFCeiling.standard.pbkdf2Rounds

    /// Throws unless the parameters lie between the safe floor and the standard ceiling.
    /// - Throws: ``CipherError/kdfParametersTooWeak(_:)`` or ``CipherError/kdfParametersTooExpensive(_:)``.
    public func validate() throws(CipherError) {
        try validate(ceiling: .standard)
    }

    /// Throws unless the parameters lie between the safe floor and `ceiling`. Nothing is
    /// derived: a hostile header is refused before any memory is taken or work done.
    /// - Parameter ceiling: The most memory and work accepted.
    /// - Throws: ``CipherError/kdfParametersTooWeak(_:)`` or ``CipherError/kdfParametersTooExpensive(_:)``.
    public func validate(ceiling: KDFCeiling) throws(CipherError) {
        switch self {
        case let .scrypt(logN, r, p):
            guard logN >= Self.scryptMinimumLogN else {
                throw CipherError.kdfParametersTooWeak("scrypt N = 2^\(logN) is under 2^\(Self.scryptMinimumLogN)")
            }
            guard logN <= Self.scryptMaximumLogN else {
                throw CipherError.kdfParametersTooExpensive("scrypt N = 2^\(logN) is over 2^\(Self.scryptMaximumLogN)")
            }
            guard r >= 1, p >= 1 else { throw CipherError.kdfParametersTooWeak("scrypt r and p must be at least 1") }
            guard r <= 32, p <= 16 else {
                throw CipherError.kdfParametersTooExpensive("scrypt r = \(r), p = \(p) (at most r = 32, p = 16)")
            }
            // logN ≤ 22, r ≤ 32, p ≤ 16: these products fit easily in 64 bits.
            let memory = (UInt64(128) << UInt64(logN)) * UInt64(r)
            guard memory <= ceiling.scryptMemory else {
                throw CipherError.kdfParametersTooExpensive(
                    "scrypt N = 2^\(logN), r = \(r) needs \(memory >> 20) MiB (128·N·r); at most \(ceiling.scryptMemory >> 20) MiB")
            }
            let work = (UInt64(1) << UInt64(logN)) * UInt64(r) * UInt64(p)
            guard work <= ceiling.scryptWork else {
                throw CipherError.kdfParametersTooExpensive(
                    "scrypt N = 2^\(logN), r = \(r), p = \(p) is work N·r·p = 2^\(63 - work.leadingZeroBitCount); at most 2^\(63 - ceiling.scryptWork.leadingZeroBitCount)")
            }
        case let .pbkdf2SHA256(rounds):
            guard rounds >= Self.pbkdf2MinimumRounds else {
                throw CipherError.kdfParametersTooWeak("PBKDF2 with \(rounds) rounds is under \(Self.pbkdf2MinimumRounds)")
            }
            guard rounds <= ceiling.pbkdf2Rounds else {
                throw CipherError.kdfParametersTooExpensive("PBKDF2 with \(rounds) rounds is over \(ceiling.pbkdf2Rounds)")
            }
        }
    }

    /// A short human-readable name, such as `scrypt(N=2^16,r=8,p=1)`.
    public var summary: String {
        switch self {
        case let .scrypt(logN, r, p): return "scrypt(N=2^\(logN),r=\(r),p=\(p))"
        case let .pbkdf2SHA256(rounds): return "PBKDF2-HMAC-SHA256(\(rounds) rounds)"
        }
    }
}

/// The most work and memory a stored KDF header may demand before it is refused as hostile.
public struct KDFCeiling: Sendable, Hashable {
    /// The most memory scrypt may take, 128·N·r bytes.
    public let scryptMemory: UInt64
    /// The most scrypt work, N·r·p.
    public let scryptWork: UInt64
    /// The most PBKDF2 rounds.
    public let pbkdf2Rounds: UInt32

    /// - Parameters:
    ///   - scryptMemory: The most scrypt memory, 128·N·r bytes.
    ///   - scryptWork: The most scrypt work, N·r·p.
    ///   - pbkdf2Rounds: The most PBKDF2 rounds.
    public init(scryptMemory: UInt64, scryptWork: UInt64, pbkdf2Rounds: UInt32) {
        self.scryptMemory = scryptMemory
        self.scryptWork = scryptWork
        self.pbkdf2Rounds = pbkdf2Rounds
    }

    /// 1 GiB of scrypt memory, scrypt work N·r·p ≤ 2^23 (N = 2^20, r = 8, p = 1: 4 × ``KDFPolicy/sensitive``)
    /// and 32,000,000 PBKDF2 rounds (4 × ``KDFPolicy/fipsSensitive``): a few seconds per guess at most.
    public static let standard = KDFCeiling(scryptMemory: 1 << 30, scryptWork: 1 << 23, pbkdf2Rounds: 32_000_000)

    /// The ceiling of earlier versions (scrypt N ≤ 2^22, r ≤ 32, p ≤ 16, up to 16 GiB and
    /// minutes per guess; PBKDF2 ≤ 100,000,000 rounds), for opening data sealed with costlier
    /// parameters than ``standard`` admits. Only for data from a trusted source.
    public static let legacy = KDFCeiling(scryptMemory: 1 << 34, scryptWork: 1 << 31, pbkdf2Rounds: 100_000_000)
}

/// A named choice of KDF work, so callers pick intent rather than numbers.
public struct KDFPolicy: Sendable, Hashable {
    /// The parameters this policy produces for new data.
    public let parameters: KDFParameters

    /// - Parameter parameters: The KDF parameters for new data.
    public init(parameters: KDFParameters) { self.parameters = parameters }

    /// scrypt N = 2^15, r = 8, p = 1: the floor this library accepts (``KDFParameters/scryptMinimumLogN``),
    /// half the time and memory of ``interactive`` (32 MiB). For small devices where 64 MiB is
    /// too much; the project's own test suite uses it, since every guess an attacker makes
    /// costs what a test's unlock costs.
    public static let minimum = KDFPolicy(parameters: .scrypt(logN: KDFParameters.scryptMinimumLogN, r: 8, p: 1))
    /// scrypt N = 2^16, r = 8, p = 1: about 0.16–0.25 s and 64 MiB on a 2-core Linux machine. For unlock prompts.
    public static let interactive = KDFPolicy(parameters: .scrypt(logN: 16, r: 8, p: 1))
    /// scrypt N = 2^18, r = 8, p = 1: about 0.7–1.3 s and 256 MiB. For data at rest behind a passphrase.
    public static let sensitive = KDFPolicy(parameters: .scrypt(logN: 18, r: 8, p: 1))
    /// PBKDF2-HMAC-SHA256, 2,000,000 rounds: about 0.25 s (OWASP 2023 asks at least 600,000).
    /// The FIPS choice for prompts.
    public static let fipsInteractive = KDFPolicy(parameters: .pbkdf2SHA256(rounds: 2_000_000))
    /// PBKDF2-HMAC-SHA256, 8,000,000 rounds: about 1 s.
    public static let fipsSensitive = KDFPolicy(parameters: .pbkdf2SHA256(rounds: 8_000_000))
}

/// Password-based and sub-key derivation.
public enum KeyDerivation {
    /// The salt length used for new data, in bytes.
    public static let saltLength = 16

    /// Derives `outputLength` bytes from `password` and `salt`.
    ///
    /// - Parameters:
    ///   - password: The password.
    ///   - salt: The salt (not empty).
    ///   - parameters: The KDF and its work; checked against ``KDFCeiling/standard``.
    ///   - outputLength: How many bytes to derive (16...1024).
    /// - Returns: The derived bytes, in locked memory.
    /// - Throws: ``CipherError/kdfParametersTooWeak(_:)``, ``CipherError/kdfParametersTooExpensive(_:)``,
    ///   or ``CipherError/invalidParameter(_:)`` for an empty salt or output length out of range.
    public static func derive(password: SecretBytes, salt: [UInt8], parameters: KDFParameters, outputLength: Int = 32) throws(CipherError) -> SecretBytes {
        try derive(password: password, salt: salt, parameters: parameters, outputLength: outputLength, ceiling: .standard)
    }

    /// Derives `outputLength` bytes, accepting parameters up to `ceiling`.
    /// - Parameters:
    ///   - password: The password.
    ///   - salt: The salt (not empty).
    ///   - parameters: The KDF and its work.
    ///   - outputLength: How many bytes to derive (16...1024).
    ///   - ceiling: The most memory and work `parameters` may demand.
    /// - Returns: The derived bytes, in locked memory.
    /// - Throws: as `derive(password:salt:parameters:outputLength:)`.
    public static func derive(password: SecretBytes, salt: [UInt8], parameters: KDFParameters, outputLength: Int,
                              ceiling: KDFCeiling) throws(CipherError) -> SecretBytes {
        try parameters.validate(ceiling: ceiling)
        guard !salt.isEmpty else { throw CipherError.invalidParameter("the salt is empty") }
        guard (16...1024).contains(outputLength) else { throw CipherError.invalidParameter("output length \(outputLength) must be 16...1024") }
        let key: SymmetricKey = try password.withUnsafeBytes { (pw) throws(CipherError) in
            do {
                switch parameters {
                case let .scrypt(logN, r, p):
                    return try KDF.Scrypt.deriveKey(from: pw, salt: salt, outputByteCount: outputLength,
                                                    rounds: 1 << Int(logN), blockSize: Int(r), parallelism: Int(p))
                case let .pbkdf2SHA256(rounds):
                    return try KDF.Insecure.PBKDF2.deriveKey(from: pw, salt: salt, using: .sha256,
                                                             outputByteCount: outputLength, rounds: Int(rounds))
                }
            } catch {
                throw CipherError.invalidParameter("key derivation failed with \(parameters.summary): \(error)")
            }
        }
        return SecretBytes(key)
    }

    /// The same derivation, run on a dedicated queue so that async callers do not block the
    /// cooperative thread pool for the 0.2–1 s a KDF takes.
    /// - Parameters:
    ///   - password: The password.
    ///   - salt: The salt (not empty).
    ///   - parameters: The KDF and its work; checked against ``KDFCeiling/standard``.
    ///   - outputLength: How many bytes to derive (16...1024).
    /// - Returns: The derived bytes, in locked memory.
    /// - Throws: as the synchronous ``derive(password:salt:parameters:outputLength:)``.
    public static func derive(password: SecretBytes, salt: [UInt8], parameters: KDFParameters,
                              outputLength: Int = 32) async throws(CipherError) -> SecretBytes {
        let result: Result<SecretBytes, CipherError> = await withCheckedContinuation { continuation in
            kdfQueue.async {
                continuation.resume(returning: Result { () throws(CipherError) in
                    try derive(password: password, salt: salt, parameters: parameters, outputLength: outputLength)
                })
            }
        }
        return try result.get()
    }

    private static let kdfQueue = DispatchQueue(label: "securefoundation.kdf", qos: .userInitiated, attributes: .concurrent)

    /// HKDF-SHA256: a sub-key of `outputLength` bytes for the purpose named by `info`.
    /// - Parameters:
    ///   - key: The input key material.
    ///   - salt: The HKDF salt (empty by default).
    ///   - info: The purpose, bound into the output.
    ///   - outputLength: How many bytes to derive.
    /// - Returns: The sub-key, in locked memory.
    public static func hkdf(_ key: SecretBytes, salt: [UInt8] = [], info: String, outputLength: Int = 32) -> SecretBytes {
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: key.symmetricKey, salt: salt,
                                              info: Array(info.utf8), outputByteCount: outputLength)
        return SecretBytes(derived)
    }
}
