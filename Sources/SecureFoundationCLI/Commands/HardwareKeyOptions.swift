import AgeCommandLine
import ArgumentParser
import Cipher
import HardwareKeys
import PinnedTLS

/// How a command reaches a key in a PKCS #11 token: `--key pkcs11:…` with the module given by
/// `--module` (or `module-path=` in the URI, never found in the data directory) and the PIN
/// from `--pin-file`, `--pin-env`, `pin-source=` in the URI, or the terminal. A PIN is never an
/// argument. A key in the TPM (`--key tpm`, `--key tpm:pcrs=0,7`) is reached through `--tcti`
/// or `$TPM2TOOLS_TCTI`.
struct HardwareKeyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The TPM's TCTI for keys in the TPM (default: $TPM2TOOLS_TCTI, else /dev/tpmrm0), for example swtpm:host=127.0.0.1,port=2321.",
                               valueName: "tcti"))
    var tcti: String?

    @Option(help: ArgumentHelp("The PKCS #11 module (shared library) of the token, for --key pkcs11:… (absolute path; never inside the data directory).",
                               valueName: "path"))
    var module: String?

    @Option(name: .customLong("pin-file"), help: ArgumentHelp("Read the token's user PIN from this file (first line; `-` for standard input).", valueName: "file"))
    var pinFile: String?

    @Option(name: .customLong("pin-env"), help: ArgumentHelp("Read the token's user PIN from this environment variable (its name, not the PIN).",
                                                            valueName: "name"))
    var pinEnv: String?

    /// The PIN source these options name (the terminal when none is given).
    func pinSource() throws -> PKCS11PINSource {
        switch (pinFile, pinEnv) {
        case (let file?, nil): return .file(file)
        case (nil, let name?): return .environment(name)
        case (nil, nil):
            return .prompt({
                do {
                    return try CLI.readPassphrase(prompt: "Token PIN: ")
                } catch {
                    throw HardwareKeyError.pinUnavailable("\(error); give it with --pin-file FILE, --pin-env NAME or pin-source=file:/PATH in the URI, or type it at the prompt of a terminal")
                }
            })
        default: throw ValidationError("give --pin-file or --pin-env, not both")
        }
    }

    /// The PCRs of `--key tpm` (none) or `--key tpm:pcrs=0,7`; nil when `text` names no TPM key.
    static func tpmPCRs(_ text: String) throws -> [Int]? {
        if text == "tpm" { return [] }
        guard text.hasPrefix("tpm:") else { return nil }
        let rest = text.dropFirst(4)
        guard rest.hasPrefix("pcrs=") else { throw ValidationError("--key tpm takes pcrs=N,N (for example tpm:pcrs=0,7)") }
        var pcrs: [Int] = []
        for part in rest.dropFirst(5).split(separator: ",", omittingEmptySubsequences: false) {
            guard let pcr = Int(part), (0...23).contains(pcr) else { throw ValidationError("PCRs are 0-23: \(text)") }
            pcrs.append(pcr)
        }
        guard !pcrs.isEmpty else { throw ValidationError("--key tpm:pcrs= names no PCR") }
        return pcrs
    }

    /// Opens the token key `uri` names; the module must not be inside `dataDirectory`.
    func open(uri text: String, dataDirectory: String) throws -> PKCS11PrivateKey {
        let uri = try PKCS11URI(text)
        return try PKCS11PrivateKey(uri: uri, modulePath: module, refusing: [dataDirectory], pin: try pinSource())
    }

    /// Opens a key whose location is recorded in the data directory (a certificate authority's
    /// or a sharing identity's key): a `pkcs11:` URI naming the token and the key only. The
    /// module and the PIN come from these options, never from the record, which anyone who can
    /// write the data directory could have swapped. The caller checks the key against the
    /// certificate.
    func recordedKeyOpener(dataDirectory: String) throws -> @Sendable (String) throws(HardwareKeyError) -> any HardwareSigningKey {
        let pin = try pinSource()
        let module = self.module
        return { @Sendable (location: String) throws(HardwareKeyError) -> any HardwareSigningKey in
            guard location.hasPrefix("pkcs11:") else {
                throw .invalidURI("the recorded key location \(location) is not a pkcs11: URI")
            }
            let uri = try Self.recordable(location)
            return try PKCS11PrivateKey(uri: uri, modulePath: module, refusing: [dataDirectory], pin: pin)
        }
    }

    /// The certificate authority stored under `label`, its key opened with these options when
    /// it stays in a token (module and PIN) or the TPM (TCTI); never with anything the record names.
    func authority(_ label: String, in identities: IdentityStore, dataDirectory: String) throws -> CertificateAuthority {
        try CertificateAuthority.load(from: identities, label: label,
                                      openingHardwareKey: try recordedKeyOpener(dataDirectory: dataDirectory), tcti: tcti)
    }

    /// The key a new item records (`--key`): a key the TPM makes now for `tpm` or
    /// `tpm:pcrs=N,N` (bound to those PCRs' current values), or the token key a `pkcs11:` URI
    /// names (as ``openRecordable(uri:dataDirectory:)``). The item then records the TPM key's
    /// blobs, or the token key's URI.
    func openOrCreate(_ text: String, dataDirectory: String) throws -> any HardwareSigningKey {
        if let pcrs = try Self.tpmPCRs(text) {
            return try TPM2PrivateKey(blobs: try TPM2PrivateKey.create(pcrs: pcrs, tcti: tcti), tcti: tcti)
        }
        guard text.hasPrefix("pkcs11:") else { throw ValidationError("--key takes a pkcs11: URI (RFC 7512), tpm or tpm:pcrs=N,N") }
        return try openRecordable(uri: text, dataDirectory: dataDirectory)
    }

    /// Checks the text of a `--key` that may name a token key or the TPM.
    static func validateKey(_ text: String?, option: String = "--key") throws {
        guard let text else { return }
        if !text.hasPrefix("pkcs11:"), try tpmPCRs(text) == nil {
            throw ValidationError("\(option) takes a pkcs11: URI (RFC 7512), tpm or tpm:pcrs=N,N")
        }
    }

    /// Opens the key of `--key URI` for an item that records where its key is: the URI may name
    /// the token and the key only (no `?module-path=` or `?pin-source=`: those come from
    /// --module and --pin-file, so a record never chooses the library loaded or the PIN read).
    func openRecordable(uri text: String, dataDirectory: String) throws -> any HardwareSigningKey {
        try recordedKeyOpener(dataDirectory: dataDirectory)(text)
    }

    /// A URI that may be recorded or read from a record: no query attributes.
    static func recordable(_ text: String) throws(HardwareKeyError) -> PKCS11URI {
        let uri = try PKCS11URI(text)
        guard !text.contains("?"), uri.modulePath == nil, uri.pinFile == nil else {
            throw .invalidURI("\(text): a recorded key's URI names the token and the key only; give the module with "
                + "--module and the PIN with --pin-file or --pin-env")
        }
        return uri
    }
}
