import SwiftASN1

/// A bound on the work a PKCS#12 file can ask for before it is opened.
///
/// Every key derivation in a PKCS#12 file (its MAC key, and the PBE or PBKDF2 key of each
/// encrypted part) runs an iteration count written in the file. BoringSSL accepts up to 100
/// million per derivation, so a hostile file could hold an import for minutes. The counts in
/// the clear are read first and any above ``maxIterations`` refuses the file: in the PFX's
/// MacData, in PKCS#12 PBE parameters and in PBKDF2 parameters, wherever they are in the clear
/// (the AuthenticatedSafe and the plain SafeContents are walked, as are the octet strings that
/// hold them). A count inside an encrypted part is bounded only by BoringSSL once the part's
/// (bounded) outer key has decrypted it.
enum PKCS12Limits {
    /// openssl writes 2048, Windows accepts up to 600,000.
    static let maxIterations = 1_000_000
    static let maxNodes = 100_000

    /// - Throws: ``IdentityError/invalidPKCS12(_:)`` when the file does not parse as BER or asks
    ///   for more than ``maxIterations`` iterations.
    static func check(_ bytes: UnsafeRawBufferPointer) throws(IdentityError) {
        let root: ASN1Node
        do { root = try BER.parse(Array(bytes)) } catch { throw .invalidPKCS12("the bytes are not PKCS#12 (BER)") }
        var budget = maxNodes
        try walk(root, depth: 0, budget: &budget)
    }

    private static func walk(_ node: ASN1Node, depth: Int, budget: inout Int) throws(IdentityError) {
        budget -= 1
        guard budget > 0, depth < 40 else { throw .invalidPKCS12("it is nested too deeply or holds too many elements") }
        switch node.content {
        case .primitive(let content):
            // Octet strings may wrap DER (the AuthenticatedSafe, SafeContents, certificates).
            if node.identifier == .octetString, let inner = try? BER.parse(content) {
                try walk(inner, depth: depth + 1, budget: &budget)
            }
        case .constructed(let children):
            if node.identifier == .octetString {
                // A BER constructed octet string: its pieces, joined.
                var joined: [UInt8] = []
                for child in children { if case .primitive(let piece) = child.content { joined += piece } }
                if let inner = try? BER.parse(joined) { try walk(inner, depth: depth + 1, budget: &budget) }
                return
            }
            var previousWasOctetString = false
            for child in children {
                // MacData (digest, salt, iterations), pkcs-12PbeParams (salt, iterations) and
                // PBKDF2-params (salt, iterationCount, ...): a count follows the salt.
                if previousWasOctetString, child.identifier == .integer, case .primitive(let value) = child.content {
                    guard let count = integer(value), count <= maxIterations else {
                        throw .invalidPKCS12("it asks for more than \(maxIterations) key-derivation iterations")
                    }
                }
                previousWasOctetString = child.identifier == .octetString
                try walk(child, depth: depth + 1, budget: &budget)
            }
        }
    }

    /// A non-negative INTEGER of at most 4 significant bytes, or nil.
    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int? {
        var trimmed = bytes
        while trimmed.count > 1, trimmed.first == 0 { trimmed = trimmed.dropFirst() }
        guard let first = trimmed.first, first & 0x80 == 0, trimmed.count <= 4 else { return nil }
        return trimmed.reduce(0) { $0 << 8 | Int($1) }
    }
}
