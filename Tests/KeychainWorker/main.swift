// A separate process for the keychain's multi-process and crash tests.
//
//   KeychainWorker write DIR MASTER_HEX PREFIX COUNT FLUSH_EVERY
//
// Sets COUNT items (service PREFIX, accounts PREFIX-0...), flushing every FLUSH_EVERY items and
// printing "ack N" (N items durable) after each flush.
import Foundation
import Cipher
import Keychain

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("KeychainWorker: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 7, arguments[1] == "write",
      let count = Int(arguments[5]), let flushEvery = Int(arguments[6]), flushEvery > 0 else {
    fail("usage: KeychainWorker write DIR MASTER_HEX PREFIX COUNT FLUSH_EVERY")
}
do {
    let master = SecretBytes(copying: try Encoding.fromHex(arguments[3]))
    let keychain = try Keychain(directory: arguments[2], keySource: try StaticKeySource(masterKey: master))
    let prefix = arguments[4]
    for index in 0..<count {
        try keychain.setPassword("\(prefix)-value-\(index)", forService: prefix, account: "\(prefix)-\(index)")
        if (index + 1) % flushEvery == 0 || index + 1 == count {
            try keychain.flush()
            let line = Array("ack \(index + 1)\n".utf8)
            try line.withUnsafeBytes { try SecureFile.writeAll(1, $0, path: "standard output") }
        }
    }
} catch {
    fail("\(error)")
}
