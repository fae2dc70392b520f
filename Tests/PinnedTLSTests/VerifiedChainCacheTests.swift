import Crypto
import Foundation
import NIOCore
import SwiftASN1
import Testing
import TestSupport
import X509
@testable import PinnedTLS
import NIOConcurrencyHelpers

/// A clock a test moves.
final class TestClock: Sendable {
    private let box: NIOLockedValueBox<Date>
    init(_ date: Date) { box = NIOLockedValueBox(date) }
    var now: Date { box.withLockedValue { $0 } }
    func set(_ date: Date) { box.withLockedValue { $0 = date } }
    var function: @Sendable () -> Date {
        let box = self.box
        return { box.withLockedValue { $0 } }
    }
}

/// The cache of validated chains never vouches for anything a full validation would refuse.
@Suite("Verified chain cache", .enabled(if: Tools.available, "needs openssl (apt-get install openssl)"), .onOwnThreads)
struct VerifiedChainCacheTests {
    let pki: TestPKI
    let root: Certificate
    let chain: [Certificate]

    init() throws {
        pki = try TestPKI.get()
        root = try pki.certificate("root")
        chain = try PEMFiles.certificates(atPath: pki.path("leaf-chain.pem"))
    }

    /// The lookup the TLS callback builds: the digest of the presented DER.
    func lookup(_ cache: VerifiedChainCache, _ presented: [Certificate]) throws -> CacheLookup {
        let ders = try presented.map { certificate -> [UInt8] in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return serializer.serializedBytes
        }
        return CacheLookup(cache: cache, presentedDigest: VerifiedChainCache.digest(presentedDER: ders))
    }

    func policy(anchors: TrustAnchors, pins: PinSet? = nil, clock: TestClock? = nil,
                source: (any AnchorSource)? = nil) throws -> TrustPolicy {
        var now: @Sendable () -> Date = { Date() }
        if let clock { now = { clock.now } }
        return TrustPolicy(hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: anchors, pins: pins)],
                           defaultAnchors: nil, anchorSource: source, clock: now)
    }

    func refusal(_ body: () async throws -> TrustEvaluation) async -> TLSTrustError.Reason? {
        do {
            _ = try await body()
            return nil
        } catch let error as TLSTrustError {
            return error.reason
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    /// An intermediate with the real one's name and extensions, but another key (a forgery that
    /// a cache keyed on names or on the leaf alone would confuse with the real one).
    func forgedIntermediate() throws -> Certificate {
        let real = try pki.certificate("inter")
        let key = P256.Signing.PrivateKey()
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: real.notValidBefore, notValidAfter: real.notValidAfter, issuer: real.subject,
            subject: real.subject, signatureAlgorithm: .ecdsaWithSHA256, extensions: real.extensions,
            issuerPrivateKey: .init(key))
    }

    @Test("A cached good chain: the same leaf with a forged intermediate, or Honest Abe's chain, is still refused")
    func sameLeafOtherIntermediate() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        let policy = try policy(anchors: .only([root]))
        let good = try await policy.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(good.validatedChain.last == root)
        #expect(cache.count == 1)
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain))?.validatedChain
                == good.validatedChain)

        let forged = [chain[0], try forgedIntermediate()]
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, forged)) == nil)
        let reason = await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: forged,
                                                               cache: try lookup(cache, forged)) }
        #expect(reason != nil)
        // The leaf alone (its intermediate left out) is not the cached chain either.
        #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: [chain[0]],
                                                          cache: try lookup(cache, [chain[0]])) } == .untrustedAnchor)
        let abe = try PEMFiles.certificates(atPath: pki.path("abe-leaf.pem"))
        #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: abe,
                                                          cache: try lookup(cache, abe)) } == .untrustedAnchor)
        #expect(cache.count == 1)
    }

    @Test("A chain cached under one anchor is refused under another (policy replaced, same cache)")
    func anotherAnchor() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        _ = try await policy(anchors: .only([root])).evaluate(host: "localhost", port: 443, presented: chain,
                                                              cache: lookup(cache, chain))
        let abePolicy = try policy(anchors: .only([try pki.certificate("abe")]))
        #expect(try abePolicy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
        #expect(await refusal { try await abePolicy.evaluate(host: "localhost", port: 443, presented: self.chain,
                                                             cache: try lookup(cache, self.chain)) } == .untrustedAnchor)
        // Client authentication against another anchor, same cache: refused too.
        let clientChain = try PEMFiles.certificates(atPath: pki.path("client-chain.pem"))
        _ = try await ClientAuthentication(anchors: .only([root])).evaluate(
            peer: "peer", presented: clientChain, cache: lookup(cache, clientChain))
        let abeClients = ClientAuthentication(anchors: .only([try pki.certificate("abe")]))
        #expect(try abeClients.cachedAcceptance(cache: lookup(cache, clientChain)) == nil)
        #expect(await refusal { try await abeClients.evaluate(peer: "peer", presented: clientChain,
                                                              cache: try lookup(cache, clientChain)) } == .untrustedAnchor)
    }

    @Test("Pins are checked at every use: a policy with other pins refuses the cached chain")
    func pinsRechecked() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        let backup = try pki.pin("backup", isKey: true)
        let matching = try policy(anchors: .only([root]), pins: try PinSet(pins: [try pki.pin("root"), backup]))
        let accepted = try await matching.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(accepted.matchedPin == (try pki.pin("root")))
        #expect(try matching.cachedAcceptance(host: "localhost", cache: lookup(cache, chain))?.matchedPin
                == (try pki.pin("root")))

        let otherPin = SPKIPin("sha256/" + Data(repeating: 7, count: 32).base64EncodedString())!
        let collector = ReportCollector()
        var strict = try policy(anchors: .only([root]), pins: try PinSet(pins: [backup, otherPin]))
        strict.reporter = collector.reporter()
        #expect(try strict.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
        #expect(await refusal { try await strict.evaluate(host: "localhost", port: 443, presented: self.chain,
                                                          cache: try lookup(cache, self.chain)) } == .noPinMatched)
        #expect(collector.reports.count == 1)

        // Report mode and an expired pin set are never decided from the cache: they report.
        let reporting = try policy(anchors: .only([root]), pins: try PinSet(pins: [backup, otherPin], mode: .report))
        #expect(try reporting.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
        let expired = try policy(anchors: .only([root]),
                                 pins: try PinSet(pins: [backup, otherPin], expires: Date(timeIntervalSince1970: 0)))
        #expect(try expired.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
    }

    @Test("A chain that expires between two handshakes is refused as expired (clock injected); not yet valid too")
    func expiresBetweenHandshakes() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        let clock = TestClock(Date())
        let policy = try policy(anchors: .only([root]), clock: clock)
        _ = try await policy.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) != nil)

        clock.set(chain[0].notValidAfter.addingTimeInterval(1))
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
        #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: self.chain,
                                                          cache: try lookup(cache, self.chain)) } == .expired)
        #expect(cache.count == 0)

        // Valid again: validated in full and cached again; then before the leaf's start.
        clock.set(Date())
        _ = try await policy.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(cache.count == 1)
        clock.set(chain[0].notValidBefore.addingTimeInterval(-1))
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil)
        #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: self.chain,
                                                          cache: try lookup(cache, self.chain)) } == .notYetValid)

        // A client chain likewise.
        let clientChain = try PEMFiles.certificates(atPath: pki.path("client-chain.pem"))
        clock.set(Date())
        let clients = ClientAuthentication(anchors: .only([root]), clock: clock.function)
        _ = try await clients.evaluate(peer: "peer", presented: clientChain, cache: lookup(cache, clientChain))
        #expect(try clients.cachedAcceptance(cache: lookup(cache, clientChain)) != nil)
        clock.set(clientChain[0].notValidAfter.addingTimeInterval(1))
        #expect(try clients.cachedAcceptance(cache: lookup(cache, clientChain)) == nil)
        #expect(await refusal { try await clients.evaluate(peer: "peer", presented: clientChain,
                                                           cache: try lookup(cache, clientChain)) } == .expired)
    }

    @Test("Refusals are never cached; a chain cached for one name is checked again for another")
    func failuresNotCached() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        let policy = TrustPolicy(defaultAnchors: .only([root]))
        let wrong = try PEMFiles.certificates(atPath: pki.path("wrongname-chain.pem"))
        for _ in 0..<2 {
            #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: wrong,
                                                              cache: try lookup(cache, wrong)) } == .hostnameMismatch)
            #expect(cache.count == 0)
        }
        _ = try await policy.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(try policy.cachedAcceptance(host: "other.example", cache: lookup(cache, chain)) == nil)
        #expect(await refusal { try await policy.evaluate(host: "other.example", port: 443, presented: self.chain,
                                                          cache: try lookup(cache, self.chain)) } == .hostnameMismatch)
        #expect(cache.count == 1)
    }

    @Test("Keychain anchors are resolved at every handshake: an anchor replaced under its label is not trusted from the cache")
    func keychainAnchorReplaced() async throws {
        let cache = VerifiedChainCache(capacity: 16)
        let stored = NIOLockedValueBox([root])
        let source = ClosureAnchorSource { _ in stored.withLockedValue { $0 } }
        let policy = try policy(anchors: TrustAnchors(keychainLabels: ["corp"]), source: source)
        _ = try await policy.evaluate(host: "localhost", port: 443, presented: chain, cache: lookup(cache, chain))
        #expect(try policy.cachedAcceptance(host: "localhost", cache: lookup(cache, chain)) == nil,
                "keychain anchors are never resolved on the event loop")
        let abe = try pki.certificate("abe")
        stored.withLockedValue { $0 = [abe] }
        #expect(await refusal { try await policy.evaluate(host: "localhost", port: 443, presented: self.chain,
                                                          cache: try lookup(cache, self.chain)) } == .untrustedAnchor)
    }

    @Test("Bounded: the least recently used entry goes first")
    func boundedLRU() throws {
        let cache = VerifiedChainCache(capacity: 2)
        let anchors = try TrustAnchors.only([root]).resolve(source: nil)
        let keys = try ["a", "b", "c"].map { name in
            try lookup(cache, chain).key(serverName: name, anchors: anchors)
        }
        cache.insert(keys[0], validatedChain: chain + [root])
        cache.insert(keys[1], validatedChain: chain + [root])
        #expect(cache.lookup(keys[0], now: Date()) != nil)
        cache.insert(keys[2], validatedChain: chain + [root])
        #expect(cache.count == 2)
        #expect(cache.lookup(keys[1], now: Date()) == nil)
        #expect(cache.lookup(keys[0], now: Date()) != nil)
        #expect(cache.lookup(keys[2], now: Date()) != nil)
        let off = VerifiedChainCache(capacity: 0)
        off.insert(keys[0], validatedChain: chain + [root])
        #expect(off.count == 0)
    }

    @Test("Over TLS: the second handshake is decided from the cache; a server that then presents Honest Abe's chain is refused")
    func overTLS() async throws {
        let backup = try pki.pin("backup", isKey: true)
        let pins = try PinSet(pins: [try pki.pin("root"), backup])
        let clientAuthentication = ClientAuthentication(anchors: .only([root]), pins: pins)
        let server = try await PinnedTLSServer.bind(identity: try pki.identity("leaf"),
                                                    clientAuthentication: clientAuthentication,
                                                    handshakeTimeout: .seconds(30))
        let seen = NIOLockedValueBox<[[Certificate]?]>([])
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run { connection in
                seen.withLockedValue { $0.append(connection.peerChain) }
                try await connection.channel.executeThenClose { _, outbound in
                    try await outbound.write(ByteBuffer(string: "ok"))
                }
            }
        }
        let policy = try policy(anchors: .only([root]), pins: pins)
        let client = try PinnedTLSClient(policy: policy, identity: try pki.identity("client"))
        for _ in 0..<3 {
            let connection = try await client.connect(host: "127.0.0.1", port: server.port, serverName: "localhost",
                                                      timeout: .seconds(30))
            #expect(connection.peerChain.count == 3)
            #expect(connection.evaluation.matchedPin == (try pki.pin("root")))
            let received = try await withTimeout(30) {
                try await connection.channel.executeThenClose { inbound, _ in
                    var text = ""
                    for try await var buffer in inbound { text += buffer.readString(length: buffer.readableBytes) ?? "" }
                    return text
                }
            }
            #expect(received == "ok")
        }
        #expect(client.verifiedChains?.count == 1)
        await server.close()
        _ = await running.result
        #expect(seen.withLockedValue { $0 }.count == 3)
        #expect(seen.withLockedValue { $0 }.allSatisfy { $0?.count == 3 })

        // The same client, a server with Honest Abe's certificate.
        let abe = try PEMFiles.identity(certificatePath: pki.path("abe-leaf.pem"), keyPath: pki.path("abe-leaf.key"))
        let mitm = try await PinnedTLSServer.bind(identity: abe, handshakeTimeout: .seconds(30))
        let mitmRunning = Task(executorPreference: TestExecutor.shared) {
            try await mitm.run { connection in try await connection.channel.executeThenClose { _, _ in } }
        }
        do {
            _ = try await client.connect(host: "127.0.0.1", port: mitm.port, serverName: "localhost", timeout: .seconds(30))
            Issue.record("Honest Abe's server was accepted")
        } catch let error as TLSTrustError {
            #expect(error.reason == .untrustedAnchor)
        }
        await mitm.close()
        _ = await mitmRunning.result
    }
}
