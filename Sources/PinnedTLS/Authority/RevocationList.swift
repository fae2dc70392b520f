import Foundation
import SwiftASN1
import X509

/// A certificate revocation list (RFC 5280 §5, version 2): the serial numbers an authority has
/// revoked, signed by it, with the time it was made (`thisUpdate`), the time the next one is due
/// (`nextUpdate`), a CRL number that grows with each list, and the authority's key identifier.
///
/// What ``CertificateAuthority`` signs is what `openssl crl` and `openssl verify -crl_check`
/// read. Parsing is strict DER (swift-asn1's DER parser), bounded in size
/// (`maxEncodedLength`) and in entries (`maxEntries`); a critical extension it does not
/// know, in the list or in an entry, is refused.
public struct RevocationList: Sendable, Equatable {
    /// One revoked certificate.
    public struct Entry: Sendable, Hashable {
        /// The certificate's serial number.
        public var serialNumber: Certificate.SerialNumber
        /// When it was revoked (whole seconds).
        public var revocationDate: Date

        /// An entry of the list.
        /// - Parameters:
        ///   - serialNumber: The revoked certificate's serial number.
        ///   - revocationDate: When it was revoked.
        public init(serialNumber: Certificate.SerialNumber, revocationDate: Date) {
            self.serialNumber = serialNumber
            self.revocationDate = revocationDate
        }
    }

    /// The largest encoded list read: 1 MiB.
    package static let maxEncodedLength = 1 << 20
    /// The most entries a list may hold.
    package static let maxEntries = 20_000

    /// The issuer's name (the authority's subject).
    public let issuer: DistinguishedName
    /// When the list was made.
    public let thisUpdate: Date
    /// When the next list is due; after it, a policy refuses this one (see docs/TLS.md).
    public let nextUpdate: Date?
    /// The CRL number (grows by one with each list the authority signs).
    public let number: UInt64
    /// The authority key identifier of the list, if present.
    public let authorityKeyIdentifier: [UInt8]?
    /// The revoked certificates, in the order listed.
    public let entries: [Entry]
    /// The whole signed list, DER.
    public let derEncoded: [UInt8]

    let signatureAlgorithm: Certificate.SignatureAlgorithm
    let tbsBytes: [UInt8]
    let signatureBytes: [UInt8]
    let revokedSerials: Set<Certificate.SerialNumber>

    /// Whether `serialNumber` is listed.
    /// - Parameter serialNumber: A certificate's serial number.
    /// - Returns: Whether it is listed.
    public func contains(_ serialNumber: Certificate.SerialNumber) -> Bool {
        revokedSerials.contains(serialNumber)
    }

    /// Whether the list is issued by `authority`: its issuer is the authority's subject and its
    /// signature verifies with the authority's public key.
    /// - Parameter authority: The authority's certificate.
    /// - Returns: Whether the list is that authority's.
    public func isIssued(by authority: Certificate) -> Bool {
        guard issuer == authority.subject else { return false }
        return authority.publicKey.isValidSignature(signatureBytes, for: tbsBytes, signatureAlgorithm: signatureAlgorithm)
    }

    /// The list as PEM (`X509 CRL`).
    public var pemEncoded: String {
        let base64 = Data(derEncoded).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN X509 CRL-----\n" + base64 + "\n-----END X509 CRL-----\n"
    }

    // MARK: Parsing

    /// Parses a list from PEM (`X509 CRL`) or DER.
    /// - Throws: ``IdentityError/invalidRevocationList(_:)``.
    /// - Parameter bytes: The list, PEM or DER.
    public init(pemOrDER bytes: [UInt8]) throws(IdentityError) {
        guard bytes.count <= Self.maxEncodedLength * 2 else {
            throw .invalidRevocationList("it is larger than \(Self.maxEncodedLength * 2) bytes")
        }
        if bytes.first == 0x30 {
            try self.init(derEncoded: bytes)
            return
        }
        let blocks: [PEMReader.Block]
        do throws(IdentityError) {
            blocks = try withPlainBytes(bytes) { buffer throws(IdentityError) in try PEMReader.blocks(buffer) }
        } catch {
            if case .invalidPEM(let detail) = error { throw .invalidRevocationList(detail) }
            throw error
        }
        guard let block = blocks.first(where: { $0.type == "X509 CRL" }) else {
            throw .invalidRevocationList("no X509 CRL block found (give a PEM or DER CRL, as `securefoundation tls crl` writes)")
        }
        try self.init(derEncoded: block.der)
    }

    /// Parses a DER list. The signature is not checked here: see ``isIssued(by:)``.
    /// - Throws: ``IdentityError/invalidRevocationList(_:)``.
    /// - Parameter bytes: The list's DER encoding.
    public init(derEncoded bytes: [UInt8]) throws(IdentityError) {
        guard bytes.count <= Self.maxEncodedLength else {
            throw .invalidRevocationList("it is larger than \(Self.maxEncodedLength) bytes")
        }
        do {
            self = try Self.parse(bytes)
        } catch let error as IdentityError {
            throw error
        } catch {
            throw .invalidRevocationList("it is not a DER certificate revocation list: \(error)")
        }
    }

    private init(issuer: DistinguishedName, thisUpdate: Date, nextUpdate: Date?, number: UInt64,
                 authorityKeyIdentifier: [UInt8]?, entries: [Entry], derEncoded: [UInt8],
                 signatureAlgorithm: Certificate.SignatureAlgorithm, tbsBytes: [UInt8], signatureBytes: [UInt8]) {
        self.issuer = issuer
        self.thisUpdate = thisUpdate
        self.nextUpdate = nextUpdate
        self.number = number
        self.authorityKeyIdentifier = authorityKeyIdentifier
        self.entries = entries
        self.derEncoded = derEncoded
        self.signatureAlgorithm = signatureAlgorithm
        self.tbsBytes = tbsBytes
        self.signatureBytes = signatureBytes
        self.revokedSerials = Set(entries.map(\.serialNumber))
    }

    /// Whether two lists are the same bytes.
    /// - Parameters:
    ///   - lhs: A list.
    ///   - rhs: Another list.
    /// - Returns: Whether their DER encodings are equal.
    public static func == (lhs: RevocationList, rhs: RevocationList) -> Bool {
        lhs.derEncoded == rhs.derEncoded
    }

    static let crlNumberOID: ASN1ObjectIdentifier = [2, 5, 29, 20]
    static let authorityKeyIdentifierOID: ASN1ObjectIdentifier = [2, 5, 29, 35]

    private static func parse(_ bytes: [UInt8]) throws -> RevocationList {
        let root = try DER.parse(bytes)
        guard root.encodedBytes.count == bytes.count else {
            throw IdentityError.invalidRevocationList("bytes follow the list")
        }
        return try DER.sequence(root, identifier: .sequence) { nodes in
            guard let tbs = nodes.next(), let algorithmNode = nodes.next(), let signatureNode = nodes.next() else {
                throw IdentityError.invalidRevocationList("the list is not a sequence of its contents, algorithm and signature")
            }
            let algorithm = try Self.algorithm(algorithmNode)
            let signature = try ASN1BitString(derEncoded: signatureNode)
            guard signature.paddingBits == 0 else { throw IdentityError.invalidRevocationList("the signature has padding bits") }
            return try DER.sequence(tbs, identifier: .sequence) { fields in
                guard let version = try? Int(derEncoded: &fields), version == 1 else {
                    throw IdentityError.invalidRevocationList("it is not a version 2 list")
                }
                guard let innerAlgorithm = fields.next(), innerAlgorithm.encodedBytes == algorithmNode.encodedBytes else {
                    throw IdentityError.invalidRevocationList("its two signature algorithms differ")
                }
                guard let issuerNode = fields.next() else { throw IdentityError.invalidRevocationList("no issuer") }
                let issuer = try DistinguishedName(derEncoded: issuerNode)
                guard let thisNode = fields.next() else { throw IdentityError.invalidRevocationList("no thisUpdate") }
                let thisUpdate = try Self.date(thisNode)
                var nextUpdate: Date?
                var entries: [Entry] = []
                var extensionsNode: ASN1Node?
                var node = fields.next()
                if let current = node, current.identifier == .utcTime || current.identifier == .generalizedTime {
                    nextUpdate = try Self.date(current)
                    node = fields.next()
                }
                if let current = node, current.identifier == .sequence {
                    entries = try Self.entries(current)
                    node = fields.next()
                }
                if let current = node {
                    guard current.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific),
                          case .constructed(let children) = current.content
                    else { throw IdentityError.invalidRevocationList("unexpected field \(current.identifier)") }
                    var iterator = children.makeIterator()
                    extensionsNode = iterator.next()
                    guard extensionsNode != nil, iterator.next() == nil else {
                        throw IdentityError.invalidRevocationList("the extensions field holds not one sequence")
                    }
                }
                var number: UInt64 = 0
                var keyIdentifier: [UInt8]?
                if let extensionsNode {
                    let extensions = try DER.sequence(of: Certificate.Extension.self, identifier: .sequence, rootNode: extensionsNode)
                    for item in extensions {
                        switch item.oid {
                        case crlNumberOID:
                            let value = try DER.parse(item.value)
                            let raw = try ArraySlice<UInt8>(derEncoded: value)
                            guard raw.count <= 9, raw.first.map({ $0 & 0x80 == 0 }) ?? false else {
                                throw IdentityError.invalidRevocationList("the CRL number is negative or larger than 2^63")
                            }
                            number = raw.reduce(0) { ($0 << 8) | UInt64($1) }
                        case authorityKeyIdentifierOID:
                            keyIdentifier = try AuthorityKeyIdentifier(item).keyIdentifier.map { Array($0) }
                        default:
                            if item.critical {
                                throw IdentityError.invalidRevocationList("a critical extension \(item.oid) is not understood")
                            }
                        }
                    }
                }
                return RevocationList(issuer: issuer, thisUpdate: thisUpdate, nextUpdate: nextUpdate, number: number,
                                      authorityKeyIdentifier: keyIdentifier, entries: entries, derEncoded: bytes,
                                      signatureAlgorithm: algorithm, tbsBytes: Array(tbs.encodedBytes),
                                      signatureBytes: Array(signature.bytes))
            }
        }
    }

    private static func entries(_ node: ASN1Node) throws -> [Entry] {
        guard case .constructed(let children) = node.content else {
            throw IdentityError.invalidRevocationList("the revoked certificates are not a sequence")
        }
        var entries: [Entry] = []
        for child in children {
            guard entries.count < maxEntries else {
                throw IdentityError.invalidRevocationList("more than \(maxEntries) revoked certificates")
            }
            let entry = try DER.sequence(child, identifier: .sequence) { fields in
                let serial = try ArraySlice<UInt8>(derEncoded: &fields)
                guard let dateNode = fields.next() else { throw IdentityError.invalidRevocationList("an entry without a date") }
                let date = try Self.date(dateNode)
                if let extensionsNode = fields.next() {
                    let extensions = try DER.sequence(of: Certificate.Extension.self, identifier: .sequence, rootNode: extensionsNode)
                    if let critical = extensions.first(where: \.critical) {
                        throw IdentityError.invalidRevocationList("an entry's critical extension \(critical.oid) is not understood")
                    }
                }
                return Entry(serialNumber: Certificate.SerialNumber(bytes: serial), revocationDate: date)
            }
            entries.append(entry)
        }
        return entries
    }

    // MARK: Encoding

    /// The DER of the TBSCertList (what is signed).
    static func encodeTBS(issuer: DistinguishedName, algorithm: [UInt8], thisUpdate: Date, nextUpdate: Date,
                          entries: [Entry], number: UInt64, authorityKeyIdentifier: [UInt8]?) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            try coder.serialize(1)
            coder.serializeRawBytes(algorithm)
            try coder.serialize(issuer)
            try serializeTime(thisUpdate, into: &coder)
            try serializeTime(nextUpdate, into: &coder)
            if !entries.isEmpty {
                try coder.appendConstructedNode(identifier: .sequence) { coder in
                    for entry in entries {
                        try coder.appendConstructedNode(identifier: .sequence) { coder in
                            try coder.serialize(entry.serialNumber.bytes)
                            try serializeTime(entry.revocationDate, into: &coder)
                        }
                    }
                }
            }
            var extensions: [Certificate.Extension] = []
            if let authorityKeyIdentifier {
                extensions.append(try AuthorityKeyIdentifier(keyIdentifier: ArraySlice(authorityKeyIdentifier)).makeCertificateExtension())
            }
            var numberBytes: [UInt8] = withUnsafeBytes(of: number.bigEndian) { Array($0) }
            while numberBytes.count > 1, numberBytes[0] == 0, numberBytes[1] & 0x80 == 0 { numberBytes.removeFirst() }
            if numberBytes[0] & 0x80 != 0 { numberBytes.insert(0, at: 0) }
            var numberSerializer = DER.Serializer()
            try numberSerializer.serialize(ArraySlice(numberBytes))
            extensions.append(Certificate.Extension(oid: crlNumberOID, critical: false, value: ArraySlice(numberSerializer.serializedBytes)))
            try coder.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { coder in
                try coder.serializeSequenceOf(extensions)
            }
        }
        return serializer.serializedBytes
    }

    /// Signs `tbs` with `key` and assembles the CertificateList.
    static func assemble(tbs: [UInt8], algorithm: Certificate.SignatureAlgorithm, algorithmBytes: [UInt8],
                         key: Certificate.PrivateKey) throws -> [UInt8] {
        let signature = try key.sign(bytes: tbs, signatureAlgorithm: algorithm)
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            coder.serializeRawBytes(tbs)
            coder.serializeRawBytes(algorithmBytes)
            try coder.serialize(ASN1BitString(bytes: ArraySlice(signature.rawRepresentation)))
        }
        return serializer.serializedBytes
    }

    /// The AlgorithmIdentifier DER of the algorithms an authority signs with.
    static func algorithmIdentifier(_ algorithm: Certificate.SignatureAlgorithm) -> [UInt8]? {
        switch algorithm {
        case .ecdsaWithSHA256: return [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
        case .ecdsaWithSHA384: return [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03]
        case .sha256WithRSAEncryption:
            return [0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B, 0x05, 0x00]
        default: return nil
        }
    }

    private static func algorithm(_ node: ASN1Node) throws -> Certificate.SignatureAlgorithm {
        for candidate in [Certificate.SignatureAlgorithm.ecdsaWithSHA256, .ecdsaWithSHA384, .sha256WithRSAEncryption]
        where algorithmIdentifier(candidate).map({ $0[...] == node.encodedBytes }) ?? false {
            return candidate
        }
        throw IdentityError.invalidRevocationList("its signature algorithm is not ECDSA with SHA-256 or SHA-384, or RSA with SHA-256")
    }

    private static var utc: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar
    }

    /// UTCTime through 2049, GeneralizedTime after (RFC 5280 §5.1.2.4).
    private static func serializeTime(_ date: Date, into coder: inout DER.Serializer) throws {
        let parts = utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        guard let year = parts.year, let month = parts.month, let day = parts.day, let hour = parts.hour,
              let minute = parts.minute, let second = parts.second
        else { throw IdentityError.signingFailed("the date \(date) cannot be encoded") }
        if (1950...2049).contains(year) {
            try coder.serialize(UTCTime(year: year, month: month, day: day, hours: hour, minutes: minute, seconds: second))
        } else {
            try coder.serialize(GeneralizedTime(year: year, month: month, day: day, hours: hour, minutes: minute,
                                                seconds: second, fractionalSeconds: 0))
        }
    }

    private static func date(_ node: ASN1Node) throws -> Date {
        var parts = DateComponents()
        if node.identifier == .utcTime {
            let time = try UTCTime(derEncoded: node)
            parts.year = time.year; parts.month = time.month; parts.day = time.day
            parts.hour = time.hours; parts.minute = time.minutes; parts.second = time.seconds
        } else if node.identifier == .generalizedTime {
            let time = try GeneralizedTime(derEncoded: node)
            parts.year = time.year; parts.month = time.month; parts.day = time.day
            parts.hour = time.hours; parts.minute = time.minutes; parts.second = time.seconds
        } else {
            throw IdentityError.invalidRevocationList("a time is neither UTCTime nor GeneralizedTime")
        }
        guard let date = utc.date(from: parts) else { throw IdentityError.invalidRevocationList("a time is not a date") }
        return date
    }
}
