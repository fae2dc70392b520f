/// Why a key in a hardware token (PKCS #11) or in the TPM could not be reached or used. Each
/// case says what to do; a failure of a PKCS #11 module carries the name of its return value
/// (`CKR_…`), a failure of the TPM the TPM Software Stack's words for its answer code.
public enum HardwareKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `pkcs11:` URI is malformed or asks for something refused (a PIN in the URI, a
    /// module by name, an attribute that is not RFC 7512's).
    case invalidURI(String)
    /// The module path breaks the loading rules (not absolute, inside the data directory,
    /// writable by others, not a regular file).
    case moduleRefused(path: String, reason: String)
    /// The module could not be loaded (dlopen failed, no `C_GetFunctionList`).
    case moduleUnavailable(path: String, reason: String)
    /// The module returned an error: the function called and its `CK_RV`.
    case pkcs11(function: String, returnValue: UInt)
    /// No token matches the URI's token attributes.
    case tokenNotFound(String)
    /// No key on the token matches the URI's object attributes.
    case keyNotFound(String)
    /// More than one key matches; the URI must name one (add `id=` or `object=`).
    case ambiguousKey(String)
    /// The key's type or curve is not one this library signs with (EC P-256, P-384, RSA).
    case unsupportedKey(String)
    /// The PIN could not be read from its source.
    case pinUnavailable(String)
    /// The TPM Software Stack's libraries (libtss2-esys, libtss2-tctildr, libtss2-mu) could
    /// not be loaded: the loader's message.
    case tpmStackMissing(String)
    /// The TPM does not answer through the TCTI (stopped, absent, or the TCTI names another place).
    case tpmUnreachable(tcti: String, detail: String)
    /// The TPM refused the key's PCR policy: the PCRs' values differ from those at creation.
    case tpmPolicyFailed(pcrs: [Int])
    /// The TPM refused to load the key's blobs: they were made by another TPM (or another
    /// owner seed), or they are damaged.
    case tpmKeyRefused(String)
    /// Another TPM failure: what was being done and the tools' message.
    case tpm(operation: String, detail: String)

    /// The name of the module's return value (`CKR_PIN_INCORRECT`), for ``pkcs11(function:returnValue:)``.
    public var returnValueName: String? {
        guard case .pkcs11(_, let value) = self else { return nil }
        return Self.name(of: value)
    }

    /// The `CKR_…` name of a PKCS #11 return value (`CKR_VENDOR_DEFINED+0x…` for vendor values).
    /// - Parameter value: a `CK_RV` a module returned.
    /// - Returns: its `CKR_…` name, or `CKR_VENDOR_DEFINED+0x…` for a vendor-defined value.
    public static func name(of value: UInt) -> String {
        if let name = ReturnValueNames.byValue[value] { return name }
        if value >= 0x8000_0000 { return "CKR_VENDOR_DEFINED+0x" + String(value - 0x8000_0000, radix: 16) }
        return "CKR_0x" + String(value, radix: 16)
    }

    public var description: String {
        switch self {
        case .invalidURI(let reason):
            return "invalid pkcs11: URI: \(reason) (RFC 7512: pkcs11:token=LABEL;object=LABEL;id=%01)"
        case .moduleRefused(let path, let reason):
            return "PKCS #11 module \(path) refused: \(reason). Give the path of the module your token's vendor "
                + "installed (for example /usr/lib/softhsm/libsofthsm2.so), owned by root or you, writable by no one else"
        case .moduleUnavailable(let path, let reason):
            return "PKCS #11 module \(path) cannot be loaded: \(reason). Check that the path names the module of the "
                + "token's vendor and that its package is installed"
        case .pkcs11(let function, let value):
            let name = Self.name(of: value)
            return "\(function) failed: \(name): \(Self.advice(name))"
        case .tokenNotFound(let what):
            return "no token matches \(what); check that the token is inserted (or its directory present) and list "
                + "the tokens with `securefoundation tls keys --module PATH`"
        case .keyNotFound(let what):
            return "no private key on the token matches \(what); list the keys with `securefoundation tls keys --module PATH`"
        case .ambiguousKey(let what):
            return "several private keys match \(what); name one with id= or object= in the URI"
        case .unsupportedKey(let what):
            return "unsupported key: \(what); use an EC P-256/P-384 or RSA (2048 bits or more) key"
        case .pinUnavailable(let reason):
            return "the token's PIN cannot be read: \(reason)"
        case .tpmStackMissing(let detail):
            return "the TPM Software Stack is not installed (\(detail)): the TPM is used through its libraries (Debian: "
                + "apt-get install libtss2-esys-3.0.2-0 libtss2-tctildr0, which tpm2-tools also installs)"
        case .tpmUnreachable(let tcti, let detail):
            return "the TPM does not answer through the TCTI \(tcti) (\(detail)); check that the TPM (or swtpm) runs and "
                + "that --tcti or $TPM2TOOLS_TCTI names it. No software key is used instead"
        case .tpmPolicyFailed(let pcrs):
            return "the TPM refused the key's PCR policy: PCRs \(pcrs.map(String.init).joined(separator: ",")) differ from "
                + "their values when the key was made (firmware, boot loader or kernel changed); restore the measured boot "
                + "chain, or make and certify a new key from a trusted state. No software key is used instead"
        case .tpmKeyRefused(let detail):
            return "the TPM refused the key: \(detail). The key's blobs open only in the TPM that made them (with the "
                + "same owner seed); on another machine make and certify a new key. No software key is used instead"
        case .tpm(let operation, let detail):
            return "the TPM could not \(operation): \(detail)"
        }
    }

    /// The return values that mean the PIN given is wrong (a wrong secret, exit status 3).
    public static let wrongPINNames: Set<String> = ["CKR_PIN_INCORRECT", "CKR_PIN_INVALID", "CKR_PIN_LEN_RANGE"]

    /// What to do about a return value.
    static func advice(_ name: String) -> String {
        switch name {
        case "CKR_PIN_INCORRECT":
            return "the PIN is wrong; check the PIN source (the token locks the PIN after a few wrong tries)"
        case "CKR_PIN_LOCKED":
            return "the user PIN is locked after too many wrong tries; the token's security officer must set a new one"
        case "CKR_PIN_EXPIRED":
            return "the user PIN has expired; set a new one with the token's tools"
        case "CKR_PIN_LEN_RANGE", "CKR_PIN_INVALID":
            return "the PIN has a length or characters the token does not accept; check the PIN source"
        case "CKR_USER_NOT_LOGGED_IN", "CKR_USER_PIN_NOT_INITIALIZED":
            return "the token needs its user PIN; give one (and initialize the user PIN if the token is new)"
        case "CKR_TOKEN_NOT_PRESENT", "CKR_DEVICE_REMOVED", "CKR_SLOT_ID_INVALID", "CKR_TOKEN_NOT_RECOGNIZED":
            return "the token is gone (removed, or its storage deleted); insert it and try again. No software key is used instead"
        case "CKR_SESSION_HANDLE_INVALID", "CKR_SESSION_CLOSED", "CKR_SESSION_COUNT":
            return "the token closed the session or has no session left; try again"
        case "CKR_KEY_HANDLE_INVALID", "CKR_OBJECT_HANDLE_INVALID":
            return "the key is no longer on the token (deleted, or the token was replaced); no software key is used instead"
        case "CKR_MECHANISM_INVALID", "CKR_MECHANISM_PARAM_INVALID", "CKR_KEY_TYPE_INCONSISTENT",
             "CKR_KEY_FUNCTION_NOT_PERMITTED":
            return "the token will not sign with this key and mechanism; check the key's type and its CKA_SIGN attribute"
        case "CKR_DEVICE_MEMORY", "CKR_HOST_MEMORY":
            return "the token or the module ran out of memory"
        case "CKR_DEVICE_ERROR", "CKR_GENERAL_ERROR", "CKR_FUNCTION_FAILED":
            return "the token or its module failed; see the module's log and check the token"
        case "CKR_CRYPTOKI_NOT_INITIALIZED":
            return "the module was not initialized; this is a defect of the caller"
        case "CKR_ARGUMENTS_BAD", "CKR_DATA_LEN_RANGE", "CKR_DATA_INVALID":
            return "the module refused the request's arguments; the key may not suit this use"
        case "CKR_CANT_LOCK", "CKR_NEED_TO_CREATE_THREADS":
            return "the module cannot run with operating-system locking in a threaded process; use another module"
        default:
            return "see the module's documentation for \(name)"
        }
    }
}
