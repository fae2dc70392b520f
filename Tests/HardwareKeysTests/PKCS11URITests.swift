import HardwareKeys
import Testing

@Suite("PKCS #11 URIs (RFC 7512)")
struct PKCS11URITests {
    @Test("path and query attributes are parsed and percent-decoded")
    func parses() throws {
        let uri = try PKCS11URI("pkcs11:token=My%20Token;object=tls%2Fkey;id=%01%ab;serial=42;slot-id=7;type=private"
            + "?pin-source=file:/run/pin&module-path=/usr/lib/softhsm/libsofthsm2.so")
        #expect(uri.token == "My Token")
        #expect(uri.object == Array("tls/key".utf8))
        #expect(uri.id == [0x01, 0xAB])
        #expect(uri.serial == "42")
        #expect(uri.slotID == 7)
        #expect(uri.type == "private")
        #expect(uri.pinFile == "/run/pin")
        #expect(uri.modulePath == "/usr/lib/softhsm/libsofthsm2.so")
        #expect(try PKCS11URI("pkcs11:").token == nil)
        #expect(try PKCS11URI("pkcs11:object=a?pin-source=/etc/pin").pinFile == "/etc/pin")
        #expect(try PKCS11URI("pkcs11:object=a;x-vendor=1").object == Array("a".utf8))
    }

    @Test("what a URI must not carry is refused with the reason", arguments: [
        ("pkcs11:object=a?pin-value=1234", "pin-value is refused"),
        ("pkcs11:object=a?module-name=softhsm2", "module-name is refused"),
        ("pkcs11:object=a?module-path=lib.so", "module-path must be absolute"),
        ("pkcs11:object=a?pin-source=|/bin/cat", "pin-source must be file:/PATH"),
        ("pkcs11:object=a?pin-source=file:pin", "absolute path"),
        ("pkcs11:object=a;object=b", "appears twice"),
        ("pkcs11:colour=blue", "unknown path attribute colour"),
        ("pkcs11:id=%0", "two hexadecimal digits"),
        ("pkcs11:id=%zz", "two hexadecimal digits"),
        ("pkcs11:object", "has no ="),
        ("pkcs11:type=cat", "type=cat"),
        ("pkcs11:slot-id=x", "slot-id"),
        ("file:/tmp/key", "does not start with pkcs11:"),
    ])
    func refuses(_ text: String, _ reason: String) {
        do {
            _ = try PKCS11URI(text)
            Issue.record("\(text) was accepted")
        } catch {
            guard case .invalidURI(let detail) = error else { Issue.record("\(error)"); return }
            #expect(detail.contains(reason), "\(detail)")
        }
    }

    @Test("every CKR_ value has its name; vendor values are named as such")
    func names() {
        #expect(HardwareKeyError.name(of: 0xA0) == "CKR_PIN_INCORRECT")
        #expect(HardwareKeyError.name(of: 0xE0) == "CKR_TOKEN_NOT_PRESENT")
        #expect(HardwareKeyError.name(of: 0x8000_0001) == "CKR_VENDOR_DEFINED+0x1")
        let error = HardwareKeyError.pkcs11(function: "C_Login", returnValue: 0xA0)
        #expect(error.returnValueName == "CKR_PIN_INCORRECT")
        #expect(error.description.hasPrefix("C_Login failed: CKR_PIN_INCORRECT: the PIN is wrong"))
    }
}
