import Cipher
import Crypto
import Foundation
import HardwareKeys
import Keychain
import PinnedTLS
import Vault
import X509

/// This machine's place in a sharing group: the group's root certificate and this device's
/// identity (a key and a certificate issued by that root), kept in the keychain.
public struct ShareMembership: Sendable {
    /// This device's key and chain (leaf, root).
    public let identity: TLSIdentity
    /// The group's root: the only anchor either side trusts.
    public let root: Certificate
    /// This device's name (its certificate's first DNS name).
    public var deviceName: String { ShareGroup.deviceNames(of: identity.leaf).first ?? "?" }

    /// A membership from its parts.
    /// - Parameters:
    ///   - identity: this device's TLS identity in the group.
    ///   - root: the group's root certificate.
    public init(identity: TLSIdentity, root: Certificate) {
        self.identity = identity
        self.root = root
    }
}

/// A device whose certificate was revoked, or issued, in this group.
public struct ShareDeviceRecord: Codable, Sendable, Equatable {
    /// The device's name.
    public var device: String
    /// The `sha256/` pin of its certificate's key.
    public var pin: String
    /// When it was recorded (seconds since 1970).
    public var time: Int64

    /// A record from its parts.
    /// - Parameters:
    ///   - device: the device's name.
    ///   - pin: the `sha256/` pin of its certificate's key.
    ///   - time: when it was recorded (seconds since 1970).
    public init(device: String, pin: String, time: Int64) {
        self.device = device
        self.pin = pin
        self.time = time
    }
}

/// The revocation list as the group's record holds it.
public struct ShareRevocations: Sendable, Equatable {
    /// The revoked devices, oldest first.
    public var devices: [ShareDeviceRecord]
    /// How many times the list was written since the record was made (each `share revoke`
    /// adds one): what an anchor outside the data directory would hold.
    public var generation: UInt64
}

/// The group's record (docs/FORMATS.md, "Share group record"): keychain item
/// `securefoundation.share` / `group`, class `alwaysThisDeviceOnly`, canonical JSON.
struct ShareGroupRecord: Codable, Sendable, Equatable {
    static let currentVersion = 1
    var version: Int = ShareGroupRecord.currentVersion
    /// The revocation list's generation.
    var generation: UInt64
    /// How many devices are revoked, and the SHA-256 of the list (``ShareGroup/digest(_:generation:)``):
    /// checked against the list each time it is read.
    var count: Int
    var digest: String
    /// The revoked devices.
    var revoked: [ShareDeviceRecord]
    /// Whether this machine holds the group root (its enrolled devices are the group's members).
    var issuer: Bool

    init(generation: UInt64, revoked: [ShareDeviceRecord], issuer: Bool) {
        self.generation = generation
        self.revoked = revoked
        self.issuer = issuer
        count = revoked.count
        digest = ShareGroup.digest(revoked, generation: generation)
    }
}

/// The group's items in the keychain: the root, this device's identity, the devices it
/// enrolled and the revoked ones.
///
/// | item | label / account | class |
/// |---|---|---|
/// | group root (key and certificate) | identity `share.ca` | whenUnlocked; certificate `alwaysThisDeviceOnly` (`always` before the record) |
/// | this device | identity `share.device` | whenUnlocked; certificate `always` |
/// | the group's record: revoked devices, generation, count, digest, issuer | generic `securefoundation.share` / `group` | alwaysThisDeviceOnly |
/// | enrolled devices | generic `securefoundation.share` / `members` | always |
/// | revoked devices, for older versions (never trusted) | generic `securefoundation.share` / `revoked` | always |
///
/// The items are keychain rows, so a writer of the data directory cannot add or swap entries
/// (each row is MAC'd under a key derived from the device key), and a server reads them while
/// the vault is locked. Rows can be deleted: the root certificate stored
/// `alwaysThisDeviceOnly` commits the group to its record, so a missing record is refused.
public struct ShareGroup: Sendable {
    /// The label of the group root.
    public static let rootLabel = "share.ca"
    /// The label of this device's identity.
    public static let deviceLabel = "share.device"
    /// The keychain service of the group's lists.
    public static let service = "securefoundation.share"
    /// A name every member's certificate carries besides its own, checked by a sender that
    /// names no device (and sent as SNI, so a device's own name never crosses in clear).
    public static let memberName = "member.share.invalid"
    /// How long a device certificate is valid by default.
    public static let deviceValidity: TimeInterval = 397 * 86_400

    /// The identity store the items live in.
    public let store: IdentityStore

    /// How a key that stays in hardware is opened from the location its record names (this
    /// device's key when it is in a token); nil when none can be.
    public let openingHardwareKey: (@Sendable (String) throws(HardwareKeyError) -> any HardwareSigningKey)?

    /// The TPM's TCTI for keys of the group that are in the TPM (nil: `$TPM2TOOLS_TCTI`). Never
    /// read from the data directory.
    public let tcti: String?

    /// - Parameters:
    ///   - store: the identity store the group's items live in.
    ///   - openingHardwareKey: opens a key in a PKCS #11 token from its recorded location (the
    ///     module and PIN come from the caller, never from the record); needed when this
    ///     device's key or the group root's key stays in a token.
    ///   - tcti: the TPM's TCTI, for keys of the group in the TPM (nil: `$TPM2TOOLS_TCTI`).
    public init(store: IdentityStore,
                openingHardwareKey: (@Sendable (String) throws(HardwareKeyError) -> any HardwareSigningKey)? = nil,
                tcti: String? = nil) {
        self.store = store
        self.openingHardwareKey = openingHardwareKey
        self.tcti = tcti
    }

    /// Creates a group: a new root and this device's identity under it (needs the vault unlocked).
    ///
    /// With `deviceKey`, this device's key is that key in hardware (a PKCS #11 token, the TPM):
    /// the root certifies its public key, the identity item records where it is (a token key's
    /// URI, a TPM key's blobs), and every sharing handshake is signed there. With `rootKey`, the
    /// group root's key is that key in hardware: the root is self-signed there, and every
    /// device certificate it issues when devices are enrolled (``ShareEnrolment/approve(request:now:)``)
    /// is signed there too.
    /// - Parameters:
    ///   - deviceName: this device's name in the group.
    ///   - groupName: the root's common name.
    ///   - replace: replace a group made here before.
    ///   - deviceKey: this device's key in hardware (nil: a new P-256 key in the keychain).
    ///   - rootKey: the group root's key in hardware (nil: a new P-256 key in the keychain).
    /// - Returns: this device's membership.
    /// - Throws: ``ShareError/storage(_:)`` when a group exists already (unless `replace`),
    ///   ``ShareError/locked(_:)``, ``ShareError/invalidDeviceName(_:)``,
    ///   ``ShareError/hardwareKey(_:)`` when a key in hardware does not sign.
    @discardableResult
    public func create(deviceName: String, groupName: String = "SecureFoundation sharing group",
                       replace: Bool = false, deviceKey: (any HardwareSigningKey)? = nil,
                       rootKey: (any HardwareSigningKey)? = nil) throws(ShareError) -> ShareMembership {
        let name = try Self.checkDeviceName(deviceName)
        let authority: CertificateAuthority
        let device: TLSIdentity
        do {
            if let rootKey {
                authority = try CertificateAuthority.createRoot(commonName: groupName, hardwareKey: rootKey)
            } else {
                authority = try CertificateAuthority.createRoot(commonName: groupName)
            }
            if let deviceKey {
                let leaf = try authority.issue(publicKey: deviceKey.publicKey, names: [name, Self.memberName],
                                               validity: Self.deviceValidity)
                guard let identity = TLSIdentity(chain: [leaf, authority.certificate], tokenKey: deviceKey) else {
                    throw ShareError.hardwareKeyMismatch(location: deviceKey.location)
                }
                device = identity
            } else {
                device = try authority.issue(names: [name, Self.memberName], validity: Self.deviceValidity)
            }
        } catch let error as ShareError {
            throw error
        } catch IdentityError.hardwareKey(let error) {
            throw .hardwareKey(error)
        } catch {
            throw .storage("cannot make the group's certificates: \(error)")
        }
        try Self.map {
            try authority.save(to: store, label: Self.rootLabel, replace: replace)
            try store.storeIdentity(device, label: Self.deviceLabel, replace: replace)
            try store.flush()
        }
        try startRecord(issuer: true)
        try commitRoot()
        try record(device: name, certificate: device.leaf)
        return ShareMembership(identity: device, root: authority.certificate)
    }

    /// This device's membership: its identity (needs the vault unlocked) and the group root.
    /// - Returns: the device identity and the group root.
    /// - Throws: ``ShareError/notAMember(_:)`` when there is no group root or device identity,
    ///   ``ShareError/locked(_:)`` when the device key is sealed and the vault locked,
    ///   ``ShareError/hardwareKey(_:)``, ``ShareError/hardwareKeyRequired(location:)`` or
    ///   ``ShareError/hardwareKeyMismatch(location:)`` for a device key in hardware, and
    ///   ``ShareError/storage(_:)`` for another keychain failure.
    public func membership() throws(ShareError) -> ShareMembership {
        let root = try rootCertificate()
        let identity: TLSIdentity
        do {
            identity = try store.identity(label: Self.deviceLabel, openingHardwareKey: openingHardwareKey, tcti: tcti)
        } catch .notFound {
            throw .notAMember("no device identity \"\(Self.deviceLabel)\" in the keychain")
        } catch .locked {
            throw .locked("the device key is sealed under whenUnlocked")
        } catch {
            throw Self.hardwareError(error) ?? .storage("\(error)")
        }
        return ShareMembership(identity: identity, root: root)
    }

    /// The group's root certificate (readable while locked).
    /// - Returns: the root certificate.
    /// - Throws: ``ShareError/notAMember(_:)`` when there is no group root, ``ShareError/storage(_:)``
    ///   when the keychain cannot be read.
    public func rootCertificate() throws(ShareError) -> Certificate {
        do {
            guard let root = try store.certificates(label: Self.rootLabel).first else {
                throw ShareError.notAMember("no group root")
            }
            return root
        } catch let error as ShareError {
            throw error
        } catch IdentityError.notFound {
            throw .notAMember("no group root \"\(Self.rootLabel)\" in the keychain")
        } catch {
            throw .storage("\(error)")
        }
    }

    /// The group's certificate authority (this machine made the group or holds its root key;
    /// needs the vault unlocked).
    /// - Returns: the authority, with the root's key.
    /// - Throws: ``ShareError/notAMember(_:)`` when this machine does not hold the root's key,
    ///   ``ShareError/locked(_:)`` when that key is sealed and the vault locked,
    ///   ``ShareError/hardwareKey(_:)``, ``ShareError/hardwareKeyRequired(location:)`` or
    ///   ``ShareError/hardwareKeyMismatch(location:)`` for a root key in hardware, and
    ///   ``ShareError/storage(_:)`` for another keychain failure.
    public func authority() throws(ShareError) -> CertificateAuthority {
        do {
            return try CertificateAuthority.load(from: store, label: Self.rootLabel, openingHardwareKey: openingHardwareKey, tcti: tcti)
        } catch .notFound {
            throw .notAMember("this machine does not hold the group root's key: enrol devices from the machine that created the group")
        } catch .locked {
            throw .locked("the group root's key is sealed under whenUnlocked")
        } catch {
            throw Self.hardwareError(error) ?? .storage("\(error)")
        }
    }

    /// The sharing error for an identity error about a key in hardware, nil for another error.
    static func hardwareError(_ error: IdentityError) -> ShareError? {
        switch error {
        case .hardwareKey(let cause): .hardwareKey(cause)
        case .hardwareKeyRequired(_, let location): .hardwareKeyRequired(location: location)
        case .hardwareKeyMismatch(_, let location): .hardwareKeyMismatch(location: location)
        default: nil
        }
    }

    // MARK: Device records

    /// The devices this machine enrolled (or created), by name and pin.
    /// - Returns: the records, in the order they were recorded.
    /// - Throws: ``ShareError/storage(_:)`` when the list cannot be read.
    public func members() throws(ShareError) -> [ShareDeviceRecord] { try list("members") }

    /// The revoked devices, as the group's record holds them (see ``revocations()``).
    /// - Returns: the revoked devices' records.
    /// - Throws: the errors of ``revocations()``: ``ShareError/revocationsTampered(_:)`` when the group's record is missing, rolled back or does not match, ``ShareError/storage(_:)`` when the keychain cannot be read or written,
    ///   ``ShareError/notAMember(_:)`` when an older group being upgraded has no root.
    public func revoked() throws(ShareError) -> [ShareDeviceRecord] { try revocations().devices }

    /// The pins of the revoked devices, as the server and client check them.
    /// - Returns: the `sha256/` pins of the revoked devices.
    /// - Throws: the errors of ``revocations()``: ``ShareError/revocationsTampered(_:)`` when the group's record is missing, rolled back or does not match, ``ShareError/storage(_:)`` when the keychain cannot be read or written,
    ///   ``ShareError/notAMember(_:)`` when an older group being upgraded has no root.
    public func revokedPins() throws(ShareError) -> Set<String> { Set(try revoked().map(\.pin)) }

    /// The revocation list and its generation, from the group's record.
    ///
    /// The record is the keychain item `securefoundation.share` / `group` (class
    /// `alwaysThisDeviceOnly`: readable while the vault is locked, sealed with the device key
    /// and row-MAC'd like every item, so a writer of the data directory can neither forge it nor
    /// change it). A group whose root certificate is stored `alwaysThisDeviceOnly` (every group
    /// made, joined or upgraded by this version) must have it: a missing record is refused with
    /// ``ShareError/revocationsTampered(_:)``, never read as an empty list. A group of an older
    /// version (root stored `always`, no record) is upgraded here, once: its `revoked` item, or
    /// nothing when that item is missing, becomes the record (see docs/SECURITY.md).
    /// - Throws: ``ShareError/revocationsTampered(_:)``, ``ShareError/notAMember(_:)``, ``ShareError/storage(_:)``.
    /// - Returns: the revoked devices and the list's generation.
    public func revocations() throws(ShareError) -> ShareRevocations {
        let record = try groupRecord()
        return ShareRevocations(devices: record.revoked, generation: record.generation)
    }

    /// Upgrades a group of an older version now (see ``revocations()``), and finishes a record
    /// whose root certificate was not stored `alwaysThisDeviceOnly` yet. Run when the group is
    /// opened; needs no passcode.
    /// - Throws: ``ShareError/revocationsTampered(_:)`` when the group's record is missing, rolled back or does not match, ``ShareError/storage(_:)`` when the keychain cannot be read or written,
    ///   ``ShareError/notAMember(_:)`` when there is no group root.
    public func upgradeIfNeeded() throws(ShareError) {
        _ = try groupRecord()
        if try !rootIsCommitted() { try commitRoot() }
    }

    /// Whether this machine's list of enrolled devices is authoritative for the group: it holds
    /// the group root, which issues every member's certificate, so a certificate of the group
    /// whose pin is not in ``members()`` was not issued by an enrolment here.
    /// - Returns: `true` on the machine that holds the group root.
    /// - Throws: ``ShareError/revocationsTampered(_:)`` when the group's record is missing, rolled back or does not match, ``ShareError/storage(_:)`` when the keychain cannot be read or written,
    ///   ``ShareError/notAMember(_:)`` when an older group being upgraded has no root.
    public func enrolsDevices() throws(ShareError) -> Bool { try groupRecord().issuer }

    /// Whether a peer's `sha256/` pin may talk to this machine as a member: on the machine that
    /// holds the group root, only a device enrolled here (``members()``), so a certificate the
    /// root signed outside an enrolment is refused; on a machine that joined, which never sees
    /// the other devices' certificates, every certificate of the root (revoke those by pin).
    /// A members list that cannot be read refuses (fail closed).
    /// - Parameter pin: the peer's `sha256/` pin.
    /// - Returns: whether the peer may talk to this machine as a member.
    /// - Throws: the errors of ``enrolsDevices()`` and ``members()``: ``ShareError/revocationsTampered(_:)`` when the group's record is missing, rolled back or does not match, ``ShareError/storage(_:)`` when the keychain cannot be read or written,
    ///   ``ShareError/notAMember(_:)`` when an older group being upgraded has no root.
    public func isEnrolled(pin: String) throws(ShareError) -> Bool {
        guard try enrolsDevices() else { return true }
        return try members().contains { $0.pin == pin }
    }

    /// Records an enrolled device.
    /// - Parameters:
    ///   - device: the device's name.
    ///   - certificate: its certificate, whose key's pin is recorded (replacing a record of the same pin).
    /// - Throws: ``ShareError/peerRefused(_:)`` when the certificate's key cannot be encoded,
    ///   ``ShareError/storage(_:)`` when the members list cannot be read or written.
    public func record(device: String, certificate: Certificate) throws(ShareError) {
        let pin = try Self.pin(certificate)
        var members = try members().filter { $0.pin != pin }
        members.append(ShareDeviceRecord(device: device, pin: pin, time: Int64(Date().timeIntervalSince1970)))
        try save(members, "members")
    }

    /// Revokes a device: by its name (as recorded when it was enrolled here) or by its `sha256/` pin.
    /// Its certificate is refused by this machine's server and client from then on. The
    /// revocation list's generation goes up by one.
    /// - Returns: The records revoked.
    /// - Throws: ``ShareError/notFound(_:)`` when no enrolled device has that name,
    ///   ``ShareError/revocationsTampered(_:)`` when the current list cannot be trusted.
    /// - Parameter device: an enrolled device's name, or a `sha256/` pin.
    @discardableResult
    public func revoke(device: String) throws(ShareError) -> [ShareDeviceRecord] {
        var targets: [ShareDeviceRecord]
        if let pin = SPKIPin(device) {
            targets = [ShareDeviceRecord(device: device, pin: pin.description, time: 0)]
        } else {
            let name = device.lowercased()
            targets = try members().filter { $0.device == name }
            guard !targets.isEmpty else {
                throw .notFound("no device named \(device) was enrolled on this machine: give its sha256/ pin instead")
            }
        }
        let now = Int64(Date().timeIntervalSince1970)
        for index in targets.indices { targets[index].time = now }
        var record = try groupRecord()
        let known = Set(record.revoked.map(\.pin))
        record.revoked += targets.filter { !known.contains($0.pin) }
        record.generation += 1
        try write(record)
        return targets
    }

    // MARK: Helpers

    /// The `sha256/` pin of a certificate's key.
    /// - Parameter certificate: a member certificate.
    /// - Returns: the pin, `sha256/` then the base64 SHA-256 of the SubjectPublicKeyInfo.
    /// - Throws: ``ShareError/peerRefused(_:)`` when the key cannot be encoded.
    public static func pin(_ certificate: Certificate) throws(ShareError) -> String {
        do { return try SPKIPin(certificate: certificate).description } catch {
            throw .peerRefused("the certificate's key cannot be encoded: \(error)")
        }
    }

    /// The device names in a member certificate (its DNS names but the shared member name).
    /// - Parameter certificate: a member certificate.
    /// - Returns: its DNS names but the shared member name; none when it has no subject alternative names.
    public static func deviceNames(of certificate: Certificate) -> [String] {
        guard let names = try? certificate.extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { name -> String? in
            if case .dnsName(let dns) = name, dns != memberName { return dns }
            return nil
        }
    }

    /// A device name, lowercased, or an error.
    /// - Parameter name: a device name: 1-63 letters, digits and hyphens, not starting or ending
    ///   with a hyphen, not `member`.
    /// - Returns: the name, lowercased.
    /// - Throws: ``ShareError/invalidDeviceName(_:)`` for any other name.
    public static func checkDeviceName(_ name: String) throws(ShareError) -> String {
        let lower = name.lowercased()
        guard (1...63).contains(lower.utf8.count), lower != "member",
              lower.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d }),
              !lower.hasPrefix("-"), !lower.hasSuffix("-")
        else { throw .invalidDeviceName(name) }
        return lower
    }

    static func map(_ body: () throws -> Void) throws(ShareError) {
        do { try body() } catch IdentityError.locked(let label, _, _) {
            throw .locked("the item \(label) is sealed under a class that is unavailable")
        } catch IdentityError.duplicate(_, let label) {
            throw .storage("this machine has a sharing group already (\(label)); pass replace to start a new one")
        } catch {
            throw .storage("\(error)")
        }
    }
}
