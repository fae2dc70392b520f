import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

struct RandomCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "random",
        abstract: "Write random bytes from the system CSPRNG.",
        discussion: """
        Raw bytes by default; --hex or --base64 print text with a trailing newline.

        Examples:
          securefoundation random -n 32 --hex
          securefoundation random -n 1048576 > noise.bin
        """
    )

    @Option(name: .short, help: ArgumentHelp("How many bytes (default 32).", valueName: "bytes"))
    var n: Int = 32

    @Flag(help: "Print lower-case hex.")
    var hex = false

    @Flag(help: "Print standard base64.")
    var base64 = false

    func validate() throws {
        guard n >= 0 else { throw ValidationError("-n must not be negative") }
        guard n <= 1 << 30 else { throw ValidationError("-n is limited to 1 GiB") }
        guard !(hex && base64) else { throw ValidationError("choose one of --hex and --base64") }
    }

    func run() throws {
        if hex || base64 {
            let bytes = try SecureRandom.bytes(n)
            print(hex ? Encoding.hex(bytes) : Encoding.base64(bytes))
            return
        }
        var remaining = n
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while remaining > 0 {
            let step = min(remaining, buffer.count)
            try buffer.withUnsafeMutableBytes { try SecureRandom.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<step])) }
            try buffer.withUnsafeBytes { try CLI.writeStdout(UnsafeRawBufferPointer(rebasing: $0[0..<step])) }
            remaining -= step
        }
    }
}
