import Cipher
import Foundation
import PinnedTLS
import Testing
import TestSupport
@testable import DeviceSharing

@Suite("Sharing enrolment", .serialized, .onOwnThreads)
struct ShareEnrolmentTests {
    @Test func joiningGivesACertificateUnderTheGroupRootOnly() throws {
        let (a, b) = try makeGroup()
        let membership = try b.group.membership()
        #expect(membership.deviceName == "bravo")
        #expect(membership.root == (try a.group.rootCertificate()))
        #expect(ShareGroup.deviceNames(of: membership.identity.leaf) == ["bravo"])
        #expect(try a.group.members().map(\.device) == ["alpha", "bravo"])
        // The joining device holds no root key.
        #expect(throws: ShareError.self) { _ = try b.group.authority() }
    }

    @Test func anInvitationIsUsedOnce() throws {
        let a = try TestDevice(), b = try TestDevice(), c = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let invitation = try ShareEnrolment(group: a.group).invite()
        let request = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo")
        _ = try ShareEnrolment(group: a.group).approve(request: request)
        let second = try ShareEnrolment(group: c.group).join(invitation: invitation, deviceName: "charlie")
        #expect(throws: ShareError.invalidEnrolment("no open invitation \(invitation.id) on this machine (used already, or made elsewhere)")) {
            _ = try ShareEnrolment(group: a.group).approve(request: second)
        }
    }

    @Test func aForgedOrExpiredRequestIsRefused() throws {
        let a = try TestDevice(), b = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let enrol = ShareEnrolment(group: a.group)
        let invitation = try enrol.invite()
        var request = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo")
        // Someone who saw the request but not the secret renames the device.
        var renamed = request
        renamed.device = "mallory"
        #expect(throws: ShareError.invalidEnrolment("the request is not authenticated by the invitation's secret")) {
            _ = try enrol.approve(request: renamed)
        }
        // Or forges the MAC without the secret.
        request.mac = Encoding.base64([UInt8](repeating: 0, count: 32))
        #expect(throws: ShareError.invalidEnrolment("the request is not authenticated by the invitation's secret")) {
            _ = try enrol.approve(request: request)
        }
        // Expired.
        let late = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo")
        #expect(throws: ShareError.invalidEnrolment("the invitation has expired")) {
            _ = try enrol.approve(request: late, now: Date() + 2 * ShareEnrolment.defaultValidity)
        }
        #expect(throws: ShareError.invalidEnrolment("the invitation has expired")) {
            _ = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo", now: Date() + 7200)
        }
    }

    @Test func aCertificateFromAnotherRootIsNotStored() throws {
        let a = try TestDevice(), b = try TestDevice()
        try a.group.create(deviceName: "alpha")
        let invitation = try ShareEnrolment(group: a.group).invite()
        _ = try ShareEnrolment(group: b.group).join(invitation: invitation, deviceName: "bravo")
        let abe = try honestAbe(device: "bravo")
        let pem = try IdentityStore.pem([abe.identity.leaf, abe.root])
        #expect(throws: ShareError.invalidEnrolment("the certificate is not signed by this group's root")) {
            _ = try ShareEnrolment(group: b.group).complete(chainPEM: Array(pem.utf8))
        }
        #expect(throws: ShareError.self) { _ = try b.group.membership() }
    }

    @Test func revocationIsKeptInTheKeychain() throws {
        let (a, b) = try makeGroup()
        let pin = try ShareGroup.pin(b.group.membership().identity.leaf)
        #expect(try a.group.revokedPins().isEmpty)
        try a.group.revoke(device: "BRAVO")
        #expect(try a.group.revokedPins() == [pin])
        #expect(throws: ShareError.notFound("no device named nobody was enrolled on this machine: give its sha256/ pin instead")) {
            _ = try a.group.revoke(device: "nobody")
        }
        // Readable while locked (the server checks it for every connection).
        a.manager.lock()
        #expect(try a.group.revokedPins() == [pin])
    }
}
