import Cipher
import Crypto
import Foundation
import X509

/// An ECDSA P-256 signing key resident in the TPM 2.0, used in-process through the TPM
/// Software Stack (``TPM2``).
///
/// ``create(pcrs:tcti:)`` has the TPM generate the key under the owner hierarchy's primary key
/// (re-created from the TPM's seed, never stored), with the attributes `sign`, `fixedtpm`,
/// `fixedparent`, `sensitivedataorigin`: the private key is made inside the TPM and never leaves
/// it. What is kept is ``Blobs``: the public area and the private area wrapped by the primary
/// key, which only the same TPM (same owner seed) loads, in tpm2-tools' format (`tpm2_create
/// -u/-r`: blobs made by either load in the other). Without PCRs the key is used with
/// `userwithauth` and an empty password; with PCRs it has no password use at all: every
/// signature runs a PCR policy session, so the TPM signs only while those PCRs hold the values
/// they had when the key was made.
///
/// Opening (``init(blobs:tcti:)``) loads the key once and keeps its saved context for the
/// object's life. Behind a resource manager (`/dev/tpmrm0`, tpm2-abrmd) the key signed with
/// last stays loaded, so a signature is one TPM command (two more when another key was used in
/// between: load this key's context, flush the other). Without one (a socket TCTI such as
/// swtpm's, `/dev/tpm0`), where all processes share the TPM's three or so object slots, each
/// signature loads the saved context and flushes it after.
/// Every signature is checked against the public key before it is returned: a key flushed by
/// another process (whose handle may now name another object) is loaded again and the
/// signature made once more. The public key is read back from the loaded object (the TPM
/// checked the private area against it), so it is the key the TPM signs with, whatever the
/// blobs claim.
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
    private let verifier: P256.Signing.PublicKey
    /// The key's saved context (replaced when the key is loaded again from its blobs); used
    /// under `TPM2.lock` only.
    nonisolated(unsafe) private var saved: TPM2.SavedContext
    /// The TCTI as resolved when opened (`$TPM2TOOLS_TCTI` read once): the connection used for
    /// the key's whole life, whatever the environment becomes.
    private let connectionTCTI: String?
    /// Whether the key keeps its connection open (behind a resource manager only).
    private let holdsConnection: Bool
    private let failures = SigningFailureRecord()

    /// Has the TPM generate a P-256 signing key and returns its blobs.
    ///
    /// - Parameters:
    ///   - pcrs: PCRs (0-23, SHA-256 bank) whose current values the key is bound to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`, else the TPM Software Stack's default).
    /// - Throws: ``HardwareKeyError`` (the TPM Software Stack missing, TPM unreachable, TPM failure).
    /// - Returns: the new key's blobs (public and private areas, the sorted, de-duplicated PCRs);
    ///   the private area is encrypted by the TPM and opens only in it.
    public static func create(pcrs: [Int] = [], tcti: String? = nil) throws(HardwareKeyError) -> Blobs {
        let pcrs = Array(Set(pcrs)).sorted()
        return try TPM2.using(tcti) { connection throws(HardwareKeyError) in
            let primary = try connection.primary()
            defer { connection.flush(primary) }
            let areas = try connection.create(parent: primary, sealing: nil, pcrs: pcrs, "a signing key")
            return Blobs(publicArea: areas.publicArea, privateArea: areas.privateArea, pcrs: pcrs)
        }
    }

    /// Loads a key into the TPM from its blobs and reads its public key.
    ///
    /// - Throws: ``HardwareKeyError/tpmKeyRefused(_:)`` when the TPM will not load the blobs
    ///   (another TPM's, or damaged), ``HardwareKeyError/unsupportedKey(_:)`` for a key that is
    ///   not P-256, and the TPM's other failures.
    /// - Parameters:
    ///   - blobs: the key's blobs, from ``create(pcrs:tcti:)`` or ``Blobs/init(serialized:)``.
    ///   - tcti: the TCTI (nil: `$TPM2TOOLS_TCTI`, else the TPM Software Stack's default).
    public init(blobs: Blobs, tcti: String? = nil) throws(HardwareKeyError) {
        guard blobs.pcrs.allSatisfy({ (0...23).contains($0) }) else { throw .tpmKeyRefused("PCRs out of range 0-23") }
        // Behind a resource manager the connection stays open for the key's life (released by
        // deinit, or below on a failure).
        let resolved = TPM2.effective(tcti)
        let held = try TPM2.hold(resolved)
        do throws(HardwareKeyError) {
            let (point, saved) = try TPM2.using(resolved) { connection throws(HardwareKeyError) in
                let handle = try Self.load(blobs, connection)
                defer { connection.flush(handle) }
                return (try connection.p256Point(handle), try connection.save(handle))
            }
            do {
                verifier = try P256.Signing.PublicKey(x963Representation: point)
            } catch {
                throw HardwareKeyError.unsupportedKey("the TPM key is not an EC P-256 key (\(error))")
            }
            self.saved = saved
        } catch {
            TPM2.release(resolved, owner: nil, held: held)
            throw error
        }
        publicKey = Certificate.PublicKey(verifier)
        self.blobs = blobs
        self.tcti = tcti
        connectionTCTI = resolved
        holdsConnection = held
    }

    deinit { TPM2.release(connectionTCTI, owner: ObjectIdentifier(self), held: holdsConnection) }

    /// Loads the key from its blobs under the primary key (made for it and flushed after).
    private static func load(_ blobs: Blobs, _ connection: TPM2.Connection) throws(HardwareKeyError) -> UInt32 {
        let primary = try connection.primary()
        defer { connection.flush(primary) }
        return try connection.load(parent: primary, publicArea: blobs.publicArea, privateArea: blobs.privateArea, "the key")
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
        let pcrs = try TPM2.pcrMask(blobs.pcrs)
        return try TPM2.using(connectionTCTI) { connection throws(HardwareKeyError) in
            // Twice at most: the second time with the key loaded anew, after the TPM lost it
            // (flushed by another process, or the TPM was reset) or the handle named another object.
            for attempt in 0..<2 {
                let handle = try resident(in: connection, afresh: attempt > 0)
                let (rc, raw) = connection.sign(handle, digest: digest, pcrs: pcrs)
                if rc != 0 {
                    // Refused by the TPM on the first try, for another reason than the policy:
                    // the handle may name another object by now (ours flushed by another
                    // process, which loaded its own). Let go of it (flushed only if it is this
                    // key) and try once more with the key loaded anew.
                    if attempt == 0 && !TPM2.isUnreachable(rc) && !TPM2.isPolicyFailure(rc) {
                        release(handle, connection)
                        continue
                    }
                    // Without a resource manager nothing stays loaded, a failure included.
                    if !connection.keepsKeysLoaded { release(handle, connection) }
                    throw TPM2.error(rc, "sign", tcti: tcti, pcrs: blobs.pcrs)
                }
                if let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw),
                   verifier.isValidSignature(signature, for: message) {
                    // Without a resource manager the TPM's slots are every process's: let go.
                    if !connection.keepsKeysLoaded { connection.flush(handle) }
                    return Array(signature.derRepresentation)
                }
                // Not this key's signature: the handle names another process's object now.
                release(handle, connection)
            }
            throw .tpm(operation: "sign", detail: "the TPM's signature does not verify with the key's public key, twice")
        }
    }

    /// Lets go of a handle that failed: flushed when it is still this key (its public key),
    /// else forgotten here and left to the process that loaded the object now there.
    private func release(_ handle: UInt32, _ connection: TPM2.Connection) {
        if (try? connection.p256Point(handle)) == Array(verifier.x963Representation) {
            connection.flush(handle)
        } else {
            connection.forget(handle)
        }
    }

    /// The key's handle in the TPM: the resident object when it is this key's, else its saved
    /// context loaded (in place of the other key's), else (`afresh`, or the context refused)
    /// loaded from its blobs again.
    private func resident(in connection: TPM2.Connection, afresh: Bool) throws(HardwareKeyError) -> UInt32 {
        let owner = ObjectIdentifier(self)
        if !afresh, let resident = connection.resident, resident.owner == owner { return resident.handle }
        if let resident = connection.resident { connection.flush(resident.handle) }
        var (rc, handle) = connection.restore(saved)
        if rc != 0 {
            // Only a context the TPM no longer takes (reset, restarted: an integrity, handle or
            // sequence answer) is replaced from the blobs; a full TPM or a lost connection is
            // the error it is.
            if TPM2.isUnreachable(rc) || TPM2.isWarning(rc) || rc >> 16 != 0 {
                throw TPM2.error(rc, "load the key's context", tcti: tcti)
            }
            // The TPM was reset or restarted since (saved contexts do not survive that): the blobs.
            handle = try Self.load(blobs, connection)
            guard (try? connection.p256Point(handle)) == Array(verifier.x963Representation) else {
                connection.flush(handle)
                throw .tpmKeyRefused("its blobs load as another key than the one opened")
            }
            if let renewed = try? connection.save(handle) { saved = renewed }
        }
        connection.resident = (owner, handle)
        return handle
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
