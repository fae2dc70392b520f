import Foundation
import EmbeddedSecrets

// The same token, sealed with a run-time share: this binary alone cannot open it. Run it with
// EXAMPLE_SECRETS_SHARE set to the share it was built with. Exit 2: no share; 3: wrong share.
do {
    let digest = try Secrets.withApiToken { token in
        token.withUnsafeBytes { Hashing.sha256($0) }
    }
    print("sha256(apiToken) = \(Encoding.hex(digest))")
} catch let error as EmbeddedSecretsError {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    switch error {
    case .runtimeShareMissing: exit(2)
    case .runtimeShareWrong: exit(3)
    default: exit(1)
    }
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
}
