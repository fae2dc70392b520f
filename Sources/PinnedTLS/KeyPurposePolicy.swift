import SwiftASN1
import X509

/// What a peer's certificate must be issued for (RFC 5280 §4.2.1.12, extended key usage): a
/// server's chain for TLS server authentication (`serverAuth`), a client's for TLS client
/// authentication (`clientAuth`).
///
/// The rule, for the leaf and every intermediate of the chain (the anchor is trusted by
/// configuration and not checked):
/// - a certificate without the extension may be used for any purpose (as OpenSSL and curl
///   read it);
/// - a certificate with the extension must list the purpose or `anyExtendedKeyUsage`;
/// - an extension that does not parse refuses the chain.
///
/// So a certificate issued for clients only (`tls issue --client`) is refused as a server's,
/// and a server-only or code-signing certificate is refused as a client's.
struct KeyPurposePolicy: VerifierPolicy {
    enum Purpose: Sendable {
        case server
        case client

        var usage: ExtendedKeyUsage.Usage {
            switch self {
            case .server: return .serverAuth
            case .client: return .clientAuth
            }
        }

        var name: String {
            switch self {
            case .server: return "TLS server authentication (serverAuth)"
            case .client: return "TLS client authentication (clientAuth)"
            }
        }
    }

    let purpose: Purpose

    init(_ purpose: Purpose) {
        self.purpose = purpose
    }

    /// The policy enforces the extension, so a certificate marking it critical is understood.
    var verifyingCriticalExtensions: [ASN1ObjectIdentifier] { [.X509ExtensionID.extendedKeyUsage] }

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        // The last certificate is the anchor.
        for (index, certificate) in chain.dropLast().enumerated() {
            if let failure = Self.check(certificate, purpose: purpose) {
                let which = index == 0 ? "the leaf" : "an intermediate (\(certificate.subject))"
                return .failsToMeetPolicy(reason: "\(which) \(failure)")
            }
        }
        return .meetsPolicy
    }

    /// Why `certificate` may not be used for `purpose`, or nil when it may.
    static func check(_ certificate: Certificate, purpose: Purpose) -> String? {
        let usages: ExtendedKeyUsage?
        do {
            usages = try certificate.extensions.extendedKeyUsage
        } catch {
            return "has an extended key usage extension that does not parse (\(error))"
        }
        guard let usages else { return nil }
        if usages.contains(purpose.usage) || usages.contains(.any) { return nil }
        let listed = usages.map { "\($0)" }.joined(separator: ", ")
        return "is not issued for \(purpose.name): its extended key usage is \(listed.isEmpty ? "empty" : listed)"
    }
}
