/// Comparison whose running time does not depend on where two inputs differ.
public enum ConstantTime {
    /// True when `a` and `b` hold the same bytes. Lengths are compared openly.
    /// - Parameters:
    ///   - a: The first bytes.
    ///   - b: The second bytes.
    /// - Returns: Whether both hold the same bytes.
    public static func equals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// True when the two byte collections hold the same bytes.
    /// - Parameters:
    ///   - a: The first bytes.
    ///   - b: The second bytes.
    /// - Returns: Whether both hold the same bytes.
    public static func equals<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool where A.Element == UInt8, B.Element == UInt8 {
        let left = Array(a), right = Array(b)
        return left.withUnsafeBytes { l in right.withUnsafeBytes { r in equals(l, r) } }
    }
}
