import AgeCommandLine
import ArgumentParser
import Foundation
import HardwareKeys
import PinnedTLS
import SecureFoundation
import X509

enum TLSIdentityCLI {
    /// The identity and certificate-authority subcommands of `tls`.
    static let subcommands: [any ParsableCommand.Type] = [
        TLSCertificateAuthorityCommand.self, TLSIssueCommand.self, TLSListCommand.self, TLSKeysCommand.self,
        TLSImportCommand.self, TLSExportCommand.self, TLSDeleteCommand.self,
        TLSRevokeCommand.self, TLSRevocationListCommand.self,
    ]

    static let exitStatus = """
    Keys and identities are sealed in the keychain (HOME/keychain.sqlite) under the \
    whenUnlocked class unless --accessibility says otherwise: give the vault's passcode with \
    --passcode-file to store or use them. Certificates are stored under the always class.

    Exit status: 0 success, 44 no such item, 45 an item with that label exists (use \
    --replace), 36 vault locked (give --passcode-file), 3 wrong PKCS#12 password, 64 usage, \
    1 any other error (unparsable input, a key that does not match its certificate...).
    """

    /// Lines describing a certificate: subject, issuer, expiry, SPKI pin.
    static func describe(_ certificate: Certificate, label: String) -> String {
        let formatter = ISO8601DateFormatter()
        let pin = (try? SPKIPin(certificate: certificate)).map { "\($0)" } ?? "-"
        return """
        label: \(label)
        subject: \(certificate.subject)
        issuer: \(certificate.issuer)
        expires: \(formatter.string(from: certificate.notValidAfter))
        pin: \(pin)

        """
    }

    /// Prints ``describe(_:label:)`` of what was stored.
    static func printStored(_ certificate: Certificate, label: String) throws {
        try CLI.writeStdout(Array(describe(certificate, label: label).utf8))
    }

    static func read(_ path: String, what: String) throws -> [UInt8] {
        do { return try CLI.readInput(path, maxLength: IdentityImport.maxInputLength) } catch {
            throw ValidationError("cannot read the \(what) \(path): \(CLI.describe(error))")
        }
    }
}

// MARK: tls ca

struct TLSCertificateAuthorityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "The application's own certificate authority.",
        subcommands: [TLSCertificateAuthorityInit.self]
    )
}

struct TLSCertificateAuthorityInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a root certificate authority; its key stays in the keychain, a PKCS #11 token or the TPM (--key).",
        discussion: """
        Makes a P-256 key and a self-signed root (CA:true, path length 0, keyCertSign and \
        cRLSign, 10 years) and stores it under the label (default "ca"): the key and certificate \
        as an identity sealed under whenUnlocked, the certificate also on its own (always), so \
        that `tls export ca` works while the vault is locked. Prints the root's subject, expiry \
        and SPKI pin.

        With --key pkcs11:… (RFC 7512: token and key attributes only, with --module and the \
        token's PIN): the root's key is that token key and never leaves the token; the root is \
        self-signed there, and `tls issue`, `tls revoke` and `tls crl` sign there too (give them \
        --module and the PIN). The identity item records the key's URI and the root (sealed \
        under always unless --accessibility says otherwise: it holds no secret); the token key \
        must be the root's key whenever it is loaded. Nothing falls back to a software key.

        With --key tpm (or tpm:pcrs=0,7 to bind it to those PCRs' current values): the TPM \
        (--tcti or $TPM2TOOLS_TCTI) makes a P-256 key that never leaves it; the identity item \
        holds the key's TPM-wrapped blobs (useless on another TPM) and the root, and `tls issue`, \
        `tls revoke` and `tls crl` sign in the TPM (give them --tcti). The key the TPM loads \
        must be the root's key whenever it is loaded.

        Examples:
          securefoundation tls ca init --common-name "Example devices CA" \\
              --passcode-file passcode.txt
          securefoundation tls ca init --key 'pkcs11:token=ca;object=root' \\
              --module /usr/lib/softhsm/libsofthsm2.so --pin-file pin.txt
          securefoundation tls ca init --key tpm --tcti swtpm:host=127.0.0.1,port=2321
          securefoundation tls export ca -o ca.pem
        """
    )

    @Option(name: .customLong("common-name"), help: "The root's common name.")
    var commonName = "SecureFoundation device CA"

    @Option(name: .customLong("organization"), help: "An organization name for the root's subject.")
    var organization: String?

    @Option(name: .customLong("label"), help: "The label to store the root under.")
    var label = CertificateAuthority.defaultLabel

    @Option(name: .customLong("days"), help: "How many days the root is valid.")
    var days = 3652

    @Option(name: .customLong("path-length"), help: "0: the root signs leaves only; 1: it may also sign one level of intermediates.")
    var pathLength = 0

    @Flag(name: .customLong("replace"), help: "Replace a root stored under the label already (certificates it issued will no longer verify).")
    var replace = false

    @Option(name: .customLong("key"), help: "The root's key: the key in a PKCS #11 token this pkcs11: URI names, or a key the TPM makes: tpm or tpm:pcrs=0,7 (it never leaves the token or TPM).")
    var tokenKey: String?

    @OptionGroup var hardware: HardwareKeyOptions

    @OptionGroup var items: ItemStoreOptions

    func validate() throws {
        try HardwareKeyOptions.validateKey(tokenKey)
    }

    func run() throws {
        try CLI.run {
            guard (1...10958).contains(days) else { throw ValidationError("--days must be between 1 and 10958") }
            let validity = TimeInterval(days) * 86_400
            let authority: CertificateAuthority
            let accessibility: Accessibility
            if let tokenKey {
                let key = try hardware.openOrCreate(tokenKey, dataDirectory: items.store.home.directory)
                accessibility = try items.accessibility(default: .always)
                authority = try CertificateAuthority.createRoot(commonName: commonName, organization: organization, hardwareKey: key,
                                                                validity: validity, pathLength: pathLength)
            } else {
                accessibility = try items.accessibility(default: .whenUnlocked)
                authority = try CertificateAuthority.createRoot(commonName: commonName, organization: organization,
                                                                validity: validity, pathLength: pathLength)
            }
            let identities = IdentityStore(keychain: try items.open())
            try authority.save(to: identities, label: label, accessibility: accessibility, replace: replace)
            try identities.flush()
            try TLSIdentityCLI.printStored(authority.certificate, label: label)
        }
    }
}

// MARK: tls issue

struct TLSIssueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "issue",
        abstract: "Issue a certificate for a device or server name, signed by the certificate authority.",
        discussion: """
        Without --csr or --public-key: makes a P-256 key, issues its certificate (CA:false, \
        digitalSignature, serverAuth and clientAuth unless --server or --client, subject \
        alternative names from NAME and --name, 397 days) and stores key and chain as an \
        identity under --label (default NAME). Prints the certificate's subject, expiry and pin.

        With --csr FILE (PEM or DER) or --public-key FILE (PEM): the key stays with the other \
        device; the certificate is printed as PEM (or written to -o) and stored under --label \
        as a certificate item. A request's signature is checked; NAME and --name are the names \
        certified, whatever the request asks for.

        With --key pkcs11:… (RFC 7512, with --module and the token's PIN): the key stays in the \
        token; its public key is read from the token and certified as with --public-key. Serve \
        with it: tls serve --identity LABEL --key pkcs11:… --module PATH.

        An authority whose key is in a token (`tls ca init --key`) signs there: give --module \
        and the token's PIN (--pin-file, --pin-env, or the prompt).
        With --key tpm (or tpm:pcrs=0,7 to bind it to those PCRs' current values): the TPM \
        (--tcti or $TPM2TOOLS_TCTI) makes a P-256 key that never leaves it; the key's \
        TPM-wrapped blobs and the chain are stored as an identity under --label. Serve with \
        it: tls serve --identity LABEL.

        Examples:
          securefoundation tls issue api.example.com --name 10.0.0.5 --server \\
              --passcode-file passcode.txt
          securefoundation tls issue device-42 --client --csr device-42.csr \\
              -o device-42.pem --passcode-file passcode.txt
        """
    )

    @Argument(help: "The device or server name (a DNS name or an IP address); also the subject's common name.")
    var name: String

    @Option(name: .customLong("name"), help: "Another DNS name or IP address to certify (repeatable).")
    var extraNames: [String] = []

    @Option(name: .customLong("label"), help: "The label to store the result under (default: NAME).")
    var label: String?

    @Option(name: .customLong("ca"), help: "The label of the certificate authority.")
    var authority = CertificateAuthority.defaultLabel

    @Flag(name: .customLong("server"), help: "For a TLS server only (serverAuth).")
    var serverOnly = false

    @Flag(name: .customLong("client"), help: "For a TLS client only (clientAuth).")
    var clientOnly = false

    @Option(name: .customLong("days"), help: "How many days the certificate is valid (at most until the root expires).")
    var days = 397

    @Option(name: .customLong("csr"), help: "Certify the key of this certificate signing request (PEM or DER).")
    var csr: String?

    @Option(name: .customLong("public-key"), help: "Certify this public key (PEM, SubjectPublicKeyInfo).")
    var publicKey: String?

    @Option(name: .customLong("key"), help: "Certify the key in a PKCS #11 token this pkcs11: URI names, or make one in the TPM: tpm or tpm:pcrs=0,7 (it never leaves the token or TPM).")
    var tokenKey: String?

    @OptionGroup var hardware: HardwareKeyOptions

    @Option(name: [.customShort("o"), .customLong("output")], help: "With --csr, --public-key or --key: write the certificate PEM here instead of standard output.")
    var output: String?

    @Flag(name: .customLong("replace"), help: "Replace an item stored under the label already.")
    var replace = false

    @OptionGroup var items: ItemStoreOptions

    func validate() throws {
        if serverOnly && clientOnly { throw ValidationError("give --server or --client, not both (neither: both usages)") }
        if [csr, publicKey, tokenKey].compactMap({ $0 }).count > 1 { throw ValidationError("give one of --csr, --public-key and --key") }
        if output != nil && csr == nil && publicKey == nil && tokenKey == nil { throw ValidationError("-o needs --csr, --public-key or --key") }
        if let tokenKey, !tokenKey.hasPrefix("pkcs11:"), try HardwareKeyOptions.tpmPCRs(tokenKey) == nil {
            throw ValidationError("--key takes a pkcs11: URI (RFC 7512), tpm or tpm:pcrs=N,N")
        }
        if let tokenKey, output != nil, tokenKey.hasPrefix("tpm") { throw ValidationError("-o does not go with --key tpm (the identity is stored)") }
        guard (1...3652).contains(days) else { throw ValidationError("--days must be between 1 and 3652") }
    }

    func run() throws {
        try CLI.run {
            let usage: CertificateAuthority.Usage = serverOnly ? .server : (clientOnly ? .client : [.server, .client])
            let names = [name] + extraNames
            let label = self.label ?? name
            let validity = TimeInterval(days) * 86_400
            // Inputs are checked before the vault is opened: a bad name or request fails at once.
            try CertificateAuthority.checkNames(names)
            let request = try csr.map { try CertificateAuthority.request(from: TLSIdentityCLI.read($0, what: "certificate request")) }
            if let tokenKey, let pcrs = try HardwareKeyOptions.tpmPCRs(tokenKey) {
                try issueInTPM(pcrs: pcrs, names: names, usage: usage, validity: validity, label: label)
                return
            }
            let otherKey = try publicKey.map { try Self.publicKey(TLSIdentityCLI.read($0, what: "public key")) }
                ?? tokenKey.map { try hardware.open(uri: $0, dataDirectory: items.store.home.directory).publicKey }
            let accessibility = try items.accessibility(default: .whenUnlocked)
            let identities = IdentityStore(keychain: try items.open())
            let authority = try hardware.authority(self.authority, in: identities, dataDirectory: items.store.home.directory)
            if request != nil || otherKey != nil {
                let certificate: Certificate
                if let request {
                    certificate = try authority.issue(request: request, names: names, usage: usage, validity: validity)
                } else if let otherKey {
                    certificate = try authority.issue(publicKey: otherKey, names: names, usage: usage, validity: validity)
                } else {
                    throw ValidationError("give --csr or --public-key")
                }
                try identities.storeCertificates([certificate, authority.certificate], label: label, replace: replace)
                try identities.flush()
                try CLI.writeOutput(Array(try IdentityStore.pem([certificate, authority.certificate]).utf8), to: output)
            } else {
                let identity = try authority.issue(names: names, usage: usage, validity: validity)
                try identities.storeIdentity(identity, label: label, accessibility: accessibility, replace: replace)
                try identities.flush()
                try TLSIdentityCLI.printStored(identity.leaf, label: label)
            }
        }
    }

    /// `--key tpm[:pcrs=…]`: the TPM makes the key, the authority certifies it, and the key's
    /// blobs with the chain are stored as an identity.
    func issueInTPM(pcrs: [Int], names: [String], usage: CertificateAuthority.Usage, validity: TimeInterval, label: String) throws {
        let accessibility = try items.accessibility(default: .whenUnlocked)
        let identities = IdentityStore(keychain: try items.open())
        let authority = try hardware.authority(self.authority, in: identities, dataDirectory: items.store.home.directory)
        let blobs = try TPM2PrivateKey.create(pcrs: pcrs, tcti: hardware.tcti)
        let key = try TPM2PrivateKey(blobs: blobs, tcti: hardware.tcti)
        let certificate = try authority.issue(publicKey: key.publicKey, names: names, usage: usage, validity: validity)
        try identities.storeIdentity(tpmKey: key, chain: [certificate, authority.certificate], label: label,
                                     accessibility: accessibility, replace: replace)
        try identities.flush()
        try TLSIdentityCLI.printStored(certificate, label: label)
        CLI.warn("the key stays in the TPM (\(key.location))")
    }

    static func publicKey(_ bytes: [UInt8]) throws -> Certificate.PublicKey {
        let text = String(decoding: bytes, as: UTF8.self)
        do { return try Certificate.PublicKey(pemEncoded: text) } catch {
            throw IdentityError.invalidPEM("the public key does not parse (give a PEM PUBLIC KEY: openssl pkey -pubout): \(error)")
        }
    }
}

// MARK: tls list

struct TLSListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the stored keys, certificates and identities (without secrets).",
        usage: "securefoundation tls list [options]",
        discussion: """
        One line per item: kind, label, accessibility, and for certificates and identities the \
        leaf's subject and expiry, separated by tabs. Items sealed under a class that is \
        unavailable are counted on standard error; give --passcode-file to see them.

        Example:
          securefoundation tls list --passcode-file passcode.txt
        """
    )

    @OptionGroup var store: KeychainStoreOptions

    @Flag(name: .customLong("json"), help: "Print the items as JSON (CLI.md, \"JSON output\"): kind, label, accessibility, summary; the count not readable now.")
    var json = false

    func run() throws {
        try CLI.run {
            let listing = try IdentityStore(keychain: try store.open()).list()
            if json {
                try JSONOutput.write(ListJSON(items: listing.items.map {
                    ListJSON.Item(kind: "\($0.kind)", label: $0.label, accessibility: $0.accessibility.name, summary: $0.summary)
                }, unreadable: listing.unreadable))
                return
            }
            var text = ""
            for item in listing.items {
                text += "\(item.kind)\t\(item.label)\t\(item.accessibility.name)\t\(item.summary ?? "-")\n"
            }
            try CLI.writeStdout(Array(text.utf8))
            if listing.unreadable > 0 {
                CLI.warn("\(listing.unreadable) keychain item(s) could not be read (vault locked, or damaged); give --passcode-file to list them")
            }
        }
    }
}

// MARK: tls keys

struct TLSKeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List the private keys by location: the keychain, the TPM, and a PKCS #11 token with --module (never their bytes).",
        usage: "securefoundation tls keys [options] [--module PATH [--uri URI]]",
        discussion: """
        One line per key, tab-separated: the location (keychain, tpm or pkcs11), the kind, then \
        for the keychain the label and the sealing class, for an identity whose key stays in \
        the TPM the label, the sealing class and the key's location (tpm:name=…;pcrs=…, the \
        name a hash of its public area), for a token the key's pkcs11: URI and its \
        flags (sensitive, extractable). An identity whose key stays in a token (a device CA made \
        with `tls ca init --key`) is listed with a fifth field, `key at pkcs11:…`: the keychain \
        holds only where the key is. With --module, the token's keys are listed (narrowed by \
        --uri; the token's PIN from --pin-file, --pin-env or the terminal); the keychain is \
        listed unless --pkcs11-only.

        Example:
          securefoundation tls keys --module /usr/lib/softhsm/libsofthsm2.so \\
              --uri 'pkcs11:token=fleet' --pin-file pin.txt
        """
    )

    @OptionGroup var store: KeychainStoreOptions
    @OptionGroup var hardware: HardwareKeyOptions

    @Option(help: "Narrow the token keys listed to this pkcs11: URI (default: every token of the module).")
    var uri = "pkcs11:"

    @Flag(name: .customLong("pkcs11-only"), help: "List the token's keys only, not the keychain's.")
    var pkcs11Only = false

    @Flag(name: .customLong("json"), help: "Print the keys as JSON (CLI.md, \"JSON output\"), one object per key with the fields of the text form.")
    var json = false

    func validate() throws {
        if pkcs11Only && hardware.module == nil { throw ValidationError("--pkcs11-only needs --module") }
    }

    func run() throws {
        try CLI.run {
            var text = ""
            var keys: [KeysJSON.Key] = []
            var unreadable = 0
            if !pkcs11Only {
                let identities = IdentityStore(keychain: try store.open())
                let listing = try identities.list()
                for item in listing.items where item.kind == .privateKey || item.kind == .identity {
                    // The record says where the key is; a record that cannot be read now (locked) is listed as kept.
                    let location = item.kind == .identity ? (try? identities.hardwareKeyLocation(label: item.label)) ?? nil : nil
                    keys.append(KeysJSON.Key(location: location?.hasPrefix("tpm:") == true ? "tpm" : "keychain", kind: "\(item.kind)",
                                             label: item.label, accessibility: item.accessibility.name, keyAt: location))
                    if let location, location.hasPrefix("tpm:") {
                        text += "tpm\t\(item.kind)\t\(item.label)\t\(item.accessibility.name)\t\(location)\n"
                    } else {
                        text += "keychain\t\(item.kind)\t\(item.label)\t\(item.accessibility.name)"
                            + (location.map { "\tkey at \($0)" } ?? "") + "\n"
                    }
                }
                unreadable = listing.unreadable
                if listing.unreadable > 0 {
                    CLI.warn("\(listing.unreadable) keychain item(s) could not be read (vault locked, or damaged); give --passcode-file to list them")
                }
            }
            if let path = hardware.module {
                let parsed = try PKCS11URI(uri)
                let module = try PKCS11Module.load(path: path, refusing: [store.home.directory])
                for key in try module.keys(matching: parsed, pin: try hardware.pinSource()) {
                    let flags = [key.sensitive == true ? "sensitive" : "not-sensitive",
                                 key.extractable == false ? "not-extractable" : "extractable"].joined(separator: ",")
                    text += "pkcs11\t\(key.keyType)\t\(key.uri)\t\(flags)\n"
                    keys.append(KeysJSON.Key(location: "pkcs11", kind: "\(key.keyType)", uri: "\(key.uri)",
                                             sensitive: key.sensitive, extractable: key.extractable))
                }
            }
            if json { return try JSONOutput.write(KeysJSON(keys: keys, unreadable: unreadable)) }
            try CLI.writeStdout(Array(text.utf8))
        }
    }
}

// MARK: tls import

struct TLSImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import an identity from PKCS#12 or PEM, or certificates from PEM.",
        usage: """
        securefoundation tls import [options] LABEL (--pkcs12 FILE
            | --key FILE --chain FILE | --certificates FILE)
        """,
        discussion: """
        --pkcs12 FILE: a .p12/.pfx file with a private key and its chain (password from \
        --password-file; none if not given). --key FILE with --chain FILE: a PEM private key \
        (PKCS#8, SEC 1 or PKCS#1, not encrypted) and its PEM chain. --certificates FILE alone: \
        PEM certificates stored as a certificate item (trust anchors, for example).

        Keys must be P-256, P-384 or RSA of 2048 bits or more, and the chain must hold the \
        key's certificate (a key that matches no certificate is refused). `-` reads standard input.

        Examples:
          securefoundation tls import server --pkcs12 server.p12 \\
              --password-file p12pass.txt --passcode-file passcode.txt
          securefoundation tls import server --key server.key --chain server.pem \\
              --passcode-file passcode.txt
          securefoundation tls import partners --certificates partner-roots.pem
        """
    )

    @Argument(help: "The label to store it under.")
    var label: String

    @Option(name: .customLong("pkcs12"), help: "A PKCS#12 file.")
    var pkcs12: String?

    @Option(name: .customLong("password-file"), help: "The PKCS#12 password is in this file (`-` for stdin).")
    var passwordFile: String?

    @Option(name: .customLong("key"), help: "A PEM private key (with --chain).")
    var key: String?

    @Option(name: .customLong("chain"), help: "The PEM certificate chain of --key.")
    var chain: String?

    @Option(name: .customLong("certificates"), help: "PEM certificates to store on their own.")
    var certificates: String?

    @Flag(name: .customLong("replace"), help: "Replace an item stored under the label already.")
    var replace = false

    @OptionGroup var items: ItemStoreOptions

    func validate() throws {
        let sources = [pkcs12 != nil, key != nil || chain != nil, certificates != nil].filter { $0 }.count
        guard sources == 1 else { throw ValidationError("give one of --pkcs12, --key with --chain, or --certificates") }
        if (key == nil) != (chain == nil) { throw ValidationError("--key and --chain go together") }
        if passwordFile != nil && pkcs12 == nil { throw ValidationError("--password-file goes with --pkcs12") }
    }

    func run() throws {
        try CLI.run {
            // Inputs are read and checked before the vault is opened.
            if let certificates {
                let list = try IdentityImport.certificates(pem: TLSIdentityCLI.read(certificates, what: "certificates"))
                let accessibility = try items.accessibility(default: .always)
                let identities = IdentityStore(keychain: try items.open())
                try identities.storeCertificates(list, label: label, accessibility: accessibility, replace: replace)
                try identities.flush()
                try TLSIdentityCLI.printStored(list[0], label: label)
                return
            }
            let accessibility = try items.accessibility(default: .whenUnlocked)
            let identity: TLSIdentity
            if let pkcs12 {
                let bytes = try TLSIdentityCLI.read(pkcs12, what: "PKCS#12 file")
                let password = try passwordFile.map { try SecretSource.file($0).read() }
                defer { password?.wipe() }
                identity = try IdentityImport.identity(pkcs12: bytes, password: password)
            } else if let key, let chain {
                let keyPEM = try SecretSource.file(key).read(maxLength: IdentityImport.maxInputLength, trimNewline: key != "-")
                defer { keyPEM.wipe() }
                identity = try IdentityImport.identity(keyPEM: keyPEM, chainPEM: TLSIdentityCLI.read(chain, what: "chain"))
            } else {
                throw ValidationError("give one of --pkcs12, --key with --chain, or --certificates")
            }
            let identities = IdentityStore(keychain: try items.open())
            try identities.storeIdentity(identity, label: label, accessibility: accessibility, replace: replace)
            try identities.flush()
            try TLSIdentityCLI.printStored(identity.leaf, label: label)
        }
    }
}

// MARK: tls export

struct TLSExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the certificates stored under a label as PEM (never a private key).",
        usage: "securefoundation tls export [options] [-o OUTPUT] LABEL",
        discussion: """
        Writes the certificate item of the label (leaf first, then the chain), or else the \
        identity's chain, to standard output or -o FILE (mode 0600, written atomically).

        Example:
          securefoundation tls export ca -o ca.pem
        """
    )

    @Argument(help: "The label.")
    var label: String

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write here instead of standard output.")
    var output: String?

    @OptionGroup var store: KeychainStoreOptions

    func run() throws {
        try CLI.run {
            let text = try IdentityStore(keychain: try store.open()).exportCertificatesPEM(label: label)
            try CLI.writeOutput(Array(text.utf8), to: output)
        }
    }
}

// MARK: tls revoke
