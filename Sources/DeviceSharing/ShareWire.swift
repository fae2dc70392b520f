import Crypto
import Foundation

/// The sharing protocol's messages (docs/FORMATS.md, "Sharing wire format").
///
/// Sender to receiver, inside mutual TLS: the offer header, then exactly `size` bytes of the
/// file, then (version 3) the end marker "SFSE". Receiver to sender: one reply.
///
/// ```
/// offer v3: "SFSH" | version u8 (3) | name length u16 BE (1...255) | name (UTF-8) | size u64 BE
///           then the file's bytes, then "SFSE" (the sender read them all, the file unchanged)
/// offer v2: as v3 with version 2, then the file's bytes, then their SHA-256 (32) (read, not written)
/// offer v1: "SFSH" | version u8 (1) | name length u16 BE (1...255) | name (UTF-8)
///           | size u64 BE | SHA-256 of the bytes (32), then the file's bytes (read, not written)
/// reply:    "SFSR" | version u8 (1 or 2) | status u8 | text length u16 BE (0...1024) | text (UTF-8)
/// ```
///
/// Version 2 moved the digest after the bytes, so that the sender hashed the bytes as it sent
/// them instead of reading the whole file once more beforehand. Version 3 ends with a fixed
/// marker instead of the digest: the bytes travel only inside TLS 1.3, whose AEAD records
/// (sequence-numbered, each authenticated) already prove to the receiver that it got every byte
/// the sender's end wrote, in order, so the two SHA-256 passes (one per side, a third of the
/// receiver's CPU) checked nothing TLS does not. The marker keeps the one thing the digest also
/// said: the sender read the whole file and it did not change meanwhile; without it the
/// receiver stores nothing. Reply version 2 adds status 4 (the sender's device is revoked); it
/// is written only for that status, version 1 for the others.
package enum ShareWire {
    /// The offer's magic.
    package static let offerMagic: [UInt8] = Array("SFSH".utf8)
    /// The reply's magic.
    package static let replyMagic: [UInt8] = Array("SFSR".utf8)
    /// The offer version written (the end marker after the bytes).
    package static let offerVersion: UInt8 = 3
    /// The offer versions read.
    package static let readableOfferVersions: ClosedRange<UInt8> = 1...3
    /// What follows the bytes of an offer of version 3.
    package static let endMarker: [UInt8] = Array("SFSE".utf8)
    /// The reply version written for statuses 0 to 3 (a receiver of any version reads them).
    package static let version: UInt8 = 1
    /// The reply version that adds status 4, ``Reply/Status/revoked``; written for that status only.
    package static let revokedReplyVersion: UInt8 = 2
    /// The reply versions read.
    package static let readableReplyVersions: ClosedRange<UInt8> = 1...2
    /// The longest file name, in UTF-8 bytes.
    package static let maxNameLength = 255
    /// The longest reply text.
    package static let maxReplyText = 1024
    /// The length of a digest (SHA-256).
    package static let digestLength = 32
    /// The offer's fixed part after the name (version 1; versions 2 and 3 have no digest there).
    static let fixedTail = 8 + 32

    /// A file announced by the sender.
    package struct Offer: Sendable, Equatable {
        package var name: String
        package var size: UInt64
        /// The SHA-256 of the bytes, in the offer (version 1); nil otherwise.
        package var digest: [UInt8]?
        /// 3 (the end marker follows the bytes; written), 2 (their digest follows them) or 1
        /// (the digest is in the offer).
        package private(set) var version: UInt8

        /// An offer of version 3, as this side writes it: the end marker follows the bytes.
        package init(name: String, size: UInt64) throws(ShareError) {
            self.name = try ShareWire.checkName(name)
            self.size = size
            self.digest = nil
            self.version = ShareWire.offerVersion
        }

        /// An offer of version 2, the digest following the bytes (read from older senders).
        package static func version2(name: String, size: UInt64) throws(ShareError) -> Offer {
            var offer = try Offer(name: name, size: size)
            offer.version = 2
            return offer
        }

        /// An offer of version 1, with the digest ahead of the bytes (read from older senders).
        package init(name: String, size: UInt64, digest: [UInt8]) throws(ShareError) {
            let name = try ShareWire.checkName(name)
            guard digest.count == 32 else { throw .protocolViolation("a digest has 32 bytes") }
            self.name = name
            self.size = size
            self.digest = digest
            self.version = 1
        }

        /// What follows the bytes: the end marker (version 3), the digest (version 2), or
        /// nothing (version 1). Its length.
        package var trailerLength: Int {
            switch version {
            case 1: 0
            case 2: ShareWire.digestLength
            default: ShareWire.endMarker.count
            }
        }

        /// The bytes of the header.
        package var encoded: [UInt8] {
            let name = Array(self.name.utf8)
            var out = ShareWire.offerMagic
            out.append(version)
            out.append(UInt8(name.count >> 8))
            out.append(UInt8(name.count & 0xff))
            out += name
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((size >> UInt64(shift)) & 0xff)) }
            if let digest { out += digest }
            return out
        }
    }

    /// What parsing a buffered prefix found.
    package enum Parse<Value: Sendable & Equatable>: Sendable, Equatable {
        /// Not enough bytes yet.
        case needMore
        /// The value and how many bytes it took.
        case complete(Value, consumed: Int)
    }

    /// Parses an offer header from the start of `bytes`.
    /// - Throws: ``ShareError/protocolViolation(_:)``, ``ShareError/invalidFileName(_:)``,
    ///   ``ShareError/tooLarge(size:limit:)`` when the size exceeds `maxSize`.
    package static func parseOffer(_ bytes: some Collection<UInt8>, maxSize: UInt64) throws(ShareError) -> Parse<Offer> {
        let bytes = Array(bytes.prefix(5 + 2 + maxNameLength + fixedTail))
        if bytes.count >= 4 && Array(bytes[0..<4]) != offerMagic {
            throw .protocolViolation("not a sharing offer (wrong magic)")
        }
        if bytes.count >= 5 && !readableOfferVersions.contains(bytes[4]) {
            throw .protocolViolation("offer version \(bytes[4]) is not supported (this side reads versions \(readableOfferVersions.lowerBound) to \(readableOfferVersions.upperBound)): update the sender or the receiver")
        }
        guard bytes.count >= 7 else { return .needMore }
        let nameLength = Int(bytes[5]) << 8 | Int(bytes[6])
        guard (1...maxNameLength).contains(nameLength) else {
            throw .invalidFileName("the name length \(nameLength) is not between 1 and \(maxNameLength)")
        }
        let withDigest = bytes[4] == 1
        let total = 7 + nameLength + (withDigest ? fixedTail : 8)
        guard bytes.count >= total else { return .needMore }
        guard let name = String(validating: bytes[7..<(7 + nameLength)], as: UTF8.self) else {
            throw .invalidFileName("the name is not UTF-8")
        }
        var size: UInt64 = 0
        for byte in bytes[(7 + nameLength)..<(15 + nameLength)] { size = size << 8 | UInt64(byte) }
        guard size <= maxSize else { throw .tooLarge(size: size, limit: maxSize) }
        guard withDigest else {
            let offer = bytes[4] == 2 ? try Offer.version2(name: name, size: size) : try Offer(name: name, size: size)
            return .complete(offer, consumed: total)
        }
        let digest = Array(bytes[(15 + nameLength)..<total])
        return .complete(try Offer(name: name, size: size, digest: digest), consumed: total)
    }

    /// The receiver's answer.
    package struct Reply: Sendable, Equatable {
        /// What happened.
        package enum Status: UInt8, Sendable {
            /// Stored; the text is the name it is stored under.
            case stored = 0
            /// The bytes did not match the digest.
            case digestMismatch = 1
            /// The offer was refused (name, size); the text says why.
            case refused = 2
            /// Storing failed; the text says why.
            case failed = 3
            /// The sender's device is revoked in the receiver's group, so nothing it sends is
            /// read; the text is the device's name (reply version 2).
            case revoked = 4

            /// The first reply version that has this status.
            var version: UInt8 { self == .revoked ? ShareWire.revokedReplyVersion : ShareWire.version }
        }
        package var status: Status
        package var text: String

        package init(status: Status, text: String) {
            self.status = status
            var bytes = Array(text.utf8.prefix(ShareWire.maxReplyText))
            while String(validating: bytes, as: UTF8.self) == nil, !bytes.isEmpty { bytes.removeLast() }
            self.text = String(decoding: bytes, as: UTF8.self)
        }

        package var encoded: [UInt8] {
            let text = Array(self.text.utf8)
            return ShareWire.replyMagic + [status.version, status.rawValue, UInt8(text.count >> 8), UInt8(text.count & 0xff)] + text
        }
    }

    /// Parses a reply from the start of `bytes`.
    package static func parseReply(_ bytes: some Collection<UInt8>) throws(ShareError) -> Parse<Reply> {
        let bytes = Array(bytes.prefix(8 + maxReplyText))
        if bytes.count >= 4 && Array(bytes[0..<4]) != replyMagic { throw .protocolViolation("not a sharing reply (wrong magic)") }
        if bytes.count >= 5 && !readableReplyVersions.contains(bytes[4]) {
            throw .protocolViolation("reply version \(bytes[4]) is not supported (this side reads versions \(readableReplyVersions.lowerBound) to \(readableReplyVersions.upperBound)): update the sender")
        }
        guard bytes.count >= 8 else { return .needMore }
        guard let status = Reply.Status(rawValue: bytes[5]), status.version <= bytes[4] else {
            throw .protocolViolation("unknown reply status \(bytes[5]) in reply version \(bytes[4])")
        }
        let length = Int(bytes[6]) << 8 | Int(bytes[7])
        guard length <= maxReplyText else { throw .protocolViolation("reply text of \(length) bytes") }
        guard bytes.count >= 8 + length else { return .needMore }
        guard let text = String(validating: bytes[8..<(8 + length)], as: UTF8.self) else {
            throw .protocolViolation("reply text is not UTF-8")
        }
        return .complete(Reply(status: status, text: text), consumed: 8 + length)
    }

    /// Checks a file name and returns it in the form it is stored under.
    ///
    /// The rule works on Unicode scalars, never on `Character`s (a grapheme such as `/` followed
    /// by a combining accent is one `Character` but still a `/` to the file system): the name is
    /// normalized to NFC, then refused if it has more than 255 UTF-8 bytes, any `/`, backslash, NUL,
    /// control character (C0, DEL, C1) or line/paragraph separator scalar, `..` anywhere, or a
    /// leading `.` (hidden names are the receiver's own).
    ///
    /// - Returns: the NFC form of `name`.
    @discardableResult
    package static func checkName(_ name: String) throws(ShareError) -> String {
        let normalized = name.precomposedStringWithCanonicalMapping
        let count = normalized.utf8.count
        guard (1...maxNameLength).contains(count) else {
            throw .invalidFileName("a name has 1 to \(maxNameLength) bytes, this one \(count)")
        }
        let scalars = Array(normalized.unicodeScalars)
        guard !scalars.contains(where: { $0 == "/" || $0 == "\\" }) else {
            throw .invalidFileName("\(debug(name)) contains a path separator")
        }
        guard !scalars.contains(where: { $0.value == 0 || $0.properties.generalCategory == .control
                                         || $0.value == 0x2028 || $0.value == 0x2029 }) else {
            throw .invalidFileName("\(debug(name)) contains a control character")
        }
        guard !zip(scalars, scalars.dropFirst()).contains(where: { $0 == "." && $1 == "." }) else {
            throw .invalidFileName("\(debug(name)) contains \"..\"")
        }
        guard scalars.first != "." else { throw .invalidFileName("\(debug(name)) starts with a dot") }
        // Not reached for a name that passed the checks above; kept so that no byte the file
        // system reads as a separator can get through.
        guard !normalized.utf8.contains(0x2F), !normalized.utf8.contains(0) else {
            throw .invalidFileName("\(debug(name)) contains a path separator")
        }
        return normalized
    }

    static func debug(_ name: String) -> String { String(reflecting: name) }
}
