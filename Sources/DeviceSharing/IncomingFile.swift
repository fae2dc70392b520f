import Cipher
import Crypto
import Foundation
import ProtectedFiles

/// One file being received: its bytes are encrypted as they arrive (a protected file of class
/// `completeUnlessOpen`, which can be written while the vault is locked) into a staging file
/// in the inbox's hidden `.incoming` directory, and moved into the inbox only once every byte
/// arrived and the digest matches. Plaintext never reaches the disk.
final class IncomingFile: @unchecked Sendable {
    /// The staging directory inside an inbox.
    static let stagingName = ".incoming"
    /// The pipe's capacity between the connection and the writer.
    static let pipeSize: Int32 = 1 << 20
    /// F_SETPIPE_SZ (Linux; not exported to Swift without _GNU_SOURCE).
    static let setPipeSize: Int32 = 1031

    let offer: ShareWire.Offer
    private let inbox: String
    private let stagingPath: String
    private var hasher = SHA256()
    private(set) var received: UInt64 = 0
    private var writeEnd: Int32
    private let done = DispatchSemaphore(value: 0)
    private let outcome = ShareLock<(any Error)?>(nil)
    private var finished = false

    /// Starts receiving: creates the staging file and the encrypting writer.
    init(offer: ShareWire.Offer, inbox: String, files: ProtectedFiles, protection: FileProtectionClass) throws(ShareError) {
        self.offer = offer
        self.inbox = inbox
        let staging = inbox + "/" + Self.stagingName
        do {
            try SecureFile.ensurePrivateDirectory(inbox)
            try SecureFile.ensurePrivateDirectory(staging)
        } catch {
            throw .io(path: staging, detail: "\(error)")
        }
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        stagingPath = staging + "/" + bytes.map { String(format: "%02x", $0) }.joined()
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .io(path: "pipe", detail: String(cString: strerror(errno))) }
        let readEnd = fds[0]
        writeEnd = fds[1]
        // A larger pipe (1 MiB instead of 64 KiB) lets the network side and the encrypting
        // writer run in larger steps; a refusal (a lower system limit) only costs speed.
        _ = fcntl(writeEnd, Self.setPipeSize, Self.pipeSize)
        let path = stagingPath
        let outcome = self.outcome
        let done = self.done
        let thread = Thread {
            do {
                try files.write(from: readEnd, to: path, protection: protection)
            } catch {
                outcome.withLock { $0 = error }
            }
            close(readEnd)
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Adds received bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws(ShareError) {
        guard !bytes.isEmpty else { return }
        guard UInt64(bytes.count) <= offer.size - received else {
            throw .protocolViolation("more bytes than the \(offer.size) announced")
        }
        hasher.update(bufferPointer: bytes)
        received += UInt64(bytes.count)
        var offset = 0
        while offset < bytes.count {
            let written = write(writeEnd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw .storage("the protected-file writer stopped: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Ends the writer and waits for it.
    private func endWriter() -> (any Error)? {
        if !finished {
            finished = true
            close(writeEnd)
            done.wait()
        }
        return outcome.withLock { $0 }
    }

    /// Every byte arrived: checks the digest and moves the file into the inbox under the
    /// offered name (or `name.1`, `name.2`... if taken).
    /// - Returns: The name it is stored under.
    func finish() throws(ShareError) -> String {
        guard received == offer.size else {
            abort()
            throw .protocolViolation("\(received) of \(offer.size) bytes arrived")
        }
        if let error = endWriter() {
            abort()
            throw .storage("the file could not be stored: \(error)")
        }
        let digest = Array(hasher.finalize())
        guard constantTimeEqual(digest, offer.digest) else {
            abort()
            throw .digestMismatch
        }
        for attempt in 0..<1000 {
            let name = attempt == 0 ? offer.name : "\(offer.name).\(attempt)"
            let target = inbox + "/" + name
            // link() fails if the name is taken, so a file already in the inbox is never replaced.
            if link(stagingPath, target) == 0 {
                unlink(stagingPath)
                try? SecureFile.syncDirectory(inbox)
                try? SecureFile.syncDirectory(inbox + "/" + Self.stagingName)
                return name
            }
            if errno != EEXIST {
                let detail = String(cString: strerror(errno))
                abort()
                throw .io(path: target, detail: detail)
            }
        }
        abort()
        throw .rejected("1000 files named \(offer.name) are in the inbox already")
    }

    /// Gives up: the staging file is removed, nothing reaches the inbox.
    func abort() {
        _ = endWriter()
        unlink(stagingPath)
    }

    private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// Removes staging files left by a process that stopped mid-transfer (they are encrypted,
    /// but useless).
    static func removeLeftovers(in inbox: String) {
        let staging = inbox + "/" + stagingName
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: staging) else { return }
        for name in names.prefix(100_000) { unlink(staging + "/" + name) }
    }
}

/// A value behind a lock.
final class ShareLock<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
