import Foundation
import Cipher
import Shredder

/// Destruction of superseded and erased key material through the Shredder module's crypto-erase:
/// each file holding wrapped keys is overwritten in place with random bytes, synced, shredded and
/// unlinked. On copy-on-write or flash storage an overwrite in place is best effort; what makes
/// the data unrecoverable is that the wrappings are the only copies of the application key, and
/// the passcode and answer keys that open them are never stored.
enum Erasure {
    /// Destroys each existing file; missing files are skipped.
    /// - Throws: ``VaultError/io(_:)`` naming the files that could not be destroyed.
    @discardableResult
    static func destroy(_ paths: [String]) throws -> [ShredReport] {
        let existing = paths.filter { access($0, F_OK) == 0 }
        guard !existing.isEmpty else { return [] }
        do {
            return try CryptoErase.destroy(keyFiles: existing)
        } catch {
            // Never leave key material behind because the shredder refused the file: unlink it.
            for path in existing where access(path, F_OK) == 0 { unlink(path) }
            throw VaultError.io("crypto-erase of \(existing.joined(separator: ", ")) was incomplete (the files were unlinked): \(error)")
        }
    }
}
