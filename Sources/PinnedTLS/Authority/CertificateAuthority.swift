import Cipher
import Crypto
import Foundation
import HardwareKeys
import SwiftASN1
import Vault
import X509

/// A small certificate authority for an application's own devices and servers: a self-signed
/// root whose key stays in the keychain or in hardware (a PKCS #11 token, the TPM: every
/// certificate and revocation list is then signed there), which issues leaf certificates for device or server
/// names, for keys it makes, for public keys sent by other devices, and for certificate
/// signing requests.
///
/// Defaults:
/// - keys P-256 (ECDSA with SHA-256 signatures);
/// - root: CA:true with a path length of 0 (leaves only), key usage keyCertSign and cRLSign
///   (critical), subject key identifier, valid 10 years;
/// - leaves: CA:false, key usage digitalSignature (critical), extended key usage serverAuth
///   and clientAuth, subject alternative names from the names (DNS names and IP addresses),
///   subject and authority key identifiers, valid 397 days and never past the root;
/// - every certificate: a random 20-byte serial number, and a start 1 hour in the past so that
///   a peer whose clock is a little behind accepts it.
public struct CertificateAuthority: Sendable {
    /// How long a root is valid by default: 10 years.
    public static let defaultRootValidity: TimeInterval = 10 * 365.25 * 86_400
    /// How long a leaf is valid by default: 397 days, the longest publicly trusted TLS
    /// certificates may have.
    public static let defaultLeafValidity: TimeInterval = 397 * 86_400
    /// How far before "now" certificates start.
    public static let backdating: TimeInterval = 3_600
    /// The label `tls ca init` stores the root under.
    public static let defaultLabel = "ca"

    /// What a leaf may be used for (its extended key usage).
    public struct Usage: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        /// A usage from its raw bits (1 server, 2 client).
        /// - Parameter rawValue: The bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// TLS server (serverAuth).
        public static let server = Usage(rawValue: 1)
        /// TLS client (clientAuth).
        public static let client = Usage(rawValue: 2)
    }

    /// The root certificate.
    public let certificate: Certificate
    /// The root's private key as swift-certificates signs with it (for a key in hardware, a
    /// `HardwareCertificateKey` that signs there).
    public let privateKey: Certificate.PrivateKey

    /// The root as an identity (its chain is the root alone); its key is
    /// ``TLSIdentity/Key/hardware(_:)`` when the root's key stays in hardware.
    public let identity: TLSIdentity

    /// The root's key in hardware, nil when it is held in memory.
    public var hardwareKey: (any HardwareSigningKey)? {
        if case .hardware(let key) = identity.key { return key }
        return nil
    }

    /// An authority from its certificate and key.
    /// - Throws: ``IdentityError/notAnAuthority(_:)`` when the certificate is not CA:true, lacks
    ///   keyCertSign, or is not the key's.
    /// - Parameters:
    ///   - certificate: The root certificate.
    ///   - privateKey: The root's private key.
    public init(certificate: Certificate, privateKey: Certificate.PrivateKey) throws(IdentityError) {
        try self.init(certificate: certificate, key: .software(privateKey))
    }

    /// An authority whose key stays in hardware: every certificate and revocation list it
    /// makes is signed there.
    /// - Throws: ``IdentityError/notAnAuthority(_:)`` as ``init(certificate:privateKey:)``,
    ///   ``IdentityError/hardwareKeyMismatch(label:location:)`` when the hardware key is not
    ///   the certificate's key.
    /// - Parameters:
    ///   - certificate: The root certificate.
    ///   - hardwareKey: The root's key in hardware.
    public init(certificate: Certificate, hardwareKey: any HardwareSigningKey) throws(IdentityError) {
        guard certificate.publicKey == hardwareKey.publicKey else {
            throw .hardwareKeyMismatch(label: "\(certificate.subject)", location: hardwareKey.location)
        }
        try self.init(certificate: certificate, key: .hardware(hardwareKey))
    }

    private init(certificate: Certificate, key: TLSIdentity.Key) throws(IdentityError) {
        guard let identity = TLSIdentity(chain: [certificate], key: key) else {
            throw .notAnAuthority("the key is not the certificate's key")
        }
        let privateKey: Certificate.PrivateKey = switch key {
        case .software(let key): key
        case .hardware(let key): HardwareCertificateKey.certificatePrivateKey(key)
        }
        let constraints: BasicConstraints?
        let usage: KeyUsage?
        do {
            constraints = try certificate.extensions.basicConstraints
            usage = try certificate.extensions.keyUsage
        } catch {
            throw .notAnAuthority("its extensions do not parse: \(error)")
        }
        guard case .isCertificateAuthority? = constraints else { throw .notAnAuthority("\(certificate.subject) is not CA:true") }
        if let usage, !usage.keyCertSign { throw .notAnAuthority("\(certificate.subject) may not sign certificates (no keyCertSign)") }
        _ = try IdentityRecord.algorithm(of: privateKey.publicKey)
        self.certificate = certificate
        self.privateKey = privateKey
        self.identity = identity
    }

    /// Creates a root: a new key (P-256 unless `key` is given) and a self-signed certificate.
    /// - Parameters:
    ///   - commonName: The root's common name, for example "Example devices CA".
    ///   - organization: An organization name for the subject, if any.
    ///   - key: The root's key (default: a new P-256 key).
    ///   - validity: How long it is valid (default 10 years).
    ///   - pathLength: 0 (default: it signs leaves only) or 1 (it may also sign one level of
    ///     intermediate authorities).
    ///   - now: The time of issue.
    /// - Throws: ``IdentityError/invalidName(_:)``, ``IdentityError/signingFailed(_:)``.
    /// - Returns: The new authority (not stored: see ``save(to:label:accessibility:replace:)``).
    public static func createRoot(commonName: String, organization: String? = nil, key: Certificate.PrivateKey? = nil,
                                  validity: TimeInterval = defaultRootValidity, pathLength: Int = 0,
                                  now: Date = Date()) throws(IdentityError) -> CertificateAuthority {
        guard !commonName.isEmpty, commonName.count <= 64 else { throw .invalidName("a common name of 1 to 64 characters is needed") }
        guard pathLength == 0 || pathLength == 1 else { throw .invalidName("the path length must be 0 or 1") }
        guard validity > 0, validity <= 30 * 366 * 86_400 else { throw .invalidName("the validity must be between 1 second and 30 years") }
        let key = key ?? Certificate.PrivateKey(P256.Signing.PrivateKey())
        return try createRoot(commonName: commonName, organization: organization, key: .software(key), validity: validity,
                              pathLength: pathLength, now: now)
    }

    /// Creates a root whose key stays in hardware (a PKCS #11 token, the TPM): the certificate
    /// is self-signed there. Nothing falls back to a software key.
    /// - Parameters: as ``createRoot(commonName:organization:key:validity:pathLength:now:)``;
    ///   `hardwareKey` is the root's key (EC P-256 or P-384, or RSA with PKCS #1 v1.5).
    /// - Throws: as ``createRoot(commonName:organization:key:validity:pathLength:now:)``, and
    ///   ``IdentityError/hardwareKey(_:)`` when the hardware does not sign.
    /// - Returns: The new authority (not stored: see ``save(to:label:accessibility:replace:)``).
    public static func createRoot(commonName: String, organization: String? = nil, hardwareKey: any HardwareSigningKey,
                                  validity: TimeInterval = defaultRootValidity, pathLength: Int = 0,
                                  now: Date = Date()) throws(IdentityError) -> CertificateAuthority {
        try createRoot(commonName: commonName, organization: organization, key: .hardware(hardwareKey), validity: validity,
                       pathLength: pathLength, now: now)
    }

    private static func createRoot(commonName: String, organization: String?, key root: TLSIdentity.Key,
                                   validity: TimeInterval, pathLength: Int, now: Date) throws(IdentityError) -> CertificateAuthority {
        guard !commonName.isEmpty, commonName.count <= 64 else { throw .invalidName("a common name of 1 to 64 characters is needed") }
        guard pathLength == 0 || pathLength == 1 else { throw .invalidName("the path length must be 0 or 1") }
        guard validity > 0, validity <= 30 * 366 * 86_400 else { throw .invalidName("the validity must be between 1 second and 30 years") }
        let key: Certificate.PrivateKey = switch root {
        case .software(let key): key
        case .hardware(let key): HardwareCertificateKey.certificatePrivateKey(key)
        }
        _ = try IdentityRecord.algorithm(of: key.publicKey)
        do {
            let name = try DistinguishedName {
                if let organization { OrganizationName(organization) }
                CommonName(commonName)
            }
            let extensions = try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: pathLength))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: key.publicKey)
            }
            let certificate = try Certificate(
                version: .v3, serialNumber: try serialNumber(), publicKey: key.publicKey,
                notValidBefore: now - backdating, notValidAfter: now + validity,
                issuer: name, subject: name, signatureAlgorithm: signatureAlgorithm(for: key),
                extensions: extensions, issuerPrivateKey: key)
            return try CertificateAuthority(certificate: certificate, key: root)
        } catch {
            throw Self.signingError(error)
        }
    }

    // MARK: Issuing

    /// Issues a leaf for a new key made here (P-256 unless `key` is given), and returns it as an
    /// identity whose chain is the leaf and this root.
    /// - Parameters:
    ///   - names: The DNS names and IP addresses it is for; the first is also the subject's common name.
    ///   - usage: serverAuth and/or clientAuth (default both).
    ///   - key: The leaf's key (default: a new P-256 key).
    ///   - validity: How long it is valid (default 397 days), cut to the root's end.
    ///   - now: The time of issue.
    /// - Throws: ``IdentityError/invalidName(_:)``, ``IdentityError/signingFailed(_:)``.
    /// - Returns: The leaf's identity: its key and the chain (leaf, root).
    public func issue(names: [String], usage: Usage = [.server, .client], key: Certificate.PrivateKey? = nil,
                      validity: TimeInterval = defaultLeafValidity, now: Date = Date()) throws(IdentityError) -> TLSIdentity {
        let key = key ?? Certificate.PrivateKey(P256.Signing.PrivateKey())
        let leaf = try issue(publicKey: key.publicKey, names: names, usage: usage, validity: validity, now: now)
        guard let identity = TLSIdentity(chain: [leaf, certificate], privateKey: key) else {
            throw .signingFailed("the issued certificate is not the key's")
        }
        return identity
    }

    /// Issues a leaf for a public key given by another device (its key stays there).
    /// - Throws: as ``issue(names:usage:key:validity:now:)``, and ``IdentityError/unsupportedKey(_:)``.
    /// - Parameters:
    ///   - publicKey: The key to certify (P-256, P-384 or RSA).
    ///   - names: The DNS names and IP addresses it is for; the first is also the subject's common name.
    ///   - usage: serverAuth and/or clientAuth (default both).
    ///   - validity: How long it is valid (default 397 days), cut to the root's end.
    ///   - now: The time of issue.
    /// - Returns: The leaf certificate.
    public func issue(publicKey: Certificate.PublicKey, names: [String], usage: Usage = [.server, .client],
                      validity: TimeInterval = defaultLeafValidity, now: Date = Date()) throws(IdentityError) -> Certificate {
        _ = try IdentityRecord.algorithm(of: publicKey)
        guard !usage.isEmpty else { throw .invalidName("a certificate needs server or client usage (or both)") }
        guard validity > 0 else { throw .invalidName("the validity must be positive") }
        let alternativeNames = try Self.generalNames(names)
        let notAfter = min(now + validity, certificate.notValidAfter)
        guard notAfter > now else { throw .notAnAuthority("the root expired on \(certificate.notValidAfter); create a new one") }
        do {
            let subject = try DistinguishedName { CommonName(names[0]) }
            var purposes: [ExtendedKeyUsage.Usage] = []
            if usage.contains(.server) { purposes.append(.serverAuth) }
            if usage.contains(.client) { purposes.append(.clientAuth) }
            let issuerKeyID = try certificate.extensions.subjectKeyIdentifier?.keyIdentifier
                ?? SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier
            let extensions = try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage(purposes)
                SubjectAlternativeNames(alternativeNames)
                SubjectKeyIdentifier(hash: publicKey)
                AuthorityKeyIdentifier(keyIdentifier: issuerKeyID)
            }
            return try Certificate(
                version: .v3, serialNumber: try Self.serialNumber(), publicKey: publicKey,
                notValidBefore: max(now - Self.backdating, certificate.notValidBefore), notValidAfter: notAfter,
                issuer: certificate.subject, subject: subject, signatureAlgorithm: Self.signatureAlgorithm(for: privateKey),
                extensions: extensions, issuerPrivateKey: privateKey)
        } catch {
            throw Self.signingError(error)
        }
    }

    /// Issues a leaf for a certificate signing request (PKCS#10), after checking its signature.
    /// The names are `names` when given, else those the request asks for (its subject
    /// alternative names, else its common name); nothing else of the request is copied.
    /// - Throws: ``IdentityError/invalidRequest(_:)`` when the request does not parse or its
    ///   signature does not verify; as ``issue(publicKey:names:usage:validity:now:)``.
    /// - Parameters:
    ///   - request: The certificate signing request.
    ///   - names: The names to certify (nil: those the request asks for).
    ///   - usage: serverAuth and/or clientAuth (default both).
    ///   - validity: How long it is valid (default 397 days), cut to the root's end.
    ///   - now: The time of issue.
    /// - Returns: The leaf certificate for the request's key.
    public func issue(request: CertificateSigningRequest, names: [String]? = nil, usage: Usage = [.server, .client],
                      validity: TimeInterval = defaultLeafValidity, now: Date = Date()) throws(IdentityError) -> Certificate {
        guard request.publicKey.isValidSignature(request.signature, for: request) else {
            throw .invalidRequest("its signature does not verify")
        }
        let requested: [String]
        if let names {
            requested = names
        } else {
            requested = try Self.requestedNames(request)
        }
        return try issue(publicKey: request.publicKey, names: requested, usage: usage, validity: validity, now: now)
    }

    /// Parses a certificate signing request from PEM (`CERTIFICATE REQUEST`) or DER.
    /// - Throws: ``IdentityError/invalidRequest(_:)``.
    /// - Parameter bytes: The request, PEM or DER (at most 1 MiB).
    /// - Returns: The parsed request (its signature is checked when it is issued).
    public static func request(from bytes: [UInt8]) throws(IdentityError) -> CertificateSigningRequest {
        guard bytes.count <= IdentityImport.maxInputLength else {
            throw .invalidRequest("it is larger than \(IdentityImport.maxInputLength) bytes")
        }
        do {
            if bytes.first == 0x30 { return try CertificateSigningRequest(derEncoded: bytes) }
            let blocks = try withPlainBytes(bytes) { buffer throws(IdentityError) in try PEMReader.blocks(buffer) }
            guard let block = blocks.first(where: { $0.type == "CERTIFICATE REQUEST" || $0.type == "NEW CERTIFICATE REQUEST" }) else {
                throw IdentityError.invalidRequest("no CERTIFICATE REQUEST block found")
            }
            return try CertificateSigningRequest(derEncoded: block.der)
        } catch let error as IdentityError {
            if case .invalidPEM(let detail) = error { throw .invalidRequest(detail) }
            throw error
        } catch {
            throw .invalidRequest("it does not parse: \(error)")
        }
    }

    // MARK: Keychain

    /// Stores the root: its identity (key sealed under `accessibility`, default `whenUnlocked`)
    /// and its certificate (under `always`, so that it can be exported and used as a trust
    /// anchor while the vault is locked), both under `label`.
    /// - Throws: as ``IdentityStore/storeIdentity(_:label:accessibility:replace:)``.
    /// - Parameters:
    ///   - store: The identity store to keep the root in.
    ///   - label: The label of both items (default "ca").
    ///   - accessibility: The class that seals the identity.
    ///   - replace: Whether a root stored under the label is replaced.
    public func save(to store: IdentityStore, label: String = defaultLabel, accessibility: Accessibility = .whenUnlocked,
                     replace: Bool = false) throws(IdentityError) {
        try store.storeIdentity(identity, label: label, accessibility: accessibility, replace: replace)
    }

    /// The authority stored under `label`.
    /// - Throws: ``IdentityError/notFound(kind:label:)``, ``IdentityError/locked(label:accessibility:reason:)``
    ///   while the vault is locked, ``IdentityError/notAnAuthority(_:)``.
    ///
    /// A root whose key stays in hardware is opened with `openingHardwareKey` (given the
    /// location its record names); the key's public key must be the root certificate's, so a
    /// swapped record naming another key is refused before anything is signed.
    /// A root whose key is in the TPM is loaded from its recorded blobs into the TPM `tcti`
    /// reaches (nil: `$TPM2TOOLS_TCTI`), and the key the TPM loads must be the certificate's
    /// (``IdentityError/hardwareKeyMismatch(label:location:)`` otherwise).
    /// - Parameters:
    ///   - store: The identity store the root is kept in.
    ///   - label: The root's label (default "ca").
    ///   - openingHardwareKey: Opens a key in a PKCS #11 token from its recorded location (the
    ///     module and PIN come from the caller, never from the record).
    ///   - tcti: The TPM's TCTI, for a root whose key is in the TPM.
    /// - Returns: The authority.
    /// - Throws: also ``IdentityError/hardwareKeyRequired(label:location:)``,
    ///   ``IdentityError/hardwareKey(_:)``, ``IdentityError/hardwareKeyMismatch(label:location:)``.
    public static func load(from store: IdentityStore, label: String = defaultLabel,
                            openingHardwareKey: ((String) throws(HardwareKeyError) -> any HardwareSigningKey)? = nil,
                            tcti: String? = nil)
        throws(IdentityError) -> CertificateAuthority {
        let identity = try store.identity(label: label, openingHardwareKey: openingHardwareKey, tcti: tcti)
        return try CertificateAuthority(certificate: identity.leaf, key: identity.key)
    }

    // MARK: Helpers

    /// What signing a certificate or a revocation list failed with: an ``IdentityError`` as it
    /// is, the hardware's own error as ``IdentityError/hardwareKey(_:)``, anything else (an
    /// encoding failure of swift-certificates) as ``IdentityError/signingFailed(_:)``.
    static func signingError(_ error: any Error) -> IdentityError {
        switch error {
        case let error as IdentityError: error
        case let error as HardwareKeyError: .hardwareKey(error)
        default: .signingFailed("\(error)")
        }
    }

    /// A positive 20-byte serial number from the system's random generator (the top bit clear,
    /// the next one set, so that the encoding is always 20 bytes).
    static func serialNumber() throws(IdentityError) -> Certificate.SerialNumber {
        var bytes: [UInt8]
        do { bytes = try SecureRandom.bytes(20) } catch { throw .signingFailed("no random bytes: \(error)") }
        bytes[0] = (bytes[0] & 0x7F) | 0x40
        return Certificate.SerialNumber(bytes: bytes)
    }

    static func signatureAlgorithm(for key: Certificate.PrivateKey) -> Certificate.SignatureAlgorithm {
        if P384.Signing.PublicKey(key.publicKey) != nil { return .ecdsaWithSHA384 }
        if P256.Signing.PublicKey(key.publicKey) != nil { return .ecdsaWithSHA256 }
        return .sha256WithRSAEncryption
    }

    /// Checks that every name is a DNS name or an IP address, as ``issue(publicKey:names:usage:validity:now:)`` will.
    /// - Throws: ``IdentityError/invalidName(_:)``.
    /// - Parameter names: DNS names and IP addresses.
    public static func checkNames(_ names: [String]) throws(IdentityError) {
        _ = try generalNames(names)
    }

    /// DNS names and IP addresses as general names.
    static func generalNames(_ names: [String]) throws(IdentityError) -> [GeneralName] {
        guard !names.isEmpty else { throw .invalidName("no name given") }
        guard names.count <= 100 else { throw .invalidName("\(names.count) names; at most 100") }
        var result: [GeneralName] = []
        for name in names {
            if let address = ipAddress(name) {
                result.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(address))))
            } else {
                result.append(.dnsName(try dnsName(name)))
            }
        }
        return result
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address in text, or nil.
    static func ipAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if text.withCString({ inet_pton(AF_INET, $0, &v4) }) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if text.withCString({ inet_pton(AF_INET6, $0, &v6) }) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// A DNS name checked as RFC 1123 host names (letters, digits and hyphens, labels of 1 to
    /// 63 characters, 253 in all), lowercased; `*.` may lead for a wildcard.
    static func dnsName(_ name: String) throws(IdentityError) -> String {
        let lower = name.lowercased()
        var labels = lower.split(separator: ".", omittingEmptySubsequences: false)
        if labels.count > 1, labels[0] == "*" { labels.removeFirst() }
        guard !lower.isEmpty, lower.utf8.count <= 253, !labels.isEmpty else { throw .invalidName("\"\(name)\" is not a DNS name") }
        for label in labels {
            guard (1...63).contains(label.utf8.count),
                  label.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }),
                  label.first != "-", label.last != "-"
            else { throw .invalidName("\"\(name)\" is not a DNS name (letters, digits and hyphens, labels separated by dots)") }
        }
        return lower
    }

    /// The names a request asks for: its subject alternative names (DNS and IP), else its common name.
    static func requestedNames(_ request: CertificateSigningRequest) throws(IdentityError) -> [String] {
        var names: [String] = []
        do {
            if let extensions = try request.attributes.extensionRequest?.extensions,
               let alternatives = try extensions.subjectAlternativeNames {
                for name in alternatives {
                    switch name {
                    case .dnsName(let dns): names.append(dns)
                    case .ipAddress(let octets): names.append(addressText(Array(octets.bytes)))
                    default: continue
                    }
                }
            }
        } catch {
            throw .invalidRequest("its requested extensions do not parse: \(error)")
        }
        if names.isEmpty {
            for rdn in request.subject {
                for attribute in rdn where attribute.type == .RDNAttributeType.commonName {
                    names.append(String(describing: attribute.value))
                }
            }
        }
        guard !names.isEmpty else { throw .invalidRequest("it names no DNS name, IP address or common name; give the names") }
        return names
    }

    static func addressText(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        guard bytes.count == 4 || bytes.count == 16,
              bytes.withUnsafeBytes({ inet_ntop(family, $0.baseAddress, &buffer, 64) }) != nil
        else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
