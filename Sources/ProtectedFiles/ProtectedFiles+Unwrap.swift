import Foundation
import Cipher
import Age

extension ProtectedFiles {
    /// The name errors give the file whose stanzas ``unwrapFileKey(stanzas:onlyClass:permit:)`` is given.
    package static let stanzaSource = "the file being decrypted"

    /// Unwraps the file key of a protected file from its header's stanzas alone, with the class
    /// identity, which never leaves this process: the unlock agent does this for
    /// `age-plugin-securefoundation`, so the real `age` opens protected files while the class
    /// identity stays in the agent.
    ///
    /// The class is the one the class stanza names; without a class stanza (a file written by
    /// `age -r CLASS_RECIPIENT`), `onlyClass`, else every class of the key table in turn. The
    /// file key is unwrapped only with that class's identity (current or retired), so a class
    /// stanza altered to name a weaker class unwraps nothing. The header MAC is not checked here
    /// (the caller has no header); `age` checks it with the key returned.
    /// - Parameters:
    ///   - stanzas: The header's stanzas (others than `X25519` and the class stanza are ignored).
    ///   - onlyClass: Serve only files of this class (nil: any).
    ///   - permit: Called before a class's identity is used; throws to refuse the class (the
    ///     agent's own lock state decides, as for its class keys).
    /// - Returns: The 16-byte file key.
    /// - Throws: ``ProtectedFileError/locked(_:_:)`` (or what `permit` throws) when the class is
    ///   unavailable; ``ProtectedFileError/tampered(path:reason:)`` for a malformed class stanza,
    ///   two of them, or a malformed `X25519` stanza; ``ProtectedFileError/invalidArgument(_:)``
    ///   for a file of another class than `onlyClass`;
    ///   ``ProtectedFileError/notProtectedFile(path:reason:)`` when no class identity unwraps it.
    ///   Untyped `throws`: what `permit` throws is passed on unchanged beside ``ProtectedFileError``.
    package func unwrapFileKey(stanzas: [AgeStanza], onlyClass: FileProtectionClass?,
                               permit: (FileProtectionClass) throws -> Void) throws -> SecretBytes {
        let source = Self.stanzaSource
        let declared = try ProtectionClassRecipient.declaredClass(in: stanzas, path: source)
        let wrapped = stanzas.filter { $0.type == "X25519" }
        guard !wrapped.isEmpty else {
            throw ProtectedFileError.notProtectedFile(path: source, reason: "its header has no X25519 stanza (it was not written to a protection class)")
        }
        let candidates: [FileProtectionClass]
        if let cls = declared {
            if let onlyClass, onlyClass != cls {
                throw ProtectedFileError.invalidArgument("the file is of class \(cls.name), and this identity opens \(onlyClass.name) files only; use an identity of class \(cls.name), or one without a class (`age -j securefoundation`)")
            }
            candidates = [cls]
        } else if let onlyClass {
            candidates = [onlyClass]
        } else {
            candidates = try table.load().compactMap { FileProtectionClass(name: $0.name) }
        }
        var unavailable: (any Error)?
        for cls in candidates {
            let identities: [any AgeIdentity]
            do {
                try permit(cls)
                identities = try self.identities(cls, path: source)
            } catch {
                // With one candidate its error is the answer; among several, a locked class may
                // be the file's, which is said when no other class opens it.
                if candidates.count == 1 { throw error }
                if unavailable == nil { unavailable = error }
                continue
            }
            for identity in identities {
                let key: SecretBytes?
                do { key = try identity.unwrap(stanzas: wrapped) } catch let error as AgeError {
                    throw Self.map(error, path: source, cls)
                }
                if let key { return key }
            }
        }
        if let unavailable { throw unavailable }
        if candidates.count == 1, let cls = candidates.first {
            throw ProtectedFileError.notProtectedFile(path: source, reason: "its file key is not wrapped to this vault's \(cls.name) key (written under another vault, or its class stanza was altered)")
        }
        throw ProtectedFileError.notProtectedFile(path: source, reason: "no class identity of this vault unwraps its file key (written under another vault?)")
    }
}
