import Foundation
import EmbeddedSecrets

// `Secrets` is generated at build time from secrets.json by SecretsPlugin; nothing generated is
// committed. The token never becomes a String here: it is hashed inside `withApiToken` and wiped.
do {
    let digest = try Secrets.withApiToken { token in
        token.withUnsafeBytes { Hashing.sha256($0) }
    }
    print("sha256(apiToken) = \(Encoding.hex(digest))")
    print("secretsVersion = \(Secrets.secretsVersion)")
    if let timeout = try Secrets.requestTimeout {
        print("requestTimeout = \(timeout)")
    }
} catch {
    print("error: \(error)")
    exit(1)
}
