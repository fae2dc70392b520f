import Cipher
import Crypto
import Foundation
import X509

/// An ECDSA P-256 signing key resident in the TPM 2.0, reached through tpm2-tools.
///
/// ``create(pcrs:tcti:)`` has the TPM generate the key under the owner hierarchy's primary key
/// (re-created from the TPM's seed, never stored), with the attributes `sign`, `fixedtpm`,
/// `fixedparent`, `sensitivedataorigin`: the private key is made inside the TPM and never leaves
/// it. What is kept is ``Blobs``: the public area and the private area wrapped by the primary
/// key, which only the same TPM (same owner seed) loads. Without PCRs the key is used with
/// `userwithauth` and an empty password; with PCRs it has no password use at all: every
/// signature runs a PCR policy session, so the TPM signs only while those PCRs hold the values
/// they had when the key was made.
///
/// Opening (``init(blobs:tcti:)``) loads the primary key and the key once and keeps their saved
/// contexts in a private (0700) temporary directory for the object's life; a signature then
/// costs one `tpm2_sign` and one `tpm2_flushcontext` run. The public key is read back from the
/// loaded object (the TPM checked the private area against it), so it is the key the TPM signs
/// with, whatever the blobs claim.
///
/// Thread safety: signatures may be asked for from several threads; the TPM is used by one at
/// a time (`TPM2.lock`).
public final class TPM2PrivateKey: HardwareSigningKey, Hashable, CustomStringConvertible {
    /// What is kept of a TPM key: not secret (the private area is wrapped by the TPM's primary
    /// key), but integrity-relevant.
    public struct Blobs: Sendable, Hashable {
        /// The TPM2B_PUBLIC, as `tpm2_create -u` writes it.
        public var publicArea: [UInt8]
        /// The TPM2B_PRIVATE, as `tpm2_create -r` writes it.
        public var privateArea: [UInt8]
        /// The PCRs of the SHA-256 bank the key is bound to (empty: none).
        public var pcrs: [Int]

        /// Blobs from their parts.
        /// - Parameters:
        ///   - publicArea: the TPM2B_PUBLIC, as `tpm2_create -u` writes it.
        ///   - privateArea: the TPM2B_PRIVATE, as `tpm2_create -r` writes it.
        ///   - pcrs: the SHA-256 bank PCRs the key is bound to (empty: none).
        public init(publicArea: [UInt8], privateArea: [UInt8], pcrs: [Int]) {
            self.publicArea = publicArea
            self.privateArea = privateArea
            self.pcrs = pcrs
        }

        /// A short name for listings: the first 16 hex digits of the SHA-256 of the public area.
        public var name: String {
            Encoding.hex(SHA256.hash(data: publicArea).prefix(8))
        }

        /// `tpm:name=…` with the PCRs the key is bound to (`;pcrs=0,7`): where the key is, never its bytes.
        public var location: String {
            "tpm:name=\(name)" + (pcrs.isEmpty ? "" : ";pcrs=" + pcrs.map(String.init).joined(separator: ","))
        }

        /// The blobs in one byte string, for a record that keeps a key before it has a
        /// certificate: `TPM` 0x01, the PCR count and PCRs (one byte each), then the public and
        /// the private area, each after its length (4 bytes, big-endian).
        public var serialized: [UInt8] {
            let pcrs = Array(Set(pcrs)).sorted()
            var bytes: [UInt8] = Array("TPM".utf8) + [1, UInt8(pcrs.count)] + pcrs.map { UInt8($0) }
            for area in [publicArea, privateArea] {
                bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: area.count >> $0) }
                bytes += area
            }
            return bytes
        }

        /// Blobs from ``serialized``; nil for anything else (a wrong tag, PCRs out of range or
        /// out of order, an area empty, longer than 16 KiB or cut short, bytes left over).
        /// - Parameter bytes: bytes made by ``serialized``.
        public init?(serialized bytes: [UInt8]) {
            guard bytes.count >= 5, bytes.starts(with: Array("TPM".utf8) + [1]) else { return nil }
            let count = Int(bytes[4])
            guard count <= 24, bytes.count >= 5 + count else { return nil }
            let pcrs = bytes[5..<(5 + count)].map(Int.init)
            guard pcrs.allSatisfy({ (0...23).contains($0) }), zip(pcrs, pcrs.dropFirst()).allSatisfy({ $0 < $1 }) else { return nil }
            var offset = 5 + count
            var areas: [[UInt8]] = []
            for _ in 0..<2 {
                guard bytes.count - offset >= 4 else { return nil }
                let length = bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
                offset += 4
                guard length > 0, length <= 16_384, bytes.count - offset >= length else { return nil }
                areas.append(Array(bytes[offset..<(offset + length)]))
                offset += length
            }
            guard offset == bytes.count else { return nil }
            self.init(publicArea: areas[0], privateArea: areas[1], pcrs: pcrs)
        }
    }

    /// The key's blobs.
    public let blobs: Blobs
    /// The TCTI (nil: `$TPM2TOOLS_TCTI` or the tools' default).
    public let tcti: String?
    public let publicKey: Certificate.PublicKey
    private let scratch: TPM2.Scratch
    private let failures = SigningFailureRecord()

    /// Has the TPM generate a P-256 signing key and returns its blobs.
    ///
    /// - Parameters:
    ///   - pcrs: PCRs (0-23, SHA-256 bank) whose current values the key is bound to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`).
    /// - Throws: ``HardwareKeyError`` (tools missing, TPM unreachable, TPM failure).
    /// - Returns: the new key's blobs (public and private areas, the sorted, de-duplicated PCRs);
    ///   the private area is encrypted by the TPM and opens only in it.
    public static func create(pcrs: [Int] = [], tcti: String? = nil) throws(HardwareKeyError) -> Blobs {
        let pcrs = Array(Set(pcrs)).sorted()
        TPM2.lock.lock()
        defer { TPM2.lock.unlock() }
        let scratch = try TPM2.Scratch()
        let directory = scratch.path
        try TPM2.createPrimary(in: directory, tcti: tcti)
        var arguments = ["tpm2_create", "-C", directory + "/primary.ctx", "-G", "ecc256:ecdsa-sha256",
                         "-u", directory + "/key.pub", "-r", directory + "/key.priv"]
        if pcrs.isEmpty {
            arguments += ["-a", "sign|fixedtpm|fixedparent|sensitivedataorigin|userwithauth"]
        } else {
            try TPM2.pcrPolicy(pcrs, to: directory + "/policy.dat", tcti: tcti)
            // No userwithauth: the policy is the only way to use the key.
            arguments += ["-L", directory + "/policy.dat", "-a", "sign|fixedtpm|fixedparent|sensitivedataorigin"]
        }
        defer { TPM2.flush(tcti: tcti) }
        try TPM2.call(arguments, "create a signing key", tcti: tcti)
        return Blobs(publicArea: try scratch.read("key.pub"), privateArea: try scratch.read("key.priv"), pcrs: pcrs)
    }

    /// Loads a key into the TPM from its blobs and reads its public key.
    ///
    /// - Throws: ``HardwareKeyError/tpmKeyRefused(_:)`` when the TPM will not load the blobs
    ///   (another TPM's, or damaged), ``HardwareKeyError/unsupportedKey(_:)`` for a key that is
    ///   not P-256, and the TPM's other failures.
    /// - Parameters:
    ///   - blobs: the key's blobs, from ``create(pcrs:tcti:)`` or ``Blobs/init(serialized:)``.
    ///   - tcti: the TCTI (nil: `$TPM2TOOLS_TCTI`).
    public init(blobs: Blobs, tcti: String? = nil) throws(HardwareKeyError) {
        guard blobs.pcrs.allSatisfy({ (0...23).contains($0) }) else { throw .tpmKeyRefused("PCRs out of range 0-23") }
        TPM2.lock.lock()
        defer { TPM2.lock.unlock() }
        let scratch = try TPM2.Scratch()
        let directory = scratch.path
        try scratch.write(blobs.publicArea, to: "key.pub")
        try scratch.write(blobs.privateArea, to: "key.priv")
        try TPM2.createPrimary(in: directory, tcti: tcti)
        defer { TPM2.flush(tcti: tcti) }
        let load = try TPM2.run(["tpm2_load", "-C", directory + "/primary.ctx", "-u", directory + "/key.pub",
                                 "-r", directory + "/key.priv", "-c", directory + "/key.ctx"], tcti: tcti)
        load.output.wipe()
        if load.status != 0 {
            if case .tpm(_, let detail) = TPM2.failure(load.error, "load the key", tcti: tcti) {
                throw .tpmKeyRefused("its blobs do not load (\(detail))")
            }
            throw TPM2.failure(load.error, "load the key", tcti: tcti)
        }
        TPM2.flush(tcti: tcti)
        try TPM2.call(["tpm2_readpublic", "-c", directory + "/key.ctx", "-f", "der", "-o", directory + "/key.der"],
                      "read the key's public key", tcti: tcti)
        do {
            publicKey = Certificate.PublicKey(try P256.Signing.PublicKey(derRepresentation: try scratch.read("key.der")))
        } catch let error as HardwareKeyError {
            throw error
        } catch {
            throw .unsupportedKey("the TPM key is not an EC P-256 key (\(error))")
        }
        self.blobs = blobs
        self.tcti = tcti
        self.scratch = scratch
    }

    public var signatureSchemes: [HardwareSignatureScheme] { [.ecdsaSHA256] }

    /// `tpm:name=…` with the PCRs the key is bound to: where the key is, never its bytes.
    public var location: String { blobs.location }

    public var description: String { "TPM2PrivateKey(\(location))" }

    public var lastFailure: HardwareKeyError? { failures.error }

    /// Signs `message` (hashed here with SHA-256; the TPM signs the digest). Returns a DER
    /// ECDSA signature.
    ///
    /// - Throws: ``HardwareKeyError``; nothing falls back to a software key.
    /// - Parameters:
    ///   - message: the bytes to sign, before hashing.
    ///   - scheme: one of the key's ``signatureSchemes``.
    /// - Returns: the signature bytes.
    public func signature(for message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        try failures.recording { () throws(HardwareKeyError) in try sign(message, scheme: scheme) }
    }

    private func sign(_ message: [UInt8], scheme: HardwareSignatureScheme) throws(HardwareKeyError) -> [UInt8] {
        guard scheme == .ecdsaSHA256 else { throw .unsupportedKey("\(scheme) with a TPM P-256 key") }
        let digest = scheme.digest(message)
        TPM2.lock.lock()
        defer { TPM2.lock.unlock() }
        var arguments = ["tpm2_sign", "-c", scratch.path + "/key.ctx"]
        if !blobs.pcrs.isEmpty { arguments += ["-p", "pcr:" + TPM2.pcrSelection(blobs.pcrs)] }
        arguments += ["-g", "sha256", "-s", "ecdsa", "-d", "-f", "plain", "-o", "/dev/stdout"]
        defer { TPM2.flush(tcti: tcti, sessions: !blobs.pcrs.isEmpty) }
        let result = try TPM2.run(arguments, input: SecretBytes(copying: digest), tcti: tcti, maxOutput: 512)
        let output = result.output.withUnsafeBytes { Array($0) }
        result.output.wipe()
        try TPM2.check(result, "sign", tcti: tcti, pcrs: blobs.pcrs)
        do {
            if output.count == 64 { return Array(try P256.Signing.ECDSASignature(rawRepresentation: output).derRepresentation) }
            return Array(try P256.Signing.ECDSASignature(derRepresentation: output).derRepresentation)
        } catch {
            throw .tpm(operation: "sign", detail: "the TPM returned a malformed ECDSA signature (\(output.count) bytes)")
        }
    }

    /// Whether both are the same key object (identity, not key material).
    /// - Parameters:
    ///   - lhs: a key.
    ///   - rhs: another key.
    /// - Returns: `true` when `lhs` and `rhs` are the identical instance.
    public static func == (lhs: TPM2PrivateKey, rhs: TPM2PrivateKey) -> Bool { lhs === rhs }
    /// Hashes the object's identity, consistently with `==`.
    /// - Parameter hasher: the hasher to feed.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
