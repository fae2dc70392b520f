import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

struct ShredCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shred",
        abstract: "Overwrite files with random data, optionally remove them, and report how far that can be trusted.",
        usage: "securefoundation shred [-n PASSES] [-z] [-u] [-r] [-v] [options] FILE ...",
        discussion: """
        Only the allocated extents are overwritten (holes stay holes), with a CSPRNG stream, \
        one pass by default (NIST SP 800-88 "clear"; GNU shred defaults to 3), fdatasync after \
        each pass. Symlinks are never followed and non-regular files are refused. Without -u \
        the file is overwritten and kept, as GNU shred does; with -u it is truncated, renamed \
        to random names of decreasing length and unlinked.

        Warnings go to standard error whenever the overwrite cannot be trusted: copy-on-write \
        filesystems (btrfs), ext4 data=journal, overlayfs, network filesystems, tmpfs, SSDs, \
        or data that FIEMAP shows moved. On such storage, erase by destroying keys instead.

        Flags follow GNU shred where they overlap (-n, -z, -u, -v). GNU's -f changes \
        permissions; here --force accepts files with several hard links. The exit status is 1 \
        if any file failed.

        Examples:
          securefoundation shred -u -v notes.txt
          securefoundation shred -n 3 -z -u --verify old-backup.tar
          securefoundation shred -r -u build/secrets
        """
    )

    @Option(name: [.short, .customLong("iterations")], help: ArgumentHelp("Random passes (default 1).", valueName: "passes"))
    var n: Int = 1

    @Flag(name: [.short, .customLong("zero")], help: "Add a final pass of zeros.")
    var zero = false

    @Flag(name: [.short, .customLong("remove")], help: "Truncate, rename and unlink after overwriting.")
    var u = false

    @Flag(name: [.short, .customLong("recursive")], help: "Shred directories and their content, depth-first.")
    var r = false

    @Flag(name: [.short, .customLong("verbose")], help: "Print each pass and the report on standard error.")
    var v = false

    @Flag(name: .customLong("force"), help: "Accept files with more than one hard link (unlike GNU -f, which changes permissions).")
    var force = false

    @Flag(name: .customLong("verify"), help: "Re-read each file after the last pass (page cache dropped) and check it.")
    var verify = false

    @Argument(help: "Files (or directories with -r).")
    var files: [String] = []

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("missing file operand") }
        guard n >= 0, n <= 100 else { throw ValidationError("-n must be between 0 and 100") }
        guard n > 0 || zero else { throw ValidationError("-n 0 needs -z (at least one pass)") }
    }

    func run() throws {
        let options = ShredOptions(passes: n, zeroPass: zero, remove: u, allowHardLinks: force,
                                   verify: verify, recursive: r)
        var failed = false
        for file in files {
            do {
                // A regular file's total is its size times the passes (holes are skipped, so it
                // can end below 100%); a directory's is not known in advance.
                let total = (try? FileCalls.linkStatus(file)).flatMap { $0.isRegularFile ? $0.size : nil }
                    .map { $0 * Int64(options.totalPasses) }
                _ = try ProgressLine.run("shred \(file)", total: total) { report in
                    try FileShredder.shred(file, options: options, onReport: { emit($0) }, onProgress: report)
                }
            } catch ShredError.incomplete(let failures, _) {
                for failure in failures { CLI.warn("shred: \(failure)") }
                failed = true
            } catch {
                CLI.warn("shred: \(file): \(CLI.describe(error))")
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }

    /// Prints one report: GNU-style pass lines with -v, warnings always.
    func emit(_ report: ShredReport) {
        let name = report.path
        if v {
            if report.isDirectory {
                if report.removed { CLI.warn("shred: \(name): removed directory") }
            } else {
                for (index, kind) in report.passKinds.enumerated() {
                    let label = kind == .random ? "random" : "000000"
                    CLI.warn("shred: \(name): pass \(index + 1)/\(report.passes) (\(label))...")
                }
                var summary = "shred: \(name): \(report.bytesOverwritten) of \(report.size) bytes in \(report.extents) extent"
                    + (report.extents == 1 ? "" : "s") + " overwritten on \(report.filesystem), placement \(report.inPlace)"
                if let verified = report.verified { summary += verified ? ", verified" : ", verification failed" }
                CLI.warn(summary)
                if report.removed {
                    CLI.warn("shred: \(name): removing")
                    CLI.warn("shred: \(name): renamed \(report.renames) times")
                    CLI.warn("shred: \(name): removed")
                }
            }
        }
        for warning in report.warnings {
            CLI.warn("shred: \(name): warning: \(warning)")
        }
    }
}
