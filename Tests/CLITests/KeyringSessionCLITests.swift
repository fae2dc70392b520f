import Foundation
import TestSupport
import Testing

/// The keyring provider in the two kinds of session a process runs in: a login session, whose
/// keyring links the user keyring, and a service's own session keyring that does not (what
/// systemd gives system services by default, `KeyringMode=private`; `keyctl session -` makes
/// one). In the second the key added to the user keyring was not possessed: its permissions
/// and timeout could not be set, and `vault erase` said "erased" while the key stayed readable
/// by every login session of the user, with no timeout.
@Suite(.serialized) struct KeyringSessionCLITests {
    /// The cached entry's line in /proc/keys (its expiry and permission mask), or nil; an
    /// invalidated key (flag `i`, listed until the kernel collects it) counts as gone.
    static func procKeysLine(_ description: String) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/keys", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return line.contains(" " + description + ":") && fields.count > 1 && !fields[1].contains("i")
        }.map(String.init)
    }

    @Test(arguments: [false, true])
    func theCacheTimesOutAndEraseEvictsIt(privateSession: Bool) throws {
        guard let keyctl = ChildProcess.which("keyctl") else {
            Issue.record("keyctl is not installed (Debian: keyutils)")
            return
        }
        let directory = try TemporaryDirectory(prefix: "sf-keyring-session")
        let home = directory.path("home"), deviceKey = directory.path("device.key")
        let passcode = try directory.file("pin.txt", "keyring-session-1\n")
        let location = ["--home", home, "--device-key", deviceKey]
        func run(_ arguments: [String]) throws -> ChildProcess.Result {
            if privateSession { return try ChildProcess.run(keyctl, ["session", "-", CLIRunner.executable] + arguments) }
            return try ChildProcess.run(CLIRunner.executable, arguments)
        }
        let made = try run(["vault", "init", "--passcode-file", passcode, "--device-key-provider", "keyring", "--keyring-timeout", "600"] + location)
        guard made.status == 0 else {
            // add_key filtered (some containers): nothing to test here.
            #expect(made.errorText.contains("keyring"), "\(made.errorText)")
            return
        }
        let add = try run(["keychain", "add-generic-password", "-s", "s", "-a", "a", "-w", "x", "--accessibility", "alwaysThisDeviceOnly"] + location)
        #expect(add.status == 0, "\(add.errorText)")
        let status = try run(["vault", "status"] + location)
        let description = try #require(status.text.split(whereSeparator: { " \n()".contains($0) })
            .first { $0.hasPrefix("securefoundation:device-key:") }.map(String.init), "\(status.text)")
        let line = try #require(Self.procKeysLine(description), "the key was not cached")
        // A timeout (not "perm"), and same-user search so that another session can evict it.
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        #expect(fields.count > 4 && fields[3] != "perm", "no timeout: \(line)")
        let erased = try run(["vault", "erase", "--yes"] + location)
        #expect(erased.status == 0, "\(erased.errorText)")
        #expect(Self.procKeysLine(description) == nil, "still cached after erase: \(Self.procKeysLine(description) ?? "")")
    }
}
