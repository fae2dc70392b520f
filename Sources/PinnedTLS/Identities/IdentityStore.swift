import Cipher
import Foundation
import HardwareKeys
import Keychain
import Vault
import X509

/// Private keys, certificates and identities (a key with its chain) kept in a `Keychain`, as
/// the system keychain's key, certificate and identity classes.
///
/// Each item is a generic-password item of the keychain under a reserved service
/// (``IdentityItemKind/service``: `securefoundation.tls.key`, `.certificate`, `.identity`) with
/// the label as its account, so it is sealed under its class key, bound to its names and
/// MAC'd per row like every keychain item. Its secret is a small versioned record (see
/// docs/FORMATS.md, "TLS identity records"). Private keys and identities are sealed under
/// `whenUnlocked` unless told otherwise, and so cannot be read while the vault is locked;
/// certificates are public and default to `always`, so that trust anchors can be read without
/// an unlock.
///
/// Writes are queued by the keychain and committed within its coalescing interval; call
/// ``flush()`` to have them on disk at once.
public struct IdentityStore: Sendable {
    /// The keychain the items live in.
    public let keychain: Keychain

    /// - Parameter keychain: The keychain to keep the items in.
    public init(keychain: Keychain) {
        self.keychain = keychain
    }

    /// One stored item, without its secret.
    public struct Item: Sendable, Hashable {
        /// Key, certificate or identity.
        public var kind: IdentityItemKind
        /// The label it is stored under.
        public var label: String
        /// The class key that protects it.
        public var accessibility: Accessibility
        /// For certificates and identities: the leaf's subject and expiry, as written when stored.
        public var summary: String?
        /// When it was first stored.
        public var created: Date
    }

    /// What ``list()`` found.
    public struct Listing: Sendable {
        /// The items whose names could be read, ordered by label then kind.
        public var items: [Item]
        /// Keychain items whose names are sealed under a class key that is unavailable (the vault
        /// is locked) or whose rows are damaged: they may or may not be TLS items.
        public var unreadable: Int
    }

    // MARK: Private keys

    /// Stores a private key (P-256, P-384, or RSA of at least 2048 bits).
    /// - Parameters:
    ///   - key: The key.
    ///   - label: The label to store it under.
    ///   - accessibility: The class key that seals it (default `whenUnlocked`).
    ///   - replace: Replace a key stored under the label already (otherwise that is an error).
    /// - Throws: ``IdentityError/duplicate(kind:label:)``, ``IdentityError/locked(label:accessibility:reason:)``,
    ///   ``IdentityError/unsupportedKey(_:)``, ``IdentityError/invalidLabel(_:)``.
    public func storePrivateKey(_ key: Certificate.PrivateKey, label: String, accessibility: Accessibility = .whenUnlocked,
                                replace: Bool = false) throws(IdentityError) {
        try Self.check(label)
        let record = try IdentityRecord.encode(key: key, certificates: [])
        defer { record.wipe() }
        try write(record, kind: .privateKey, label: label, accessibility: accessibility, comment: nil, replace: replace)
    }

    /// The private key stored under `label`.
    /// - Parameters:
    ///   - label: The label.
    ///   - minimum: The weakest class accepted (nil: any); a key stored under a weaker one is refused.
    /// - Throws: ``IdentityError/notFound(kind:label:)``, ``IdentityError/locked(label:accessibility:reason:)``
    ///   while the vault is locked, ``IdentityError/corruptedRecord(label:detail:)``.
    /// - Returns: The key.
    public func privateKey(label: String, requiring minimum: Accessibility? = nil) throws(IdentityError) -> Certificate.PrivateKey {
        let decoded = try read(.privateKey, label: label, requiring: minimum)
        guard let key = decoded.key else { throw .corruptedRecord(label: label, detail: "no key in the record") }
        return key
    }

    // MARK: Certificates

    /// Stores one or more certificates (a chain, leaf first, or a set of trust anchors).
    /// - Parameters:
    ///   - certificates: 1 to 16 certificates.
    ///   - label: The label to store them under.
    ///   - accessibility: The class key that seals them (default `always`: certificates are public).
    ///   - replace: Replace certificates stored under the label already.
    /// - Throws: ``IdentityError/duplicate(kind:label:)``, ``IdentityError/invalidCertificate(_:)``.
    public func storeCertificates(_ certificates: [Certificate], label: String, accessibility: Accessibility = .always,
                                  replace: Bool = false) throws(IdentityError) {
        try Self.check(label)
        guard let first = certificates.first else { throw .invalidCertificate("no certificate given") }
        let record = try IdentityRecord.encode(key: nil, certificates: certificates)
        defer { record.wipe() }
        try write(record, kind: .certificate, label: label, accessibility: accessibility, comment: Self.summary(first), replace: replace)
    }

    /// The certificates stored under `label`, in the order stored: what a trust policy uses for
    /// "anchors kept in the keychain".
    /// - Throws: ``IdentityError/notFound(kind:label:)``, ``IdentityError/corruptedRecord(label:detail:)``,
    ///   ``IdentityError/locked(label:accessibility:reason:)`` for certificates stored under a locked class.
    /// - Parameters:
    ///   - label: The label.
    ///   - minimum: The weakest class accepted (nil: any).
    /// - Returns: The certificates.
    public func certificates(label: String, requiring minimum: Accessibility? = nil) throws(IdentityError) -> [Certificate] {
        try read(.certificate, label: label, requiring: minimum).certificates
    }

    /// The certificates stored under `label`, for a trust policy's anchors kept in the keychain
    /// (the same as ``certificates(label:requiring:)``).
    /// - Parameter label: The label.
    /// - Returns: The certificates.
    /// - Throws: As ``certificates(label:requiring:)``.
    public func anchorCertificates(label: String) throws(IdentityError) -> [Certificate] {
        try certificates(label: label)
    }

    // MARK: Identities

    /// Stores an identity (the key and its chain, in one item sealed under `accessibility`) and
    /// its chain as a certificate item under the same label (sealed under `always`, so that it
    /// can be listed and exported while the vault is locked). An identity whose key stays in a
    /// PKCS #11 token is stored as where its key is (its `HardwareSigningKey.location`) and its
    /// chain; one whose key is in the TPM (a `TPM2PrivateKey`), as the key's blobs and its chain
    /// (``storeIdentity(tpmKey:chain:label:accessibility:replace:)``): the key never enters the
    /// keychain.
    /// - Parameters:
    ///   - identity: The identity.
    ///   - label: The label for both items.
    ///   - accessibility: The class key that seals the identity (default `whenUnlocked`).
    ///   - replace: Replace an identity or certificates stored under the label already.
    /// - Throws: ``IdentityError/duplicate(kind:label:)`` (nothing is written then),
    ///   ``IdentityError/locked(label:accessibility:reason:)``, ``IdentityError/unsupportedKey(_:)``.
    public func storeIdentity(_ identity: TLSIdentity, label: String, accessibility: Accessibility = .whenUnlocked,
                              replace: Bool = false) throws(IdentityError) {
        try Self.check(label)
        // A key in the TPM is stored as its blobs (version 3), which only that TPM can load.
        if case .hardware(let key) = identity.key, let tpmKey = key as? TPM2PrivateKey {
            try storeIdentity(tpmKey: tpmKey, chain: identity.chain, label: label, accessibility: accessibility, replace: replace)
            return
        }
        // A key that stays in a token is never stored: the record says where it is (version 2).
        let record: SecretBytes
        switch identity.key {
        case .software(let key): record = try IdentityRecord.encode(key: key, certificates: identity.chain)
        case .hardware(let key):
            // A recorded pkcs11: URI names the token and the key only: a record in the data
            // directory must never choose the module loaded or the PIN file read.
            if key.location.hasPrefix("pkcs11:"), key.location.contains("?") {
                throw .unsupportedKey("\(key.location): a recorded key's URI names the token and the key only (no ?module-path= "
                    + "or ?pin-source=); open the key without them and give the module and PIN when it is used")
            }
            record = try IdentityRecord.encode(location: key.location, certificates: identity.chain)
        }
        defer { record.wipe() }
        let chain = try IdentityRecord.encode(key: nil, certificates: identity.chain)
        defer { chain.wipe() }
        let summary = Self.summary(identity.leaf)
        try write(record, kind: .identity, label: label, accessibility: accessibility, comment: summary, replace: replace)
        do {
            try write(chain, kind: .certificate, label: label, accessibility: .always, comment: summary, replace: replace)
        } catch {
            // Not half-stored: take the new identity back out. (When replacing, the earlier
            // identity is gone already; the new one stays, consistent on its own.)
            if !replace { try? keychain.deletePassword(forService: IdentityItemKind.identity.service, account: label) }
            throw error
        }
    }

    /// Stores an identity whose key stays in the TPM: the key's blobs with the chain (one
    /// version 3 record, sealed under `accessibility`) and the chain as a certificate item, as
    /// ``storeIdentity(_:label:accessibility:replace:)`` does.
    /// - Parameters:
    ///   - key: The opened TPM key; it must be the leaf certificate's key.
    ///   - chain: The certificates, leaf first.
    ///   - label: The item's label.
    ///   - accessibility: When the record can be read (default `whenUnlocked`).
    ///   - replace: Whether an item of the same label is replaced.
    /// - Throws: ``IdentityError/keyDoesNotMatchCertificate(_:)`` and the errors of ``storeIdentity(_:label:accessibility:replace:)``.
    public func storeIdentity(tpmKey key: TPM2PrivateKey, chain: [Certificate], label: String,
                              accessibility: Accessibility = .whenUnlocked, replace: Bool = false) throws(IdentityError) {
        try Self.check(label)
        guard let leaf = chain.first, leaf.publicKey == key.publicKey else {
            throw .keyDoesNotMatchCertificate("the TPM key \(key.location) is not the leaf certificate's key")
        }
        let record = try IdentityRecord.encodeTPM(key.blobs, certificates: chain)
        defer { record.wipe() }
        let chainRecord = try IdentityRecord.encode(key: nil, certificates: chain)
        defer { chainRecord.wipe() }
        let summary = Self.summary(leaf)
        try write(record, kind: .identity, label: label, accessibility: accessibility, comment: summary, replace: replace)
        do {
            try write(chainRecord, kind: .certificate, label: label, accessibility: .always, comment: summary, replace: replace)
        } catch {
            if !replace { try? keychain.deletePassword(forService: IdentityItemKind.identity.service, account: label) }
            throw error
        }
    }

    /// The identity stored under `label`: its key and chain, checked to belong together.
    /// - Throws: ``IdentityError/notFound(kind:label:)``, ``IdentityError/locked(label:accessibility:reason:)``
    ///   while the vault is locked, ``IdentityError/corruptedRecord(label:detail:)``.
    ///
    /// An identity whose key stays in a PKCS #11 token (stored from a ``TLSIdentity/Key/hardware(_:)``
    /// identity) is opened with `openingHardwareKey`, given the location recorded, and its
    /// public key must be the leaf's.
    /// - Throws: also ``IdentityError/hardwareKeyRequired(label:location:)`` when the key stays
    ///   in hardware and no opener is given, ``IdentityError/hardwareKey(_:)`` when it cannot be
    ///   opened, ``IdentityError/hardwareKeyMismatch(label:location:)`` when it is not the
    ///   leaf's key.
    ///
    /// An identity whose key stays in the TPM (stored by ``storeIdentity(tpmKey:chain:label:accessibility:replace:)``)
    /// is opened with the TPM reached through `tcti` (nil: `$TPM2TOOLS_TCTI`); the public key the
    /// TPM reports for the loaded key must be the leaf's (``IdentityError/hardwareKeyMismatch(label:location:)``
    /// otherwise, ``IdentityError/hardwareKey(_:)`` when the TPM key cannot be opened).
    /// - Parameters:
    ///   - label: The identity's label.
    ///   - minimum: The weakest class accepted (nil: any).
    ///   - openingHardwareKey: Opens a key in a PKCS #11 token from the location its record names
    ///     (the module and PIN come from the caller, never from the record).
    ///   - tcti: The TPM's TCTI, for a key in the TPM (nil: `$TPM2TOOLS_TCTI`).
    /// - Returns: The identity: its key (in memory, in a token or in the TPM) and its chain.
    public func identity(label: String, requiring minimum: Accessibility? = nil,
                         openingHardwareKey: ((String) throws(HardwareKeyError) -> any HardwareSigningKey)? = nil,
                         tcti: String? = nil)
        throws(IdentityError) -> TLSIdentity {
        let decoded = try read(.identity, label: label, requiring: minimum)
        if let blobs = decoded.tpmKey { return try Self.tpmIdentity(label: label, blobs: blobs, chain: decoded.certificates, tcti: tcti) }
        if let location = decoded.location {
            guard let openingHardwareKey else { throw .hardwareKeyRequired(label: label, location: location) }
            let key: any HardwareSigningKey
            do { key = try openingHardwareKey(location) } catch { throw .hardwareKey(error) }
            guard let identity = TLSIdentity(chain: decoded.certificates, tokenKey: key) else {
                throw .hardwareKeyMismatch(label: label, location: location)
            }
            return identity
        }
        guard let key = decoded.key, let identity = TLSIdentity(chain: decoded.certificates, privateKey: key) else {
            throw .corruptedRecord(label: label, detail: "the key is not the leaf certificate's key")
        }
        return identity
    }

    /// Where the key of the identity stored under `label` is, when it stays in hardware: its
    /// `pkcs11:` URI, or the TPM key's `tpm:name=…;pcrs=…`; nil for a key in the keychain.
    /// Reads the record (its class key must be available) but opens no key.
    /// - Parameter label: The identity's label.
    /// - Returns: The location, or nil.
    /// - Throws: as ``identity(label:requiring:openingHardwareKey:tcti:)`` reading the record.
    public func hardwareKeyLocation(label: String) throws(IdentityError) -> String? {
        let decoded = try read(.identity, label: label, requiring: nil)
        return decoded.location ?? decoded.tpmKey?.location
    }

    /// Opens the TPM key of a record and pairs it with the record's chain: the public key the
    /// TPM reports for the loaded key must be the leaf's.
    static func tpmIdentity(label: String, blobs: TPM2PrivateKey.Blobs, chain: [Certificate], tcti: String?) throws(IdentityError) -> TLSIdentity {
        let key: TPM2PrivateKey
        do { key = try TPM2PrivateKey(blobs: blobs, tcti: tcti) } catch { throw .hardwareKey(error) }
        guard let identity = TLSIdentity(chain: chain, tokenKey: key) else {
            // As for a key in a token: the record was swapped (here: its key blobs replaced).
            throw .hardwareKeyMismatch(label: label, location: key.location)
        }
        return identity
    }

    // MARK: Import and export

    /// Imports a PEM private key and chain as an identity (see ``IdentityImport/identity(keyPEM:chainPEM:)``).
    /// - Returns: The identity stored.
    /// - Parameters:
    ///   - key: The private key's PEM text (wiped by the caller).
    ///   - chain: The certificates' PEM text.
    ///   - label: The label to store it under.
    ///   - accessibility: The class that seals the identity.
    ///   - replace: Whether items stored under the label are replaced.
    /// - Throws: As ``IdentityImport/identity(keyPEM:chainPEM:)`` and ``storeIdentity(_:label:accessibility:replace:)``.
    @discardableResult
    public func importPEM(key: SecretBytes, chain: some ContiguousBytes, label: String, accessibility: Accessibility = .whenUnlocked,
                          replace: Bool = false) throws(IdentityError) -> TLSIdentity {
        try Self.check(label)
        let identity = try IdentityImport.identity(keyPEM: key, chainPEM: chain)
        try storeIdentity(identity, label: label, accessibility: accessibility, replace: replace)
        return identity
    }

    /// Imports a PKCS#12 file as an identity (see ``IdentityImport/identity(pkcs12:password:)``).
    /// - Returns: The identity stored.
    /// - Parameters:
    ///   - bytes: The PKCS#12 file.
    ///   - password: Its export password (nil or empty: none).
    ///   - label: The label to store it under.
    ///   - accessibility: The class that seals the identity.
    ///   - replace: Whether items stored under the label are replaced.
    /// - Throws: As ``IdentityImport/identity(pkcs12:password:)`` and ``storeIdentity(_:label:accessibility:replace:)``.
    @discardableResult
    public func importPKCS12(_ bytes: some ContiguousBytes, password: SecretBytes?, label: String,
                             accessibility: Accessibility = .whenUnlocked, replace: Bool = false) throws(IdentityError) -> TLSIdentity {
        try Self.check(label)
        let identity = try IdentityImport.identity(pkcs12: bytes, password: password)
        try storeIdentity(identity, label: label, accessibility: accessibility, replace: replace)
        return identity
    }

    /// The certificates stored under `label` as PEM text (leaf first): the certificate item's,
    /// else the identity's chain.
    /// - Throws: ``IdentityError/notFound(kind:label:)`` when neither is stored.
    /// - Parameter label: The label.
    /// - Returns: The PEM text.
    public func exportCertificatesPEM(label: String) throws(IdentityError) -> String {
        let certificates: [Certificate]
        do {
            certificates = try self.certificates(label: label)
        } catch .notFound {
            certificates = try identity(label: label).chain
        }
        return try Self.pem(certificates)
    }

    /// PEM text of certificates, one `CERTIFICATE` block each (64-column base64), as openssl writes it.
    /// - Parameter certificates: The certificates, in the order to write them.
    /// - Returns: The PEM text.
    /// - Throws: ``IdentityError/invalidCertificate(_:)`` when a certificate cannot be encoded.
    public static func pem(_ certificates: [Certificate]) throws(IdentityError) -> String {
        var text = ""
        for certificate in certificates {
            let base64 = Data(try IdentityRecord.der(certificate)).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
            text += "-----BEGIN CERTIFICATE-----\n" + base64 + "\n-----END CERTIFICATE-----\n"
        }
        return text
    }

    // MARK: Listing and deleting

    /// Every key, certificate and identity item, without secrets.
    /// - Throws: ``IdentityError/keychain(_:)`` when the keychain cannot be read.
    /// - Returns: The keys, certificates and identities by label, with their class and summary.
    public func list() throws(IdentityError) -> Listing {
        let listing: KeychainListing
        do { listing = try keychain.listing() } catch { throw .keychain("\(error)") }
        var items: [Item] = []
        // A damaged row is counted, and does not hide the others.
        var unreadable = listing.damaged.count
        for summary in listing.items {
            guard let attributes = summary.attributes else { unreadable += 1; continue }
            guard attributes.key.itemClass == .genericPassword,
                  let kind = IdentityItemKind.allCases.first(where: { $0.service == attributes.key.service })
            else { continue }
            items.append(Item(kind: kind, label: attributes.key.account, accessibility: attributes.accessibility,
                              summary: attributes.comment, created: attributes.creationDate))
        }
        items.sort { ($0.label, $0.kind.rawValue) < ($1.label, $1.kind.rawValue) }
        return Listing(items: items, unreadable: unreadable)
    }

    /// Deletes the items stored under `label`: of one kind, or of every kind. No class key is needed.
    /// - Returns: How many items were deleted (at least 1).
    /// - Throws: ``IdentityError/notFound(kind:label:)`` when there was none.
    /// - Parameters:
    ///   - label: The label.
    ///   - kind: The kind of item to delete (nil: every kind).
    @discardableResult
    public func delete(label: String, kind: IdentityItemKind? = nil) throws(IdentityError) -> Int {
        var deleted = 0
        for candidate in kind.map({ [$0] }) ?? IdentityItemKind.allCases {
            do {
                try keychain.deletePassword(forService: candidate.service, account: label)
                deleted += 1
            } catch {
                if case .itemNotFound = error { continue }
                throw IdentityError.from(error, kind: candidate, label: label)
            }
        }
        guard deleted > 0 else { throw .notFound(kind: kind ?? .identity, label: label) }
        return deleted
    }

    /// Commits queued writes to disk now.
    /// - Throws: ``IdentityError/keychain(_:)`` when the keychain cannot write.
    public func flush() throws(IdentityError) {
        do { try keychain.flush() } catch { throw .keychain("\(error)") }
    }

    // MARK: Internals

    static func check(_ label: String) throws(IdentityError) {
        guard !label.isEmpty else { throw .invalidLabel("the label is empty") }
        guard label.count <= 200 else { throw .invalidLabel("the label has \(label.count) characters") }
        guard !label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalidLabel("the label contains control characters")
        }
    }

    /// "CN=…, expires 2027-12-24" for listings.
    static func summary(_ certificate: Certificate) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return "\(certificate.subject), expires \(formatter.string(from: certificate.notValidAfter))"
    }

    private func write(_ record: SecretBytes, kind: IdentityItemKind, label: String, accessibility: Accessibility,
                       comment: String?, replace: Bool) throws(IdentityError) {
        let key = ItemKey.generic(service: kind.service, account: label)
        do {
            if replace {
                try keychain.addOrUpdate(record, for: key, accessibility: accessibility, label: label, comment: comment)
            } else {
                try keychain.add(record, for: key, accessibility: accessibility, label: label, comment: comment)
            }
        } catch {
            throw IdentityError.from(error, kind: kind, label: label)
        }
    }

    private func read(_ kind: IdentityItemKind, label: String, requiring minimum: Accessibility?) throws(IdentityError) -> IdentityRecord.Decoded {
        let secret: SecretBytes
        do {
            secret = try keychain.passwordData(forService: kind.service, account: label, requiring: minimum)
        } catch {
            throw IdentityError.from(error, kind: kind, label: label)
        }
        defer { secret.wipe() }
        return try IdentityRecord.decode(secret, expecting: kind, label: label)
    }
}
