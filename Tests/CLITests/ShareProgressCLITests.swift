import Foundation
import TestSupport
import Testing

/// `share serve` shows each file's progress on standard error when it is a terminal (a
/// pseudo-terminal from util-linux `script`), as the other commands' progress lines.
@Suite("share serve progress on a terminal", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"),
                "util-linux script is not installed; the pseudo-terminal test is skipped"))
struct ShareProgressCLITests {
    @Test func serveDrawsALinePerFileAndClearsItBeforeReportingTheFile() throws {
        let (a, b) = try ShareCLITests.group()
        let file = try b.file("photo.bin", [UInt8](repeating: 0x42, count: 3 << 20))
        let arguments = [try BuiltProducts.commandLine, "share", "serve", "--listen", "127.0.0.1:0", "--max-transfers", "1",
                         "--passcode-file", a.passcode] + a.common
        let command = arguments.map { "'\($0)'" }.joined(separator: " ")
        var environment = a.environment
        environment["SECUREFOUNDATION_PROGRESS_DELAY"] = "0"
        let server = try ChildProcess.start("/usr/bin/script", ["-qec", command, "/dev/null"], environment: environment)
        defer { server.kill(SIGTERM) }
        let listening = try #require(server.waitForLine(startingWith: "listening on ", timeout: .seconds(60)))
        let colon = try #require(listening.lastIndex(of: ":"))
        let port = try #require(Int(listening[listening.index(after: colon)...].prefix(while: \.isNumber)))

        let sent = try b.run(["share", "send", file, "--to", "127.0.0.1:\(port)"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let served = try server.wait(timeout: .seconds(120))
        #expect(served.status == 0)
        let transcript = String(decoding: served.stdout, as: UTF8.self)
        #expect(transcript.contains("\r\u{1B}[2Kshare serve: photo.bin from bravo… "), "\(transcript.debugDescription)")
        #expect(transcript.contains("100% 3.0/3.0 MiB"), "\(transcript.debugDescription)")
        // Cleared before the line that reports the file.
        #expect(transcript.contains("\r\u{1B}[2Kreceived photo.bin (3145728 bytes) from bravo"), "\(transcript.debugDescription)")

        // Not on a pipe: the same server without a terminal draws nothing.
        let (plain, plainPort) = try a.serve(["--max-transfers", "1"])
        defer { plain.kill(SIGTERM) }
        #expect(try b.run(["share", "send", file, "--to", "127.0.0.1:\(plainPort)"]).status == 0)
        let quiet = try plain.wait(timeout: .seconds(120))
        #expect(!quiet.errorText.contains("share serve: "), "\(quiet.errorText)")
    }
}
