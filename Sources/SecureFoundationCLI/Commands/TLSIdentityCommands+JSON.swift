import Foundation

// The `--json` shapes of `tls list` and `tls keys` (docs/CLI.md, "JSON output").

extension TLSListCommand {
    /// `tls list --json`: `{"items": [{"accessibility", "kind", "label", "summary"}], "unreadable": N, "version": 1}`.
    struct ListJSON: Encodable {
        struct Item: Encodable {
            var kind: String
            var label: String
            var accessibility: String
            var summary: String?
        }
        var items: [Item]
        var unreadable: Int
        var version = JSONOutput.schemaVersion
    }
}

extension TLSKeysCommand {
    /// `tls keys --json`: `{"keys": [KEY], "unreadable": N, "version": 1}`; a KEY has
    /// `location` (keychain, tpm, pkcs11), `kind`, and `label`, `accessibility`, `keyAt` (the
    /// TPM or token location of an identity's key) or `uri`, `sensitive`, `extractable`.
    struct KeysJSON: Encodable {
        struct Key: Encodable {
            var location: String
            var kind: String
            var label: String?
            var accessibility: String?
            var keyAt: String?
            var uri: String?
            var sensitive: Bool?
            var extractable: Bool?
        }
        var keys: [Key]
        var unreadable: Int
        var version = JSONOutput.schemaVersion
    }
}
