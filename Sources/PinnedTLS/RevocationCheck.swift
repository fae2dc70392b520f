import Cipher
import Foundation
import NIOConcurrencyHelpers
import X509

/// The revocation list files that policies name, read when a handshake needs them and read
/// again only when the file changes (its device, inode, size, modification or change time).
///
/// A list is used only when its signature verifies with one of the anchor certificates of the
/// entry that names it (the application's own CA), and only until its nextUpdate; otherwise
/// every handshake the entry covers is refused (fail closed) with
/// ``TLSTrustError/Reason/revocationListUnusable(_:)``.
enum RevocationCheck {
    private struct Stamp: Equatable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: FileStatus.Time
        let changed: FileStatus.Time
    }

    private struct Cached {
        let stamp: Stamp
        let list: RevocationList
        /// The anchor the signature was verified with.
        var verifiedBy: Certificate?
    }

    private static let cache = NIOLockedValueBox<[String: Cached]>([:])

    /// The list at `path`, checked against `anchors` and `now`.
    static func list(path: String, anchors: [Certificate], now: Date) throws(TLSTrustError.Reason) -> RevocationList {
        let status: FileStatus
        do throws(SystemCallError) { status = try FileCalls.status(atPath: path) } catch {
            throw .revocationListUnusable("\(path): \(String(cString: strerror(error.code)))")
        }
        let stamp = Stamp(device: status.device, inode: status.inode, size: status.size, modified: status.modified,
                          changed: status.changed)
        var entry = cache.withLockedValue { $0[path] }
        if entry?.stamp != stamp {
            let bytes: [UInt8]
            do {
                bytes = try RegularFile.contents(path, maxLength: RevocationList.maxEncodedLength * 2)
            } catch {
                throw .revocationListUnusable("\(error)")
            }
            do {
                entry = Cached(stamp: stamp, list: try RevocationList(pemOrDER: bytes), verifiedBy: nil)
            } catch {
                cache.withLockedValue { $0[path] = nil }
                throw .revocationListUnusable("\(path): \(error)")
            }
        }
        guard var entry else { throw .revocationListUnusable("\(path): not read") }
        let list = entry.list
        if let verifiedBy = entry.verifiedBy, anchors.contains(verifiedBy) {
            // Verified before against an anchor still in the set.
        } else {
            entry.verifiedBy = anchors.first { list.isIssued(by: $0) }
        }
        cache.withLockedValue { $0[path] = entry }
        guard entry.verifiedBy != nil else {
            throw .revocationListUnusable(
                "\(path) is not signed by any anchor certificate of this entry (issuer \(entry.list.issuer)); export the list of this CA with `securefoundation tls crl`")
        }
        if let nextUpdate = entry.list.nextUpdate, nextUpdate < now {
            throw .revocationListUnusable(
                "\(path) was due to be replaced on \(ISO8601DateFormatter().string(from: nextUpdate)); export a fresh one with `securefoundation tls crl`")
        }
        return entry.list
    }

    /// `.revoked` when a certificate of the validated chain (leaf first, anchor last) other than
    /// the anchor is issued by the list's issuer and listed.
    static func check(_ chain: [Certificate], against list: RevocationList) throws(TLSTrustError.Reason) {
        for certificate in chain.dropLast() where certificate.issuer == list.issuer {
            if list.contains(certificate.serialNumber) { throw .revoked }
        }
    }
}
