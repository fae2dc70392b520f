import Cipher
import Foundation
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

    public init(device: String, pin: String, time: Int64) {
        self.device = device
        self.pin = pin
        self.time = time
    }
}

/// The group's items in the keychain: the root, this device's identity, the devices it
/// enrolled and the revoked ones.
///
/// | item | label / account | class |
/// |---|---|---|
/// | group root (key and certificate) | identity `share.ca` | whenUnlocked; certificate `always` |
/// | this device | identity `share.device` | whenUnlocked; certificate `always` |
/// | enrolled devices | generic `securefoundation.share` / `members` | always |
/// | revoked devices | generic `securefoundation.share` / `revoked` | always |
///
/// The lists are keychain items, so a writer of the data directory cannot add, remove or
/// swap entries (each row is MAC'd under a key derived from the device key), and a server
/// reads them while the vault is locked.
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

    public init(store: IdentityStore) {
        self.store = store
    }

    /// Creates a group: a new root and this device's identity under it (needs the vault unlocked).
    /// - Throws: ``ShareError/storage(_:)`` when a group exists already (unless `replace`),
    ///   ``ShareError/locked(_:)``, ``ShareError/invalidDeviceName(_:)``.
    @discardableResult
    public func create(deviceName: String, groupName: String = "SecureFoundation sharing group",
                       replace: Bool = false) throws(ShareError) -> ShareMembership {
        let name = try Self.checkDeviceName(deviceName)
        let authority: CertificateAuthority
        let device: TLSIdentity
        do {
            authority = try CertificateAuthority.createRoot(commonName: groupName)
            device = try authority.issue(names: [name, Self.memberName], validity: Self.deviceValidity)
        } catch {
            throw .storage("cannot make the group's certificates: \(error)")
        }
        try Self.map {
            try authority.save(to: store, label: Self.rootLabel, replace: replace)
            try store.storeIdentity(device, label: Self.deviceLabel, replace: replace)
            try store.flush()
        }
        try record(device: name, certificate: device.leaf)
        return ShareMembership(identity: device, root: authority.certificate)
    }

    /// This device's membership: its identity (needs the vault unlocked) and the group root.
    public func membership() throws(ShareError) -> ShareMembership {
        let root = try rootCertificate()
        let identity: TLSIdentity
        do {
            identity = try store.identity(label: Self.deviceLabel)
        } catch .notFound {
            throw .notAMember("no device identity \"\(Self.deviceLabel)\" in the keychain")
        } catch .locked {
            throw .locked("the device key is sealed under whenUnlocked")
        } catch {
            throw .storage("\(error)")
        }
        return ShareMembership(identity: identity, root: root)
    }

    /// The group's root certificate (readable while locked).
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
    public func authority() throws(ShareError) -> CertificateAuthority {
        do {
            return try CertificateAuthority.load(from: store, label: Self.rootLabel)
        } catch .notFound {
            throw .notAMember("this machine does not hold the group root's key: enrol devices from the machine that created the group")
        } catch .locked {
            throw .locked("the group root's key is sealed under whenUnlocked")
        } catch {
            throw .storage("\(error)")
        }
    }

    // MARK: Device records

    /// The devices this machine enrolled (or created), by name and pin.
    public func members() throws(ShareError) -> [ShareDeviceRecord] { try list("members") }

    /// The revoked devices.
    public func revoked() throws(ShareError) -> [ShareDeviceRecord] { try list("revoked") }

    /// The pins of the revoked devices, as the server and client check them.
    public func revokedPins() throws(ShareError) -> Set<String> { Set(try revoked().map(\.pin)) }

    /// Records an enrolled device.
    public func record(device: String, certificate: Certificate) throws(ShareError) {
        let pin = try Self.pin(certificate)
        var members = try members().filter { $0.pin != pin }
        members.append(ShareDeviceRecord(device: device, pin: pin, time: Int64(Date().timeIntervalSince1970)))
        try save(members, "members")
    }

    /// Revokes a device: by its name (as recorded when it was enrolled here) or by its `sha256/` pin.
    /// Its certificate is refused by this machine's server and client from then on.
    /// - Returns: The records revoked.
    /// - Throws: ``ShareError/notFound(_:)`` when no enrolled device has that name.
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
        var revoked = try revoked()
        let known = Set(revoked.map(\.pin))
        revoked += targets.filter { !known.contains($0.pin) }
        try save(revoked, "revoked")
        return targets
    }

    private func list(_ account: String) throws(ShareError) -> [ShareDeviceRecord] {
        do {
            return try store.keychain.value([ShareDeviceRecord].self, forService: Self.service, account: account)
        } catch KeychainError.itemNotFound {
            return []
        } catch {
            throw .storage("the \(account) list cannot be read: \(error)")
        }
    }

    private func save(_ records: [ShareDeviceRecord], _ account: String) throws(ShareError) {
        do {
            try store.keychain.set(records, forService: Self.service, account: account, accessibility: .always)
            try store.keychain.flush()
        } catch {
            throw .storage("the \(account) list cannot be written: \(error)")
        }
    }

    // MARK: Helpers

    /// The `sha256/` pin of a certificate's key.
    public static func pin(_ certificate: Certificate) throws(ShareError) -> String {
        do { return try SPKIPin(certificate: certificate).description } catch {
            throw .peerRefused("the certificate's key cannot be encoded: \(error)")
        }
    }

    /// The device names in a member certificate (its DNS names but the shared member name).
    public static func deviceNames(of certificate: Certificate) -> [String] {
        guard let names = try? certificate.extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { name -> String? in
            if case .dnsName(let dns) = name, dns != memberName { return dns }
            return nil
        }
    }

    /// A device name, lowercased, or an error.
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
