import Cipher
import Configuration
import Crypto
import Keychain
import Vault

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Keychain items as swift-configuration values: a service's secrets (a database password, an
/// API token) read through the `ConfigReader` an application already uses, every value marked
/// secret so that the configuration system redacts it in logs, access reports and descriptions.
///
/// A configuration key maps to the generic password of `service` whose account is the key's
/// components joined with dots: `database.password` is the item
/// (`service`, `"database.password"`), as `securefoundation keychain add-generic-password -s
/// SERVICE -a database.password -w -` stores it.
///
/// - A missing item is a missing value (the reader falls back to the next provider or the
///   default).
/// - An item whose class key is unavailable (the vault locked, not unlocked since start, the
///   device key missing) is an unavailable value: the lookup throws
///   ``KeychainConfigurationError/unavailable(key:reason:)`` with the keychain's reason, which a
///   reader's `required…` methods pass on and its other methods report and answer with the
///   default.
/// - `watch` and `fetch` reread the keychain: a watcher sees a changed, deleted or re-locked
///   item within `pollInterval`.
///
/// The value leaves `SecretBytes` when the configuration system takes it: a `String` or
/// `[UInt8]` that the application holds is not wiped by this library. Read the keychain
/// directly (`Keychain.passwordData`) where that matters.
///
/// ```swift
/// let config = ConfigReader(providers: [
///     KeychainConfigProvider(keychain: keychain, service: "com.example.orders"),
///     EnvironmentVariablesProvider(),
/// ])
/// let password = try config.requiredString(forKey: "database.password", isSecret: true)
/// ```
@available(macOS 15.0, iOS 18.0, *)
public final class KeychainConfigProvider: ConfigProvider, Sendable {
    /// The keychain service whose items this provider reads.
    public let service: String
    /// The weakest class accepted: an item stored under a weaker class is refused (nil: any).
    public let minimumAccessibility: Accessibility?
    /// How often watchers reread the keychain.
    public let pollInterval: Duration
    public let providerName: String
    private let keychain: Keychain
    /// Keys watchers' fingerprints of values (HMAC-SHA256), so that what they keep between
    /// polls is neither the secret nor a hash one could test guesses against.
    private let fingerprintKey = SymmetricKey(size: .bits256)

    /// - Parameters:
    ///   - keychain: the open keychain.
    ///   - service: the service of the items read (the configuration key is the account).
    ///   - minimumAccessibility: refuse items stored under a weaker class than this.
    ///   - pollInterval: how often `watchValue` and `watchSnapshot` reread the keychain.
    public init(keychain: Keychain, service: String, minimumAccessibility: Accessibility? = nil,
                pollInterval: Duration = .seconds(2)) {
        self.keychain = keychain
        self.service = service
        self.minimumAccessibility = minimumAccessibility
        self.pollInterval = pollInterval
        providerName = "KeychainConfigProvider[\(service)]"
    }

    /// The account a configuration key is stored under.
    public static func account(for key: AbsoluteConfigKey) -> String {
        key.components.joined(separator: ".")
    }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let account = Self.account(for: key)
        return try KeychainConfigSnapshot.lookup(account: account, type: type, readItem(account))
    }

    /// The keychain is the source of truth and is read at every lookup: fetching is getting.
    public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        let stream = poll { [self] () -> (Result<LookupResult, any Error>, String) in
            let result = Result { try value(forKey: key, type: type) }
            // Compared as text: a value by its keyed fingerprint, an error by its message.
            switch result {
            case .success(let found): return (result, "value " + (found.value.map { fingerprint($0.content) } ?? "none"))
            case .failure(let error): return (result, "error \(error)")
            }
        }
        defer { stream.poller.cancel() }
        return try await updatesHandler(.init(stream.updates))
    }

    /// Reads with `sample` every `pollInterval` (on a task of its own, until cancelled) and yields
    /// what it read each time its fingerprint differs from the last one.
    private func poll<Element: Sendable, Seen: Equatable & Sendable>(
        _ sample: @escaping @Sendable () -> (Element, Seen)
    ) -> (updates: AsyncStream<Element>, poller: Task<Void, Never>) {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let interval = pollInterval
        let poller = Task.detached {
            var last: Seen?
            while !Task.isCancelled {
                let (element, seen) = sample()
                if seen != last {
                    continuation.yield(element)
                    last = seen
                }
                try? await Task.sleep(for: interval)
            }
            continuation.finish()
        }
        return (stream, poller)
    }

    /// A snapshot of every item of the service, read now. Items whose class key is unavailable
    /// have sealed names, so they cannot be listed: while the keychain holds any, a key the
    /// snapshot does not have is looked up in the keychain when asked for (and then throws
    /// ``KeychainConfigurationError/unavailable(key:reason:)`` if its class is still locked).
    public func snapshot() -> any ConfigSnapshot { takeSnapshot() }

    private func takeSnapshot() -> KeychainConfigSnapshot {
        var entries: [String: Result<SecretBytes, KeychainConfigurationError>] = [:]
        var sealedNames = false
        do {
            for item in try keychain.listing().items where item.itemClass == .genericPassword {
                guard let key = item.attributes?.key else {
                    sealedNames = true
                    continue
                }
                guard key.service == service else { continue }
                switch readItem(key.account) {
                case .success(let secret?): entries[key.account] = .success(secret)
                case .success(nil): break   // deleted since the listing
                case .failure(let error): entries[key.account] = .failure(error)
                }
            }
        } catch {
            sealedNames = true
        }
        var unlisted: (@Sendable (String) -> Result<SecretBytes?, KeychainConfigurationError>)?
        if sealedNames {
            unlisted = { [self] account in readItem(account) }
        }
        return KeychainConfigSnapshot(providerName: providerName, entries: entries, unlisted: unlisted)
    }

    nonisolated(nonsending) public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        let stream = poll { [self] () -> (any ConfigSnapshot, [String: String]) in
            let current = takeSnapshot()
            return (current, current.entries.mapValues { entry in
                switch entry {
                case .success(let secret): return fingerprint(secret)
                case .failure(let error): return "\(error)"
                }
            })
        }
        defer { stream.poller.cancel() }
        return try await updatesHandler(.init(stream.updates))
    }

    /// The item's secret, nil when there is none, or why it cannot be read.
    private func readItem(_ account: String) -> Result<SecretBytes?, KeychainConfigurationError> {
        do {
            return .success(try keychain.passwordData(forService: service, account: account, requiring: minimumAccessibility))
        } catch .itemNotFound {
            return .success(nil)
        } catch {
            return .failure(.unavailable(key: account, reason: error))
        }
    }

    /// A keyed digest of a value, so that watchers compare without keeping the secret.
    private func fingerprint(_ content: ConfigContent) -> String {
        let code: HMAC<SHA256>.MAC
        switch content {
        case .bytes(let value):
            code = HMAC<SHA256>.authenticationCode(for: value, using: fingerprintKey)
        case .string(var value):
            // The string's own storage, not a copy.
            code = value.withUTF8 { HMAC<SHA256>.authenticationCode(for: UnsafeRawBufferPointer($0), using: fingerprintKey) }
        default:
            code = HMAC<SHA256>.authenticationCode(for: Array("\(content)".utf8), using: fingerprintKey)
        }
        return Encoding.hex(code)
    }

    private func fingerprint(_ secret: SecretBytes) -> String {
        secret.withUnsafeBytes { Encoding.hex(HMAC<SHA256>.authenticationCode(for: $0, using: fingerprintKey)) }
    }
}

/// Why a keychain item cannot be a configuration value.
public enum KeychainConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The item exists but cannot be read now (its class is locked, the keychain is damaged...):
    /// `reason` says why and what to do.
    case unavailable(key: String, reason: KeychainError)
    /// The item's secret is not of the type asked for (not UTF-8 text for a string, not a
    /// number for an int...). The secret itself is never part of the message.
    case typeMismatch(key: String, type: ConfigType)

    public var description: String {
        switch self {
        case let .unavailable(key, reason): return "the keychain item for \(key) is unavailable: \(reason)"
        case let .typeMismatch(key, type): return "the keychain item for \(key) is not a \(type.rawValue) value"
        }
    }
}

/// The items of one service as they were when the snapshot was taken.
@available(macOS 15.0, iOS 18.0, *)
struct KeychainConfigSnapshot: ConfigSnapshot {
    let providerName: String
    let entries: [String: Result<SecretBytes, KeychainConfigurationError>]
    /// Reads a key the listing could not name (set when some items' names were sealed).
    let unlisted: (@Sendable (String) -> Result<SecretBytes?, KeychainConfigurationError>)?

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let account = KeychainConfigProvider.account(for: key)
        let found = entries[account].map { $0.map(Optional.some) } ?? unlisted?(account) ?? .success(nil)
        return try Self.lookup(account: account, type: type, found)
    }

    /// A secret as a configuration value of `type`, marked secret.
    static func lookup(account: String, type: ConfigType, _ read: Result<SecretBytes?, KeychainConfigurationError>) throws -> LookupResult {
        guard let secret = try read.get() else { return LookupResult(encodedKey: account, value: nil) }
        let content: ConfigContent? = secret.withUnsafeBytes { bytes in
            if type == .bytes { return .bytes(Array(bytes)) }
            guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
            if type == .string { return .string(text) }
            // Numbers and flags only: no second copy of a string value.
            let trimmed = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            switch type {
            case .int: return Int(trimmed).map(ConfigContent.int)
            case .double: return Double(trimmed).map(ConfigContent.double)
            case .bool:
                switch trimmed.lowercased() {
                case "true", "yes", "1": return .bool(true)
                case "false", "no", "0": return .bool(false)
                default: return nil
                }
            default: return nil
            }
        }
        guard let content else { throw KeychainConfigurationError.typeMismatch(key: account, type: type) }
        return LookupResult(encodedKey: account, value: ConfigValue(content, isSecret: true))
    }
}
