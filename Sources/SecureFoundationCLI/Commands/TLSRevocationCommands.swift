import AgeCommandLine
import ArgumentParser
import Foundation
import HardwareKeys
import PinnedTLS
import SecureFoundation
import X509

struct TLSRevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a certificate the certificate authority issued: add it to the authority's revocation list.",
        usage: "securefoundation tls revoke [options] [--ca LABEL] NAME",
        discussion: """
        NAME is the label a certificate is stored under (by `tls issue` or `tls import`), or the \
        sha256/ pin of a stored certificate's key. The certificate must be issued by the \
        authority (--ca, default "ca"). Its serial number is added to the authority's revocation \
        list, which is signed again (new CRL number, valid --days) and kept in the keychain \
        beside the authority. Revoking a certificate listed already changes nothing (exit 0). \
        Export the list with `tls crl` and give it to the peers that check it (a policy's \
        "revocationList", see TLS.md in the documentation). An authority whose key is in a token signs the \
        list there: give --module and the token's PIN.

        Exit status: 0 revoked (or listed already), 44 no certificate under that label or pin, \
        1 not issued by the authority, 36 vault locked (give --passcode-file), 2 stored list \
        damaged.

        Examples:
          securefoundation tls revoke device-42 --passcode-file passcode.txt
          securefoundation tls crl -o crl.pem --passcode-file passcode.txt
        """
    )

    @Argument(help: "The label of the certificate, or the sha256/ pin of its key.")
    var name: String

    @Option(name: .customLong("ca"), help: "The label of the certificate authority.")
    var authority = CertificateAuthority.defaultLabel

    @Option(name: .customLong("days"), help: "How many days the new revocation list is valid (its nextUpdate).")
    var days = 30

    @OptionGroup var hardware: HardwareKeyOptions

    @OptionGroup var store: KeychainStoreOptions

    func validate() throws {
        guard (1...366).contains(days) else { throw ValidationError("--days must be between 1 and 366") }
    }

    /// A serial number as openssl prints it (`x509 -text`, `crl -text`): each byte as two
    /// lower-case hex digits, colon-separated (`71:6b:ce:aa:07:…`).
    static func serialText(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef")
        return bytes.map { String([digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]]) }.joined(separator: ":")
    }

    func run() throws {
        try CLI.run {
            let identities = IdentityStore(keychain: try store.open())
            let certificate = try CertificateAuthority.storedCertificate(named: name, in: identities)
            let authority = try hardware.authority(self.authority, in: identities, dataDirectory: store.home.directory)
            let (list, added) = try authority.revoke(certificate, in: identities, label: self.authority,
                                                     validity: TimeInterval(days) * 86_400)
            let state = added ? "revoked" : "already revoked"
            try CLI.writeStdout(Array("""
            \(state): \(certificate.subject), serial \(Self.serialText(certificate.serialNumber.bytes))
            revocation list: number \(list.number), \(list.entries.count) revoked

            """.utf8))
        }
    }
}

// MARK: tls crl

struct TLSRevocationListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crl",
        abstract: "Sign and export the certificate authority's revocation list (PEM, or DER with --der).",
        usage: "securefoundation tls crl [options] [--ca LABEL] [--der] [-o OUTPUT]",
        discussion: """
        Signs the authority's revocation list again (the revoked serial numbers so far, none if \
        nothing was revoked; thisUpdate now, nextUpdate --days later, the next CRL number), keeps \
        it in the keychain beside the authority, and writes it to standard output or -o FILE \
        (mode 0600, written atomically): PEM ("X509 CRL") by default, DER with --der. \
        `openssl crl -in FILE -noout -text` reads it, and `openssl verify -crl_check -CAfile \
        ca.pem -CRLfile FILE` checks certificates against it. Export a new list before \
        nextUpdate: a policy refuses a list past its nextUpdate. An authority whose key is in a \
        token signs the list there: give --module and the token's PIN.

        Exit status: 0 success, 44 no authority under --ca, 36 vault locked (give \
        --passcode-file), 2 stored list damaged, 64 DER to a terminal.

        Examples:
          securefoundation tls crl -o crl.pem --passcode-file passcode.txt
          securefoundation tls crl --der -o crl.der --passcode-file passcode.txt
        """
    )

    @Option(name: .customLong("ca"), help: "The label of the certificate authority.")
    var authority = CertificateAuthority.defaultLabel

    @Flag(name: .customLong("der"), help: "Write DER instead of PEM.")
    var der = false

    @Option(name: .customLong("days"), help: "How many days the list is valid (its nextUpdate).")
    var days = 30

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write here instead of standard output.")
    var output: String?

    @OptionGroup var hardware: HardwareKeyOptions

    @OptionGroup var store: KeychainStoreOptions

    func validate() throws {
        guard (1...366).contains(days) else { throw ValidationError("--days must be between 1 and 366") }
    }

    func run() throws {
        try CLI.run {
            if der && (output == nil || output == "-") && isatty(1) == 1 {
                throw CLIFailure("refusing to write DER to a terminal: give -o FILE or redirect standard output", status: .usage)
            }
            let identities = IdentityStore(keychain: try store.open())
            let authority = try hardware.authority(self.authority, in: identities, dataDirectory: store.home.directory)
            let list = try authority.refreshRevocationList(in: identities, label: self.authority,
                                                           validity: TimeInterval(days) * 86_400)
            try CLI.writeOutput(der ? list.derEncoded : Array(list.pemEncoded.utf8), to: output)
        }
    }
}

// MARK: tls delete
