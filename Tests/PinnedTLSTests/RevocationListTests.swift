import Foundation
import NIOCore
import Testing
import TestSupport
import X509
@testable import PinnedTLS

/// The device CA's revocation list: its DER (read back, and by openssl), the keychain record
/// beside the CA, and the TLS policy that checks it at each handshake, on both sides.
@Suite("Revocation lists of the device CA", .onOwnThreads)
struct RevocationListTests {
    let authority: CertificateAuthority
    let server: TLSIdentity
    let client: TLSIdentity

    init() throws {
        authority = try CertificateAuthority.createRoot(commonName: "Revocation test CA")
        server = try authority.issue(names: ["localhost"], usage: .server)
        client = try authority.issue(names: ["device-1"], usage: .client)
    }

    @Test("A signed list reads back: issuer, dates, number, key identifier, entries; only its CA verifies it")
    func roundTrip() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000.6)
        let entry = RevocationList.Entry(serialNumber: server.leaf.serialNumber, revocationDate: Date(timeIntervalSince1970: 1_799_999_000))
        let list = try authority.signRevocationList(entries: [entry], number: 7, validity: 86_400, now: now)
        let parsed = try RevocationList(derEncoded: list.derEncoded)
        #expect(parsed.issuer == authority.certificate.subject)
        #expect(parsed.thisUpdate == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(parsed.nextUpdate == Date(timeIntervalSince1970: 1_800_086_400))
        #expect(parsed.number == 7)
        #expect(parsed.entries == [entry])
        #expect(parsed.contains(server.leaf.serialNumber))
        #expect(!parsed.contains(client.leaf.serialNumber))
        let keyID = try #require(try authority.certificate.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(parsed.authorityKeyIdentifier == Array(keyID))
        #expect(parsed.isIssued(by: authority.certificate))
        let other = try CertificateAuthority.createRoot(commonName: "Revocation test CA")
        #expect(!parsed.isIssued(by: other.certificate), "same name, another key")
        #expect(try RevocationList(pemOrDER: Array(parsed.pemEncoded.utf8)) == parsed)
        let empty = try authority.signRevocationList(entries: [], number: 1)
        #expect(try RevocationList(derEncoded: empty.derEncoded).entries.isEmpty)
    }

    @Test("Hostile input: every truncation, trailing bytes, a flipped byte, garbage, oversize are refused or fail to verify, never crash")
    func hostileInput() throws {
        let list = try authority.signRevocationList(
            entries: [RevocationList.Entry(serialNumber: server.leaf.serialNumber, revocationDate: Date())], number: 3)
        let der = list.derEncoded
        for length in 0..<der.count {
            #expect(throws: IdentityError.self) { try RevocationList(derEncoded: Array(der.prefix(length))) }
        }
        #expect(throws: IdentityError.self) { try RevocationList(derEncoded: der + [0]) }
        var accepted = 0
        for index in 0..<der.count {
            var tampered = der
            tampered[index] ^= 0x01
            if let parsed = try? RevocationList(derEncoded: tampered), parsed.isIssued(by: authority.certificate) {
                accepted += 1
            }
        }
        #expect(accepted == 0)
        #expect(throws: IdentityError.self) { try RevocationList(pemOrDER: Array("not a list".utf8)) }
        #expect(throws: IdentityError.self) { try RevocationList(pemOrDER: [0x30, 0x84, 0x7F, 0xFF, 0xFF, 0xFF]) }
        do {
            _ = try RevocationList(derEncoded: [UInt8](repeating: 0x30, count: RevocationList.maxEncodedLength + 1))
            Issue.record("an oversized list was read")
        } catch {
            guard case .invalidRevocationList(let detail) = error else { Issue.record("\(error)"); return }
            #expect(detail.contains("larger than"))
        }
    }

    @Test("Revoking through the keychain: idempotent, numbers grow, another CA's certificate and the root refused")
    func revokeInKeychain() throws {
        let scratch = try TemporaryDirectory()
        let store = IdentityStore(keychain: try scratch.keychain())
        try authority.save(to: store)
        #expect(try authority.storedRevocationList(in: store) == nil)
        let first = try authority.revoke(server.leaf, in: store)
        #expect(first.added)
        #expect(first.list.number == 1)
        #expect(first.list.contains(server.leaf.serialNumber))
        let again = try authority.revoke(server.leaf, in: store)
        #expect(!again.added)
        #expect(again.list == first.list)
        let second = try authority.revoke(client.leaf, in: store)
        #expect(second.list.number == 2)
        #expect(second.list.entries.map(\.serialNumber) == [server.leaf.serialNumber, client.leaf.serialNumber])
        #expect(try authority.storedRevocationList(in: store) == second.list)
        let refreshed = try authority.refreshRevocationList(in: store)
        #expect(refreshed.number == 3)
        #expect(refreshed.entries == second.list.entries)
        let other = try CertificateAuthority.createRoot(commonName: "Other CA")
        let foreign = try other.issue(names: ["localhost"])
        #expect(throws: IdentityError.self) { try authority.revoke(foreign.leaf, in: store) }
        #expect(throws: IdentityError.self) { try authority.revoke(authority.certificate, in: store) }
        // Found by label and by pin; unknown names are notFound.
        try store.storeCertificates(server.chain, label: "web")
        #expect(try CertificateAuthority.storedCertificate(named: "web", in: store) == server.leaf)
        #expect(try CertificateAuthority.storedCertificate(named: SPKIPin(certificate: server.leaf).description, in: store) == server.leaf)
        #expect(throws: IdentityError.notFound(kind: .certificate, label: "nobody")) {
            try CertificateAuthority.storedCertificate(named: "nobody", in: store)
        }
    }

    // MARK: Handshakes

    /// Writes `list` to `path` atomically (a new inode, as `tls crl -o` does).
    static func install(_ list: RevocationList, at path: String, der: Bool = false) throws {
        let bytes = der ? list.derEncoded : Array(list.pemEncoded.utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Runs our server with `identity` (requiring client certificates under `clientAnchors` when
    /// given), runs `body` against its port, then stops it.
    func withServer(identity: TLSIdentity, clientAnchors: TrustAnchors? = nil,
                    _ body: @Sendable (Int, ServerLog) async throws -> Void) async throws {
        let log = ServerLog()
        let server = try await PinnedTLSServer.bind(
            identity: identity, clientAuthentication: clientAnchors.map { ClientAuthentication(anchors: $0) },
            handshakeTimeout: .seconds(30))
        let running = Task(executorPreference: TestExecutor.shared) {
            try await server.run(onRefused: { log.refuse($0) }) { connection in
                log.serve(connection.peerChain)
                try await connection.channel.executeThenClose { inbound, outbound in
                    var received = ""
                    for try await var buffer in inbound {
                        received += buffer.readString(length: buffer.readableBytes) ?? ""
                        if received.contains("\n") || received.utf8.count > 4096 { break }
                    }
                    try await outbound.write(ByteBuffer(string: "PONG\n"))
                }
            }
        }
        do {
            try await body(server.port, log)
        } catch {
            await server.close()
            _ = await running.result
            throw error
        }
        await server.close()
        _ = await running.result
    }

    func refusal(_ client: PinnedTLSClient, port: Int) async -> TLSTrustError.Reason? {
        do {
            let connection = try await client.connect(host: "127.0.0.1", port: port, serverName: "localhost", timeout: .seconds(30))
            _ = try await exchange(connection, "PING\n")
            return nil
        } catch let error as TLSTrustError {
            return error.reason
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test("The client refuses a revoked server, accepts a valid one, and sees a new list without a restart")
    func clientChecksServer() async throws {
        let scratch = try TemporaryDirectory()
        let path = scratch.path("crl.pem")
        try Self.install(try authority.signRevocationList(entries: [], number: 1), at: path)
        let other = try authority.issue(names: ["localhost"], usage: .server)
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .ownCA([authority.certificate], revocationList: path))],
            defaultAnchors: nil)
        let pinned = try PinnedTLSClient(policy: policy)
        try await withServer(identity: server) { port, _ in
            #expect(await refusal(pinned, port: port) == nil, "valid before revocation")
            // Revoked, the list replaced: the same client refuses the next handshake.
            try Self.install(try authority.signRevocationList(
                entries: [.init(serialNumber: server.leaf.serialNumber, revocationDate: Date())], number: 2), at: path, der: true)
            #expect(await refusal(pinned, port: port) == .revoked)
        }
        try await withServer(identity: other) { port, _ in
            #expect(await refusal(pinned, port: port) == nil, "another certificate of the CA is not revoked")
        }
    }

    @Test("A tampered, foreign, missing or stale list refuses every handshake of the host (fail closed)")
    func failClosed() async throws {
        let scratch = try TemporaryDirectory()
        let path = scratch.path("crl.der")
        let good = try authority.signRevocationList(entries: [], number: 1)
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .ownCA([authority.certificate], revocationList: path))],
            defaultAnchors: nil)
        let pinned = try PinnedTLSClient(policy: policy)
        try await withServer(identity: server) { port, _ in
            // Missing.
            guard case .revocationListUnusable(let missing)? = await refusal(pinned, port: port) else {
                Issue.record("a missing list was not refused"); return
            }
            #expect(missing.contains(path))
            // Tampered: one byte of the signature flipped.
            var tampered = good.derEncoded
            tampered[tampered.count - 3] ^= 0x40
            try Data(tampered).write(to: URL(fileURLWithPath: path), options: .atomic)
            guard case .revocationListUnusable(let detail)? = await refusal(pinned, port: port) else {
                Issue.record("a tampered list was not refused"); return
            }
            #expect(detail.contains("not signed by any anchor") || detail.contains("not a DER"), "\(detail)")
            // Signed by another CA with the same name.
            let other = try CertificateAuthority.createRoot(commonName: "Revocation test CA")
            try Self.install(try other.signRevocationList(entries: [], number: 9), at: path, der: true)
            guard case .revocationListUnusable(let foreign)? = await refusal(pinned, port: port) else {
                Issue.record("a foreign list was not refused"); return
            }
            #expect(foreign.contains("not signed by any anchor"))
            // Garbage.
            try Data("garbage".utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            guard case .revocationListUnusable? = await refusal(pinned, port: port) else {
                Issue.record("garbage was not refused"); return
            }
            // Past its nextUpdate.
            try Self.install(try authority.signRevocationList(entries: [], number: 2, validity: 3_600,
                                                               now: Date() - 7_200), at: path)
            guard case .revocationListUnusable(let stale)? = await refusal(pinned, port: port) else {
                Issue.record("a stale list was not refused"); return
            }
            #expect(stale.contains("due to be replaced"))
            // A good list again: accepted.
            try Self.install(good, at: path)
            #expect(await refusal(pinned, port: port) == nil)
        }
    }

    @Test("The server refuses a revoked client certificate and serves a valid one")
    func serverChecksClient() async throws {
        let scratch = try TemporaryDirectory()
        let path = scratch.path("crl.pem")
        try Self.install(try authority.signRevocationList(
            entries: [.init(serialNumber: client.leaf.serialNumber, revocationDate: Date())], number: 1), at: path)
        let good = try authority.issue(names: ["device-2"], usage: .client)
        let policy = TrustPolicy(
            hosts: [HostPolicy(pattern: try HostPattern("localhost"), anchors: .only([authority.certificate]))],
            defaultAnchors: nil)
        try await withServer(identity: server, clientAnchors: .ownCA([authority.certificate], revocationList: path)) { port, log in
            let valid = try PinnedTLSClient(policy: policy, identity: good)
            #expect(await refusal(valid, port: port) == nil)
            let revoked = try PinnedTLSClient(policy: policy, identity: client)
            do {
                let connection = try await revoked.connect(host: "127.0.0.1", port: port, serverName: "localhost", timeout: .seconds(30))
                let answer = try? await exchange(connection, "PING\n")
                #expect(answer?.contains("PONG") != true)
            } catch {
                // Refused during the handshake: as expected.
            }
            for _ in 0..<3000 where log.refused.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
            let reasons = log.refused.compactMap { ($0 as? TLSTrustError)?.reason }
            #expect(reasons == [.revoked], "\(log.refused)")
            #expect((log.refused.first as? TLSTrustError)?.role == .client)
        }
    }

    @Test("The policy file: anchors' revocationList resolves against the file's directory; without a CA it is an issue")
    func policyFile() throws {
        let scratch = try TemporaryDirectory()
        try scratch.file("ca.pem", Array(try IdentityStore.pem([authority.certificate]).utf8))
        let good = try scratch.file("policy.json", Array("""
        { "version": 1, "hosts": [ { "pattern": "localhost",
          "anchors": { "files": ["ca.pem"], "revocationList": "crl.pem" } } ] }
        """.utf8))
        let configuration = try PolicyConfiguration.load(path: good)
        #expect(configuration.entries.first?.anchors.revocationList == scratch.path("crl.pem"))
        let bad = try scratch.file("bad.json", Array("""
        { "version": 1, "hosts": [ { "pattern": "localhost",
          "anchors": { "system": true, "revocationList": "crl.pem" } } ] }
        """.utf8))
        #expect(throws: PinnedTLSError.self) { try PolicyConfiguration.load(path: bad) }
    }
}
