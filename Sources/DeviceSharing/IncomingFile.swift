import Cipher
import Crypto
import Foundation
import ProtectedFiles

/// One file being received: its bytes are encrypted as they arrive (a protected file of class
/// `completeUnlessOpen`, which can be written while the vault is locked) into a staging file in
/// the inbox's hidden `.incoming` directory, and moved into the inbox only once every byte and
/// the end marker arrived (offer version 3; for the older versions 1 and 2 the bytes are also
/// hashed, and their digest must match). Plaintext never reaches the disk.
///
/// The work happens on the thread that calls ``append(_:)`` (the task reading the connection),
/// not on the event loop that decrypts TLS, so both run at once; what the task has not taken
/// yet stays in the channel's bounded buffer, and the channel stops reading from the socket
/// when that is full.
final class IncomingFile {
    /// The staging directory inside an inbox.
    static let stagingName = ".incoming"

    let offer: ShareWire.Offer
    private let inbox: String
    private let stagingPath: String
    /// The bytes' SHA-256 as they arrive, for an offer of version 1 or 2 (version 3 has no
    /// digest: TLS authenticated every byte).
    private var hasher: SHA256?
    private let writer: ProtectedFileWriter
    private(set) var received: UInt64 = 0
    /// What follows the bytes (the end marker, or for version 2 the digest), as it arrives.
    private var trailer: [UInt8] = []
    private var trailerLength: Int { offer.trailerLength }
    private var done = false

    /// Whether the file's bytes and what follows them (the end marker or the digest) arrived.
    var isComplete: Bool { received == offer.size && trailer.count == trailerLength }

    /// Starts receiving: creates the staging file and its encrypting writer.
    init(offer: ShareWire.Offer, inbox: String, files: ProtectedFiles, protection: FileProtectionClass) throws(ShareError) {
        self.offer = offer
        self.inbox = inbox
        hasher = offer.version < 3 ? SHA256() : nil
        let staging = inbox + "/" + Self.stagingName
        do {
            try SecureFile.ensurePrivateDirectory(inbox)
            try SecureFile.ensurePrivateDirectory(staging)
        } catch {
            throw .io(path: staging, detail: "\(error)")
        }
        do {
            stagingPath = staging + "/" + Encoding.hex(try SecureRandom.bytes(12))
        } catch {
            throw .storage("no random name for the staging file: \(error)")
        }
        do {
            writer = try files.makeWriter(creating: stagingPath, protection: protection)
        } catch {
            throw .storage("the file could not be stored: \(error)")
        }
    }

    deinit {
        if !done { abort() }
    }

    /// Adds received bytes: the file's, then the end marker's (or, version 2, the digest's).
    /// - Throws: ``ShareError/protocolViolation(_:)`` for bytes past the end,
    ///   ``ShareError/storage(_:)`` when the protected file cannot be written (disk full...).
    func append(_ bytes: UnsafeRawBufferPointer) throws(ShareError) {
        guard !bytes.isEmpty else { return }
        let body = Int(min(UInt64(bytes.count), offer.size - received))
        if body > 0 {
            let part = UnsafeRawBufferPointer(rebasing: bytes[0..<body])
            hasher?.update(bufferPointer: part)
            do {
                try writer.write(part)
            } catch {
                throw .storage("the file could not be stored: \(error)")
            }
            received += UInt64(body)
        }
        let rest = bytes.count - body
        guard rest > 0 else { return }
        guard rest <= trailerLength - trailer.count else {
            throw .protocolViolation("more bytes than the \(offer.size) announced")
        }
        trailer += UnsafeRawBufferPointer(rebasing: bytes[body...])
    }

    /// Every byte arrived: checks the end marker (or the digest), completes the protected file
    /// (synced) and moves it into the inbox under the offered name (or `name.1`, `name.2`... if
    /// taken).
    /// - Returns: The name it is stored under.
    func finish() throws(ShareError) -> String {
        guard isComplete else {
            abort()
            throw .protocolViolation("\(received) of \(offer.size) bytes arrived")
        }
        if let hasher {
            guard ConstantTime.equals(Array(hasher.finalize()), offer.digest ?? trailer) else {
                abort()
                throw .digestMismatch
            }
        } else if trailer != ShareWire.endMarker {
            abort()
            throw .protocolViolation("the bytes are not followed by the end marker")
        }
        do {
            try writer.finish()
        } catch {
            abort()
            throw .storage("the file could not be stored: \(error)")
        }
        done = true
        let stagingLeaf = (stagingPath as NSString).lastPathComponent
        // The inbox and its staging directory are opened without following a link at their
        // last component, and the file is linked relative to them under a name of one component
        // (checked again here on its scalars and bytes): a symbolic link planted in the inbox,
        // whatever its name, is never followed.
        let inboxFD = open(inbox, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard inboxFD >= 0 else {
            let code = errno
            unlink(stagingPath)
            throw .io(path: inbox, detail: String(cString: strerror(code)))
        }
        defer { close(inboxFD) }
        let stagingFD = openat(inboxFD, Self.stagingName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard stagingFD >= 0 else {
            let code = errno
            unlink(stagingPath)
            throw .io(path: inbox + "/" + Self.stagingName, detail: String(cString: strerror(code)))
        }
        defer { close(stagingFD) }
        let base: String
        do throws(ShareError) {
            base = try ShareWire.checkName(offer.name)
        } catch {
            unlinkat(stagingFD, stagingLeaf, 0)
            throw error
        }
        for attempt in 0..<1000 {
            let name = attempt == 0 ? base : "\(base).\(attempt)"
            // linkat() without AT_SYMLINK_FOLLOW, into a directory descriptor, under a single
            // component: it fails with EEXIST if the name is taken (a file or a link already in
            // the inbox is never replaced, nor followed).
            if linkat(stagingFD, stagingLeaf, inboxFD, name, 0) == 0 {
                unlinkat(stagingFD, stagingLeaf, 0)
                fsync(inboxFD)
                fsync(stagingFD)
                return name
            }
            let code = errno
            if code == EEXIST { continue }
            unlinkat(stagingFD, stagingLeaf, 0)
            throw .io(path: inbox + "/" + name, detail: String(cString: strerror(code)))
        }
        unlinkat(stagingFD, stagingLeaf, 0)
        throw .rejected("1000 files named \(offer.name) are in the inbox already")
    }

    /// Gives up: the staging file is removed, nothing reaches the inbox.
    func abort() {
        done = true
        writer.abort()
    }

    /// Removes staging files left by a process that stopped mid-transfer (they are encrypted,
    /// but useless).
    ///
    /// Only a private directory of the user's is emptied, and only through a descriptor opened
    /// without following links: the inbox is in the data directory, whose writer could otherwise
    /// put a symbolic link at `.incoming` and have every file of another directory unlinked.
    static func removeLeftovers(in inbox: String) {
        let staging = inbox + "/" + stagingName
        guard (try? SecureFile.checkPrivate(staging, isDirectory: true)) != nil else { return }
        let directory = open(staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else { return }
        defer { close(directory) }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: staging) else { return }
        // Names relative to the checked directory: a directory swapped in at the path meanwhile
        // is listed at most, never emptied; a link inside is removed, not followed.
        for name in names.prefix(100_000) where !name.contains("/") && name != "." && name != ".." {
            unlinkat(directory, name, 0)
        }
    }
}
