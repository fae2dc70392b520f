import ArgumentParser
import Foundation
import SecureFoundation

struct HashCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash",
        abstract: "Print digests of files in sha256sum's format.",
        discussion: """
        Output lines are `HEX  NAME`, exactly as sha256sum prints them, so `sha256sum -c` accepts
        them. `-` or no file reads standard input. md5 is offered only for checking legacy data.

        Example:
          securefoundation hash -a sha512 report.pdf > report.sha512
        """
    )

    enum Algorithm: String, ExpressibleByArgument, CaseIterable {
        case sha256, sha384, sha512, md5
    }

    @Option(name: .shortAndLong, help: "The digest: sha256, sha384, sha512 or md5.")
    var algorithm: Algorithm = .sha256

    @Argument(help: "Files to hash; `-` or none for standard input.")
    var files: [String] = []

    func run() throws {
        var failed = false
        for name in files.isEmpty ? ["-"] : files {
            do {
                let digest = try compute(name)
                print("\(Encoding.hex(digest))  \(name)")
            } catch {
                CLI.warn("securefoundation: \(name): \(CLI.describe(error))")
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }

    private func compute(_ name: String) throws -> [UInt8] {
        switch algorithm {
        case .md5:
            return name == "-" ? try Hashing.Insecure.digest(.md5, ofFileDescriptor: 0)
                               : try Hashing.Insecure.digest(.md5, ofFile: name)
        case .sha256, .sha384, .sha512:
            let kind = HashAlgorithm(rawValue: algorithm.rawValue)!
            return name == "-" ? try Hashing.digest(kind, ofFileDescriptor: 0)
                               : try Hashing.digest(kind, ofFile: name)
        }
    }
}
