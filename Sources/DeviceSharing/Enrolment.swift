import Cipher
import Crypto
import Foundation
import HardwareKeys
import Keychain
import PinnedTLS
import SwiftASN1
import X509

/// Joining a group, file-based, in three steps (docs/SHARING.md, "Enrolment"):
///
/// 1. on a machine holding the group root, ``invite(validity:now:)`` makes an invitation: the
///    root certificate, a one-time 32-byte secret and an expiry. The secret is also kept in the
///    keychain (whenUnlocked). Carry the invitation to the new machine privately (it is a
///    password for one enrolment).
/// 2. on the new machine, ``join(invitation:deviceName:now:deviceKey:)`` stores the root as its only anchor,
///    makes a P-256 key (kept in the keychain) and writes a request: the device name and public
///    key, authenticated by an HMAC-SHA256 under the secret.
/// 3. the inviter's ``approve(request:now:)`` checks the HMAC, the expiry and that the invitation
///    was not used, issues the certificate (the device name and the member name), forgets the
///    secret and returns the chain; the new machine's ``complete(chainPEM:)`` checks that it is
///    the root's and its key's, and stores the identity.
public struct ShareEnrolment: Sendable {
    /// The version of the invitation and request files.
    public static let version = 1
    /// The default lifetime of an invitation: one hour.
    public static let defaultValidity: TimeInterval = 3600
    /// The label of the key a joining device made, until its certificate arrives.
    package static let pendingLabel = "share.pending"
    /// The account (under ``ShareGroup/service``) of the location of a joining device's key
    /// that stays in hardware, until its certificate arrives.
    package static let pendingHardwareAccount = "pending.hardware-key"
    static let context = Array("securefoundation share join v1".utf8)
    static let networkContext = Array("securefoundation share join over the network v1".utf8)

    /// An invitation file.
    public struct Invitation: Codable, Sendable {
        public var version: Int
        /// The group root, DER, base64.
        public var root: String
        /// The invitation's identifier (hex, 16 bytes).
        public var id: String
        /// The one-time secret, base64 (32 bytes).
        public var secret: String
        /// Seconds since 1970 after which it is refused.
        public var expires: Int64
    }

    /// A join request file.
    public struct Request: Codable, Sendable {
        public var version: Int
        public var id: String
        public var device: String
        /// The device's public key, DER SubjectPublicKeyInfo, base64.
        public var publicKey: String
        /// HMAC-SHA256 under the invitation's secret, base64.
        public var mac: String
    }

    public let group: ShareGroup

    /// Enrolment in `group`.
    /// - Parameter group: the group devices are invited to, or joined.
    public init(group: ShareGroup) {
        self.group = group
    }

    /// Makes an invitation (needs the vault unlocked and this machine to hold the root's key).
    /// - Parameters:
    ///   - validity: how long the invitation can be used, in seconds.
    ///   - now: the current time.
    /// - Returns: the invitation, carrying the root certificate, a random id and a 32-byte secret;
    ///   the secret and expiry are stored in the keychain until the request is approved.
    /// - Throws: ``ShareError/notAMember(_:)``, ``ShareError/locked(_:)``, ``ShareError/hardwareKey(_:)``, ``ShareError/hardwareKeyRequired(location:)``, ``ShareError/hardwareKeyMismatch(location:)`` or ``ShareError/storage(_:)`` from ``ShareGroup/authority()``;
    ///   ``ShareError/locked(_:)`` or ``ShareError/storage(_:)`` when the invitation cannot be stored
    ///   or no randomness is available.
    public func invite(validity: TimeInterval = defaultValidity, now: Date = Date()) throws(ShareError) -> Invitation {
        let authority = try group.authority()
        let secret: SecretBytes
        let id: [UInt8]
        do {
            secret = try SecretBytes.random(count: 32)
            id = try SecureRandom.bytes(16)
        } catch {
            throw .storage("no randomness: \(error)")
        }
        defer { secret.wipe() }
        let expires = Int64(now.timeIntervalSince1970 + validity)
        let record = SecretBytes(count: 40) { buffer in
            secret.withUnsafeBytes { buffer.copyMemory(from: $0) }
            for index in 0..<8 { buffer[32 + index] = UInt8(truncatingIfNeeded: UInt64(bitPattern: expires) >> UInt64(56 - 8 * index)) }
        }
        defer { record.wipe() }
        let account = "invite." + Encoding.hex(id)
        do {
            try group.store.keychain.setSecurePasswordData(record, forService: ShareGroup.service, account: account)
            try group.store.keychain.flush()
        } catch {
            throw mapKeychain(error, "the invitation")
        }
        return Invitation(version: Self.version, root: Encoding.base64(try der(authority.certificate)), id: Encoding.hex(id),
                          secret: secret.withUnsafeBytes { Encoding.base64($0) }, expires: expires)
    }

    /// Joins with an invitation: stores the root, makes this device's key, returns the request
    /// to give to the inviter (needs the vault unlocked).
    ///
    /// With `deviceKey`, this device's key is that key in hardware (a PKCS #11 token, the TPM):
    /// its location is kept until ``complete(chainPEM:)``, which opens it with the group's
    /// ``ShareGroup/openingHardwareKey``.
    /// - Parameters:
    ///   - invitation: the invitation the inviter made.
    ///   - deviceName: this device's name (see ``ShareGroup/checkDeviceName(_:)``).
    ///   - now: the current time, checked against the invitation's expiry.
    ///   - deviceKey: this device's key in hardware; nil makes a key in the keychain.
    /// - Returns: the request, authenticated with the invitation's secret.
    /// - Throws: ``ShareError/invalidEnrolment(_:)`` for an invitation that is expired, damaged or of
    ///   another version, ``ShareError/invalidDeviceName(_:)``, and ``ShareError/locked(_:)`` or
    ///   ``ShareError/storage(_:)`` when the root or the key cannot be stored.
    public func join(invitation: Invitation, deviceName: String, now: Date = Date(),
                     deviceKey: (any HardwareSigningKey)? = nil) throws(ShareError) -> Request {
        let prepared = try prepareJoin(invitation: invitation, deviceName: deviceName, now: now, deviceKey: deviceKey)
        defer { prepared.secret.wipe() }
        let mac = Self.mac(secret: prepared.secret, id: invitation.id, device: prepared.name, spki: prepared.spki)
        return Request(version: Self.version, id: invitation.id, device: prepared.name, publicKey: Encoding.base64(prepared.spki),
                       mac: Encoding.base64(mac))
    }

    /// What joining needs: checks the invitation, stores its root as this machine's only
    /// sharing anchor and makes the pending key. The caller wipes the secret.
    func prepareJoin(invitation: Invitation, deviceName: String, now: Date, deviceKey: (any HardwareSigningKey)?) throws(ShareError)
        -> (name: String, root: Certificate, secret: SecretBytes, spki: [UInt8]) {
        guard invitation.version == Self.version else {
            throw .invalidEnrolment("invitation version \(invitation.version) is not supported")
        }
        guard Int64(now.timeIntervalSince1970) <= invitation.expires else { throw .invalidEnrolment("the invitation has expired") }
        let name = try ShareGroup.checkDeviceName(deviceName)
        let root: Certificate
        let secret: SecretBytes
        do {
            root = try Certificate(derEncoded: try Encoding.fromBase64(invitation.root))
            var raw = try Encoding.fromBase64(invitation.secret)
            defer { for index in raw.indices { raw[index] = 0 } }
            guard raw.count == 32, invitation.id.count == 32 else { throw ShareError.invalidEnrolment("the invitation is damaged") }
            secret = SecretBytes(copying: raw)
        } catch let error as ShareError {
            throw error
        } catch {
            throw .invalidEnrolment("the invitation does not parse: \(error)")
        }
        let publicKey: Certificate.PublicKey
        do {
            if let deviceKey {
                // The key stays in hardware: only where it is is kept (a token key's URI, a TPM
                // key's blobs), and no software key is pending.
                publicKey = deviceKey.publicKey
                let location = SecretBytes(copying: (deviceKey as? TPM2PrivateKey)?.blobs.serialized ?? Array(deviceKey.location.utf8))
                defer { location.wipe() }
                try ShareGroup.map {
                    try group.store.keychain.setSecurePasswordData(location, forService: ShareGroup.service,
                                                                   account: Self.pendingHardwareAccount)
                    _ = try? group.store.delete(label: Self.pendingLabel, kind: .privateKey)
                    try group.store.flush()
                }
            } else {
                let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
                publicKey = key.publicKey
                try ShareGroup.map {
                    try group.store.storePrivateKey(key, label: Self.pendingLabel, replace: true)
                    try? group.store.keychain.deletePassword(forService: ShareGroup.service, account: Self.pendingHardwareAccount)
                    try group.store.flush()
                }
            }
            // The record first, then the root stored alwaysThisDeviceOnly (which commits the
            // group to the record).
            try group.startRecord(issuer: false)
            try ShareGroup.map {
                try group.store.storeCertificates([root], label: ShareGroup.rootLabel, accessibility: .alwaysThisDeviceOnly,
                                                  replace: true)
                try group.store.flush()
            }
            return (name, root, secret, try der(publicKey))
        } catch {
            secret.wipe()
            throw error
        }
    }

    /// Approves a request made with one of this machine's invitations: issues the device's
    /// certificate and returns its chain as PEM (needs the vault unlocked). The invitation
    /// cannot be used again.
    /// - Parameters:
    ///   - request: the request the joining device made.
    ///   - now: the current time, checked against the invitation's expiry.
    /// - Returns: the PEM chain: the device's certificate, then the root.
    /// - Throws: ``ShareError/invalidEnrolment(_:)`` for a request of another version, naming no
    ///   open invitation of this machine, expired, unparsable or not authenticated by the
    ///   invitation's secret; ``ShareError/invalidDeviceName(_:)``; ``ShareError/notAMember(_:)``, ``ShareError/locked(_:)``, ``ShareError/hardwareKey(_:)``, ``ShareError/hardwareKeyRequired(location:)``, ``ShareError/hardwareKeyMismatch(location:)`` or ``ShareError/storage(_:)`` from ``ShareGroup/authority()``;
    ///   ``ShareError/storage(_:)`` when the device cannot be recorded.
    public func approve(request: Request, now: Date = Date()) throws(ShareError) -> String {
        try approve(request: request, now: now, binding: nil)
    }

    /// Approves a request; with a `binding` (over the network: the server's challenge and
    /// certificate), the MAC must cover it too, so a file request is not accepted there and a
    /// network request is not accepted from a file.
    func approve(request: Request, now: Date, binding: [UInt8]?) throws(ShareError) -> String {
        guard request.version == Self.version else { throw .invalidEnrolment("request version \(request.version) is not supported") }
        let name = try ShareGroup.checkDeviceName(request.device)
        guard request.id.count == 32, request.id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw .invalidEnrolment("the request names no invitation")
        }
        let account = "invite." + request.id
        let record: SecretBytes
        do {
            record = try group.store.keychain.securePasswordData(forService: ShareGroup.service, account: account)
        } catch KeychainError.itemNotFound {
            throw .invalidEnrolment("no open invitation \(request.id) on this machine (used already, or made elsewhere)")
        } catch {
            throw mapKeychain(error, "the invitation")
        }
        defer { record.wipe() }
        guard record.count == 40 else { throw .invalidEnrolment("the stored invitation is damaged") }
        let expires = record.withUnsafeBytes { bytes in (32..<40).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) } }
        guard Int64(now.timeIntervalSince1970) <= Int64(bitPattern: expires) else {
            try? group.store.keychain.deletePassword(forService: ShareGroup.service, account: account)
            throw .invalidEnrolment("the invitation has expired")
        }
        let secret = record.slice(0..<32)
        defer { secret.wipe() }
        let spki: [UInt8]
        let publicKey: Certificate.PublicKey
        let mac: [UInt8]
        do {
            spki = try Encoding.fromBase64(request.publicKey)
            mac = try Encoding.fromBase64(request.mac)
            publicKey = try Certificate.PublicKey(derEncoded: spki)
        } catch {
            throw .invalidEnrolment("the request does not parse: \(error)")
        }
        let expected = binding.map { Self.mac(secret: secret, id: request.id, device: name, spki: spki, binding: $0) }
            ?? Self.mac(secret: secret, id: request.id, device: name, spki: spki)
        guard expected.count == mac.count, zip(expected, mac).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw .invalidEnrolment("the request is not authenticated by the invitation's secret")
        }
        let authority = try group.authority()
        let leaf: Certificate
        do {
            leaf = try authority.issue(publicKey: publicKey, names: [name, ShareGroup.memberName], validity: ShareGroup.deviceValidity, now: now)
        } catch {
            throw .invalidEnrolment("cannot issue the certificate: \(error)")
        }
        do {
            try group.store.keychain.deletePassword(forService: ShareGroup.service, account: account)
        } catch {
            throw mapKeychain(error, "the invitation")
        }
        try group.record(device: name, certificate: leaf)
        do {
            return try IdentityStore.pem([leaf, authority.certificate])
        } catch {
            throw .storage("\(error)")
        }
    }

    /// Completes joining with the chain the inviter returned: checks that the leaf is signed by
    /// the stored root and is this device's key, then stores the identity (needs the vault unlocked).
    /// - Parameter chainPEM: the PEM chain ``approve(request:now:)`` returned.
    /// - Returns: this device's membership.
    /// - Throws: ``ShareError/invalidEnrolment(_:)`` for a chain that does not parse, is empty, is not
    ///   signed by the stored root or not for this device's key, or when no key is pending;
    ///   ``ShareError/notAMember(_:)`` when no root is stored; ``ShareError/hardwareKey(_:)`` or
    ///   ``ShareError/hardwareKeyRequired(location:)`` for a pending key in hardware;
    ///   ``ShareError/locked(_:)`` or ``ShareError/storage(_:)`` when the keychain refuses.
    @discardableResult
    public func complete(chainPEM: [UInt8]) throws(ShareError) -> ShareMembership {
        let root = try group.rootCertificate()
        let chain: [Certificate]
        do {
            chain = try IdentityImport.certificates(pem: chainPEM)
        } catch {
            throw .invalidEnrolment("the certificate file does not parse: \(error)")
        }
        guard let leaf = chain.first else { throw .invalidEnrolment("the certificate file is empty") }
        guard leaf.issuer == root.subject, root.publicKey.isValidSignature(leaf.signature, for: leaf) else {
            throw .invalidEnrolment("the certificate is not signed by this group's root")
        }
        let identity: TLSIdentity
        if let pending = try pendingHardwareKey() {
            let key: any HardwareSigningKey
            switch pending {
            case .tpm(let blobs):
                do { key = try TPM2PrivateKey(blobs: blobs, tcti: group.tcti) } catch { throw .hardwareKey(error) }
            case .location(let location):
                guard let open = group.openingHardwareKey else { throw .hardwareKeyRequired(location: location) }
                do { key = try open(location) } catch { throw .hardwareKey(error) }
            }
            guard let made = TLSIdentity(chain: [leaf, root], tokenKey: key) else {
                throw .invalidEnrolment("the certificate is not for this device's key (\(key.location))")
            }
            identity = made
        } else {
            let key: Certificate.PrivateKey
            do {
                key = try group.store.privateKey(label: Self.pendingLabel)
            } catch .notFound {
                throw .invalidEnrolment("no pending key: run `share join INVITATION` first")
            } catch .locked {
                throw .locked("the pending key is sealed under whenUnlocked")
            } catch {
                throw .storage("\(error)")
            }
            guard let made = TLSIdentity(chain: [leaf, root], privateKey: key) else {
                throw .invalidEnrolment("the certificate is not for this device's key")
            }
            identity = made
        }
        try ShareGroup.map {
            try group.store.storeIdentity(identity, label: ShareGroup.deviceLabel, replace: true)
            if identity.privateKey != nil {
                _ = try group.store.delete(label: Self.pendingLabel, kind: .privateKey)
            } else {
                try group.store.keychain.deletePassword(forService: ShareGroup.service, account: Self.pendingHardwareAccount)
            }
            try group.store.flush()
        }
        return ShareMembership(identity: identity, root: root)
    }

    /// Where a pending key that stays in hardware is: a token key's URI, or a TPM key's blobs.
    enum PendingHardwareKey {
        case location(String)
        case tpm(TPM2PrivateKey.Blobs)
    }

    /// The pending key when it stays in hardware, nil when the pending key is a software key
    /// (or none).
    func pendingHardwareKey() throws(ShareError) -> PendingHardwareKey? {
        let secret: SecretBytes
        do {
            secret = try group.store.keychain.securePasswordData(forService: ShareGroup.service, account: Self.pendingHardwareAccount)
        } catch KeychainError.itemNotFound {
            return nil
        } catch {
            throw mapKeychain(error, "the pending key's location")
        }
        defer { secret.wipe() }
        let bytes = secret.withUnsafeBytes { Array($0) }
        if let blobs = TPM2PrivateKey.Blobs(serialized: bytes) { return .tpm(blobs) }
        return .location(String(decoding: bytes, as: UTF8.self))
    }

    static func mac(secret: SecretBytes, id: String, device: String, spki: [UInt8]) -> [UInt8] {
        mac(secret: secret, parts: [context, Array(id.utf8), Array(device.utf8), spki])
    }

    /// The MAC of a request made over the network: bound to the server's challenge and
    /// certificate (`binding`), under another context.
    static func mac(secret: SecretBytes, id: String, device: String, spki: [UInt8], binding: [UInt8]) -> [UInt8] {
        mac(secret: secret, parts: [networkContext, Array(id.utf8), Array(device.utf8), spki, binding])
    }

    static func mac(secret: SecretBytes, parts: [[UInt8]]) -> [UInt8] {
        let key = secret.withUnsafeBytes { SymmetricKey(data: $0) }
        var hmac = HMAC<SHA256>(key: key)
        for part in parts {
            let length = UInt32(part.count)
            hmac.update(data: [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)])
            hmac.update(data: part)
        }
        return Array(hmac.finalize())
    }

    func der(_ certificate: Certificate) throws(ShareError) -> [UInt8] {
        do {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return serializer.serializedBytes
        } catch { throw .storage("\(error)") }
    }

    private func der(_ key: Certificate.PublicKey) throws(ShareError) -> [UInt8] {
        do {
            var serializer = DER.Serializer()
            try serializer.serialize(key)
            return serializer.serializedBytes
        } catch { throw .storage("\(error)") }
    }

    private func mapKeychain(_ error: any Error, _ what: String) -> ShareError {
        if let error = error as? KeychainError, case .interactionNotAllowed = error {
            return .locked("\(what) is sealed under whenUnlocked")
        }
        return .storage("\(what): \(error)")
    }
}
