import Cipher
import Foundation
import HardwareKeys
import Keychain
import X509

extension CertificateAuthority {
    /// How long a revocation list is valid by default (its nextUpdate): 30 days.
    public static let defaultRevocationListValidity: TimeInterval = 30 * 86_400

    /// The keychain service the authority's revocation list is stored under (the account is the
    /// authority's label): `securefoundation.tls.crl`, sealed under `always` (a list is public).
    package static let revocationListService = "securefoundation.tls.crl"

    /// Signs a revocation list of `entries` with number `number`, made at `now` and due again
    /// `validity` later.
    /// - Throws: ``IdentityError/signingFailed(_:)``, ``IdentityError/invalidRevocationList(_:)``.
    /// - Parameters:
    ///   - entries: The revoked certificates' serial numbers and dates.
    ///   - number: The list's CRL number (one above the previous list's).
    ///   - validity: How long the list is valid (its nextUpdate).
    ///   - now: The time of issue (its thisUpdate).
    /// - Returns: The signed list.
    public func signRevocationList(entries: [RevocationList.Entry], number: UInt64,
                                   validity: TimeInterval = defaultRevocationListValidity,
                                   now: Date = Date()) throws(IdentityError) -> RevocationList {
        guard validity >= 3_600, validity <= 366 * 86_400 else {
            throw .invalidName("a revocation list's validity must be between 1 hour and 366 days")
        }
        guard entries.count < RevocationList.maxEntries else {
            throw .invalidRevocationList("the list is full (\(RevocationList.maxEntries) entries); create a new authority")
        }
        let algorithm = Self.signatureAlgorithm(for: privateKey)
        guard let algorithmBytes = RevocationList.algorithmIdentifier(algorithm) else {
            throw .unsupportedKey("the authority's key cannot sign a revocation list")
        }
        let thisUpdate = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        do {
            let keyIdentifier = try certificate.extensions.subjectKeyIdentifier?.keyIdentifier
                ?? SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier
            let tbs = try RevocationList.encodeTBS(
                issuer: certificate.subject, algorithm: algorithmBytes, thisUpdate: thisUpdate,
                nextUpdate: thisUpdate + validity.rounded(.down), entries: entries, number: number,
                authorityKeyIdentifier: Array(keyIdentifier))
            let der = try RevocationList.assemble(tbs: tbs, algorithm: algorithm, algorithmBytes: algorithmBytes, key: privateKey)
            return try RevocationList(derEncoded: der)
        } catch {
            throw Self.signingError(error)
        }
    }

    /// Whether `certificate` was issued by this authority (its issuer is the root's subject and
    /// its signature verifies with the root's key), and is not the root itself.
    /// - Parameter certificate: A certificate.
    /// - Returns: Whether this authority issued it.
    public func hasIssued(_ certificate: Certificate) -> Bool {
        certificate != self.certificate && certificate.issuer == self.certificate.subject
            && self.certificate.publicKey.isValidSignature(certificate.signature, for: certificate)
    }

    /// The revocation list stored for the authority under `label`, or nil when none was made
    /// yet or the stored one is not this authority's (a root replaced under the same label
    /// starts a new list).
    /// - Throws: ``IdentityError/invalidRevocationList(_:)`` when the stored list does not
    ///   parse, ``IdentityError/keychain(_:)``.
    /// - Parameters:
    ///   - store: The identity store the authority is kept in.
    ///   - label: The authority's label.
    /// - Returns: The stored list, or nil.
    public func storedRevocationList(in store: IdentityStore, label: String = defaultLabel) throws(IdentityError) -> RevocationList? {
        let secret: SecretBytes
        do {
            secret = try store.keychain.passwordData(forService: Self.revocationListService, account: label)
        } catch {
            if case .itemNotFound = error { return nil }
            throw IdentityError.from(error, kind: .certificate, label: label)
        }
        let bytes = secret.withUnsafeBytes { Array($0) }
        let list = try RevocationList(derEncoded: bytes)
        return list.isIssued(by: certificate) ? list : nil
    }

    /// Signs a new list of the stored entries (number one above the stored list's) and stores
    /// it under `label`, replacing the stored one.
    /// - Returns: The new list.
    /// - Throws: as ``signRevocationList(entries:number:validity:now:)`` and ``storedRevocationList(in:label:)``.
    /// - Parameters:
    ///   - store: The identity store the authority is kept in.
    ///   - label: The authority's label.
    ///   - validity: How long the new list is valid.
    ///   - now: The time of issue.
    @discardableResult
    public func refreshRevocationList(in store: IdentityStore, label: String = defaultLabel,
                                      validity: TimeInterval = defaultRevocationListValidity,
                                      now: Date = Date()) throws(IdentityError) -> RevocationList {
        let stored = try storedRevocationList(in: store, label: label)
        return try storeRevocationList(entries: stored?.entries ?? [], after: stored, in: store, label: label,
                                       validity: validity, now: now)
    }

    /// Revokes `certificate`: adds its serial number to the list, signs a new list and stores it.
    /// Revoking a certificate listed already changes nothing.
    /// - Returns: The current list, and whether the certificate was added now (false: it was
    ///   listed already).
    /// - Throws: ``IdentityError/notIssuedByAuthority(_:)`` for a certificate another authority
    ///   issued (or the root itself); as ``refreshRevocationList(in:label:validity:now:)``.
    /// - Parameters:
    ///   - certificate: A certificate this authority issued.
    ///   - store: The identity store the authority is kept in.
    ///   - label: The authority's label.
    ///   - validity: How long the new list is valid.
    ///   - now: The time of revocation and of the new list.
    @discardableResult
    public func revoke(_ certificate: Certificate, in store: IdentityStore, label: String = defaultLabel,
                       validity: TimeInterval = defaultRevocationListValidity,
                       now: Date = Date()) throws(IdentityError) -> (list: RevocationList, added: Bool) {
        guard hasIssued(certificate) else {
            throw .notIssuedByAuthority("\(certificate.subject) (serial \(certificate.serialNumber)) is not issued by \(self.certificate.subject)")
        }
        let stored = try storedRevocationList(in: store, label: label)
        if let stored, stored.contains(certificate.serialNumber) { return (stored, false) }
        let entry = RevocationList.Entry(serialNumber: certificate.serialNumber,
                                         revocationDate: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)))
        let list = try storeRevocationList(entries: (stored?.entries ?? []) + [entry], after: stored, in: store,
                                           label: label, validity: validity, now: now)
        return (list, true)
    }

    /// The certificate a `tls revoke` argument names: a label (the leaf of the certificate item
    /// stored under it) or a `sha256/` pin of a stored leaf's key.
    /// - Throws: ``IdentityError/notFound(kind:label:)`` when nothing stored matches.
    /// - Parameters:
    ///   - nameOrPin: A label, or a `sha256/` pin.
    ///   - store: The identity store to look in.
    /// - Returns: The stored leaf certificate.
    public static func storedCertificate(named nameOrPin: String, in store: IdentityStore) throws(IdentityError) -> Certificate {
        if let pin = SPKIPin(nameOrPin) {
            let listing = try store.list()
            for item in listing.items where item.kind == .certificate {
                guard let leaf = try? store.certificates(label: item.label).first else { continue }
                if let leafPin = try? SPKIPin(certificate: leaf), leafPin == pin { return leaf }
            }
            throw .notFound(kind: .certificate, label: nameOrPin)
        }
        guard let leaf = try store.certificates(label: nameOrPin).first else {
            throw .notFound(kind: .certificate, label: nameOrPin)
        }
        return leaf
    }

    private func storeRevocationList(entries: [RevocationList.Entry], after stored: RevocationList?, in store: IdentityStore,
                                     label: String, validity: TimeInterval, now: Date) throws(IdentityError) -> RevocationList {
        let number = (stored?.number ?? 0) &+ 1
        let list = try signRevocationList(entries: entries, number: number, validity: validity, now: now)
        let secret = SecretBytes(copying: list.derEncoded)
        defer { secret.wipe() }
        do {
            try store.keychain.addOrUpdate(secret, for: .generic(service: Self.revocationListService, account: label),
                                           accessibility: .always, label: label,
                                           comment: "revocation list #\(number), \(entries.count) revoked")
        } catch {
            throw IdentityError.from(error, kind: .certificate, label: label)
        }
        try store.flush()
        return list
    }
}
