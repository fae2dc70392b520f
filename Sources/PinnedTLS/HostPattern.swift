/// A host name pattern as OkHttp's `CertificatePinner` writes it:
///
/// - `example.com` matches that host only;
/// - `*.example.com` matches exactly one label more (`www.example.com`, not `example.com`
///   nor `a.b.example.com`);
/// - `**.example.com` matches `example.com` itself and any number of labels in front of it.
///
/// Matching ignores case and a trailing dot. No other wildcard is accepted.
public struct HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// How the pattern matches.
    public enum Kind: Hashable, Sendable {
        /// The host itself.
        case exact
        /// One label in front of the suffix.
        case oneLabel
        /// The suffix itself or any number of labels in front of it.
        case anyDepth
    }

    /// How the pattern matches.
    public let kind: Kind
    /// The host (`.exact`) or the domain after the wildcard, lower case, no trailing dot.
    public let domain: String

    /// Parses a pattern.
    ///
    /// - Parameter text: `host`, `*.domain` or `**.domain`.
    /// - Throws: ``PinnedTLSError/invalidConfiguration(_:)`` for an empty label, a wildcard
    ///   anywhere but in front, or characters a host name cannot hold.
    public init(_ text: String) throws(PinnedTLSError) {
        var rest = Self.normalize(text)
        if rest.hasPrefix("**.") {
            kind = .anyDepth
            rest.removeFirst(3)
        } else if rest.hasPrefix("*.") {
            kind = .oneLabel
            rest.removeFirst(2)
        } else {
            kind = .exact
        }
        let labels = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard !rest.isEmpty, rest.utf8.count <= 253, labels.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 63 }) else {
            throw .invalidConfiguration("host pattern \"\(text)\": empty label; write host, *.domain or **.domain")
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_:")
        guard rest.allSatisfy({ allowed.contains($0) || $0 == "." }) else {
            throw .invalidConfiguration(
                "host pattern \"\(text)\": only letters, digits, '-', '.' and a leading *. or **. are allowed")
        }
        domain = rest
    }

    /// Whether `host` matches.
    public func matches(_ host: String) -> Bool {
        let host = Self.normalize(host)
        switch kind {
        case .exact:
            return host == domain
        case .oneLabel:
            guard host.hasSuffix("." + domain) else { return false }
            let prefix = host.dropLast(domain.count + 1)
            return !prefix.isEmpty && !prefix.contains(".")
        case .anyDepth:
            if host == domain { return true }
            guard host.hasSuffix("." + domain) else { return false }
            return !host.dropLast(domain.count + 1).isEmpty
        }
    }

    /// Orders patterns from most to least specific: exact, then `*.`, then `**.`; within a
    /// kind, the longer domain first.
    var specificity: (Int, Int) {
        switch kind {
        case .exact: return (2, domain.count)
        case .oneLabel: return (1, domain.count)
        case .anyDepth: return (0, domain.count)
        }
    }

    /// The pattern as written in a configuration.
    public var description: String {
        switch kind {
        case .exact: return domain
        case .oneLabel: return "*." + domain
        case .anyDepth: return "**." + domain
        }
    }

    static func normalize(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        return host
    }
}
