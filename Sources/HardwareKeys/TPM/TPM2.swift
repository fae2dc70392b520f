internal import CTPM2
import Cipher
import Foundation

/// The one place the TPM 2.0 is reached: in-process, through the TPM Software Stack's Enhanced
/// System API (ESYS, tpm2-tss), one connection per TCTI for the process, its failures sorted
/// into ``HardwareKeyError`` cases.
///
/// The libraries are loaded at the first use (CTPM2; Debian: `libtss2-esys-3.0.2-0`,
/// `libtss2-tctildr0`, which tpm2-tools also brings), so a program that never touches the TPM
/// maps none of them. The TCTI is spelled as tpm2-tools spell it: the caller's, else
/// `$TPM2TOOLS_TCTI`, else the loader's default (`/dev/tpmrm0` first).
///
/// A connection stays open while a ``TPM2PrivateKey`` uses it, and closes with the last one
/// (a one-off use, such as unsealing a device key, closes it at once). The signing key used
/// last stays loaded in the TPM (one object: a socket TCTI has no resource manager, and a TPM
/// has three or so slots); another key's signature swaps it out for its own saved context. What
/// another process does to the TPM is expected: an object flushed under us is loaded again
/// from its saved context (or from its blobs) and the command is run once more.
package enum TPM2 {
    /// Overrides, for one TCTI, whether signing keys stay loaded between signatures (by
    /// default only behind a resource manager, see ``Connection/keepsKeysLoaded``); for tests
    /// and measurements, before the TCTI's first use.
    package static func keepKeysLoaded(_ keep: Bool, tcti: String) {
        lock.lock()
        defer { lock.unlock() }
        keepOverrides[tcti] = keep
    }

    nonisolated(unsafe) private static var keepOverrides: [String: Bool] = [:]

    /// Serializes this process's use of the TPM: ESYS contexts are not thread-safe, and a flush
    /// must not remove an object another thread is using.
    package static let lock = NSRecursiveLock()

    /// The TCTI as the stack sees it, for messages.
    package static func describe(tcti: String?) -> String {
        effective(tcti) ?? "default (/dev/tpmrm0)"
    }

    /// The caller's TCTI, else `$TPM2TOOLS_TCTI`; nil for the loader's default.
    static func effective(_ tcti: String?) -> String? {
        if let tcti, !tcti.isEmpty { return tcti }
        if let variable = ProcessInfo.processInfo.environment["TPM2TOOLS_TCTI"], !variable.isEmpty { return variable }
        return nil
    }

    /// `sha256:0,7` for PCRs 0 and 7, as tpm2-tools write a PCR selection.
    package static func pcrSelection(_ pcrs: [Int]) -> String {
        "sha256:" + pcrs.map(String.init).joined(separator: ",")
    }

    /// PCRs as the C layer takes them: a bit per PCR of the SHA-256 bank.
    static func pcrMask(_ pcrs: [Int]) throws(HardwareKeyError) -> UInt32 {
        guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw .tpm(operation: "bind to PCRs", detail: "PCRs are 0-23") }
        return pcrs.reduce(0) { $0 | (1 << UInt32($1)) }
    }

    /// Runs `body` with the connection to `tcti` (opened if none is), holding ``lock``. A
    /// connection that broke is dropped (the next use opens a new one); one that no key holds
    /// is closed after `body`.
    ///
    /// With `privately`, the connection is a new one of its own, closed after `body` (sealing
    /// and unsealing the device key: tpm2-tss keeps copies of a command's parameters and of the
    /// decrypted answer in the context's memory until it is closed, so that context is not one a
    /// key keeps open).
    package static func using<Result>(_ tcti: String?, privately: Bool = false,
                                      _ body: (Connection) throws(HardwareKeyError) -> Result)
        throws(HardwareKeyError) -> Result {
        lock.lock()
        defer { lock.unlock() }
        let connection = try privately ? Connection.standalone(tcti) : Connection.opened(tcti)
        defer {
            // ESYS refuses every later call once a response failed its checks (a bad response
            // HMAC, a malformed answer): start again with a new context.
            if connection.broken { connection.disconnect() }
            if privately { connection.disconnect() } else { connection.closeIfUnused() }
        }
        do {
            return try body(connection)
        } catch {
            if case .tpmUnreachable = error { connection.disconnect() }
            throw error
        }
    }

    /// A connection to one TCTI: the C layer's ESYS context, the keys that hold it, and the
    /// signing key left loaded. Used only under ``TPM2/lock``.
    package final class Connection: @unchecked Sendable {
        nonisolated(unsafe) fileprivate static var open: [String: Connection] = [:]

        let tcti: String?
        /// Whether a resource manager stands between this process and the TPM (the kernel's
        /// `/dev/tpmrm0`, or tpm2-abrmd): then each connection has its own object slots and
        /// the signing key used last stays loaded. Without one (a socket TCTI such as swtpm's,
        /// or `/dev/tpm0`) every process shares the TPM's three or so slots, so an object is
        /// flushed as soon as it was used.
        let keepsKeysLoaded: Bool
        private var pointer: OpaquePointer?
        /// Keys that keep the connection open (``TPM2/hold(_:)``).
        fileprivate var holders = 0
        /// The signing key left loaded: its owner and handle.
        var resident: (owner: ObjectIdentifier, handle: UInt32)?
        /// An answer came from the ESYS, SYS or marshaling layer (not the TPM, not the TCTI):
        /// ESYS then refuses every later call, so the context is replaced after this use.
        fileprivate(set) var broken = false

        /// Notes an answer code (see ``broken``) and returns it.
        @discardableResult
        func observe(_ rc: UInt32) -> UInt32 {
            let layer = rc >> 16 & 0xff
            if layer == 7 || layer == 8 || layer == 9 { broken = true }
            return rc
        }

        private init(tcti: String?) {
            self.tcti = tcti
            if let tcti, let forced = TPM2.keepOverrides[tcti] {
                keepsKeysLoaded = forced
            } else if let tcti {
                keepsKeysLoaded = tcti.hasPrefix("tabrmd") || (tcti.hasPrefix("device:") && tcti.contains("tpmrm"))
            } else {
                // The loader's default tries /dev/tpmrm0 first.
                keepsKeysLoaded = FileManager.default.fileExists(atPath: "/dev/tpmrm0")
            }
        }

        static func key(_ tcti: String?) -> String { effective(tcti) ?? "" }

        /// A connection of its own, in no table (closed by the caller).
        static func standalone(_ tcti: String?) throws(HardwareKeyError) -> Connection {
            let connection = Connection(tcti: effective(tcti))
            try connection.connect(registered: false)
            return connection
        }

        /// The open connection to `tcti`, or a new one.
        static func opened(_ tcti: String?) throws(HardwareKeyError) -> Connection {
            let connection = open[key(tcti)] ?? Connection(tcti: effective(tcti))
            open[key(tcti)] = connection
            try connection.connect(registered: true)
            return connection
        }

        /// Opens the ESYS context if it is not open.
        private func connect(registered: Bool) throws(HardwareKeyError) {
            let connection = self
            let tcti = self.tcti
            if connection.pointer == nil {
                var opened: OpaquePointer?
                var message = [CChar](repeating: 0, count: 256)
                let rc = ctpm_open(connection.tcti, &opened, &message, message.count)
                guard rc == 0, let opened else {
                    if registered && connection.holders == 0 { Connection.open[Connection.key(tcti)] = nil }
                    if rc == CTPM_NOT_INSTALLED {
                        throw .tpmStackMissing(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                    }
                    throw .tpmUnreachable(tcti: describe(tcti: tcti), detail: TPM2.words(rc))
                }
                connection.pointer = opened
                connection.broken = false
            }
        }

        /// Closes the ESYS context (the next use opens another); the resident key is forgotten.
        func disconnect() {
            if let pointer { ctpm_close(pointer) }
            pointer = nil
            resident = nil
        }

        fileprivate func closeIfUnused() {
            guard holders == 0 else { return }
            if let resident { _ = flush(resident.handle) }
            disconnect()
            if Connection.open[Connection.key(tcti)] === self { Connection.open[Connection.key(tcti)] = nil }
        }

        private func context() throws(HardwareKeyError) -> OpaquePointer {
            guard let pointer else { throw .tpmUnreachable(tcti: describe(tcti: tcti), detail: "the connection was closed") }
            return pointer
        }

        /// Throws the error `rc` means, or returns for success.
        package func check(_ rc: UInt32, _ operation: String, pcrs: [Int] = []) throws(HardwareKeyError) {
            guard observe(rc) != 0 else { return }
            throw TPM2.error(rc, operation, tcti: tcti, pcrs: pcrs)
        }

        /// The owner hierarchy's primary key (the tools' `-G ecc256 -g sha256` template); flush it after.
        package func primary() throws(HardwareKeyError) -> UInt32 {
            var handle: UInt32 = 0
            try check(ctpm_primary(try context(), &handle), "create the owner hierarchy's primary key")
            return handle
        }

        /// Loads an object from its marshaled public and private areas under `parent`.
        package func load(parent: UInt32, publicArea: [UInt8], privateArea: [UInt8], _ what: String) throws(HardwareKeyError) -> UInt32 {
            var handle: UInt32 = 0
            let context = try context()
            let rc = publicArea.withUnsafeBufferPointer { publicBytes in
                privateArea.withUnsafeBufferPointer { privateBytes in
                    ctpm_load(context, parent, publicBytes.baseAddress, publicBytes.count, privateBytes.baseAddress,
                              privateBytes.count, &handle)
                }
            }
            if rc == CTPM_BAD_BLOB { throw .tpmKeyRefused("\(what)'s blobs are not a TPM2B_PUBLIC and a TPM2B_PRIVATE") }
            if TPM2.refusesBlobs(rc) { throw .tpmKeyRefused("\(what)'s blobs do not load (\(TPM2.words(rc)))") }
            try check(rc, "load \(what)")
            return handle
        }

        /// The loaded object's P-256 public key (uncompressed point).
        package func p256Point(_ handle: UInt32) throws(HardwareKeyError) -> [UInt8] {
            var point = [UInt8](repeating: 0, count: 65)
            let rc = ctpm_p256_point(try context(), handle, &point)
            if rc == CTPM_NOT_P256 { throw .unsupportedKey("the TPM key is not an EC P-256 key") }
            try check(rc, "read the key's public key")
            return point
        }

        /// Flushes a loaded object or session; the TPM's answer is returned, never thrown
        /// (nothing may be left, and a flushed handle is gone here whatever the answer).
        @discardableResult
        package func flush(_ handle: UInt32) -> UInt32 {
            guard let pointer else { return 0 }
            if resident?.handle == handle { resident = nil }
            return ctpm_flush(pointer, handle)
        }

        /// Forgets a handle without flushing it: it may name another process's object by now.
        package func forget(_ handle: UInt32) {
            guard let pointer else { return }
            if resident?.handle == handle { resident = nil }
            ctpm_forget(pointer, handle)
        }

        /// Saves a loaded object's context (it stays loaded).
        package func save(_ handle: UInt32) throws(HardwareKeyError) -> SavedContext {
            var saved: OpaquePointer?
            try check(ctpm_save(try context(), handle, &saved), "save the key's context")
            guard let saved else { throw .tpm(operation: "save the key's context", detail: "no context returned") }
            return SavedContext(saved)
        }

        /// Loads a saved context again.
        package func restore(_ saved: SavedContext) -> (rc: UInt32, handle: UInt32) {
            guard let pointer else { return (CTPM_MALFORMED, 0) }
            var handle: UInt32 = 0
            let rc = observe(ctpm_restore(pointer, saved.pointer, &handle))
            return (rc, handle)
        }

        /// An ECDSA P-256 signature (r and s, 64 bytes) of a SHA-256 digest; the raw answer
        /// code for the caller to sort (a key flushed under us is loaded again).
        package func sign(_ handle: UInt32, digest: [UInt8], pcrs: UInt32) -> (rc: UInt32, signature: [UInt8]) {
            guard let pointer, digest.count == 32 else { return (CTPM_MALFORMED, []) }
            var r = [UInt8](repeating: 0, count: 32)
            var s = [UInt8](repeating: 0, count: 32)
            let rc = observe(ctpm_sign_p256(pointer, handle, digest, pcrs, &r, &s))
            return (rc, rc == 0 ? r + s : [])
        }

        /// Unseals a loaded sealed-data object (the answer encrypted by a session salted with `parent`).
        package func unseal(parent: UInt32, item: UInt32, pcrs: [Int], _ what: String) throws(HardwareKeyError) -> SecretBytes {
            let mask = try pcrMask(pcrs)
            let context = try context()
            var rc: UInt32 = 0
            var length = 0
            let data = SecretBytes(count: 128) { bytes in
                rc = ctpm_unseal(context, parent, item, mask, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, &length)
            }
            guard observe(rc) == 0 else {
                data.wipe()
                throw TPM2.error(rc, "unseal \(what)", tcti: tcti, pcrs: pcrs)
            }
            let result = SecretBytes(copying: data.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0.prefix(length)) })
            data.wipe()
            return result
        }

        /// Creates a signing key (no `data`) or a sealed-data object under `parent`, bound to
        /// `pcrs`' current values when given; returns its marshaled public and private areas.
        package func create(parent: UInt32, sealing data: SecretBytes?, pcrs: [Int], _ what: String)
            throws(HardwareKeyError) -> (publicArea: [UInt8], privateArea: [UInt8]) {
            let mask = try pcrMask(pcrs)
            let context = try context()
            var publicArea = [UInt8](repeating: 0, count: 1024)
            var privateArea = [UInt8](repeating: 0, count: 1024)
            var publicLength = publicArea.count
            var privateLength = privateArea.count
            let rc: UInt32
            if let data {
                rc = data.withUnsafeBytes { bytes in
                    ctpm_create(context, parent, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, mask,
                                &publicArea, &publicLength, &privateArea, &privateLength)
                }
            } else {
                rc = ctpm_create(context, parent, nil, 0, mask, &publicArea, &publicLength, &privateArea, &privateLength)
            }
            try check(rc, "create \(what)", pcrs: pcrs)
            return (Array(publicArea.prefix(publicLength)), Array(privateArea.prefix(privateLength)))
        }
    }

    /// A transient object's saved context (freed with this object).
    package final class SavedContext: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { ctpm_saved_free(pointer) }
    }

    /// Keeps the connection to `tcti` open until ``release(_:owner:)`` (a key's life), behind
    /// a resource manager only: without one, a connection held open would keep other processes
    /// out (`/dev/tpm0` and mssim take one client at a time), so each use opens and closes its
    /// own. Returns whether it holds.
    static func hold(_ tcti: String?) throws(HardwareKeyError) -> Bool {
        try using(tcti) { connection throws(HardwareKeyError) in
            guard connection.keepsKeysLoaded else { return false }
            connection.holders += 1
            return true
        }
    }

    /// Ends a ``hold(_:)``: flushes `owner`'s resident object, closes the connection with its last holder.
    static func release(_ tcti: String?, owner: ObjectIdentifier?, held: Bool) {
        lock.lock()
        defer { lock.unlock() }
        guard let connection = Connection.open[Connection.key(tcti)] else { return }
        if let resident = connection.resident, let owner, resident.owner == owner { connection.flush(resident.handle) }
        if held { connection.holders = max(0, connection.holders - 1) }
        connection.closeIfUnused()
    }

    /// An answer code in words (libtss2-rc's decoding, with the code in hexadecimal).
    static func words(_ rc: UInt32) -> String {
        switch rc {
        case CTPM_BAD_BLOB: return "blobs that do not unmarshal"
        case CTPM_NOT_P256: return "not an ECC P-256 key"
        case CTPM_TOO_SMALL: return "an answer larger than expected"
        case CTPM_MALFORMED: return "an answer of the wrong shape"
        default:
            let hex = "0x" + String(rc, radix: 16)
            guard let text = ctpm_describe(rc) else { return hex }
            return String(cString: text) + " (" + hex + ")"
        }
    }

    /// The TCTI layer (10), or a lower layer's "no connection" or "I/O error" in any layer: the TPM is unreachable.
    static func isUnreachable(_ rc: UInt32) -> Bool {
        let layer = rc >> 16 & 0xff
        let base = rc & 0xffff
        return layer == 10 || (layer != 0 && (base == 8 || base == 10))
    }

    /// A format-one TPM answer with error number `number` (TPM2_RC_FMT1 + number, with any handle,
    /// session or parameter index).
    static func isTPMError(_ rc: UInt32, _ number: UInt32) -> Bool {
        rc >> 16 == 0 && rc & 0x80 != 0 && rc & 0x3f == number
    }

    /// A TPM warning (format zero, TPM2_RC_WARN: out of memory for objects or sessions, retry,
    /// yielded...), never a verdict on the object itself.
    static func isWarning(_ rc: UInt32) -> Bool {
        rc >> 16 == 0 && rc & 0x80 == 0 && rc & 0x900 == 0x900 && !isObjectGone(rc)
    }

    /// The TPM refused a policy session (TPM2_RC_POLICY_FAIL).
    static func isPolicyFailure(_ rc: UInt32) -> Bool { isTPMError(rc, 0x1d) }

    /// The TPM would not load blobs: their integrity or their parent's key did not check out
    /// (TPM2_RC_INTEGRITY, _KEY, _SIZE, _VALUE, _TYPE, _BINDING, _ATTRIBUTES, _ASYMMETRIC...).
    static func refusesBlobs(_ rc: UInt32) -> Bool {
        [0x1f, 0x1c, 0x15, 0x04, 0x0a, 0x25, 0x02, 0x01, 0x16, 0x18].contains { isTPMError(rc, $0) }
    }

    /// A transient object not loaded (TPM2_RC_REFERENCE_H0..H6, or a handle of the wrong kind):
    /// another process flushed it, or the TPM was reset.
    static func isObjectGone(_ rc: UInt32) -> Bool {
        (rc >> 16 == 0 && rc & 0xff0 == 0x910) || isTPMError(rc, 0x0b)
    }

    static func error(_ rc: UInt32, _ operation: String, tcti: String?, pcrs: [Int] = []) -> HardwareKeyError {
        if isUnreachable(rc) { return .tpmUnreachable(tcti: describe(tcti: tcti), detail: words(rc)) }
        if isPolicyFailure(rc) { return .tpmPolicyFailed(pcrs: pcrs) }
        return .tpm(operation: operation, detail: words(rc))
    }
}
