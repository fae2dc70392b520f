import CPlatform

/// The OS CSPRNG: `getrandom(2)` on Linux, `getentropy(2)` on Darwin (see CPlatform).
/// Returns an errno value on failure, nil on success.
enum SystemRandom {
    static func fill(_ pointer: UnsafeMutableRawPointer, _ count: Int) -> Int32? {
        let code = sf_random_bytes(pointer, count)
        return code == 0 ? nil : code
    }
}
