import Foundation
import Cipher
#if canImport(Glibc)
import Glibc
#endif

/// A software TPM (swtpm) on a local TCP port (loopback) with a state directory of its own
/// under `root` (a new seed each time), stopped by `stop()`. Each child process is given the
/// TCTI `swtpm:host=127.0.0.1,port=N` in its environment; nothing sets the test process's.
public final class SoftwareTPM: @unchecked Sendable {
    public let state: String
    public let port: Int
    public let process: ChildProcess.Running
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    public init?(root: String) throws {
        guard let swtpm = ExternalTool.find("swtpm"), let getrandom = ExternalTool.find("tpm2_getrandom") else { return nil }
        state = root + "/tpm"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // A port taken by another program, or a start slowed down by a loaded machine: up to 3
        // ports, each waited for at most 20 s.
        var started: (port: Int, process: ChildProcess.Running)?
        for _ in 0..<3 where started == nil {
            let port = Int.random(in: 20000..<40000) & ~1
            let process = try ChildProcess.start(swtpm, ["socket", "--tpm2", "--tpmstate", "dir=" + state,
                                                         "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                                         "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                                                         "--flags", "not-need-init,startup-clear"])
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline, process.isRunning {
                if let result = try? ExternalTool.run([getrandom, "8"], maxOutput: 64,
                                                      environment: ["TPM2TOOLS_TCTI": "swtpm:host=127.0.0.1,port=\(port)"]),
                   result.status == 0 {
                    started = (port, process)
                    break
                }
                usleep(100_000)
            }
            if started == nil {
                process.kill()
                _ = try? process.wait(timeout: .seconds(30))
            }
        }
        guard let started else { return nil }
        port = started.port
        process = started.process
    }

    /// A started software TPM, or nil with the reason printed.
    public static func orSkip(root: String) throws -> SoftwareTPM? {
        guard let tpm = try SoftwareTPM(root: root) else {
            print("skipping: needs swtpm and tpm2-tools (Debian: swtpm swtpm-tools tpm2-tools)")
            return nil
        }
        return tpm
    }

    public func tool(_ name: String, _ arguments: [String]) throws -> Int32 {
        let result = try ExternalTool.run([ExternalTool.find(name)!] + arguments, maxOutput: 65536, environment: ["TPM2TOOLS_TCTI": tcti])
        result.output.wipe()
        return result.status
    }

    /// Runs tpm2-tools program `name` against this TPM: its exit status and standard output.
    public func run(_ name: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try ExternalTool.run([ExternalTool.find(name)!] + arguments, maxOutput: 65536, environment: ["TPM2TOOLS_TCTI": tcti])
        let output = String(decoding: result.output.withUnsafeBytes { Array($0) }, as: UTF8.self)
        result.output.wipe()
        return (result.status, output)
    }

    public func stop() {
        // swtpm does not end on SIGTERM while a client may be connected: SIGKILL.
        process.kill()
        _ = try? process.wait(timeout: .seconds(30))
    }
}

