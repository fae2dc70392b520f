import AgeCommandLine
import Cipher
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The full `securefoundation` program, which the front program hands every command line to
/// that it does not run itself (docs/CLI.md, "Installed programs").
///
/// It is looked for relative to this program's own file (symbolic links resolved), never on the
/// PATH, in the working directory or through an environment variable, so it is exactly as
/// trusted as this program: the places `CLI.fullProgramCandidates(frontPath:)` lists, the
/// installed layout first, then a build directory.
///
/// A candidate that is this very file (this program installed as `securefoundation` next to
/// nothing else) is skipped. A full program that is in fact another front program would hand the
/// command line back; the variable `CLI.frontHandOffVariable` marks a hand-off, so a front
/// program started by another stops with an error instead of starting a loop (the full program removes the
/// mark at its start, so nothing it starts inherits it).
enum FullProgram {
    /// Replaces this process with the full program, with the same arguments (the program name
    /// included) and environment. Returns only by ending the process with an error (status 1):
    /// no full program found, or it cannot be started.
    static func handOff() -> Never {
        guard let own = CLI.ownExecutable() else {
            fail("cannot find this program's own file (/proc/self/exe), so not the full program beside it either")
        }
        if getenv(CLI.frontHandOffVariable) != nil {
            fail("\(own) was started with \(CLI.frontHandOffVariable) set: by another front program, so this front program is installed where the full program belongs (install the full program there: scripts/build-release --install), or the variable was left in the environment (unset it)")
        }
        let ownFile = try? FileCalls.status(atPath: own)
        var looked: [String] = []
        for candidate in CLI.fullProgramCandidates(frontPath: own) {
            looked.append(candidate)
            guard let info = try? FileCalls.status(atPath: candidate), info.kind == .regular,
                  info.permissions & 0o111 != 0 else { continue }
            if let ownFile, ownFile.device == info.device, ownFile.inode == info.inode { continue }
            setenv(CLI.frontHandOffVariable, own, 1)
            execv(candidate, CommandLine.unsafeArgv)
            let reason = String(cString: strerror(errno))
            unsetenv(CLI.frontHandOffVariable)
            fail("cannot start the full program \(candidate): \(reason)")
        }
        fail("this is the front program, which runs encrypt and decrypt only, and the full program is not installed beside it: looked for "
             + looked.joined(separator: " and ") + " (scripts/build-release --install DIR installs both)")
    }

    private static func fail(_ message: String) -> Never {
        CLI.warn("securefoundation: error: \(message)")
        exit(ExitStatus.failure.rawValue)
    }
}
