/// SecureFoundation: application-level data security for Swift.
///
/// This umbrella module re-exports Cipher, Shredder, Age, Vault, Keychain, ProtectedFiles and
/// UnlockAgent. PinnedTLS and DeviceSharing (they pull SwiftNIO), EmbeddedSecrets and Migration
/// are imported on their own; README.md and docs/ARCHITECTURE.md say the same.
@_exported import Cipher
@_exported import Shredder
@_exported import Age
@_exported import Vault
@_exported import Keychain
@_exported import ProtectedFiles
@_exported import ProtectedDatabase
@_exported import UnlockAgent
