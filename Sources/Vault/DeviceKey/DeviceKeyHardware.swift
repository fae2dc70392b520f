import Foundation
import Cipher

/// A device-key provider kept beside its hardware, outside this module: the TPM 2.0 and
/// PKCS #11 providers live in `HardwareDeviceKeys`, which brings the PKCS #11 loader, the TPM
/// tools and X.509 with it. A program that uses them (the command line, the unlock agent's
/// daemon) registers them once with ``DeviceKeyHardware/register(_:for:)``
/// (`HardwareDeviceKeys.register()`); `Vault` and the umbrella module link none of that.
public protocol HardwareDeviceKeyBackend: Sendable {
    /// The provider that reads the key `record` names (a record of the kind registered for).
    /// - Parameter record: The provider record (its sealed path, PCRs, module and URI).
    /// - Returns: The provider.
    func provider(for record: DeviceKeyRecord) -> any DeviceKeyProvider

    /// Seals `key` where `record` says, then reads it back.
    /// - Parameters:
    ///   - key: The 32-byte device key.
    ///   - record: Where it goes (its sealed path, PCRs, module and URI).
    ///   - refusing: Directories a loaded module must not be in (the data directory).
    ///   - tcti: The TPM's TCTI (nil: the environment's).
    /// - Throws: ``VaultError`` naming what failed.
    func seal(_ key: SecretBytes, as record: DeviceKeyRecord, refusing: [String], tcti: String?) throws(VaultError)

    /// Whether the record's hardware fields are well formed (a `pkcs11:` URI that parses).
    /// - Parameter record: The record, read from the data directory.
    /// - Returns: false for a record to refuse as corrupted.
    func accepts(_ record: DeviceKeyRecord) -> Bool
}

/// The registry of ``HardwareDeviceKeyBackend``s, and the token PIN a process holds for them.
public enum DeviceKeyHardware {
    private static let backends = Protected<[DeviceKeyRecord.Kind: any HardwareDeviceKeyBackend]>([:])
    private static let held = Protected<SecretBytes?>(nil)

    /// Makes `backend` the provider of records of `kind` for this process (replacing one
    /// registered before). Call it before a vault with such a device key is opened.
    /// - Parameters:
    ///   - backend: The provider's backend.
    ///   - kind: `.tpm2` or `.pkcs11`.
    public static func register(_ backend: any HardwareDeviceKeyBackend, for kind: DeviceKeyRecord.Kind) {
        backends.withLock { $0[kind] = backend }
    }

    /// The backend registered for `kind`, or nil.
    /// - Parameter kind: The record kind.
    /// - Returns: The backend.
    public static func registered(_ kind: DeviceKeyRecord.Kind) -> (any HardwareDeviceKeyBackend)? {
        backends.withLock { $0[kind] }
    }

    /// The backend registered for `kind`.
    /// - Throws: ``VaultError/deviceKey(_:)`` saying what to link and call when none is.
    static func backend(for kind: DeviceKeyRecord.Kind) throws(VaultError) -> any HardwareDeviceKeyBackend {
        guard let backend = registered(kind) else { throw notRegistered(kind) }
        return backend
    }

    /// The refusal of a `kind` nobody registered: what to link and call.
    static func notRegistered(_ kind: DeviceKeyRecord.Kind) -> VaultError {
        VaultError.deviceKey("the \(kind.rawValue) device-key provider is not part of this program: link the HardwareDeviceKeys module and call HardwareDeviceKeys.register() before opening the vault (the securefoundation command does)")
    }

    /// Holds `pin` in this process for the device key's token, in place of the one held before
    /// (which is wiped); nil forgets it. A PKCS #11 provider made without a PIN source uses it
    /// before the environment variable. The unlock agent holds the PIN `agent unlock
    /// --token-pin` gives it until it stops, so that a token whose PIN is typed by a person
    /// serves a service without the PIN in a file or the environment.
    /// - Parameter pin: The token's user PIN (a copy is kept; the caller wipes its own), or nil.
    public static func holdPIN(_ pin: SecretBytes?) {
        let copy = pin.map { pin in SecretBytes(count: pin.count) { target in pin.withUnsafeBytes { target.copyMemory(from: $0) } } }
        let old = held.withLock { value -> SecretBytes? in
            let old = value
            value = copy
            return old
        }
        old?.wipe()
    }

    /// A copy of the held PIN (the caller wipes it), or nil.
    public static func heldPIN() -> SecretBytes? {
        held.withLock { value in value.map { pin in SecretBytes(count: pin.count) { target in pin.withUnsafeBytes { target.copyMemory(from: $0) } } } }
    }
}

/// The provider of a TPM or PKCS #11 record: the registered backend's, looked up at each read
/// (so a program may register after a record was loaded); without one, every read says what
/// to link.
struct HardwareDeviceKeyProvider: DeviceKeyProvider {
    let record: DeviceKeyRecord
    /// Where the backend is found: the registry (a test gives its own).
    var lookup: @Sendable (DeviceKeyRecord.Kind) -> (any HardwareDeviceKeyBackend)? = { DeviceKeyHardware.registered($0) }

    func deviceKey() throws -> SecretBytes {
        guard let backend = lookup(record.kind) else { throw DeviceKeyHardware.notRegistered(record.kind) }
        return try backend.provider(for: record).deviceKey()
    }

    var isOnRemovableHardware: Bool { record.kind == .pkcs11 }
}
