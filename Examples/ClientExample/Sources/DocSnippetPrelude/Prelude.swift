// The prelude of the documentation's snippets: the few names they use without defining them,
// because the text around the snippet says what they are. Each is declared with its type and
// never evaluated (the snippets are compiled, not run). Keep this list short and in step with
// README.md ("Documentation snippets").
import Foundation
import SecureFoundation
import PinnedTLS

private func placeholder<T>(_ name: String) -> T {
    preconditionFailure("\(name): a name of the documentation's snippets; they are compiled, not run")
}

/// A crypto manager of the application (docs/VAULT.md).
public var manager: CryptoManager { placeholder("manager") }
/// The user's passcode.
public var passcode: SecretBytes { placeholder("passcode") }
/// A secret to keep (an API token, a password...).
public var token: SecretBytes { placeholder("token") }
/// A keychain in the manager's directory (docs/KEYCHAIN.md).
public var keychain: Keychain { placeholder("keychain") }

/// The application's own API client (docs/EMBEDDED-SECRETS.md).
public struct APIClient: Sendable {
    /// Authorizes the client's requests with a token.
    public func authorize(_ token: SecretBytes) throws {}
}
/// The application's API client.
public var client: APIClient { placeholder("client") }
