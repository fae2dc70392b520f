/// Generated code reads `SecretBytes` from Cipher; importing EmbeddedSecrets is enough.
@_exported import Cipher
