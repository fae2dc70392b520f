import Cipher

// The helper-program runner (`ExternalTool`) lives in Cipher's platform layer, beside the one
// owner of posix_spawn; the device-key providers report its failures as `VaultError.deviceKey`.
extension VaultError {
    /// Runs `body`, reporting a helper program that could not be run as a device-key error.
    static func tool<Result>(_ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let failure as ExternalTool.Failure { throw VaultError.deviceKey(failure.message) }
    }
}
