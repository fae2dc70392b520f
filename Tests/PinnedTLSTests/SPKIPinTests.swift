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
}
