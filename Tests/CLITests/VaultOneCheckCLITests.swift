import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `vault change-passcode` and `vault rotate-key` check the secrets once: one counted attempt
/// (one KDF run for the passcode), no unlock before the change. Each attempt writes the attempt
/// record twice (counted before the KDF, cleared after success), so the writes of `attempts`,
/// seen through inotify, count the attempts of a child process.
@Suite("vault command: one check per change", .enabled(if: inotifyAvailable(),
                                                         "inotify is not available here to count the attempt record's writes"))
struct VaultOneCheckCLITests {

    /// How many times `path` was opened for writing and closed while `body` ran.
    static func writes(of path: String, during body: () throws -> Void) throws -> Int {
        #if os(Linux)
        try FileEvents.record([path], mask: UInt32(IN_OPEN | IN_CLOSE_WRITE), during: body)
            .filter { $0.mask & UInt32(IN_CLOSE_WRITE) != 0 }.count
        #else
        throw POSIXError(.ENOSYS)
        #endif
    }

    @Test func changePasscodeAndRotateKeyCountOneAttempt() throws {
        let ws = try VaultCLITests.Workspace()
        let pin = try ws.file("pin", "first pin")
        let newPin = try ws.file("newpin", "second pin")
        let wrong = try ws.file("wrong", "not the pin")
        let answers = try ws.file("answers", "Rex\nLyon\n")
        #expect(try ws.vault(["init", "--passcode-file", pin, "--question", "Pet?", "--question", "Town?", "--answers-file", answers]).status == 0)
        let attempts = ws.home + "/attempts"

        var result: VaultCLITests.Result?
        var writes = try Self.writes(of: attempts) {
            result = try ws.vault(["change-passcode", "--passcode-file", wrong, "--new-passcode-file", newPin])
        }
        #expect(result?.status == 3, "\(result?.stderr ?? "")")
        #expect(writes == 1, "a wrong old passcode is one counted attempt")
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 1"))

        writes = try Self.writes(of: attempts) {
            result = try ws.vault(["change-passcode", "--passcode-file", pin, "--new-passcode-file", newPin])
        }
        #expect(result?.status == 0, "\(result?.stderr ?? "")")
        #expect(writes == 2, "one attempt: counted, then cleared (an unlock first would make it 4)")
        #expect(try ws.vault(["unlock", "--passcode-file", newPin]).status == 0)

        writes = try Self.writes(of: attempts) {
            result = try ws.vault(["rotate-key", "--passcode-file", newPin, "--answers-file", answers])
        }
        #expect(result?.status == 0, "\(result?.stderr ?? "")")
        #expect(result?.stdout.hasPrefix("key rotated: ") == true)
        #expect(writes == 2, "the passcode and the answers are one attempt")
        #expect(try ws.vault(["status"]).stdout.contains("failed attempts: 0"))
        #expect(try ws.vault(["unlock", "--answers-file", answers]).status == 0)
    }
}

/// Whether inotify works here (Linux, not exhausted).
func inotifyAvailable() -> Bool {
    #if os(Linux)
    let fd = inotify_init1(0)
    guard fd >= 0 else { return false }
    close(fd)
    return true
    #else
    return false
    #endif
}
