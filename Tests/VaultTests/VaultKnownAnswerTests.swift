import Foundation
import Testing
import Cipher
@testable import Vault

/// Fixed vault files written by each state version, and fixed answers of the answer
/// normalization: a change of code or toolchain that would strand existing vaults fails here.
@Suite("Vault known answers")
struct VaultKnownAnswerTests {
    /// Version 1, written by the release before version 2: passcode "kat pin", questions
    /// Pet?/Town?/Teacher? answered Rex/Lyon/Mrs Dupont, any 2 unlock.
    static let stateV1 = #"{"format":"securefoundation-vault","keyID":"AXOsliwtt6E=","passcode":{"kdf":{"scrypt":{"logN":16,"p":1,"r":8}},"salt":"+W4jYiLR9WhOoxqsUBDmlw==","wrapped":"vPS3GUGmqGr7KLnjLy8rdO6lruWfW3QJVBffIUbLtdnN3e9M7mzOLGsjHg1cVhpSxaxj+Sa/thuN944G"},"questions":{"kdf":{"scrypt":{"logN":16,"p":1,"r":8}},"questions":["Pet?","Town?","Teacher?"],"subsets":[{"indices":[0,1],"salt":"9Uqv7J3oGiyCpSSD3gVzmA==","wrapped":"RoOGCNccpvt1DpIUtes3sKifYPnglrGaEFigZ4YVugl2IDVGjBXbZUAsRjXMdVvLqku1Dt6pgXG37eDi"},{"indices":[0,2],"salt":"/g8yr28h1bdAksJDqCzWPg==","wrapped":"d8+5mg1ycMF1UbaaLcSp3QMrHkR9o+2Cl1vk25jNqkO/cxSsT7jR+dtJBb95v7mv0ayNYkg06m40Z7XO"},{"indices":[1,2],"salt":"NuvP9DTU9P/YV7pJYxQCVA==","wrapped":"DtV74FewGr3Of+QiuS2YXz8/g8uTgVLJQ12wMWx6WYx1qFHtOBJYckRX751gvkfKj8JNO2Th5ChKQZ3G"}],"threshold":2},"secrets":"v05WD9ELdIwkxh4HT3qRZogF0QXCy4WOc6gsaSK13QjyYUtKvGZ8CKCtaP6f/6F+vfTNwBmkfQuJxgM6xiQ=","vaultID":"Ex272kKoPA/o4SdGlMHGHw==","version":1}"#
    static let sealedV1 = "U0ZTRAEBAQgBc6yWLC23ofjSsFOgtJjLGJ3tK8pBPdhfoKKPjezfQ/5WtKvAiZXn1Mhtv/8/"
    static let whenUnlockedV1 = "2gH5E2o2+ja94mYrl5vvLyycDl6RFy15yQCWaM26Auc="
    static let afterFirstUnlockV1 = "o5MkSueQCHCDrSqzPRE25ZjlWEZVSNvBxlo6aYaiNYo="

    /// Version 2: the same secrets, erase after 7 failures, one class-key rotation (secret
    /// layout 2 with one retired class master; always.key layout 2 with two keys).
    static let stateV2 = #"{"eraseAfter":7,"format":"securefoundation-vault","keyID":"xPXq89byIwc=","passcode":{"kdf":{"scrypt":{"logN":16,"p":1,"r":8}},"salt":"7Yc4xxcX8Wpdh5HnQF1DZA==","wrapped":"/NYhBw1dR61Zlu1f8Ro7weM2JJWa81/n+fXzM4gVT9JsqCI5YUU5UueTi0phmgqNSoy1XHAz4Meh2to3"},"questions":{"kdf":{"scrypt":{"logN":16,"p":1,"r":8}},"normalization":1,"questions":["Pet?","Town?","Teacher?"],"subsets":[{"indices":[0,1],"salt":"gW/P+VEiR2Hi8n9I0tWowQ==","wrapped":"+BufI5CgkFf9NrtdRwmyN89gPV8NMn7+JaDsI6P5SGXvNutyFAuoeMkg0cvPEZqJikdQkS7Bu16eKTT+"},{"indices":[0,2],"salt":"MO2im0WJRvK403uw+/QnOw==","wrapped":"ENyGgLC8VczW40DjEjG7G/+N5iaS72YfEI9C1SvFNtse3T8ebEvDXxqniTIeEOqiPV+lN5zsC2xadc6q"},{"indices":[1,2],"salt":"ZtyjYL0OlxGXTctCLJPAJQ==","wrapped":"LsWSFOrM4q/sbOHbBKXiyjPxTG566/Li7U75z603Iw9v8XULBhtYo8zr9moXpHzslRduYDGYCOzN5IIr"}],"threshold":2},"secrets":"zDMvk97GOX1D4agq2t57dN5bX27HrHvVbPH5ZHBJNm+rWvK7evzkBC2UouD0cE3JH55W5GtoPjDHx/x77idvaRwkqxYxYKqU+UUDtsd+jx2hrpA1jrtuCx+xpijoddM=","vaultID":"2ou3ZBaa3jsGqVsNxROqsQ==","version":2}"#
    static let alwaysFileV2 = "U0ZBSwIC5UaBOduXUyd4V8TSkOmJGUq9GgJfASMefJ4wNrsMglN2fqYWFPvYgj6U6Ldrm0AHLoZjfPcWlr04kG4aFHL0EQ=="
    static let sealedV2 = "U0ZTRAEBAQjE9erz1vIjBzHaKMvYmNGTTgHtSx/4eJ5N4FTUWs9QXuiLNEgHT5ziZOr7kiOn"
    static let whenUnlockedV2 = "O/xRLBuUhmpa96R2A8bz+mGXrxT9CbUCuuOeVG62R9U="
    static let retiredWhenUnlockedV2 = "7Qd9IKEAJjSo4FKt3l02TeLQIBVU6kyJDDlYju3uolk="
    static let alwaysV2 = "5UaBOduXUyd4V8TSkOmJGUq9GgJfASMefJ4wNrsMglM="
    static let retiredAlwaysV2 = "dn6mFhT72II+lOi3a5tABy6GY3z3Fpa9OJBuGhRy9BE="

    func key(_ base64: String) throws -> SecretBytes {
        let data = try #require(Data(base64Encoded: base64))
        return SecretBytes(count: data.count) { target in data.withUnsafeBytes { target.copyMemory(from: $0) } }
    }

    @Test func aVersion1StateOpensAndIsUpgradedOnUnlock() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try FileManager.default.createDirectory(atPath: fixture.home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try SecureFile.writeAtomically(Array(Self.stateV1.utf8), to: fixture.statePath)
        let manager = try fixture.manager()
        #expect(try manager.questions == ["Pet?", "Town?", "Teacher?"])
        #expect(try VaultState.load(directory: fixture.home)?.version == 1)
        try manager.unlock(passcode: secret("kat pin"))
        #expect(try manager.decrypt(Array(try #require(Data(base64Encoded: Self.sealedV1))), context: Array("ctx".utf8)) == Array("v1 payload".utf8))
        #expect(try manager.classKey(for: .whenUnlocked) == key(Self.whenUnlockedV1))
        #expect(try manager.classKey(for: .afterFirstUnlock) == key(Self.afterFirstUnlockV1))
        let upgraded = try #require(try VaultState.load(directory: fixture.home))
        #expect(upgraded.version == VaultState.currentVersion && upgraded.generation == 1 && upgraded.questions?.normalization == 1 && upgraded.eraseAfter == nil)
        #expect(Array(upgraded.keyID) == Array(try #require(Data(base64Encoded: "AXOsliwtt6E="))))
        manager.lock()
        try manager.unlock(answers: ["", "LYON", "  mrs   dupont "])
        #expect(try manager.classKey(for: .whenUnlocked) == key(Self.whenUnlockedV1))
        FirstUnlockCache.remove(vaultID: upgraded.vaultID)
    }

    @Test func aVersion2StateAndAlwaysKeyFileOpen() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try FileManager.default.createDirectory(atPath: fixture.home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try SecureFile.writeAtomically(Array(Self.stateV2.utf8), to: fixture.statePath)
        try SecureFile.writeAtomically(Array(try #require(Data(base64Encoded: Self.alwaysFileV2))), to: fixture.home + "/always.key")
        let manager = try fixture.manager()
        #expect(try manager.classKey(for: .always) == key(Self.alwaysV2))
        #expect(try manager.retiredClassKeys(for: .always) == [key(Self.retiredAlwaysV2)])
        try manager.unlock(answers: ["rex", "", "Mrs Dupont"])
        #expect(try manager.decrypt(Array(try #require(Data(base64Encoded: Self.sealedV2))), context: Array("ctx".utf8)) == Array("v2 payload".utf8))
        #expect(try manager.classKey(for: .whenUnlocked) == key(Self.whenUnlockedV2))
        #expect(try manager.retiredClassKeys(for: .whenUnlocked) == [key(Self.retiredWhenUnlockedV2)])
        // Upgraded to version 3 by the unlock: same keys and wrappings, a generation and the
        // device key's check value, authenticated by the secret section.
        let upgraded = try #require(try VaultState.load(directory: fixture.home))
        #expect(upgraded.eraseAfter == 7 && upgraded.version == VaultState.currentVersion && upgraded.generation == 1)
        #expect(upgraded.deviceCheck == DeviceKeyRecord.checkValue(of: fixture.deviceKey))
        #expect(Array(upgraded.keyID) == Array(try #require(Data(base64Encoded: "xPXq89byIwc="))))
        let v3 = try SecureFile.read(fixture.statePath)
        manager.lock()
        try manager.unlock(answers: ["rex", "", "Mrs Dupont"])
        #expect(try manager.classKey(for: .whenUnlocked) == key(Self.whenUnlockedV2))
        #expect(try SecureFile.read(fixture.statePath) == v3, "a current state is not rewritten by unlock")
        FirstUnlockCache.remove(vaultID: upgraded.vaultID)
    }

    @Test func aStateFromANewerNormalizationIsRefusedWithAMessage() throws {
        let fixture = try VaultFixture()
        defer { fixture.cleanup() }
        try FileManager.default.createDirectory(atPath: fixture.home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try SecureFile.writeAtomically(Array(Self.stateV2.replacingOccurrences(of: #""normalization":1"#, with: #""normalization":2"#).utf8),
                                       to: fixture.statePath)
        let manager = try fixture.manager()
        let error = #expect(throws: VaultError.self) { try manager.unlock(answers: ["rex", "lyon", ""]) }
        #expect(error?.description.contains("answer normalization 2 is not supported") == true, "\(String(describing: error))")
    }

    /// Normalization 1, byte for byte: NFKC, full case folding, leading and trailing white space
    /// trimmed, inner runs collapsed to one space.
    @Test(arguments: [
        ("Straße", "strasse"),
        ("ΟΔΥΣΣΕΥΣ", "οδυσσευσ"),
        ("ὀδυσσεύς", "ὀδυσσεύσ"),
        ("ＦＵＬＬ\u{3000}ｗｉｄｔｈ", "full width"),
        ("a\u{00A0}b", "a b"),
        (" \u{00A0}Ｘ\u{00A0} ", "x"),
        ("\u{FB01}do", "fido"),
        ("A\u{030A}", "\u{00E5}"),
        ("\u{01C5}", "d\u{017E}"),
        ("  Fluffy \t the   CAT\n", "fluffy the cat"),
    ])
    func normalizationKnownAnswers(input: String, expected: String) throws {
        let fromString = AnswerNormalization.normalize(input)
        let fromBytes = try AnswerNormalization.normalize(SecretBytes(utf8: input))
        #expect(fromString.withUnsafeBytes { Array($0) } == Array(expected.utf8))
        #expect(fromBytes.withUnsafeBytes { Array($0) } == Array(expected.utf8))
    }
}
