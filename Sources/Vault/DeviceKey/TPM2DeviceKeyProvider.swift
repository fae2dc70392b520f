import Foundation
import Cipher

/// The device key sealed to a TPM 2.0 (tpm2-tools), optionally bound to PCR values.
///
/// ``seal(_:to:pcrs:tcti:)`` creates a sealed-data object under the owner hierarchy's primary
/// key (ECC P-256, re-created from the TPM's seed at every use, so nothing but the object's
/// public and encrypted private parts is stored: `PREFIX.pub`, `PREFIX.priv`). Only the same TPM
/// unseals it, so the data directory and these files copied to another machine open nothing;
/// with PCRs the TPM also refuses once a measured component (firmware, boot loader, kernel)
/// changed. The TPM is reached as tpm2-tools reach it: `$TPM2TOOLS_TCTI` or `tcti` (for
/// example `swtpm:host=127.0.0.1,port=2321`, or `device:/dev/tpmrm0`).
public struct TPM2DeviceKeyProvider: DeviceKeyProvider {
    /// `PREFIX` of `PREFIX.pub` and `PREFIX.priv`.
    public let sealedPath: String
    /// PCRs of the SHA-256 bank the key is bound to (empty: none).
    public let pcrs: [Int]
    /// The TCTI (nil: `$TPM2TOOLS_TCTI` or the tools' default).
    public let tcti: String?

    public init(sealedPath: String, pcrs: [Int] = [], tcti: String? = nil) {
        self.sealedPath = VaultPaths.absolute(sealedPath)
        self.pcrs = pcrs
        self.tcti = tcti
    }

    var pcrSelection: String { "sha256:" + pcrs.map(String.init).joined(separator: ",") }

    public func deviceKey() throws -> SecretBytes {
        let tools = try Self.tools()
        return try Self.withScratch { scratch in
            try Self.createPrimary(tools, scratch: scratch, tcti: tcti)
            try Self.check(Self.run([tools.load, "-C", scratch + "/primary.ctx", "-u", sealedPath + ".pub", "-r", sealedPath + ".priv",
                                     "-c", scratch + "/key.ctx"], tcti: tcti), "load the sealed device key \(sealedPath)")
            Self.flush(tools, tcti: tcti)
            defer { Self.flush(tools, tcti: tcti) }
            var arguments = [tools.unseal, "-c", scratch + "/key.ctx"]
            if !pcrs.isEmpty { arguments += ["-p", "pcr:" + pcrSelection] }
            let result = try Self.run(arguments, tcti: tcti, maxOutput: 128)
            guard result.status == 0 else {
                result.output.wipe()
                if result.error.contains("POLICY_FAIL") || result.error.contains("0x99d") || result.error.contains("policy") {
                    throw VaultError.deviceKey("the TPM refused to unseal the device key: PCRs \(pcrs.map(String.init).joined(separator: ",")) differ from their values at sealing (firmware, boot loader or kernel changed, or this is another machine); re-seal with `securefoundation vault migrate-device-key` from a trusted state, or restore the previous boot chain")
                }
                throw VaultError.deviceKey("the TPM could not unseal the device key \(sealedPath) (exit \(result.status)): \(result.error)")
            }
            guard result.output.count == 32 else {
                result.output.wipe()
                throw VaultError.deviceKey("the TPM unsealed \(result.output.count) bytes, not a 32-byte device key")
            }
            return result.output
        }
    }

    /// Seals `key` to the TPM: writes `PREFIX.pub` and `PREFIX.priv` (0600), bound to `pcrs`'
    /// current values when given.
    /// - Parameters:
    ///   - key: The 32-byte device key.
    ///   - prefix: The path prefix of the two files.
    ///   - pcrs: The PCRs (0-23) to bind the key to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`).
    /// - Throws: ``VaultError/invalidArgument(_:)`` for a key that is not 32 bytes or a PCR out of
    ///   range, ``VaultError/deviceKey(_:)`` when the TPM tools are missing or fail.
    public static func seal(_ key: SecretBytes, to prefix: String, pcrs: [Int] = [], tcti: String? = nil) throws {
        guard key.count == 32 else { throw VaultError.invalidArgument("a device key of \(key.count) bytes") }
        guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw VaultError.invalidArgument("PCRs are 0-23") }
        let tools = try tools()
        let prefix = VaultPaths.absolute(prefix)
        try VaultError.call { try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(prefix)) }
        try withScratch { scratch in
            try createPrimary(tools, scratch: scratch, tcti: tcti)
            var create = [tools.create, "-C", scratch + "/primary.ctx", "-g", "sha256", "-i", "-",
                          "-u", scratch + "/key.pub", "-r", scratch + "/key.priv"]
            if !pcrs.isEmpty {
                let selection = "sha256:" + pcrs.map(String.init).joined(separator: ",")
                try check(run([tools.createpolicy, "--policy-pcr", "-l", selection, "-L", scratch + "/policy.dat"], tcti: tcti), "read the PCRs")
                create += ["-L", scratch + "/policy.dat", "-a", "fixedtpm|fixedparent|noda"]
            }
            try check(run(create, input: key, tcti: tcti), "seal the device key")
            flush(tools, tcti: tcti)
            for suffix in [".pub", ".priv"] {
                let bytes = try VaultError.call { try SecureFile.read(scratch + "/key" + suffix, maxLength: 1 << 16) }
                try VaultError.call { try SecureFile.writeAtomically(bytes, to: prefix + suffix) }
            }
        }
    }

    struct Tools {
        var createprimary, create, load, unseal, createpolicy, flushcontext: String
    }

    static func tools() throws -> Tools {
        guard let createprimary = ExternalTool.find("tpm2_createprimary"), let create = ExternalTool.find("tpm2_create"),
              let load = ExternalTool.find("tpm2_load"), let unseal = ExternalTool.find("tpm2_unseal"),
              let createpolicy = ExternalTool.find("tpm2_createpolicy"), let flushcontext = ExternalTool.find("tpm2_flushcontext") else {
            throw VaultError.deviceKey("tpm2-tools is not installed (Debian: apt-get install tpm2-tools)")
        }
        return Tools(createprimary: createprimary, create: create, load: load, unseal: unseal, createpolicy: createpolicy,
                     flushcontext: flushcontext)
    }

    /// Flushes transient objects and sessions the tools left loaded (without a resource manager,
    /// as with a socket TCTI, they would fill the TPM's few object slots).
    static func flush(_ tools: Tools, tcti: String?) {
        for flag in ["-t", "-s"] { (try? run([tools.flushcontext, flag], tcti: tcti))?.output.wipe() }
    }

    static func createPrimary(_ tools: Tools, scratch: String, tcti: String?) throws {
        flush(tools, tcti: tcti)
        defer { flush(tools, tcti: tcti) }
        try check(run([tools.createprimary, "-C", "o", "-g", "sha256", "-G", "ecc256", "-c", scratch + "/primary.ctx"], tcti: tcti),
                  "create the TPM's primary key (is the TPM reachable? TCTI \(tcti ?? ProcessInfo.processInfo.environment["TPM2TOOLS_TCTI"] ?? "default"))")
    }

    static func run(_ arguments: [String], input: SecretBytes? = nil, tcti: String?, maxOutput: Int = 65536) throws -> ExternalTool.Result {
        var environment: [String: String] = [:]
        if let tcti { environment["TPM2TOOLS_TCTI"] = tcti }
        return try ExternalTool.run(arguments, input: input, maxOutput: maxOutput, environment: environment)
    }

    static func check(_ result: ExternalTool.Result, _ what: String) throws {
        result.output.wipe()
        guard result.status == 0 else { throw VaultError.deviceKey("the TPM could not \(what) (exit \(result.status)): \(result.error)") }
    }

    /// A private scratch directory for TPM context files, removed afterwards.
    static func withScratch<Result>(_ body: (String) throws -> Result) throws -> Result {
        var template = Array((NSTemporaryDirectory() + "/sf-tpm-XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else { throw VaultError.io("mkdtemp: \(String(cString: strerror(errno)))") }
        let scratch = String(cString: created)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        return try body(scratch)
    }
}
