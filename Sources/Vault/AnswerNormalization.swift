import Foundation
import Cipher

/// Normalization of security answers before key derivation, so that answers typed differently
/// but meaning the same derive the same key: Unicode NFKC, case folding, leading and trailing
/// whitespace removed and inner runs of whitespace collapsed to one space.
///
/// "  Fluffy   the CAT " and "fluffy the cat" are equal; so are "ﬁdo" and "FIDO".
///
/// Memory: answers made only of ASCII bytes are normalized byte by byte inside `SecretBytes`
/// (for ASCII, NFKC is the identity and case folding is lowercasing), so no copy is left in
/// ordinary memory. Answers with other characters need Foundation's Unicode tables, which work
/// on `String`; those temporary strings cannot be wiped and may stay in freed memory until it is
/// reused.
public enum AnswerNormalization {
    /// The normalized UTF-8 bytes of `answer`.
    /// - Parameter answer: The answer as typed, in UTF-8.
    /// - Returns: The normalized form, in new `SecretBytes` (empty if the answer is only whitespace).
    /// - Throws: ``VaultError/invalidArgument(_:)`` when the bytes are not valid UTF-8.
    public static func normalize(_ answer: SecretBytes) throws(VaultError) -> SecretBytes {
        let isASCII = answer.withUnsafeBytes { bytes in bytes.allSatisfy { $0 < 0x80 } }
        if isASCII { return normalizeASCII(answer) }
        let text: String? = answer.withUnsafeBytes { bytes in
            String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self)
        }
        guard let text else { throw VaultError.invalidArgument("an answer is not valid UTF-8") }
        return normalize(text)
    }

    /// The normalized UTF-8 bytes of `answer` (see the type's discussion about `String` copies).
    /// - Parameter answer: The answer as typed.
    /// - Returns: Its normalized bytes, in locked memory.
    public static func normalize(_ answer: String) -> SecretBytes {
        var folded = answer.precomposedStringWithCompatibilityMapping
            .folding(options: [.caseInsensitive], locale: nil)
            .precomposedStringWithCompatibilityMapping
        let words = folded.split(whereSeparator: { $0.isWhitespace })
        var joined = words.joined(separator: " ")
        let result = SecretBytes(utf8: joined)
        folded = ""
        joined = ""
        return result
    }

    private static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    private static func normalizeASCII(_ answer: SecretBytes) -> SecretBytes {
        answer.withUnsafeBytes { source in
            var length = 0
            let scratch = SecretBytes(count: source.count) { target in
                var pendingSpace = false
                for byte in source {
                    if isASCIIWhitespace(byte) {
                        pendingSpace = length > 0
                        continue
                    }
                    if pendingSpace { target[length] = 0x20; length += 1; pendingSpace = false }
                    target[length] = (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
                    length += 1
                }
            }
            let result = scratch.slice(0..<length)
            scratch.wipe()
            return result
        }
    }
}
