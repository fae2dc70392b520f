import Crypto
import Foundation
import NIOConcurrencyHelpers
import X509

/// Chains that passed full validation (RFC 5280 and, for a server, its identity), so that a peer
/// presenting exactly the same certificates again does not pay for swift-certificates' chain
/// building and signature checks at every handshake.
///
/// What a hit may skip, and what it may not:
///
/// - The key is everything the validation depended on apart from the time: SHA-256 over every
///   presented certificate's DER (each preceded by its length), the name the leaf was checked
///   against (`nil` for a client), and the anchors exactly (the system store flag and each anchor
///   certificate, compared byte for byte). Another intermediate, another anchor, another name:
///   another key, a full validation.
/// - The validity period of every certificate of the validated chain is checked again at every
///   use against the policy's clock; an entry that is no longer current is dropped, and the
///   full validation then refuses with the exact reason.
/// - Only successes are stored. A refusal is never cached, as a success or at all.
/// - Pins are not part of the entry: they are checked again against the validated chain at every
///   handshake, as are the pin set's expiry and mode.
/// - A client or server owns its cache, created with its policy; a different policy is a
///   different client or server, with an empty cache.
///
/// Bounded: at most ``capacity`` entries, the least recently used one goes first.
final class VerifiedChainCache: Sendable {
    struct Key: Hashable, Sendable {
        /// SHA-256 over the presented certificates' DER, each preceded by its length.
        let presented: [UInt8]
        /// The name the leaf was checked against; `nil` for a client's chain.
        let serverName: String?
        /// Whether the system's root store was among the anchors.
        let system: Bool
        /// The anchor certificates, in the order the store was built (compared byte for byte).
        let anchors: [Certificate]
    }

    /// A validated chain and the window in which every certificate of it is valid.
    struct Entry: Sendable {
        let validatedChain: [Certificate]
        /// The `sha256/` pin of each certificate of ``validatedChain``, in its order (computed
        /// once: the pins of a policy are compared with these at every use).
        let pins: [SPKIPin]
        /// The latest `notValidBefore` of the chain.
        let notBefore: Date
        /// The earliest `notValidAfter` of the chain.
        let notAfter: Date

        init?(validatedChain: [Certificate]) {
            guard !validatedChain.isEmpty else { return nil }
            self.validatedChain = validatedChain
            pins = validatedChain.compactMap(SPKIPin.memoized)
            notBefore = validatedChain.map(\.notValidBefore).max() ?? .distantFuture
            notAfter = validatedChain.map(\.notValidAfter).min() ?? .distantPast
        }

        /// RFC 5280's check for every certificate of the chain: notValidBefore ≤ now ≤ notValidAfter.
        func isCurrent(at now: Date) -> Bool {
            notBefore <= now && now <= notAfter
        }
    }

    private struct State {
        var entries: [Key: (entry: Entry, lastUse: UInt64)] = [:]
        var tick: UInt64 = 0
    }

    /// The most entries kept.
    let capacity: Int
    private let state = NIOLockedValueBox(State())

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The digest that identifies a presented chain: SHA-256 over each DER encoding, each
    /// preceded by its length (so that no two different lists give the same input).
    static func digest(presentedDER: [[UInt8]]) -> [UInt8] {
        var hasher = SHA256()
        for der in presentedDER {
            var length = UInt64(der.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
            hasher.update(data: der)
        }
        return Array(hasher.finalize())
    }

    /// The validated chain stored under `key`, if it is still within every certificate's
    /// validity period at `now`; an entry that is not is removed.
    func lookup(_ key: Key, now: Date) -> [Certificate]? {
        entry(key, now: now)?.validatedChain
    }

    /// ``lookup(_:now:)`` with the chain's pins.
    func entry(_ key: Key, now: Date) -> Entry? {
        guard capacity > 0 else { return nil }
        return state.withLockedValue { state in
            guard let found = state.entries[key] else { return nil }
            guard found.entry.isCurrent(at: now) else {
                state.entries[key] = nil
                return nil
            }
            state.tick &+= 1
            state.entries[key] = (found.entry, state.tick)
            return found.entry
        }
    }

    /// Stores a chain that has just passed full validation under `key`.
    func insert(_ key: Key, validatedChain: [Certificate]) {
        guard capacity > 0, let entry = Entry(validatedChain: validatedChain) else { return }
        state.withLockedValue { state in
            if state.entries[key] == nil, state.entries.count >= capacity,
               let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                state.entries[oldest] = nil
            }
            state.tick &+= 1
            state.entries[key] = (entry, state.tick)
        }
    }

    /// Forgets every entry.
    func removeAll() {
        state.withLockedValue { $0.entries.removeAll() }
    }

    /// How many entries are kept.
    var count: Int { state.withLockedValue { $0.entries.count } }
}

/// A presented chain's identity in a cache, handed from the TLS callback to the evaluation.
struct CacheLookup: Sendable {
    let cache: VerifiedChainCache
    /// ``VerifiedChainCache/digest(presentedDER:)`` of the presented chain.
    let presentedDigest: [UInt8]

    func key(serverName: String?, anchors: ResolvedAnchors) -> VerifiedChainCache.Key {
        VerifiedChainCache.Key(presented: presentedDigest, serverName: serverName, system: anchors.system,
                               anchors: anchors.certificates)
    }
}
