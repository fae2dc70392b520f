import CSealAEAD

/// The key schedule of one sealed-data AEAD under one key (BoringSSL's AEAD context, through
/// CSealAEAD), kept in locked memory of its own that is zeroed when the schedule is freed.
///
/// A ``SecretBytes`` of 32 bytes makes its schedules on first use and keeps them until it is
/// wiped or freed (``SecretBytes/schedule(for:)``), so sealing a small value costs no key setup.
/// A seal or open in flight holds its own reference: a wipe during it lets it finish under the
/// right key, and the schedule's memory is zeroed when the last such call returns.
final class AEADSchedule: @unchecked Sendable {
    // Written once in init, then only read (BoringSSL's seal and open take the context as const).
    private let pointer: UnsafeMutableRawPointer
    private let allocated: Int
    private let locked: Bool

    /// The schedule of `algorithm` for the 32 bytes of `key`, or nil when `key` is not 32 bytes.
    init?(algorithm: SealAlgorithm, key: UnsafeRawBufferPointer) {
        let size = sf_seal_schedule_size()
        let (pointer, allocated, locked) = MemoryProtection.allocate(size)
        guard key.count == 32, let base = key.baseAddress,
              Int(bitPattern: pointer) % sf_seal_schedule_alignment() == 0,
              sf_seal_schedule_init(pointer, allocated, Int32(algorithm.rawValue), base.assumingMemoryBound(to: UInt8.self), key.count) == 1
        else {
            MemoryProtection.release(pointer, allocated, locked: locked)
            return nil
        }
        self.pointer = pointer
        self.allocated = allocated
        self.locked = locked
    }

    deinit {
        sf_seal_schedule_cleanup(pointer)
        MemoryProtection.release(pointer, allocated, locked: locked)
    }

    /// Seals `plaintext` into `ciphertext` (as many bytes) and the tag into `tag` (16 bytes).
    func seal(_ plaintext: UnsafeRawBufferPointer, into ciphertext: UnsafeMutableRawPointer, tag: UnsafeMutableRawPointer,
              nonce: UnsafeRawPointer, authenticating ad: UnsafeRawBufferPointer) -> Bool {
        sf_seal_schedule_seal(pointer, ciphertext.assumingMemoryBound(to: UInt8.self), tag.assumingMemoryBound(to: UInt8.self),
                              nonce.assumingMemoryBound(to: UInt8.self),
                              plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), plaintext.count,
                              ad.baseAddress?.assumingMemoryBound(to: UInt8.self), ad.count) == 1
    }

    /// Opens `ciphertext` with its 16-byte `tag` into `plaintext` (as many bytes). False when
    /// they do not authenticate; `plaintext` is then zeroed.
    func open(_ ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawPointer, into plaintext: UnsafeMutableRawPointer?,
              nonce: UnsafeRawPointer, authenticating ad: UnsafeRawBufferPointer) -> Bool {
        sf_seal_schedule_open(pointer, plaintext?.assumingMemoryBound(to: UInt8.self), nonce.assumingMemoryBound(to: UInt8.self),
                              ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self), ciphertext.count,
                              tag.assumingMemoryBound(to: UInt8.self),
                              ad.baseAddress?.assumingMemoryBound(to: UInt8.self), ad.count) == 1
    }
}
