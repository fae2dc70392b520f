/// SecureFoundation: application-level data security for Swift.
///
/// This umbrella module re-exports every capability module.
@_exported import Cipher
@_exported import Shredder
@_exported import Age
@_exported import Vault
@_exported import Keychain
@_exported import ProtectedFiles
@_exported import UnlockAgent
