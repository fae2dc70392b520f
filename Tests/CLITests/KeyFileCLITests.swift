import Foundation
import Testing
import Cipher

/// `--key-file`: raw keys are read as they are; only the hex form may end in a newline.
@Suite struct KeyFileCLITests {
    @Test("a raw key ending in 0x0A or 0x0D 0x0A is used whole, and equals its hex form")
    func rawKeyEndingInNewline() throws {
        let scratch = try ScratchDirectory()
        let plaintext = Array("sealed with a key that ends in a newline byte".utf8)
        for ending: [UInt8] in [[0x0A], [0x0D, 0x0A]] {
            let key = (0..<(32 - ending.count)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) } + ending
            let raw = try scratch.file("raw-\(ending.count)", key)
            let hex = try scratch.file("hex-\(ending.count)", Array((Encoding.hex(key) + "\n").utf8))
            let sealed = try CLIRunner.run(["seal", "--key-file", raw], stdin: plaintext)
            #expect(sealed.status == 0, "\(sealed.stderr)")
            // The hex form of the same 32 bytes opens it: the raw file was not shortened.
            let opened = try CLIRunner.run(["open", "--key-file", hex], stdin: sealed.stdout)
            #expect(opened.status == 0 && opened.stdout == plaintext, "\(opened.stderr)")
            let back = try CLIRunner.run(["open", "--key-file", raw], stdin: sealed.stdout)
            #expect(back.status == 0 && back.stdout == plaintext, "\(back.stderr)")
        }
    }

    @Test("hex with no newline, \\n or \\r\\n is accepted; 31 or 33 raw bytes and hex with two newlines are refused")
    func shapes() throws {
        let scratch = try ScratchDirectory()
        let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let reference = try scratch.file("raw", key)
        let sealed = try CLIRunner.run(["seal", "--key-file", reference], stdin: [1, 2, 3])
        #expect(sealed.status == 0)
        for suffix in ["", "\n", "\r\n"] {
            let file = try scratch.file("hex", Array((Encoding.hex(key) + suffix).utf8))
            let opened = try CLIRunner.run(["open", "--key-file", file], stdin: sealed.stdout)
            #expect(opened.status == 0 && opened.stdout == [1, 2, 3], "\(suffix.debugDescription): \(opened.stderr)")
        }
        for (name, contents) in [("short", Array(key.prefix(31))), ("long", key + [0x0A]),
                                 ("hex2", Array((Encoding.hex(key) + "\n\n").utf8))] {
            let file = try scratch.file(name, contents)
            let result = try CLIRunner.run(["open", "--key-file", file], stdin: sealed.stdout)
            #expect(result.status != 0 && result.stdout.isEmpty, "\(name)")
            #expect(result.stderr.contains("a key file is exactly 32 raw bytes, or 64 hex digits and at most one newline"), "\(name): \(result.stderr)")
        }
    }
}
