#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Cipher
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decrypts a passphrase-protected OpenSSH private key with OpenSSH's own `ssh-keygen`: the
/// key derivation of those keys (bcrypt_pbkdf) is built on Blowfish, which swift-crypto does not
/// offer and this project does not implement.
///
/// Nothing touches a file system and the passphrase is never on a command line:
/// - the key is copied into an anonymous memory file (`memfd_create`, mode 0600), which
///   `ssh-keygen -p -N "" -f /proc/self/fd/4` rewrites in place without its passphrase;
/// - the passphrase goes through a pipe (descriptor 3) to the askpass program `ssh-keygen`
///   starts (`SSH_ASKPASS_REQUIRE=force`), a two-line shell script itself in a memory file
///   (`/proc/self/fd/5`: `exec cat <&3`);
/// - the decrypted key is read back into locked memory and the memory file is emptied.
///
/// Linux only (memory files and `/proc`); elsewhere, and without `ssh-keygen` on the `PATH`,
/// the key is refused with what to do.
enum SSHKeyDecryption {
    /// Bounds: a key file, a passphrase, and what `ssh-keygen` may say on standard error.
    static let maximumKey = 1 << 20
    static let maximumPassphrase = 4096
    /// `ssh-keygen` taking longer than this (bcrypt rounds are its cost: 16 by default, about
    /// 0.1 s) is stopped.
    static let timeout: Double = 60

    /// The decrypted OpenSSH private key file (`cipher none`), in locked memory.
    /// - Throws: ``AgeError/noMatchingIdentity(_:)`` for a wrong passphrase,
    ///   ``AgeError/invalidIdentity(_:)`` when `ssh-keygen` is missing or fails.
    static func decrypt(_ key: SecretBytes, passphrase: SecretBytes, name: String) throws -> SecretBytes {
        guard key.count <= maximumKey, passphrase.count <= maximumPassphrase else {
            throw AgeError.invalidIdentity("\(name) or its passphrase is too large")
        }
        guard let program = locate() else {
            throw AgeError.invalidIdentity("\(name) is a passphrase-protected SSH key, and decrypting it needs OpenSSH's ssh-keygen on the PATH (Debian: apt-get install openssh-client)")
        }
        var opened = [Int32]()
        defer { opened.forEach { close($0) } }
        func keep(_ fd: Int32, _ what: String) throws -> Int32 {
            guard fd >= 0 else { throw AgeError.io("\(what): \(String(cString: strerror(errno)))") }
            // Above every descriptor the child is given, so that placing them cannot overwrite one.
            let high = fcntl(fd, F_DUPFD_CLOEXEC, 100)
            let code = errno
            close(fd)
            guard high >= 0 else { throw AgeError.io("\(what): \(String(cString: strerror(code)))") }
            opened.append(high)
            return high
        }
        let keyFD = try keep(sf_memory_file("securefoundation-ssh-key"), "a memory file for the SSH key")
        defer { _ = ftruncate(keyFD, 0) }
        guard fchmod(keyFD, 0o600) == 0 else { throw AgeError.io("fchmod: \(String(cString: strerror(errno)))") }
        let endsWithNewline = try key.withUnsafeBytes { bytes -> Bool in
            try writeAll(keyFD, bytes)
            return bytes.last == 0x0A
        }
        // OpenSSH finds its format by the end line and its newline (a key read with the last
        // newline trimmed would go to the PEM parser and fail as "error in libcrypto").
        if !endsWithNewline { try [UInt8(0x0A)].withUnsafeBytes { try writeAll(keyFD, $0) } }
        let scriptFD = try keep(sf_memory_file("securefoundation-askpass"), "a memory file for the askpass script")
        guard fchmod(scriptFD, 0o700) == 0 else { throw AgeError.io("fchmod: \(String(cString: strerror(errno)))") }
        try Array("#!/bin/sh\nexec cat <&3\n".utf8).withUnsafeBytes { try writeAll(scriptFD, $0) }
        let passPipe: (read: Int32, write: Int32), errorPipe: (read: Int32, write: Int32)
        do { passPipe = try ProcessSpawn.pipe() } catch { throw AgeError.io("pipe: \(String(cString: strerror(error.code)))") }
        let passRead = try keep(passPipe.read, "pipe")
        let passWrite = try keep(passPipe.write, "pipe")
        do { errorPipe = try ProcessSpawn.pipe() } catch { throw AgeError.io("pipe: \(String(cString: strerror(error.code)))") }
        let errorRead = try keep(errorPipe.read, "pipe")
        let errorWrite = try keep(errorPipe.write, "pipe")
        // The passphrase and a newline fit in the pipe's buffer (64 KiB): written before the start.
        try passphrase.withUnsafeBytes { try writeAll(passWrite, $0) }
        try [UInt8(0x0A)].withUnsafeBytes { try writeAll(passWrite, $0) }
        close(passWrite)
        opened.removeAll { $0 == passWrite }

        let arguments = [program, "-p", "-N", "", "-f", "/proc/self/fd/4"]
        let environment = ["PATH=" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                           "SSH_ASKPASS=/proc/self/fd/5", "SSH_ASKPASS_REQUIRE=force"]
        let spawned: Result<pid_t, SystemCallError> = Result { () throws(SystemCallError) in
            try ProcessSpawn.spawn(arguments, actions: [.open(fd: 0, path: "/dev/null", flags: O_RDONLY), .open(fd: 1, path: "/dev/null", flags: O_WRONLY),
                                                        .duplicate(errorWrite, as: 2), .duplicate(passRead, as: 3),
                                                        .duplicate(keyFD, as: 4), .duplicate(scriptFD, as: 5)],
                                   environment: environment)
        }
        close(errorWrite)
        opened.removeAll { $0 == errorWrite }
        let child: pid_t
        switch spawned {
        case .success(let pid): child = pid
        case .failure(let error): throw AgeError.invalidIdentity("cannot run \(program): \(String(cString: strerror(error.code)))")
        }
        let message = readBounded(errorRead, limit: 4096)
        let status = wait(for: child)
        guard status == 0 else {
            let text = String(String(decoding: message, as: UTF8.self).trimmingWhitespace())
            if text.contains("incorrect passphrase") { throw AgeError.noMatchingIdentity("the passphrase of the SSH key \(name) is wrong") }
            throw AgeError.invalidIdentity("ssh-keygen could not decrypt \(name): \(text.isEmpty ? "exit status \(status)" : text)")
        }
        guard let size = (try? FileCalls.status(keyFD)).map({ Int($0.size) }), size > 0, size <= maximumKey else {
            throw AgeError.invalidIdentity("ssh-keygen left no key for \(name)")
        }
        return try SecretBytes(count: size) { buffer in
            let done: Int
            do throws(SystemCallError) { done = try FileCalls.readFully(keyFD, into: buffer, at: 0) } catch {
                throw AgeError.io("reading the decrypted key: \(String(cString: strerror(error.code)))")
            }
            guard done == buffer.count else { throw AgeError.io("reading the decrypted key: it is shorter than ssh-keygen left it") }
        }
    }

    /// `ssh-keygen` in a directory of `searchPath` (nil: `$PATH`), or nil.
    static func locate(searchPath: String? = nil) -> String? {
        #if os(Linux)
        return ProgramSearch.locate("ssh-keygen", searchPath: searchPath, fallback: "/usr/bin:/bin")
        #else
        return nil
        #endif
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        do { try FileCalls.writeAll(fd, bytes) } catch {
            throw AgeError.io("write: \(String(cString: strerror(error.code)))")
        }
    }

    /// Reads until the end of `fd` (the child's standard error), keeping at most `limit` bytes.
    private static func readBounded(_ fd: Int32, limit: Int) -> [UInt8] {
        var result = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1024)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, 250)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            guard let n = chunk.withUnsafeMutableBytes({ try? FileCalls.readSome(fd, into: $0) }), n > 0 else { break }
            if result.count < limit { result += chunk[0..<min(n, limit - result.count)] }
        }
        return result
    }

    /// Waits for `pid` (at most ``timeout`` seconds, then kills it); its exit status, or -1.
    private static func wait(for pid: pid_t) -> Int32 {
        ProcessSpawn.wait(pid, timeout: timeout) ?? -1
    }
}
