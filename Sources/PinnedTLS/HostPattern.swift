import Foundation

/// A host name pattern as OkHttp's `CertificatePinner` writes it:
///
/// - `example.com` matches that host only;
/// - `*.example.com` matches exactly one label more (`www.example.com`, not `example.com`
///   nor `a.b.example.com`);
/// - `**.example.com` matches `example.com` itself and any number of labels in front of it.
///
/// Matching ignores case and a trailing dot. No other wildcard is accepted.
///
/// An IP address literal (an exact pattern only) is kept, and every host is compared, in one
/// canonical form (``canonicalHost(_:)``): the address's bytes as `inet_pton` reads them,
/// written back by `inet_ntop`, so that `0:0:0:0:0:0:0:1`, `0::1`, `::0:1`, `0000::1` and
/// `[::1]` are all `::1`. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the IPv4 address
/// `a.b.c.d`: an entry for `127.0.0.1` covers `::ffff:127.0.0.1` and the reverse. Brackets are
/// removed; a zone id (`fe80::1%eth0`) is refused in a pattern and removed from a host (the
/// address's entry applies on every interface). A numeric host that is not a dotted quad
/// (`127.1`, `0x7f.0.0.1`, `2130706433`, `127.000.0.1`, which the resolver would still take for
/// an address) is refused in a pattern and matches nothing.
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
        switch Self.parse(text) {
        case .address(let address, let zone):
            guard !zone else {
                throw .invalidConfiguration("host pattern \"\(text)\": a zone id (%...) cannot be part of a pattern; write the address alone")
            }
            kind = .exact
            domain = address
            return
        case .ambiguousNumber:
            throw .invalidConfiguration(
                "host pattern \"\(text)\": a numeric host must be a dotted quad (127.0.0.1) or an IPv6 address")
        case .name:
            break
        }
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
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_")
        guard rest.allSatisfy({ allowed.contains($0) || $0 == "." }) else {
            throw .invalidConfiguration(
                "host pattern \"\(text)\": only letters, digits, '-', '.' and a leading *. or **. are allowed")
        }
        domain = rest
    }

    /// Whether `host` matches.
    /// - Parameter host: a host name or IP address literal, matched in its canonical form
    ///   (``canonicalHost(_:)``).
    /// - Returns: `true` when the pattern matches it; `false` for a host with no canonical form.
    public func matches(_ host: String) -> Bool {
        guard let host = Self.canonicalHost(host) else { return false }
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

    /// What a host's text is.
    enum Parsed: Equatable {
        /// An IP address, in canonical form; `zone`: a zone id was removed.
        case address(String, zone: Bool)
        /// Digits, dots and hex that the resolver may read as an address, but no dotted quad.
        case ambiguousNumber
        /// A host name (or something that is neither).
        case name
    }

    /// The canonical form a host is matched in (see the type's documentation): an IP address
    /// literal as `inet_ntop` writes its bytes (an IPv4-mapped IPv6 address as its IPv4
    /// address), without brackets or zone id; a name in lower case without a trailing dot.
    /// `nil` for a numeric host that is not a dotted quad (it matches no entry and is refused
    /// when connecting).
    /// - Parameter host: a host name or IP address literal, possibly in brackets.
    /// - Returns: the canonical form, or `nil` as said above.
    public static func canonicalHost(_ host: String) -> String? {
        switch parse(host) {
        case .address(let address, _): return address
        case .ambiguousNumber: return nil
        case .name: return normalize(host)
        }
    }

    static func parse(_ text: String) -> Parsed {
        var host = text.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 {
            host = String(host.dropFirst().dropLast())
        }
        var zone = false
        if host.contains(":"), let percent = host.firstIndex(of: "%") {
            host = String(host[..<percent])
            zone = true
        }
        guard !host.isEmpty, !host.utf8.contains(0) else { return .name }
        // "127.0.0.1." is the address, as "example.com." is the name.
        if !host.contains(":") && host.hasSuffix(".") { host.removeLast() }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return .address(ipv4String(v4), zone: zone)
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                return .address(bytes[12..<16].map { String($0) }.joined(separator: "."), zone: zone)
            }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            guard inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil else { return .name }
            return .address(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                            zone: zone)
        }
        if zone { return .ambiguousNumber }
        // What inet_aton (and so getaddrinfo) still reads as an IPv4 address: up to four parts,
        // each decimal, octal (leading 0) or hex (0x); the last label of a host name is never
        // all digits (RFC 3696 §2).
        var name = host
        if name.hasSuffix(".") { name.removeLast() }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        let numeric = parts.count <= 4 && parts.allSatisfy { part in
            if part.hasPrefix("0x") { return part.dropFirst(2).allSatisfy(\.isHexDigit) }
            return !part.isEmpty && part.allSatisfy { $0.isASCII && $0.isNumber }
        }
        if numeric { return .ambiguousNumber }
        if let last = parts.last, !last.isEmpty, last.allSatisfy({ $0.isASCII && $0.isNumber }) {
            return .ambiguousNumber
        }
        return .name
    }

    private static func ipv4String(_ address: in_addr) -> String {
        withUnsafeBytes(of: address) { $0.map { String($0) }.joined(separator: ".") }
    }

    static func normalize(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        return host
    }
}
