import Cipher
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one place the TPM 2.0 is reached: tpm2-tools run through ``ExternalTool`` with the TCTI
/// in the child's environment, their failures sorted into ``HardwareKeyError`` cases, the
/// owner hierarchy's primary key, PCR policies, and the flushing of transient objects.
///
/// Used by ``TPM2PrivateKey`` (TLS keys resident in the TPM) and by the vault's TPM device-key
/// provider. A socket TCTI (swtpm, `mssim`) has no resource manager: objects the tools load stay
/// in the TPM's few slots until flushed, so every use flushes after itself, and uses within the
/// process are serialized by ``lock``. Two processes on one socket TCTI may still flush each
/// other's objects; use the kernel's resource manager (`device:/dev/tpmrm0`) to share a TPM.
package enum TPM2 {
    /// Serializes this process's use of the TPM (a flush must not remove an object another
    /// thread is using).
    package static let lock = NSRecursiveLock()

    /// The TCTI as the tools see it, for messages.
    package static func describe(tcti: String?) -> String {
        tcti ?? ProcessInfo.processInfo.environment["TPM2TOOLS_TCTI"] ?? "default (/dev/tpmrm0)"
    }

    /// The path of a tpm2-tools program.
    package static func tool(_ name: String) throws(HardwareKeyError) -> String {
        guard let path = ExternalTool.find(name) else { throw .tpmToolsMissing(name) }
        return path
    }

    /// Runs tpm2-tools program `arguments[0]` (a name, found on `$PATH`) with the TCTI.
    package static func run(_ arguments: [String], input: SecretBytes? = nil, tcti: String?,
                            maxOutput: Int = 65536) throws(HardwareKeyError) -> ExternalTool.Result {
        let path = try tool(arguments[0])
        var environment: [String: String] = [:]
        if let tcti { environment["TPM2TOOLS_TCTI"] = tcti }
        do {
            return try ExternalTool.run([path] + arguments.dropFirst(), input: input, maxOutput: maxOutput, environment: environment)
        } catch let failure as ExternalTool.Failure {
            throw .tpm(operation: "run \(arguments[0])", detail: failure.message)
        } catch {
            throw .tpm(operation: "run \(arguments[0])", detail: "\(error)")
        }
    }

    /// Runs and checks: a failure becomes ``HardwareKeyError`` (the output is wiped).
    package static func call(_ arguments: [String], _ operation: String, input: SecretBytes? = nil, tcti: String?,
                             pcrs: [Int] = []) throws(HardwareKeyError) {
        let result = try run(arguments, input: input, tcti: tcti)
        result.output.wipe()
        try check(result, operation, tcti: tcti, pcrs: pcrs)
    }

    /// Sorts a failed run: the TPM unreachable, its PCR policy refused, or another failure.
    package static func check(_ result: ExternalTool.Result, _ operation: String, tcti: String?, pcrs: [Int] = []) throws(HardwareKeyError) {
        guard result.status != 0 else { return }
        throw failure(result.error, operation, tcti: tcti, pcrs: pcrs)
    }

    package static func failure(_ message: String, _ operation: String, tcti: String?, pcrs: [Int] = []) -> HardwareKeyError {
        if unreachable(message) { return .tpmUnreachable(tcti: describe(tcti: tcti), detail: lastLine(message)) }
        if isPolicyFailure(message) { return .tpmPolicyFailed(pcrs: pcrs) }
        return .tpm(operation: operation, detail: lastLine(message))
    }

    /// The tools could not open the TCTI or lost the connection.
    static func unreachable(_ message: String) -> Bool {
        ["Could not load tcti", "Failed to instantiate TCTI", "Failed to connect", "Connection refused", "Connection reset",
         "tcti-swtpm", "tcti-mssim", "tcti-device", "ERROR:tcti"].contains { message.contains($0) }
    }

    /// The TPM refused a policy session (TPM_RC_POLICY_FAIL, 0x99d with the session's bits).
    package static func isPolicyFailure(_ message: String) -> Bool {
        message.contains("0x99D") || message.contains("0x99d") || message.contains("policy check failed")
            || message.contains("POLICY_FAIL")
    }

    static func lastLine(_ message: String) -> String {
        let lines = message.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return lines.last ?? "no message"
    }

    /// Flushes the transient objects and the loaded and saved sessions the tools left (without a
    /// resource manager they would fill the TPM's few object and session slots: a policy session
    /// of a refused PCR policy stays loaded). Failures are ignored: nothing may be left.
    package static func flush(tcti: String?, sessions: Bool = true) {
        for flag in sessions ? ["-t", "-l", "-s"] : ["-t"] { (try? run(["tpm2_flushcontext", flag], tcti: tcti))?.output.wipe() }
    }

    /// Creates the owner hierarchy's primary key (ECC P-256, from the TPM's seed: the same key
    /// at every call) and saves its context to `directory/primary.ctx`, then flushes it.
    package static func createPrimary(in directory: String, tcti: String?) throws(HardwareKeyError) {
        flush(tcti: tcti)
        defer { flush(tcti: tcti) }
        try call(["tpm2_createprimary", "-C", "o", "-g", "sha256", "-G", "ecc256", "-c", directory + "/primary.ctx"],
                 "create the owner hierarchy's primary key", tcti: tcti)
    }

    /// `sha256:0,7` for PCRs 0 and 7.
    package static func pcrSelection(_ pcrs: [Int]) -> String {
        "sha256:" + pcrs.map(String.init).joined(separator: ",")
    }

    /// Writes the policy digest of `pcrs`' current values (SHA-256 bank) to `path`.
    package static func pcrPolicy(_ pcrs: [Int], to path: String, tcti: String?) throws(HardwareKeyError) {
        guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw .tpm(operation: "bind to PCRs", detail: "PCRs are 0-23") }
        defer { flush(tcti: tcti) }
        try call(["tpm2_createpolicy", "--policy-pcr", "-l", pcrSelection(pcrs), "-L", path], "read the PCRs", tcti: tcti)
    }

    /// A private directory (0700) for context files, removed when the object goes.
    package final class Scratch: @unchecked Sendable {
        package let path: String

        package init() throws(HardwareKeyError) {
            var template = Array((NSTemporaryDirectory() + "/sf-tpm-XXXXXX").utf8CString)
            guard let created = mkdtemp(&template) else {
                throw .tpm(operation: "make a private directory for its context files", detail: String(cString: strerror(errno)))
            }
            path = String(cString: created)
        }

        /// Writes `bytes` to `name` in the directory (0600).
        package func write(_ bytes: [UInt8], to name: String) throws(HardwareKeyError) {
            do { try SecureFile.writeAtomically(bytes, to: path + "/" + name) } catch {
                throw .tpm(operation: "write \(name)", detail: "\(error)")
            }
        }

        /// Reads `name` from the directory.
        package func read(_ name: String, maxLength: Int = 1 << 16) throws(HardwareKeyError) -> [UInt8] {
            do { return try SecureFile.read(path + "/" + name, maxLength: maxLength) } catch {
                throw .tpm(operation: "read \(name)", detail: "\(error)")
            }
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }
    }
}
