// The entry points of the TLS parsers (PinnedTLS): the policy configuration JSON, PEM
// certificates and keys, SPKI pins and host patterns, PKCS#12 files and certificate signing
// requests. Linked into the fuzz package as Fuzz/Sources/FuzzHarness, like FuzzHarness.swift.

import Foundation
import Cipher
import Keychain
import PinnedTLS
import X509
import Crypto

extension FuzzHarness {
    /// The TLS targets, merged into ``targets``.
    static let tlsTargets: [String: @Sendable ([UInt8]) -> Void] = [
        "tlsPolicy": tlsPolicy,
        "tlsPEM": tlsPEM,
        "tlsPin": tlsPin,
        "tlsPKCS12": tlsPKCS12,
        "tlsCSR": tlsCSR,
        "tlsRecord": tlsRecord,
        "tlsCRL": tlsCRL,
    ]

    /// A fixed authority made once per process: its certificate is the anchor file the policy
    /// inputs may name, and it issues a certificate for every request that parses.
    static let tlsAuthority: CertificateAuthority? = try? CertificateAuthority.createRoot(
        commonName: "Fuzz CA", key: Certificate.PrivateKey(P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))))

    /// The directory relative anchor files of a policy are read from: `ca.pem` (the authority's
    /// certificate), `chain.pem` (a leaf and the authority), `empty.pem` and `junk.pem`.
    static let tlsBaseDirectory: String = {
        let dir = scratchRoot + "/tls"
        try? SecureFile.ensurePrivateDirectory(scratchRoot)
        try? SecureFile.ensurePrivateDirectory(dir)
        var files: [String: [UInt8]] = ["empty.pem": [], "junk.pem": Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)]
        if let tlsAuthority, let root = try? tlsAuthority.certificate.serializeAsPEM().pemString {
            files["ca.pem"] = Array((root + "\n").utf8)
            if let leaf = try? tlsAuthority.issue(names: ["fuzz.example"]).chain.first?.serializeAsPEM().pemString {
                files["chain.pem"] = Array((leaf + "\n" + root + "\n").utf8)
            }
        }
        for (name, bytes) in files { try? writeScratchFile(bytes, to: dir + "/" + name) }
        return dir
    }()

    /// Whether every file name the policy names (`files` and `file` members, at any depth) is a
    /// plain name in ``tlsBaseDirectory``: the parser reads the files it names, and an input
    /// naming /dev/stdin or a FIFO would stall the fuzzer on I/O rather than on parsing.
    static func namesOnlyLocalFiles(_ data: [UInt8]) -> Bool {
        guard let root = try? JSONSerialization.jsonObject(with: Data(data), options: [.fragmentsAllowed]) else { return true }
        var stack: [Any] = [root]
        var visited = 0
        while let value = stack.popLast() {
            visited += 1
            guard visited < 100_000 else { return false }
            if let object = value as? [String: Any] {
                for (key, member) in object {
                    if key == "files" || key == "file" {
                        let names = (member as? [Any]) ?? [member]
                        for name in names {
                            guard let name = name as? String else { continue }
                            if name.contains("/") || name.hasPrefix(".") { return false }
                        }
                    }
                    stack.append(member)
                }
            } else if let array = value as? [Any] {
                stack.append(contentsOf: array)
            }
        }
        return true
    }

    /// The trust policy file: parsed with the debug overrides honoured, and, when it parses, made
    /// into a policy (a configuration with a report file is not: that would create the file).
    /// Every host entry that parses has a pattern, and enforcing entries hold at least two pins.
    @Sendable public static func tlsPolicy(_ data: [UInt8]) {
        guard namesOnlyLocalFiles(data) else { return }
        guard let configuration = try? PolicyConfiguration.parse(
            Data(data), name: "fuzz", baseDirectory: tlsBaseDirectory,
            environment: [PolicyConfiguration.debugEnvironmentVariable: data.count % 2 == 0 ? "1" : "0"])
        else { return }
        if !configuration.debugOverridesApplied {
            for entry in configuration.entries where entry.mode == .enforce && !entry.pins.isEmpty {
                precondition(Set(entry.pins).count >= 2, "an enforcing entry with fewer than two pins was accepted")
            }
        }
        if configuration.reportFile == nil { _ = try? configuration.policy() }
    }

    /// PEM text: certificates through both readers (`PEMFiles` for anchor files, `IdentityImport`
    /// for imports), and the private key through both (the key file reader goes through a file).
    /// `PEMFiles` is package plumbing: the fuzz package (a client of SecureFoundation, built with
    /// `FUZZ_CLIENT`) reaches its file readers through the public `TrustAnchors.only(certificateFile:)`
    /// and `TLSIdentity(certificateFile:keyFile:)` instead.
    @Sendable public static func tlsPEM(_ data: [UInt8]) {
        #if !FUZZ_CLIENT
        _ = try? PEMFiles.certificates(pem: String(decoding: data, as: UTF8.self), name: "fuzz")
        #endif
        _ = try? IdentityImport.certificates(pem: data)
        let key = SecretBytes(copying: data)
        defer { key.wipe() }
        _ = try? IdentityImport.privateKey(pem: key)
        _ = try? IdentityImport.identity(keyPEM: key, chainPEM: data)
        let path = tlsBaseDirectory + "/key-\(UUID().uuidString).pem"
        defer { unlink(path) }
        if (try? writeScratchFile(data, to: path)) != nil {
            #if FUZZ_CLIENT
            _ = try? TrustAnchors.only(certificateFile: path)
            _ = try? TLSIdentity(certificateFile: path, keyFile: path)
            #else
            _ = try? PEMFiles.privateKey(atPath: path)
            #endif
        }
    }

    /// A pin (`sha256/<base64>`) and a host pattern, from the same text. A pin that parses
    /// prints as a pin that parses to the same digest.
    @Sendable public static func tlsPin(_ data: [UInt8]) {
        let text = String(decoding: data, as: UTF8.self)
        if let pin = SPKIPin(text) {
            precondition(pin.digest.count == 32, "a pin of \(pin.digest.count) bytes")
            precondition(SPKIPin(pin.description) == pin, "a pin does not survive printing and parsing")
        }
        _ = try? HostPattern(text)
    }

    /// A PKCS#12 file; the first byte chooses the password (0: none, 1: empty, else "fuzz").
    @Sendable public static func tlsPKCS12(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        let password: SecretBytes? = switch mode {
        case 0: nil
        case 1: SecretBytes(copying: [])
        default: SecretBytes(utf8: "fuzz")
        }
        defer { password?.wipe() }
        _ = try? IdentityImport.identity(pkcs12: Array(data.dropFirst()), password: password)
    }

    /// A certificate signing request (PEM or DER); one that parses is issued by the fixed
    /// authority (which checks its signature and names first).
    @Sendable public static func tlsCSR(_ data: [UInt8]) {
        guard let request = try? CertificateAuthority.request(from: data) else { return }
        _ = try? tlsAuthority?.issue(request: request)
    }

    /// A keychain made once per process for the identity records (slow path: one keychain write
    /// per input).
    static let tlsKeychain: Keychain? = {
        let dir = scratchRoot + "/tls-keychain"
        guard (try? SecureFile.ensurePrivateDirectory(scratchRoot)) != nil, (try? SecureFile.ensurePrivateDirectory(dir)) != nil,
              let source = try? StaticKeySource(masterKey: SecretBytes(copying: [UInt8](repeating: 0x44, count: 32)))
        else { return nil }
        return try? Keychain(directory: dir, keySource: source)
    }()

    /// The identity store's record decoder (key, certificates or identity, docs/FORMATS.md "TLS
    /// identity records"): the first byte chooses the kind, the rest is stored as the item's
    /// secret and read back through the store.
    @Sendable public static func tlsRecord(_ data: [UInt8]) {
        guard let mode = data.first, let keychain = tlsKeychain else { return }
        let kind = IdentityItemKind.allCases[Int(mode) % IdentityItemKind.allCases.count]
        let record = SecretBytes(copying: Array(data.dropFirst()))
        defer { record.wipe() }
        guard (try? keychain.addOrUpdate(record, for: .generic(service: kind.service, account: "fuzz"), accessibility: .always)) != nil
        else { return }
        let store = IdentityStore(keychain: keychain)
        switch kind {
        case .privateKey: _ = try? store.privateKey(label: "fuzz")
        case .certificate: _ = try? store.certificates(label: "fuzz")
        case .identity: _ = try? store.identity(label: "fuzz")
        }
    }

    /// Valid records of each kind, as the store writes them.
    static func tlsRecordSeeds() -> [[UInt8]] {
        guard let keychain = tlsKeychain, let tlsAuthority, let identity = try? tlsAuthority.issue(names: ["fuzz.example"]) else { return [] }
        let store = IdentityStore(keychain: keychain)
        var seeds: [[UInt8]] = []
        for (index, kind) in IdentityItemKind.allCases.enumerated() {
            let label = "seed-\(kind.rawValue)"
            switch kind {
            case .privateKey: if let key = identity.privateKey { try? store.storePrivateKey(key, label: label, accessibility: .always, replace: true) }
            case .certificate: try? store.storeCertificates(identity.chain, label: label, accessibility: .always, replace: true)
            case .identity: try? store.storeIdentity(identity, label: label, accessibility: .always, replace: true)
            }
            if let secret = try? keychain.passwordData(forService: kind.service, account: label) {
                seeds.append([UInt8(index)] + secret.withUnsafeBytes { Array($0) })
                secret.wipe()
            }
        }
        return seeds
    }

    /// A certificate revocation list (PEM or DER): a list that parses is checked against the
    /// fixed authority, looked up, and must parse back from its own DER and PEM to the same list.
    @Sendable public static func tlsCRL(_ data: [UInt8]) {
        guard let list = try? RevocationList(pemOrDER: data) else { return }
        if let tlsAuthority { _ = list.isIssued(by: tlsAuthority.certificate) }
        for entry in list.entries.prefix(4) { precondition(list.contains(entry.serialNumber)) }
        precondition((try? RevocationList(derEncoded: list.derEncoded)) == list, "a parsed list does not parse back")
        precondition((try? RevocationList(pemOrDER: Array(list.pemEncoded.utf8))) == list, "its PEM does not parse back")
    }

    static func tlsSeeds(for target: String) -> [[UInt8]] {
        switch target {
        case "tlsCRL":
            guard let tlsAuthority, let leaf = try? tlsAuthority.issue(names: ["fuzz.example"]).leaf else { return [] }
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let entry = RevocationList.Entry(serialNumber: leaf.serialNumber, revocationDate: now)
            var seeds: [[UInt8]] = []
            if let empty = try? tlsAuthority.signRevocationList(entries: [], number: 1, now: now) { seeds.append(empty.derEncoded) }
            if let one = try? tlsAuthority.signRevocationList(entries: [entry], number: 2, now: now) {
                seeds.append(one.derEncoded)
                seeds.append(Array(one.pemEncoded.utf8))
            }
            return seeds
        case "tlsPolicy":
            let pin1 = "sha256/" + Data(repeating: 1, count: 32).base64EncodedString()
            let pin2 = "sha256/" + Data(repeating: 2, count: 32).base64EncodedString()
            return [
                #"{"version": 1, "defaultAnchors": {"system": true}}"#,
                #"{"version": 1, "hosts": [{"pattern": "api.example.com", "anchors": {"system": false, "files": ["ca.pem"]}, "pins": ["\#(pin1)", "\#(pin2)"], "expires": "2027-06-30", "mode": "enforce"}]}"#,
                #"{"version": 1, "defaultAnchors": {"files": ["chain.pem"], "keychain": ["corp-ca"]}, "hosts": [{"pattern": "*.example.com", "pins": ["\#(pin1)"], "mode": "report", "expires": "2027-06-30T12:00:00Z"}, {"pattern": "**.example.org"}], "reports": {"file": "reports.jsonl", "minimumIntervalSeconds": 60}}"#,
                #"{"version": 1, "hosts": [{"pattern": "10.0.0.1", "anchors": {"keychain": ["ca"]}}], "debugOverrides": {"anchors": {"files": ["ca.pem"]}, "overridePins": true}}"#,
                #"{"version": 2}"#, #"{"version": 1, "hosts": {}, "extra": null}"#,
            ].map { Array($0.utf8) }
        case "tlsPEM", "tlsPKCS12", "tlsCSR":
            // The openssl files come from scripts/fuzz seeds; these are made here.
            guard let tlsAuthority else { return [] }
            var seeds: [[UInt8]] = []
            if let root = try? tlsAuthority.certificate.serializeAsPEM().pemString { seeds.append(Array(root.utf8)) }
            if target == "tlsPEM", let identity = try? tlsAuthority.issue(names: ["fuzz.example"]),
               let chain = try? identity.chain.map({ try $0.serializeAsPEM().pemString }).joined(separator: "\n"),
               let key = try? identity.privateKey?.serializeAsPEM().pemString {
                seeds.append(Array((key + "\n" + chain + "\n").utf8))
            }
            if target == "tlsPKCS12" { return seeds.map { [2] + $0 } }
            return seeds
        case "tlsRecord":
            return tlsRecordSeeds()
        case "tlsPin":
            return ["sha256/" + Data(repeating: 7, count: 32).base64EncodedString(), "sha256/AAAA", "api.example.com", "*.example.com",
                    "**.example.org", "192.168.0.1", "::1"].map { Array($0.utf8) }
        default:
            return []
        }
    }
}
