import Foundation
import Testing
import TestSupport
import X509
@testable import DeviceSharing

/// A received file's name is checked on Unicode scalars after NFC normalization, and the file
/// is linked into the inbox relative to it, never through a symbolic link.
@Suite("Received file names stay in the inbox", .serialized, .onOwnThreads)
struct ShareReceivedNameTests {
    /// One grapheme each, but a `/` or a leading `.` to the file system.
    static let attackNames = ["link/\u{0301}escaped", ".\u{0301}hidden", "a/\u{0301}b", "/\u{0301}",
                              "..\u{0301}", "x\u{0000}\u{0301}y", "\\\u{0301}x", "x\u{0085}y",
                              "x\u{2028}y"]

    @Test("Names with a separator or dot hidden in a grapheme are refused")
    func attackNamesRefused() throws {
        for name in Self.attackNames {
            #expect(throws: ShareError.self, "\(name.unicodeScalars.map(\.value))") { try ShareWire.checkName(name) }
            #expect(throws: ShareError.self, "\(name.unicodeScalars.map(\.value))") {
                try ShareWire.Offer(name: name, size: 1)
            }
        }
        #expect(throws: ShareError.invalidFileName(#"\#(String(reflecting: "link/\u{0301}escaped")) contains a path separator"#)) {
            try ShareWire.checkName("link/\u{0301}escaped")
        }
        #expect(throws: ShareError.invalidFileName(#"\#(String(reflecting: ".\u{0301}hidden")) starts with a dot"#)) {
            try ShareWire.checkName(".\u{0301}hidden")
        }
    }

    @Test("Names are stored in NFC; the length limit applies to the NFC form")
    func nfc() throws {
        #expect(try ShareWire.checkName("e\u{0301}te\u{0301}.txt") == "\u{00e9}t\u{00e9}.txt")
        #expect(try ShareWire.Offer(name: "e\u{0301}.txt", size: 1).name == "\u{00e9}.txt")
        #expect(try ShareWire.checkName("photo 2026-11-23.jpg") == "photo 2026-11-23.jpg")
        // 128 "é" decomposed are 384 bytes, composed 256: still too long.
        #expect(throws: ShareError.self) { try ShareWire.checkName(String(repeating: "e\u{0301}", count: 128)) }
        #expect(try ShareWire.checkName(String(repeating: "e\u{0301}", count: 127)).utf8.count == 254)
    }

    /// An offer of version 3 as a hostile sender writes it: any name bytes, the body, the end marker.
    static func rawOffer(name: String, body: [UInt8]) -> [UInt8] {
        let name = Array(name.utf8)
        var out = Array("SFSH".utf8) + [ShareWire.offerVersion, UInt8(name.count >> 8), UInt8(name.count & 0xff)] + name
        withUnsafeBytes(of: UInt64(body.count).bigEndian) { out += $0 }
        return out + body + ShareWire.endMarker
    }

    @Test("A sender's name through a link planted in the inbox, or a hidden name, stores nothing", .timeLimit(.minutes(2)))
    func attackOverTheWire() async throws {
        let a = try TestDevice()
        let outside = try TemporaryDirectory(prefix: "share-outside")
        try FileManager.default.createDirectory(atPath: a.inbox, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(symlink(outside.path, a.inbox + "/link") == 0)
        let body = content(1000)
        try await serving(try await ShareServer.bindWithoutTLS(inbox: a.inbox, files: a.files)) { port, log in
            for name in ["link/\u{0301}escaped", ".\u{0301}hidden"] {
                let reply = try await SharePlainTransportTests.exchange(port: port, Self.rawOffer(name: name, body: body))
                guard case let .complete(parsed, _) = try ShareWire.parseReply(reply) else {
                    Issue.record("no reply to \(name)")
                    continue
                }
                #expect(parsed.status == .refused, "\(parsed)")
            }
            _ = await log.wait(for: 2)
            #expect(log.refusals.count == 2, "\(log.all)")
            #expect(log.refusals.allSatisfy { if case .invalidFileName = $0 { true } else { false } })
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
        // The offers were refused before anything was staged.
        let entries = try FileManager.default.contentsOfDirectory(atPath: a.inbox).sorted()
        #expect(entries == ["link"], "\(entries)")
    }

    @Test("A link planted in the inbox under the offered name is neither followed nor replaced", .timeLimit(.minutes(2)))
    func plantedLinkUnderTheName() async throws {
        let a = try TestDevice()
        let outside = try TemporaryDirectory(prefix: "share-outside")
        try FileManager.default.createDirectory(atPath: a.inbox, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(symlink(outside.path + "/target", a.inbox + "/photo.raw") == 0)
        let body = content(1000)
        try await serving(try await ShareServer.bindWithoutTLS(inbox: a.inbox, files: a.files)) { port, log in
            let reply = try await SharePlainTransportTests.exchange(port: port, Self.rawOffer(name: "photo.raw", body: body))
            guard case let .complete(parsed, _) = try ShareWire.parseReply(reply) else {
                Issue.record("no reply")
                return
            }
            #expect(parsed == ShareWire.Reply(status: .stored, text: "photo.raw.1"))
        }
        #expect(!FileManager.default.fileExists(atPath: outside.path + "/target"))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: a.inbox + "/photo.raw") == outside.path + "/target")
        #expect(try a.files.read(at: a.inbox + "/photo.raw.1") == body)
    }
}

/// Device certificates serve both ends of mutual TLS: a device is a server when it receives and
/// a client when it sends, and the peer's chain is checked for that purpose.
@Suite("Device certificates carry both TLS purposes")
struct ShareDevicePurposeTests {
    @Test("The creator's and an enrolled device's certificates list serverAuth and clientAuth")
    func bothPurposes() throws {
        let (a, b) = try makeGroup()
        for device in [a, b] {
            let leaf = try device.group.membership().identity.leaf
            let usages = try #require(try leaf.extensions.extendedKeyUsage)
            #expect(usages.contains(.serverAuth))
            #expect(usages.contains(.clientAuth))
        }
    }
}
