import HardwareKeys

/// The helper-program runner lives in HardwareKeys (the TPM plumbing shares it); the device-key
/// providers reach it by this name and report its failures as ``VaultError/deviceKey(_:)``.
typealias ExternalTool = HardwareKeys.ExternalTool

extension VaultError {
    /// Runs `body`, reporting a helper program that could not be run as a device-key error.
    static func tool<Result>(_ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let failure as ExternalTool.Failure { throw VaultError.deviceKey(failure.message) }
    }
}
