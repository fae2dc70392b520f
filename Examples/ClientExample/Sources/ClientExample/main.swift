// A client's file: every library product of SecureFoundation beside Foundation. Each name below
// is used unqualified, as a client writes it; a public type of the project with the same name
// (the way `Cipher.Hasher` once shadowed `Swift.Hasher`) makes this fail to compile.
import Foundation
import SecureFoundation
import Cipher
import Shredder
import Age
import Vault
import Keychain
import ProtectedFiles
import ProtectedDatabase
import PinnedTLS
import Migration
import UnlockAgent
import EmbeddedSecrets
import DeviceSharing
import HardwareKeys
import HardwareDeviceKeys
import PinnedTLSHummingbird
import PinnedTLSVapor
import KeychainConfiguration
import PinnedTLSGRPC
import PinnedTLSOpenAPI
import SecureFoundationServices

/// A value type of the client's own, hashed as the standard library's protocol asks.
struct Account: Hashable {
    let service: String
    let name: String

    func hash(into hasher: inout Hasher) {
        hasher.combine(service)
        hasher.combine(name)
    }
}

/// Foundation's and the standard library's names a client uses every day.
func clientNames() throws -> Result<Data, any Error> {
    let home = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("client-example")
    let progress = Progress(totalUnitCount: 1)
    var hasher = Hasher()
    hasher.combine(Account(service: "mail", name: "alice"))
    let data = Data(home.path.utf8)
    progress.completedUnitCount = 1
    let decoded: Result<String, any Error> = .success(String(decoding: data, as: UTF8.self))
    _ = try decoded.get()
    return .success(data + withUnsafeBytes(of: hasher.finalize()) { Data($0) })
}

/// The project's own names beside them, one from each module.
func projectNames() throws {
    let secret = SecretBytes(utf8: "client")                      // Cipher
    defer { secret.wipe() }
    let digest = Hashing.digest(.sha256, of: Array("client".utf8))  // Cipher
    let identity = X25519Identity.generate()                        // Age
    _ = (digest, identity.recipient)
    _ = FileShredder.self                                            // Shredder
    _ = CryptoManager.self                                           // Vault
    _ = Keychain.self                                                // Keychain
    _ = FileProtection.complete                                      // ProtectedFiles
    _ = ProtectedDatabase.Kind.pool                                  // ProtectedDatabase
    _ = TrustAnchors.systemRoots                                     // PinnedTLS
    _ = IMASMigration.self                                           // Migration
    _ = AgentClient.self                                             // UnlockAgent
    _ = EmbeddedSecretsError.self                                   // EmbeddedSecrets
    _ = ShareGroup.self                                              // DeviceSharing
    _ = PKCS11PrivateKey.self                                        // HardwareKeys
    HardwareDeviceKeys.register()                                    // HardwareDeviceKeys
}

let accounts: Set<Account> = [Account(service: "mail", name: "alice"), Account(service: "mail", name: "alice")]
precondition(accounts.count == 1)
let result = try clientNames()
try projectNames()
print("ClientExample: \(accounts.count) account, \(try result.get().count) bytes; every module imported beside Foundation")
