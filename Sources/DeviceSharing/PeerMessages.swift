/// The parsers of every message a peer sends during sharing and enrolment, one message at a
/// time and without a connection: the same functions the share server, the share client and
/// both sides of network enrolment run on the bytes they receive (docs/FORMATS.md, "Sharing
/// wire format"; docs/SHARING.md, "Enrolment over the network"). For checking captured bytes,
/// and for the fuzz targets (Fuzz/, `shareWire` and `enrolment`).
public enum SharePeerMessage: String, CaseIterable, Sendable {
    /// The offer header a sender writes before the file's bytes (read by the receiver).
    case offer
    /// The receiver's reply (read by the sender).
    case reply
    /// The enrolment server's challenge (read by the joining machine).
    case enrolmentChallenge
    /// The joining machine's request (read by the enrolment server).
    case enrolmentRequest
    /// The enrolment server's answer (read by the joining machine).
    case enrolmentAnswer

    /// Parses the message at the start of `bytes`, as the connection does with what it has
    /// received so far.
    /// - Parameters:
    ///   - bytes: What the connection has received so far.
    ///   - maxOfferSize: The largest file an offer may announce (the receiver's limit).
    /// - Returns: How many bytes the message took, or nil when `bytes` is the start of a valid
    ///   message and more must arrive.
    /// - Throws: The ``ShareError`` that ends the connection: ``ShareError/protocolViolation(_:)``,
    ///   ``ShareError/invalidFileName(_:)``, ``ShareError/tooLarge(size:limit:)``,
    ///   ``ShareError/invalidDeviceName(_:)``.
    public func parse(_ bytes: [UInt8], maxOfferSize: UInt64 = .max) throws(ShareError) -> Int? {
        switch self {
        case .offer:
            guard case let .complete(_, consumed) = try ShareWire.parseOffer(bytes, maxSize: maxOfferSize) else { return nil }
            return consumed
        case .reply:
            guard case let .complete(_, consumed) = try ShareWire.parseReply(bytes) else { return nil }
            return consumed
        case .enrolmentChallenge:
            return try NetworkEnrolment.parseChallenge(bytes).map { 5 + $0.count }
        case .enrolmentRequest:
            return try NetworkEnrolment.parseRequest(bytes).map { _ in bytes.count }
        case .enrolmentAnswer:
            return try NetworkEnrolment.parseAnswer(bytes).map { 8 + Array($0.text.utf8).count }
        }
    }
}
