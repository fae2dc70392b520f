import AgeCommandLine
import ArgumentParser
import Foundation
import SecureFoundation

/// `inspect`: what an age file's structure says, without any key (as age-inspect).
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Describe an age file without decrypting it: armor, recipient stanza types, sizes.",
        discussion: """
        Reads INPUT (or stdin) to its end and prints whether it is armored, the type of each \
        recipient stanza of its header (X25519, mlkem768x25519, scrypt, ssh-ed25519, ssh-rsa, a \
        plugin's), and the sizes of header, encryption overhead and payload. No key is needed \
        and nothing is authenticated: a decryption checks the header MAC and the payload. \
        Exit status 2 when the input is not an age file (no header, no nonce, bad armor).

        Examples:
          securefoundation inspect doc.pdf.age
          securefoundation inspect --json < notes.txt.age
        """
    )

    @Flag(name: .customLong("json"), help: "Print the description as JSON (CLI.md in the documentation, \"JSON output\").")
    var json = false

    @Argument(help: "The age file; `-` or none for stdin.")
    var input: String?

    struct InfoJSON: Encodable {
        var version = JSONOutput.schemaVersion
        var armored: Bool
        var stanzaTypes: [String]
        var postQuantum: Bool
        var headerSize: Int64
        var overheadSize: Int64
        var payloadSize: Int64?
        var totalSize: Int64
    }

    func run() throws {
        do {
            let fd = try AgeIO.openInput(input)
            defer { if fd != 0 { close(fd) } }
            let info = try Age.inspect(from: fd)
            if json {
                try JSONOutput.write(InfoJSON(armored: info.armored, stanzaTypes: info.stanzaTypes, postQuantum: info.postQuantum,
                                              headerSize: info.headerSize, overheadSize: info.overhead,
                                              payloadSize: info.payloadSize, totalSize: info.totalSize))
                return
            }
            let name = (input == nil || input == "-") ? "standard input" : input!
            var text = "\(name) is an age file, version \"age-encryption.org/v1\".\n"
            if info.armored { text += "It is ASCII-armored; the sizes below are of the binary file inside.\n" }
            text += "\nThis file is encrypted to the following recipient types:\n"
            for type in info.stanzaTypes { text += "  - \(type.debugDescription)\n" }
            if info.postQuantum { text += "\nThis file uses post-quantum encryption.\n" }
            func row(_ label: String, _ value: Int64) -> String {
                let number = String(value)
                return "    " + label.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + String(repeating: " ", count: max(1, 12 - number.count)) + number + " bytes\n"
            }
            text += "\nSize breakdown (assuming it decrypts successfully):\n\n"
            text += row("Header", info.headerSize)
            text += row("Encryption overhead", info.overhead)
            if let payload = info.payloadSize {
                text += row("Payload", payload)
            } else {
                text += "    Payload                 (the payload length is not one of a valid age file: it will not decrypt)\n"
            }
            text += "                        -------------------\n"
            text += row("Total", info.totalSize)
            try CLI.writeStdout(Array(text.utf8))
        } catch {
            throw CLI.fail(error)
        }
    }
}
