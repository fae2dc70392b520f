import Foundation
import GRDB
import Cipher

/// Reinstall detection: the application names a marker path that goes away when it is
/// reinstalled (a file in its bundle or cache directory). The marker holds an installation id
/// that the keychain also records. On open, a keychain that records an id while the marker is
/// missing or holds another id has outlived a reinstall: its items are wiped as stale, and the
/// new id is written to both. A keychain that never recorded an id adopts the marker's (or a
/// new one) without wiping.
enum Reinstall {
    static let idKey = "install_id"

    /// Runs inside the opening transaction. Returns the number of items wiped.
    static func check(db: Database, markerPath: String) throws -> Int {
        let marker = readMarker(markerPath)
        let recorded = try String.fetchOne(db, sql: "SELECT CAST(value AS TEXT) FROM keychain_meta WHERE key = ?", arguments: [idKey])
        if let marker, marker == recorded { return 0 }
        var wiped = 0
        if recorded != nil {
            wiped = try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items") ?? 0
            try db.execute(sql: "DELETE FROM keychain_items")
            _ = try Int64.fetchOne(db, sql: KeychainSchema.bumpGenerationSQL)
        }
        let id: String
        if let marker {
            id = marker
        } else {
            do { id = Encoding.hex(try SecureRandom.bytes(16)) } catch { throw KeychainError.keyUnavailable("no randomness for an installation id: \(error)") }
            do {
                let directory = SecureFile.directoryOf(markerPath)
                if !FileManager.default.fileExists(atPath: directory) {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                            attributes: [.posixPermissions: 0o700])
                }
                try SecureFile.writeAtomically(Array((id + "\n").utf8), to: markerPath)
            } catch {
                throw KeychainError.fromFile(error, path: markerPath)
            }
        }
        try db.execute(sql: "INSERT INTO keychain_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       arguments: [idKey, id])
        return wiped
    }

    private static func readMarker(_ path: String) -> String? {
        guard let bytes = try? SecureFile.read(path, maxLength: 4096),
              let text = String(bytes: bytes, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
              !text.isEmpty else { return nil }
        return text
    }
}
