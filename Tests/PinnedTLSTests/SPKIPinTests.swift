import Crypto
import Foundation
import Testing
import X509
@testable import PinnedTLS

@Suite("SPKI pins")
struct SPKIPinTests {
    @Test("A pin round-trips through its text form; malformed text is refused")
    func textForm() throws {
        let key = P256.Signing.PrivateKey()
        let pin = try SPKIPin(publicKey: Certificate.PublicKey(key.publicKey))
        #expect(SPKIPin(pin.description) == pin)
        #expect(pin.description.hasPrefix("sha256/"))
        #expect(SPKIPin("sha1/" + pin.description.dropFirst(7)) == nil)
        #expect(SPKIPin("sha256/" + Data(repeating: 1, count: 31).base64EncodedString()) == nil)
        #expect(SPKIPin("sha256/!!!") == nil)
    }

    @Test("The pin hashes the DER SubjectPublicKeyInfo, not the raw key")
    func hashesDERSubjectPublicKeyInfo() throws {
        let key = P256.Signing.PrivateKey()
        let pin = try SPKIPin(publicKey: Certificate.PublicKey(key.publicKey))
        #expect(pin.digest == Array(SHA256.hash(data: key.publicKey.derRepresentation)))
        #expect(pin.digest != Array(SHA256.hash(data: key.publicKey.x963Representation)))
    }

    @Test("Remembered pins: a look-alike certificate (same subject, issuer, serial and dates, another key) gets its own pin")
    func memoizedPinsFollowTheKey() throws {
        func certificate(_ key: P256.Signing.PrivateKey) throws -> Certificate {
            let name = try DistinguishedName { CommonName("localhost") }
            let start = Date(timeIntervalSince1970: 1_700_000_000)
            return try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(bytes: [1, 2, 3]),
                publicKey: Certificate.PublicKey(key.publicKey), notValidBefore: start,
                notValidAfter: start.addingTimeInterval(86_400), issuer: name, subject: name,
                signatureAlgorithm: .ecdsaWithSHA256, extensions: Certificate.Extensions {},
                issuerPrivateKey: Certificate.PrivateKey(key))
        }
        let genuine = try certificate(P256.Signing.PrivateKey())
        let lookAlike = try certificate(P256.Signing.PrivateKey())
        let genuinePin = try SPKIPin(certificate: genuine)
        #expect(SPKIPin.memoized(genuine) == genuinePin)
        #expect(SPKIPin.memoized(genuine) == genuinePin)
        let lookAlikePin = try SPKIPin(certificate: lookAlike)
        #expect(lookAlikePin != genuinePin)
        #expect(SPKIPin.memoized(lookAlike) == lookAlikePin)
        let pins = try PinSet(pins: [genuinePin, SPKIPin("sha256/" + Data(repeating: 7, count: 32).base64EncodedString())!])
        #expect(ChainValidation.matchingPin(pins, chain: [lookAlike]) == nil)
        #expect(ChainValidation.matchingPin(pins, chain: [lookAlike, genuine]) == genuinePin)
    }
}
