#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether decryption expects ASCII armor.
public enum AgeArmorMode: Sendable {
    /// Detect it: input whose first non-whitespace byte is `-` is read as armor.
    case auto
    /// The input must be armored; anything else is an ``AgeError/armorFailure(_:)``.
    case required
    /// The input is binary.
    case none
}
